"""Holds: stop the reminders of one invoice, or of every invoice of one customer, for a reason.

A hold has a ``reason``: ``dispute`` (the customer disputes the invoice or the charge), ``promise`` (the customer
promised to pay by ``promise_until``, a date) or ``manual`` (an operator's call). It covers business date ``D``
of an invoice when it is on that invoice or on its customer and ``D < resumes_on`` (None: until released).

Rules (DESIGN.md G9, README "Holds"):

1. Each stage that comes due while held is recorded ``held`` with the hold's id and reason (a final state: the
   stage is never skipped silently and never sent later in a burst). The scan records it so when it creates the
   stage; the send job re-checks just before sending, as it re-checks payment, so a hold placed after the send
   job was enqueued still stops the email.
2. A promise covers up to and including ``promise_until``: unpaid, the ladder resumes on the next business day
   (:func:`next_business_day`). A release (a dispute closed, an operator) ends a hold on the business day after
   the release's business date. Either way the ladder resumes with the next due stage only, in stage order
   (the scan's collapse rule; the lower stages it passes over are recorded skipped with their reason), and the
   first reminder after a missed promise has ``promise_missed`` set in its template.
3. A hold placed for an invoice that is paid later changes nothing more: a paid invoice gets no reminder.

Example::

    hold = place_hold(store, clock=clock, zone=policy.zone, source=src, invoice="INV-7", reason="promise",
                      until=date(2026, 3, 10), note="called on the 3rd")
    release_holds(store, clock=clock, zone=policy.zone, source=src, hold_id=hold.id)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from .. import audit
from ..errors import OncebeatError
from ..provenance import Source, current_source
from ..store import Store, Tx
from ..timebase import Clock
from .calendar import BusinessCalendar
from .ladders import LadderSettings
from .model import HOLD_REASONS

__all__ = ["HOLD_REASONS", "Hold", "HoldError", "place_hold", "release_holds", "list_holds", "get_hold",
           "covering_hold", "next_business_day", "created_by", "holds_of_invoice", "import_holds",
           "hold_placed_with"]



class HoldError(OncebeatError):
    """A hold cannot be placed or released as asked (unknown invoice, customer or hold; a bad date or reason)."""


def _invoice_calendar(row: dict[str, Any], calendar: BusinessCalendar | None) -> BusinessCalendar | None:
    """The calendar a hold on invoice ``row`` (``invoice_for_hold``) resumes by: its pinned ladder version's own
    (:mod:`.ladder_calendars`), else ``calendar`` (the policy's). A customer's hold spans ladders: the policy's."""
    if row.get("ladder_settings") is None:
        return calendar
    own = LadderSettings.from_json(row["ladder_settings"]).calendar
    return own if own is not None else calendar


def next_business_day(day: date, calendar: BusinessCalendar | None = None) -> date:
    """The business day after ``day``: where a held ladder resumes.

    Without a business calendar every day is a business day (the scan runs daily at the send time), so this is
    ``day + 1``; with one (``[calendar]``: weekends, holidays) the first business day after ``day``. Either way
    the scan creates nothing on a non-business day, so a hold stored without the calendar (an import) still
    resumes on a business day.
    """
    return day + timedelta(days=1) if calendar is None else calendar.next_business_day(day)


def created_by(source: Source) -> str:
    """Who placed or released a hold, as stored: ``cli:alice``, ``dashboard:admin``, ``stripe``, ``api``."""
    op = source.operator
    if op is not None:
        return f"{op.via}:{op.user}" if op.user else op.via
    return source.kind


@dataclass(frozen=True, kw_only=True, slots=True)
class Hold:
    """One hold as stored. ``invoice`` (number) or ``customer`` (email) names what it holds (one of them);
    ``email`` is the customer's in both cases. Instants are UTC; ``resumes_on`` is the first business date the
    hold no longer covers (None: held until released)."""

    id: int
    invoice: str | None
    customer: str | None
    email: str | None
    reason: str
    promise_until: date | None
    resumes_on: date | None
    note: str | None
    external_ref: str | None
    created_by: str
    created_at: datetime
    released_at: datetime | None
    released_by: str | None
    release_note: str | None

    @classmethod
    def from_row(cls, r: dict[str, Any]) -> Hold:
        return cls(id=int(r["id"]), invoice=r["number"] if r["invoice_id"] is not None else None,
                   customer=r["email"] if r["customer_id"] is not None else None, email=r["email"],
                   reason=r["reason"], promise_until=r["promise_until"], resumes_on=r["resumes_on"], note=r["note"],
                   external_ref=r["external_ref"], created_by=r["created_by"], created_at=r["created_at"],
                   released_at=r["released_at"], released_by=r["released_by"], release_note=r["release_note"])

    def active_on(self, day: date) -> bool:
        """Whether the hold covers business date ``day``."""
        return self.resumes_on is None or day < self.resumes_on

    @property
    def target(self) -> str:
        return f"invoice {self.invoice}" if self.invoice is not None else f"customer {self.customer}"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: dates and instants as ISO text."""
        out: dict[str, Any] = {}
        for name in self.__slots__:
            value = getattr(self, name)
            out[name] = value.isoformat() if isinstance(value, date | datetime) else value
        return out


def _today(clock: Clock, zone: ZoneInfo) -> date:
    return clock.now().astimezone(zone).date()


def place_hold(store: Store, *, clock: Clock, zone: ZoneInfo, source: Source, reason: str,
               invoice: str | None = None, customer: str | None = None, until: date | None = None,
               note: str | None = None, external_ref: str | None = None, by: str | None = None,
               tx: Tx | None = None, calendar: BusinessCalendar | None = None) -> Hold | None:
    """Place a hold on invoice number ``invoice`` or on every invoice of customer ``customer`` (an email).

    Args:
        zone: the business zone (the policy's): "today" for the checks on ``until``.
        reason: one of :data:`HOLD_REASONS`; ``promise`` needs ``until`` (the last day of the promise, on or after
            today), the others refuse it.
        external_ref: the id of what placed it (a Stripe dispute id): a second hold with the same one is not
            placed (returns None), so a replayed webhook places one hold.
        by: who placed it as stored (default :func:`created_by` of ``source``), e.g. ``stripe``.
        tx: place it inside this transaction (the caller commits); default: its own.
        calendar: the policy's business calendar: a promise resumes on the next business day after ``until``.
    Returns:
        The hold, or None when ``external_ref`` already has one.
    Raises:
        HoldError: unknown invoice or customer, both or neither given, a bad reason or ``until``.
    """
    if tx is None:
        with store.transaction() as own:
            return place_hold(store, clock=clock, zone=zone, source=source, reason=reason, invoice=invoice,
                              customer=customer, until=until, note=note, external_ref=external_ref, by=by, tx=own,
                              calendar=calendar)
    if reason not in HOLD_REASONS:
        raise HoldError(f"hold reason {reason!r} is not one of {', '.join(HOLD_REASONS)}")
    if (invoice is None) == (customer is None):
        raise HoldError("a hold is on an invoice or on a customer: give exactly one (--invoice NUMBER or "
                        "--customer EMAIL)")
    today = _today(clock, zone)
    if reason == "promise":
        if until is None:
            raise HoldError("a promise hold needs the date the customer promised to pay by (--until YYYY-MM-DD)")
        if until < today:
            raise HoldError(f"--until {until.isoformat()} is before today ({today.isoformat()}, {zone.key}): a "
                            "promise to pay ends on or after the day it is recorded")
    elif until is not None:
        raise HoldError(f"--until is for a promise to pay; a {reason} hold lasts until it is released "
                        "(`oncebeat release`)")
    invoice_id = customer_id = None
    if invoice is not None:
        rows = tx.run("invoice_for_hold", number=invoice)
        if not rows:
            raise HoldError(f"no invoice {invoice!r}; the dashboard's invoice search finds its number")
        invoice_id = int(rows[0]["id"])
        calendar = _invoice_calendar(rows[0], calendar)
    else:
        assert customer is not None
        rows = tx.run("customer_by_email", email=customer.strip().lower())
        if not rows:
            raise HoldError(f"no customer with email {customer!r}; customers are identified by their email")
        customer_id = int(rows[0]["id"])
    now = clock.now()
    resumes_on = next_business_day(until, calendar) if until is not None else None
    row = tx.one("insert_hold", invoice_id=invoice_id, customer_id=customer_id, reason=reason,
                 promise_until=until, resumes_on=resumes_on, note=note, external_ref=external_ref,
                 created_by=by or created_by(source), now=now)
    if row is None:
        return None
    hold = Hold.from_row(tx.run("get_hold", id=row["id"])[0])
    audit.record(tx, now=now, kind="reminders.hold_placed", subject=f"hold:{hold.id}", source=source,
                 detail={"hold": hold.id, "on": hold.target, "reason": reason,
                         "until": until.isoformat() if until else None, "note": note, "external_ref": external_ref})
    return hold


def release_holds(store: Store, *, clock: Clock, zone: ZoneInfo, source: Source, hold_id: int | None = None,
                  invoice: str | None = None, customer: str | None = None, note: str | None = None,
                  external_ref: str | None = None, by: str | None = None, tx: Tx | None = None,
                  calendar: BusinessCalendar | None = None) -> list[Hold]:
    """Release hold ``hold_id``, or every unreleased hold on invoice ``invoice`` (number), on customer
    ``customer`` (email) or placed with ``external_ref``: exactly one selector.

    A released hold stops covering on the next business day after today (in ``zone``; of ``calendar`` when
    given, or of the ladder version a held invoice is pinned to when that ladder has its own calendar), so the
    ladder resumes then with the next due stage only. Audited ``reminders.hold_released`` per hold.

    Returns:
        The holds released (empty when there was none unreleased for the selector, e.g. a replayed release).
    Raises:
        HoldError: no selector or several; an unknown hold id, invoice, customer or external_ref (one no hold was
            ever placed with).
    """
    if tx is None:
        with store.transaction() as own:
            return release_holds(store, clock=clock, zone=zone, source=source, hold_id=hold_id, invoice=invoice,
                                 customer=customer, note=note, external_ref=external_ref, by=by, tx=own,
                                 calendar=calendar)
    given = [s for s in (hold_id, invoice, customer, external_ref) if s is not None]
    if len(given) != 1:
        raise HoldError("release what? Give one: a hold id, --invoice NUMBER or --customer EMAIL")
    ids: list[int]
    if hold_id is not None:
        rows = tx.run("get_hold", id=hold_id)
        if not rows:
            raise HoldError(f"no hold {hold_id}; `oncebeat holds` lists them")
        ids = [hold_id] if rows[0]["released_at"] is None else []
    elif invoice is not None:
        found = tx.run("invoice_for_hold", number=invoice)
        if not found:
            raise HoldError(f"no invoice {invoice!r}")
        ids = [int(r["id"]) for r in tx.run("unreleased_holds_of_invoice", invoice_id=found[0]["id"])]
        calendar = _invoice_calendar(found[0], calendar)
    elif customer is not None:
        found = tx.run("customer_by_email", email=customer.strip().lower())
        if not found:
            raise HoldError(f"no customer with email {customer!r}")
        ids = [int(r["id"]) for r in tx.run("unreleased_holds_of_customer", customer_id=found[0]["id"])]
    else:
        placed = tx.run("hold_by_external_ref", external_ref=external_ref)
        if not placed:  # as an unknown invoice or customer: a typo must not look like a release
            raise HoldError(f"no hold was placed with external_ref {external_ref!r}; `oncebeat holds` lists the "
                            "holds with their external_ref")
        ids = [int(r["id"]) for r in placed if r["released_at"] is None]
    now = clock.now()
    today = now.astimezone(zone).date()
    released: list[Hold] = []
    for i in ids:
        resume_by = calendar
        if hold_id is not None or external_ref is not None:  # a hold on an invoice resumes by its ladder's calendar
            held = tx.run("get_hold", id=i)[0]
            on = tx.run("invoice_for_hold", number=held["number"]) if held["invoice_id"] is not None else []
            resume_by = _invoice_calendar(on[0], calendar) if on else calendar
        if tx.one("release_hold", id=i, now=now, released_by=by or created_by(source), note=note,
                  resumes_on=next_business_day(today, resume_by)) is None:
            continue
        hold = Hold.from_row(tx.run("get_hold", id=i)[0])
        released.append(hold)
        audit.record(tx, now=now, kind="reminders.hold_released", subject=f"hold:{i}", source=source,
                     detail={"hold": i, "on": hold.target, "reason": hold.reason, "note": note,
                             "resumes_on": hold.resumes_on.isoformat() if hold.resumes_on else None})
    return released


def import_holds(tx: Tx, rows: Sequence[dict[str, Any]], *, source: str, now: datetime,
                 calendar: BusinessCalendar | None = None) -> int:
    """Place the holds an invoice import's rows give (``number``, ``hold_reason``, ``promise_until``, ``hold_note``;
    checked by the import), inside its transaction. Keyed by ``import:<number>:<reason>[:<until>]``, so importing
    the same row again places nothing; a row without a hold never releases one (``oncebeat release`` does).
    Audited ``reminders.hold_placed`` per hold. Returns the holds placed."""
    placed = 0
    src = current_source("cli", name="oncebeat import")
    for r in rows:
        until = r["promise_until"]
        ref = f"import:{r['number']}:{r['hold_reason']}" + (f":{until.isoformat()}" if until else "")
        invoice = tx.run("invoice_for_hold", number=r["number"])
        row = tx.one("insert_hold", invoice_id=invoice[0]["id"], customer_id=None, reason=r["hold_reason"],
                     promise_until=until,
                     resumes_on=next_business_day(until, _invoice_calendar(invoice[0], calendar)) if until else None,
                     note=r["hold_note"], external_ref=ref[:255], created_by=f"import:{source}"[:200], now=now)
        if row is None:
            continue
        placed += 1
        audit.record(tx, now=now, kind="reminders.hold_placed", subject=f"hold:{row['id']}", source=src,
                     detail={"hold": row["id"], "on": f"invoice {r['number']}", "reason": r["hold_reason"],
                             "until": until.isoformat() if until else None, "note": r["hold_note"],
                             "external_ref": ref, "file": source})
    return placed


def get_hold(store: Store, hold_id: int) -> Hold | None:
    """Hold ``hold_id``, or None."""
    rows = store.read("get_hold", id=hold_id)
    return Hold.from_row(rows[0]) if rows else None


def hold_placed_with(tx: Tx, external_ref: str) -> Hold | None:
    """The hold placed with ``external_ref`` (the one :func:`place_hold` keeps for it), or None."""
    rows = tx.run("hold_by_external_ref", external_ref=external_ref)
    return Hold.from_row(tx.run("get_hold", id=rows[0]["id"])[0]) if rows else None


def list_holds(store: Store, *, active_on: date | None = None) -> list[Hold]:
    """Every hold, oldest first; with ``active_on`` only those covering that business date."""
    holds = [Hold.from_row(r) for r in store.read("list_holds")]
    return [h for h in holds if active_on is None or h.active_on(active_on)]


def holds_of_invoice(store: Store, invoice_id: int) -> list[dict[str, Any]]:
    """The hold rows on invoice ``invoice_id`` or on its customer, oldest first (the dashboard's invoice page)."""
    return store.read("holds_of_invoice", invoice_id=invoice_id)


def covering_hold(tx: Tx, invoice_id: int, business_date: date) -> dict[str, Any] | None:
    """The oldest hold covering invoice ``invoice_id`` on ``business_date``: ``{"id", "reason", "promise_until",
    "reason_text"}`` (``reason_text``: what a held reminder records, e.g. "held: dispute (hold 4)"), or None."""
    return tx.one("covering_hold", invoice_id=invoice_id, business_date=business_date)


def hold_scan_rows(tx: Tx, now: datetime) -> tuple[int, int]:
    """After a scan's insert (same transaction, same ``now``): record held the new reminders a hold covers, and
    mark the first reminder after an ended hold. Returns (held, resumed). Costs nothing when no hold exists."""
    if tx.one("any_hold") is None:
        return 0, 0
    held = len(tx.run("scan_hold_reminders", now=now))
    resumed = sum(1 for r in tx.run("scan_mark_resumed", now=now) if r["resumes_hold_id"] is not None)
    return held, resumed


def describe(holds: Sequence[Hold]) -> list[str]:
    """One line per hold for a terminal: id, target, reason, dates, who, state."""
    lines = []
    for h in holds:
        until = f" until {h.promise_until.isoformat()}" if h.promise_until else ""
        state = (f"released {h.released_at.isoformat()} by {h.released_by}" if h.released_at
                 else "active" if h.resumes_on is None else f"covers up to {(h.resumes_on - timedelta(days=1))}")
        resumes = f", resumes {h.resumes_on.isoformat()}" if h.resumes_on else ""
        note = f" — {h.note}" if h.note else ""
        lines.append(f"{h.id:>5}  {h.target}  {h.reason}{until}  by {h.created_by}  {state}{resumes}{note}")
    return lines
