"""The per-customer cap and the payment-freshness fence (issue 23 items 4 and 5; README "Reminder policy").

**Cap** (``[reminders] max_notices_per_week = N``, or a ``[[ladders]]`` table's own: :mod:`.ladder_calendars`): a
customer gets at most N notices in any 7 consecutive business days of their zone (the customer's with
``send_zone = "customer"``, else the schedule's), counted across all their invoices and ladders, N being the cap
of the ladder of the notice being placed. The send job claims a place just before its email is attempted
(:func:`claim_place`): it locks the customer (PostgreSQL: the customer's row, ``FOR UPDATE``; SQLite: writes run
one at a time), counts the places taken on days ``D-6 … D`` (``reminders.cap_day``; reminders sent before the cap
was set count by their ``sent_at``) and, in that same transaction, takes one (``cap_day = D``) or records the
reminder ``deferred`` with the reason. Two workers sending for one customer therefore never both pass the cap.

``deferred`` is NOT final. The reminder keeps its (invoice, stage) row, its send job is snoozed (a
:class:`~oncebeat.errors.Snooze`: no attempt used up, not a failure) until the next allowed day, and then it is
sent (or skipped, held, failed as any pending reminder). ``capped_at`` (first deferral) and ``cap_reason`` stay
on the row once it is sent, so the row shows "deferred, then sent". While a stage of an invoice is deferred the
scan creates no later stage of that invoice (stage order kept). Places go in order of business date, stage and
id: a reminder waiting longer is never overtaken, so each waits a bounded time (the ones ahead of it / N weeks).

**Fence** (``[reminders] max_payment_staleness = "6h"``): each source of payment data records a watermark
(``payment_watermarks``: the last CSV import, Stripe webhook or sync, API import; each SQL source's last good read
in ``source_reads``). Each invoice records the source its payment data comes from (``invoices.payment_source``,
reminders 0020: ``csv``, ``stripe``, ``api``, ``sql NAME``): the source that last wrote the invoice. While the
watermark of THAT source is older than the setting, a send waits (snoozed, re-checked every :func:`fence_poll`
seconds) before claiming anything; a grouped notice waits while any invoice it lists waits. An invoice written
before 0020 (no ``payment_source``) keeps the earlier rule: it waits while the freshest source is older. An
invoice whose source never recorded a watermark waits too. :func:`fence_status` says, per source, which are stale
(doctor, dashboard). A
Stripe invoice whose payment is processing (``payment_intent.processing``) waits too, until the payment
succeeds (the invoice is paid: the reminder is skipped) or fails (the reminder goes out).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .. import telemetry
from ..durations import format_duration
from ..errors import Snooze
from ..store import Store, Tx
from ..timebase import Clock
from .holds import next_business_day
from .ladder_calendars import ladder_calendar, ladder_cap
from .ladders import LadderSettings
from .policy import Policy

__all__ = ["CAP_DAYS", "Freshness", "set_payment_source", "sql_source", "check_notice_fence", "source_words",
           "claim_place", "claim_notice_place", "wake", "touch_watermark", "fence_status", "fence_poll",
           "deferred_reminders", "cap_zone", "processing_wait", "mark_processing", "check_fence",
           "waiting_reminders", "waiting_by_source", "waiting_words", "WAITING"]

log = logging.getLogger("oncebeat.reminders")

#: The cap's window: 7 consecutive days (the day of the send and the 6 before it).
CAP_DAYS = 7
#: The shortest and longest wait between two checks of the freshness fence (seconds).
FENCE_MIN_POLL = 60.0
FENCE_MAX_POLL = 900.0
#: Seconds between two checks of an invoice whose Stripe payment is processing.
PROCESSING_POLL = 3600.0


def cap_zone(policy: Policy, customer_tz: str | None) -> ZoneInfo:
    """The zone whose calendar days the cap counts: the customer's with ``send_zone = "customer"`` (an unknown
    stored zone falls back to the schedule's, as the scan does), else the schedule's."""
    if policy.send_zone == "customer" and customer_tz:
        try:
            return ZoneInfo(customer_tz)
        except (ZoneInfoNotFoundError, ValueError):
            pass
    return policy.zone


def _start_of(day: date, zone: ZoneInfo) -> datetime:
    return datetime.combine(day, time(0), tzinfo=zone).astimezone(UTC)


def _wake_at(day: date, now: datetime, zone: ZoneInfo, policy: Policy) -> datetime:
    """When a deferred reminder tries again on ``day``: at ``send_at`` (send_zone = customer), else at the local
    time of day it is now (the scan's hour: the job runs right after the scan that created it)."""
    at = policy.send_time if policy.send_zone == "customer" else now.astimezone(zone).time().replace(tzinfo=None)
    return max(datetime.combine(day, at, tzinfo=zone).astimezone(UTC), _start_of(day, zone))


def wake(store: Store, *, clock: Clock, reminder_id: int) -> None:
    """A deferred reminder's send job runs again: the reminder is pending while the job decides what it becomes."""
    with store.transaction() as tx:
        tx.run("cap_wake", id=reminder_id, now=clock.now())


def claim_place(store: Store, policy: Policy, *, clock: Clock, reminder_id: int, r: dict[str, Any],
                ladder: LadderSettings | None = None) -> None:
    """Take a place under the customer's cap for reminder ``reminder_id`` (``r``: its ``get_reminder_for_send``
    row), or record it ``deferred`` and snooze its job until the next allowed day. Nothing to do without a cap,
    or when the reminder already holds a place (an earlier attempt claimed it).

    ``ladder``: the settings of the reminder's pinned ladder version; its ``max_notices_per_week`` and calendar
    (:mod:`.ladder_calendars`) apply, else the policy's. The count is over every ladder of the customer.

    Raises:
        Snooze: deferred (``delay``: seconds until it tries again, on the next allowed day).
    """
    cap = ladder_cap(policy, ladder)
    calendar = ladder_calendar(policy, ladder)
    if cap is None:
        return
    now = clock.now()
    zone = cap_zone(policy, r.get("tz"))
    today = now.astimezone(zone).date()
    since = today - timedelta(days=CAP_DAYS - 1)
    with store.transaction() as tx:
        owner = tx.one("cap_lock_customer", invoice_id=r["invoice_id"])  # PostgreSQL: locks the customer's row
        row = tx.one("cap_reminder", id=reminder_id)
        if owner is None or row is None or row["state"] not in ("pending", "deferred") or row["cap_day"] is not None:
            return
        customer_id = owner["customer_id"]
        taken = _taken(tx, customer_id, zone, since, today, reminder_id=reminder_id, notice_id=0)
        # The seam a race test stops at: counted, not yet claimed (the customer's lock is held here).
        telemetry.emit("reminder.cap_counted", {"reminder_id": reminder_id, "taken": len(taken)})
        places = cap - len(taken)
        ahead = [int(w["id"]) for w in tx.run("cap_waiting", customer_id=customer_id, places=max(places, 0))] \
            if places > 0 else []
        if places > 0 and reminder_id in ahead:
            tx.run("cap_claim", id=reminder_id, day=today, now=now)
            return
        if places > 0:  # a place is free, but reminders of this customer waiting longer go first
            nxt = next_business_day(today, calendar)
            reason = (f"cap: {len(taken)} of {cap} notices to this customer since {since.isoformat()}, and "
                      f"reminders waiting longer go first; next try {nxt.isoformat()}")
        else:  # the place that frees first: the cap-th newest notice leaves the window 7 days after its day
            nxt = next_business_day(taken[cap - 1] + timedelta(days=CAP_DAYS - 1), calendar)
            reason = (f"cap: {len(taken)} notice{'s' if len(taken) != 1 else ''} to this customer since "
                      f"{since.isoformat()} (at most {cap} per {CAP_DAYS} days); next allowed {nxt.isoformat()}")
        tx.run("cap_defer", id=reminder_id, reason=reason, now=now)
    wake_at = _wake_at(nxt, now, zone, policy)
    log.info("reminder %s deferred: %s", reminder_id, reason,
             extra={"event": "reminders.deferred", "reminder_id": reminder_id})
    raise Snooze(reason, delay=max(1.0, (wake_at - now).total_seconds()))


def _taken(tx: Tx, customer_id: int, zone: ZoneInfo, since: date, today: date, *, reminder_id: int,
           notice_id: int) -> list[date]:
    """The days of the notices counted against the customer's cap in ``since … today``, newest first, leaving out
    reminder ``reminder_id`` and the rows of notice ``notice_id`` (0, -1: none). The rows one grouped notice lists
    count once (issue 24 item 1: the cap counts notices, not invoices)."""
    days: dict[tuple[str, int], date] = {}
    for c in tx.run("cap_counted", customer_id=customer_id, id=reminder_id, notice_id=notice_id, since=since,
                    since_at=_start_of(since, zone)):
        one = ("notice", int(c["notice_id"])) if c["notice_id"] is not None else ("reminder", int(c["id"]))
        day = _day_of(c, zone)
        days[one] = max(day, days.get(one, day))
    return sorted((d for d in days.values() if since <= d <= today), reverse=True)


def claim_notice_place(store: Store, policy: Policy, *, clock: Clock, notice_id: int, customer_id: int,
                       customer_tz: str | None, row_ids: list[int], ladder: LadderSettings | None = None) -> None:
    """Take ONE place under the customer's cap for grouped notice ``notice_id`` listing reminders ``row_ids``
    (every row gets ``cap_day``), or record every row ``deferred`` and snooze the notice's job until the next
    allowed day. Nothing to do without a cap or when the rows already hold their place (an earlier attempt).
    ``ladder``: the notice's ladder version's settings (its cap and calendar, else the policy's).

    Raises:
        Snooze: deferred (``delay``: seconds until the next allowed day).
    """
    cap = ladder_cap(policy, ladder)
    calendar = ladder_calendar(policy, ladder)
    if cap is None or not row_ids:
        return
    now = clock.now()
    zone = cap_zone(policy, customer_tz)
    today = now.astimezone(zone).date()
    since = today - timedelta(days=CAP_DAYS - 1)
    with store.transaction() as tx:
        owner = tx.one("cap_lock_customer_id", customer_id=customer_id)  # PostgreSQL: locks the customer's row
        rows = [tx.one("cap_reminder", id=i) for i in row_ids]
        if owner is None or any(r is not None and r["cap_day"] is not None for r in rows):
            return
        taken = _taken(tx, customer_id, zone, since, today, reminder_id=-1, notice_id=notice_id)
        telemetry.emit("reminder.cap_counted", {"notice_id": notice_id, "taken": len(taken)})
        if len(taken) < cap:
            for i in row_ids:
                tx.run("cap_claim", id=i, day=today, now=now)
            return
        nxt = next_business_day(taken[cap - 1] + timedelta(days=CAP_DAYS - 1), calendar)
        reason = (f"cap: {len(taken)} notice{'s' if len(taken) != 1 else ''} to this customer since "
                  f"{since.isoformat()} (at most {cap} per {CAP_DAYS} days); next allowed {nxt.isoformat()}")
        for i in row_ids:
            tx.run("cap_defer", id=i, reason=reason, now=now)
    log.info("notice %s deferred: %s", notice_id, reason, extra={"event": "reminders.deferred",
                                                                 "notice_id": notice_id})
    raise Snooze(reason, delay=max(1.0, (_wake_at(nxt, now, zone, policy) - now).total_seconds()))


def _day_of(row: dict[str, Any], zone: ZoneInfo) -> date:
    """The day a counted notice took: its claimed ``cap_day``, else the local date of when it went out."""
    if row["cap_day"] is not None:
        return row["cap_day"]  # type: ignore[no-any-return]
    at: datetime = row["at"]
    return at.astimezone(zone).date()


def deferred_reminders(store: Store) -> list[dict[str, Any]]:
    """Reminders deferred by the cap now, first deferred first: ``id``, ``reason``, ``capped_at`` (UTC),
    ``number`` (invoice), ``email`` (customer)."""
    return store.read("cap_deferred_summary")


# --------------------------------------------------------------------------- the freshness fence


def sql_source(name: str) -> str:
    """The ``payment_source`` of invoices written by the SQL source ``name`` (its ``source_reads`` name)."""
    return f"sql {name}"


def set_payment_source(tx: Tx, number: str, source: str) -> None:
    """Record that ``source`` (``stripe``, ...) last wrote invoice ``number``: its payment data comes from there."""
    tx.run("payment_source_set", number=number, source=source)


def touch_watermark(tx: Tx, source: str, *, now: datetime, detail: str | None = None) -> None:
    """Record that ``source`` (``csv``, ``stripe``, ``api``) refreshed payment data at ``now`` (UTC), inside the
    transaction that applied it (a rolled-back import moves no watermark)."""
    tx.run("watermark_touch", source=source, now=now, detail=detail)


@dataclass(frozen=True, kw_only=True, slots=True)
class Freshness:
    """How fresh the payment data is: the freshest source (``source``, ``refreshed_at`` UTC, None: never), its
    ``age`` in seconds at ``now``, and ``limit`` (``max_payment_staleness`` seconds, None: no fence).
    ``sources``: every source's watermark, freshest first (``csv``, ``stripe``, ``api``, ``sql NAME``);
    ``own``: True when this is one invoice source's freshness (:meth:`of`), not the freshest overall."""

    source: str | None
    refreshed_at: datetime | None
    age: float | None
    limit: float | None
    sources: tuple[tuple[str, datetime], ...] = ()
    now: datetime | None = None
    own: bool = False

    def of(self, source: str | None) -> Freshness:
        """The freshness that fences an invoice whose ``payment_source`` is ``source``: that source's watermark
        (none recorded: ``refreshed_at`` None, stale under a fence); None (an invoice from before reminders
        0020): the freshest source's, this object itself."""
        if source is None:
            return self
        at = dict(self.sources).get(source)
        age = None if at is None or self.now is None else (self.now - at).total_seconds()
        return Freshness(source=source, refreshed_at=at, age=age, limit=self.limit, sources=self.sources,
                         now=self.now, own=True)

    def stale_sources(self) -> list[Freshness]:
        """Each recorded source whose watermark is older than the fence, freshest first ([] without a fence)."""
        return [f for f in (self.of(name) for name, _ in self.sources) if f.stale]

    @property
    def stale(self) -> bool:
        """Whether sends wait: a fence is set and the freshest data is older than it (or there is none)."""
        return self.limit is not None and (self.age is None or self.age > self.limit)

    def sentence(self) -> str:
        """Why reminders wait, or that they need not, e.g. "payment data last refreshed 9h ago by csv import;
        reminders wait until it is fresher than 6h"."""
        if self.limit is None:
            return "no payment-freshness fence (max_payment_staleness is not set)"
        limit = format_duration(self.limit)
        how = source_words(self.source or "?")
        if self.own and (self.refreshed_at is None or self.age is None):
            return (f"no payment data from {how} recorded yet; reminders of its invoices wait until it is fresher "
                    f"than {limit}")
        if self.refreshed_at is None or self.age is None:
            return (f"no payment data refreshed yet (no import, Stripe event or source read recorded); reminders "
                    f"wait until some is fresher than {limit}")
        age = max(0.0, self.age)
        ago = format_duration(float(round(age / 60) * 60) if age >= 60 else float(round(age)))  # no fractions
        if self.own and self.stale:
            return (f"payment data from {how} last refreshed {ago} ago; reminders of its invoices wait until it is "
                    f"fresher than {limit}")
        if self.own:
            return f"payment data from {how} refreshed {ago} ago (fresher than {limit})"
        if self.stale:
            return f"payment data last refreshed {ago} ago by {how}; reminders wait until it is fresher than {limit}"
        return f"payment data refreshed {ago} ago by {how} (fresher than {limit})"


_SOURCE_WORDS = {"csv": "csv import", "stripe": "Stripe webhook or sync", "api": "API import"}


def source_words(source: str) -> str:
    """A source's name in sentences: ``csv`` → "csv import", ``sql NAME`` → "SQL source NAME"."""
    if source.startswith("sql "):
        return f"SQL source {source[4:]}"
    return _SOURCE_WORDS.get(source, source)


def fence_status(store: Store, policy: Policy, *, clock: Clock, tx: Tx | None = None) -> Freshness:
    """The payment data's freshness against ``policy.max_payment_staleness`` (read in ``tx`` when given): the
    freshest source's, and every source's in ``sources`` (:meth:`Freshness.of` one, :meth:`Freshness.stale_sources`
    the stale ones)."""
    rows = tx.run("watermarks") if tx is not None else store.read("watermarks")
    sql = tx.run("sql_source_watermark") if tx is not None else store.read("sql_source_watermark")
    sources = [(str(r["source"]), r["refreshed_at"]) for r in rows]
    sources += [(sql_source(str(r["source"])), r["started_at"]) for r in sql]
    sources.sort(key=lambda s: s[1], reverse=True)
    now = clock.now()
    limit = policy.max_payment_staleness
    if not sources:
        return Freshness(source=None, refreshed_at=None, age=None, limit=limit, now=now)
    name, at = sources[0]
    return Freshness(source=name, refreshed_at=at, age=(now - at).total_seconds(), limit=limit,
                     sources=tuple(sources), now=now)


def fence_poll(limit: float) -> float:
    """Seconds between two checks of a waiting send: an eighth of the fence, 1 to 15 minutes."""
    return min(FENCE_MAX_POLL, max(FENCE_MIN_POLL, limit / 8))


#: The prefix of a pending reminder's reason while its send waits for the fence or a processing payment.
WAITING = "waiting: "


def _wait(store: Store, clock: Clock, reminder_id: int, reason: str, delay: float) -> None:
    """Record why pending reminder ``reminder_id`` waits (its ``reason``, as a mail outage's) and snooze its job."""
    with store.transaction() as tx:
        tx.run("fence_wait", id=reminder_id, reason=(WAITING + reason)[:2000], now=clock.now())
    raise Snooze(reason, delay=delay)


def _stale_for(store: Store, policy: Policy, clock: Clock, invoice_ids: list[int]) -> Freshness | None:
    """The first stale freshness among invoices ``invoice_ids``' payment sources (module docstring), or None."""
    fresh = fence_status(store, policy, clock=clock)
    seen: set[str | None] = set()
    for row in store.read("invoice_payment_sources", ids=invoice_ids):
        source = row["payment_source"]
        if source in seen:
            continue
        seen.add(source)
        own = fresh.of(source)
        if own.stale:
            return own
    return None


def check_fence(store: Store, policy: Policy, *, clock: Clock, reminder_id: int, invoice_id: int) -> None:
    """Snooze the send of pending reminder ``reminder_id`` (of invoice ``invoice_id``) while the watermark of the
    invoice's payment source is older than ``max_payment_staleness`` (nothing without it; an invoice without a
    ``payment_source``: the freshest source's); its reason says why (``waiting: payment data from csv import …``).

    Raises:
        Snooze: the data is stale (``delay``: :func:`fence_poll` seconds).
    """
    if policy.max_payment_staleness is None:
        return
    stale = _stale_for(store, policy, clock, [invoice_id])
    if stale is not None:
        _wait(store, clock, reminder_id, stale.sentence(), fence_poll(policy.max_payment_staleness))


def check_notice_fence(store: Store, policy: Policy, *, clock: Clock, invoice_ids: list[int]) -> str | None:
    """Why a grouped notice listing invoices ``invoice_ids`` waits for fresher payment data (the first stale
    payment source among them, as :func:`check_fence`), or None: it need not (or no fence is set)."""
    if policy.max_payment_staleness is None or not invoice_ids:
        return None
    stale = _stale_for(store, policy, clock, invoice_ids)
    return None if stale is None else stale.sentence()


def processing_wait(store: Store, *, clock: Clock, reminder_id: int, since: datetime | None) -> None:
    """Snooze the send of reminder ``reminder_id`` while Stripe says a payment of its invoice is processing: not
    skipped (the payment may still fail), not sent (it may succeed). ``since``: the invoice's
    ``payment_processing_since`` as the send read it with the reminder (UTC; None: no payment processing).
    Raises :class:`Snooze`."""
    if since is not None:
        _wait(store, clock, reminder_id, f"a payment of this invoice is processing at Stripe (since "
              f"{since.isoformat()}); the reminder waits for it to succeed or fail", PROCESSING_POLL)


def waiting_reminders(store: Store) -> list[dict[str, Any]]:
    """Pending reminders whose send waits for fresher payment data or a processing payment, newest wait first:
    ``id``, ``reason`` (without the ``waiting:`` prefix), ``updated_at`` (UTC, the last check), ``number`` and
    ``payment_source`` (None: from before reminders 0020) of the invoice."""
    return [r | {"reason": str(r["reason"]).removeprefix(WAITING)} for r in store.read("fence_waiting")]


def mark_processing(tx: Tx, number: str, since: datetime | None) -> bool:
    """Stripe: a payment of invoice ``number`` is processing since ``since`` (None: it ended). Returns whether
    such an invoice is known."""
    return bool(tx.run("payment_processing_mark", number=number, now=since))


def waiting_by_source(rows: list[dict[str, Any]]) -> dict[str | None, int]:
    """How many of :func:`waiting_reminders`' ``rows`` wait for fresher payment data, per payment source
    (``csv``, ``sql NAME``; None for invoices from before reminders 0020), most first. Rows waiting for a
    processing payment are not counted."""
    counts: dict[str | None, int] = {}
    for r in rows:
        if str(r["reason"]).startswith("a payment of this invoice is processing"):
            continue
        source = r.get("payment_source")
        counts[source] = counts.get(source, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0] or "")))


def waiting_words(source: str | None) -> str:
    """A :func:`waiting_by_source` key in words: "csv import", "SQL source NAME", "any source" (None)."""
    return "any source" if source is None else source_words(source)
