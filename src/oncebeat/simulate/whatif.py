"""``oncebeat preview --policy new.toml --days N``: the real book run through the current and a proposed policy.

A what-if answers "what would this ladder change do to the people we remind?" before the change is made. It
runs the simulator's machinery (the real clock process, scan, send jobs, holds and SQL, on a
:class:`~oncebeat.timebase.SimulatedClock`) twice on a **copy** of the live book and prints the difference:

1. The live database (SQLite or PostgreSQL) is only read: customers, invoices, holds and reminders are streamed
   page by page into a temporary SQLite database (:func:`oncebeat.reminders.bookcopy.copy_book`), so memory stays
   bounded whatever the book's size. That copy is then duplicated byte for byte (SQLite's backup API) for each
   run, so both runs start from the same book.
2. Each run applies its policy from the start of ``start`` (midnight in the current policy's zone) for ``days``
   days: the clock fires the scan on the policy's schedule, workers drain the send jobs, and payments the book
   already knows (an invoice recorded paid on ``start`` or later) are applied at the start of their day, as the
   simulator does. **Assumption:** no invoice and no payment beyond those already in the book: a what-if
   compares two policies on known data, it does not forecast. Nothing is delivered: the runs' mailer records each
   message as sent without opening a connection, the policy's ``[source]`` (the team's own database) is not
   read and retention does not prune; relay rate limits (minutes) are not simulated.
3. Both runs' reminders are read back invoice by invoice (in id order, both at once, so the comparison is a
   merge of two sorted streams, not two books in memory) and compared.

The comparison is generic over reminder states and reasons: a state a newer release adds (``deferred`` by a
cap, a holiday postponement) shows up as its own row without a change here. It reports:

- notices (sent reminders) per customer per week of the window (7-day weeks from ``start``, business dates):
  the maximum and the distribution;
- stages moved: for each invoice the k-th notice of the window under the current policy is paired with the k-th
  under the proposed one (earlier, later or same day, per stage pair), unpaired ones are dropped or added;
- every state (and, for those not sent, its reason with numbers masked) per policy;
- holiday hits: notices sent on a public holiday of the customer's country (the territory of its locale, from
  the ``holidays`` package), and reminders whose recorded reason names a holiday;
- DST hits: notices sent on a day the customer's zone changes its UTC offset, or at a local wall time that
  differs from the one the same send instant had at the window's start (the schedule's zone and the customer's
  zone changing offset on different dates);
- the invoices already in dunning (a reminder recorded before ``start``) whose reminders differ. They keep the
  ladder version they are pinned to (copied with the book, never re-matched), so a ladder edit affects them only
  with ``apply_to_open`` (``--apply-to-open``), as live.

Example::

    report = run_whatif(live_store, current=load_policy(cur), proposed=load_policy(new), start=date(2026, 1, 25),
                        days=30)
    print(report.to_text())
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..clock import ClockProcess
from ..errors import OncebeatError
from ..mail import Mailer
from ..provenance import current_source
from ..reminders.bookcopy import BookCopy, copy_book, iter_outcomes
from ..reminders.model import Payment
from ..reminders.policy import Policy
from ..reminders.service import ReminderService
from ..reminders.tasks import build_app
from ..sample import payment_instant
from ..schedules import Schedule
from ..store import Store, open_store
from ..timebase import SimulatedClock
from ..worker import Worker

__all__ = ["WhatIfReport", "RunStats", "run_whatif"]

RUNS = ("current", "proposed")
#: Invoices listed by name in the text output (all of them are counted; JSON lists up to AFFECTED_JSON).
AFFECTED_TEXT = 20
AFFECTED_JSON = 1000


_MANY = 10**9
#: Rows of the text output's notices-per-week distribution (inclusive ranges).
_BUCKETS = ((1, 1), (2, 2), (3, 3), (4, 5), (6, 10), (11, 20), (21, _MANY))


class _NoDelivery(Mailer):
    """A mailer that delivers nothing: each send passes the effect's point of no return and reports a reply, so
    the send job records the reminder ``sent`` exactly as after a real delivery. A what-if must never email a
    customer, whatever SMTP_URL says."""

    def __init__(self) -> None:
        super().__init__("smtp://what-if.invalid:25")

    def send(self, msg: Any, *, before_final_dot: Callable[[], None] | None = None, envelope: Any = None,
             before_transaction: Callable[[], None] | None = None) -> str:
        if before_transaction is not None:
            before_transaction()
        if before_final_dot is not None:
            before_final_dot()
        return "250 what-if: not delivered"

    def close(self) -> None:
        pass


@dataclass(kw_only=True)
class RunStats:
    """One policy's run over the window: counts of reminders decided in it (all plain ints and dicts)."""

    stages: tuple[int, ...]
    policy: Policy = field(repr=False)  # the run's (its zone, send_zone and send_at judge DST hits)
    notices: int = 0
    states: Counter[str] = field(default_factory=Counter)  # state -> reminders (superseded stages as skipped)
    reasons: Counter[tuple[str, str]] = field(default_factory=Counter)  # (state, reason, numbers masked) -> n
    by_stage: dict[int, Counter[str]] = field(default_factory=dict)  # stage -> state -> n
    weekly: Counter[tuple[int, int]] = field(default_factory=Counter)  # (customer id, week) -> notices
    holiday_sends: int = 0
    holiday_reasons: int = 0
    dst_change_day: int = 0
    dst_shifted: int = 0

    def week_distribution(self) -> dict[int, int]:
        """notices in one customer-week -> how many customer-weeks had that many (weeks with none left out)."""
        return dict(sorted(Counter(self.weekly.values()).items()))

    def as_dict(self) -> dict[str, Any]:
        dist = self.week_distribution()
        return {"stages": list(self.stages), "notices": self.notices, "states": dict(sorted(self.states.items())),
                "reasons": [{"state": s, "reason": r, "count": n} for (s, r), n in sorted(self.reasons.items())],
                "by_stage": {str(k): dict(sorted(v.items())) for k, v in sorted(self.by_stage.items())},
                "notices_per_customer_week": {"max": max(dist, default=0),
                                              "distribution": {str(k): v for k, v in dist.items()}},
                "holiday_hits": {"sent_on_public_holiday": self.holiday_sends,
                                 "recorded_for_a_holiday": self.holiday_reasons},
                "dst_hits": {"sent_on_change_day": self.dst_change_day, "local_time_shifted": self.dst_shifted}}


@dataclass(kw_only=True)
class WhatIfReport:
    """The difference between two runs of the same book; ``as_dict()`` for ``--json``, ``to_text()`` to print."""

    start: date
    days: int
    zone: str
    current_name: str
    proposed_name: str
    copied: BookCopy
    runs: dict[str, RunStats]
    moves: dict[tuple[int, int], Counter[str]] = field(default_factory=dict)  # (cur stage, new stage) -> kind -> n
    shift_days: Counter[tuple[int, int]] = field(default_factory=Counter)  # (cur, new) -> sum of day shifts
    dropped: Counter[int] = field(default_factory=Counter)  # current stage -> notices the proposal drops
    added: Counter[int] = field(default_factory=Counter)  # proposed stage -> notices it adds
    changed_invoices: int = 0
    applied_to_open: dict[str, int] = field(default_factory=dict)  # ladder -> open invoices the proposal moved
    affected_count: int = 0
    affected: list[dict[str, Any]] = field(default_factory=list)
    wall_seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        moves = [{"current_stage": a, "proposed_stage": b, **dict(sorted(kinds.items())),
                  "mean_shift_days": round(self.shift_days[(a, b)] / sum(kinds.values()), 2)}
                 for (a, b), kinds in sorted(self.moves.items())]
        return {"start": self.start, "end": self.start + timedelta(days=self.days), "days": self.days,
                "zone": self.zone, "current": self.current_name, "proposed": self.proposed_name,
                "assumes": "no new invoices or payments beyond those the book already holds",
                "book": {"customers": self.copied.customers, "invoices": self.copied.invoices,
                         "holds": self.copied.holds, "reminders": self.copied.reminders,
                         "pinned_invoices": self.copied.pinned, "ladder_versions": self.copied.ladder_versions,
                         "payments_in_window": len(self.copied.payments)},
                "apply_to_open": self.applied_to_open or None,
                "runs": {k: v.as_dict() for k, v in self.runs.items()},
                "stages_moved": moves,
                "dropped": {str(k): v for k, v in sorted(self.dropped.items())},
                "added": {str(k): v for k, v in sorted(self.added.items())},
                "invoices_changed": self.changed_invoices,
                "in_dunning_affected": {"count": self.affected_count, "invoices": self.affected[:AFFECTED_JSON]},
                "wall_seconds": self.wall_seconds}

    def to_text(self) -> str:
        cur, new = self.runs["current"], self.runs["proposed"]
        end = self.start + timedelta(days=self.days)
        c = self.copied
        lines = [f"what-if: {self.days} days from {self.start} to {end} ({self.zone}), on a copy of the book: "
                 f"{c.customers} customers, {c.invoices} invoices, {c.holds} holds, {c.reminders} reminders",
                 f"  current:  {self.current_name}, stages {list(cur.stages)}",
                 f"  proposed: {self.proposed_name}, stages {list(new.stages)}",
                 f"  assumes no new invoices and no payments beyond the {len(c.payments)} the book already holds "
                 "in the window (applied on their day); nothing was sent, the live database was only read",
                 (f"  {c.pinned} invoices already in dunning keep the ladder version they are pinned to"
                  if not self.applied_to_open else
                  "  --apply-to-open: the proposal moves open invoices to its ladders' settings ("
                  + ", ".join(f"{k}: {v}" for k, v in sorted(self.applied_to_open.items())) + ")"), ""]
        rows: list[tuple[str, int, int]] = [
            ("notices sent", cur.notices, new.notices),
            ("max notices per customer per week", max(cur.weekly.values(), default=0),
             max(new.weekly.values(), default=0)),
            ("customer-weeks with 2+ notices", sum(1 for v in cur.weekly.values() if v >= 2),
             sum(1 for v in new.weekly.values() if v >= 2))]
        for state in sorted((set(cur.states) | set(new.states)) - {"sent"}):
            rows.append((f"reminders {state}", cur.states[state], new.states[state]))
        rows += [("notices on a public holiday", cur.holiday_sends, new.holiday_sends),
                 ("reminders recorded for a holiday", cur.holiday_reasons, new.holiday_reasons),
                 ("notices on a DST change day", cur.dst_change_day, new.dst_change_day),
                 ("notices at a DST-shifted local time", cur.dst_shifted, new.dst_shifted)]
        width = max(len(r[0]) for r in rows) + 2
        lines.append(f"  {'':<{width}}{'current':>9}{'proposed':>10}{'change':>9}")
        for label, a, b in rows:
            lines.append(f"  {label:<{width}}{a:>9}{b:>10}{b - a:>+9}")
        lines.append(f"  {'invoices whose reminders change':<{width}}{'':>9}{self.changed_invoices:>10}")
        lines.append(f"  {'  of them already in dunning':<{width}}{'':>9}{self.affected_count:>10}")
        lines += ["", "notices per customer per week (customer-weeks with that many notices; --json: each count):"]
        dist_a, dist_b = cur.week_distribution(), new.week_distribution()
        for low, high in _BUCKETS:
            a = sum(v for k, v in dist_a.items() if low <= k <= high)
            b = sum(v for k, v in dist_b.items() if low <= k <= high)
            if a or b:
                label = str(low) if low == high else f"{low}+" if high == _MANY else f"{low}-{high}"
                lines.append(f"  {label:>6} notice(s): current {a}, proposed {b}")
        if not dist_a and not dist_b:
            lines.append("  none sent under either policy")
        lines += ["", "stages moved (each invoice's k-th notice in the window, current -> proposed):"]
        if not (self.moves or self.dropped or self.added):
            lines.append("  none")
        for (a, b), kinds in sorted(self.moves.items()):
            total = sum(kinds.values())
            parts = ", ".join(f"{kinds[k]} {k}" for k in ("earlier", "later", "same day") if kinds[k])
            mean = self.shift_days[(a, b)] / total
            lines.append(f"  stage {a} -> stage {b}: {parts} (mean {mean:+.1f} days)")
        for a, n in sorted(self.dropped.items()):
            lines.append(f"  stage {a} -> none: {n} notice(s) no longer sent in the window")
        for b, n in sorted(self.added.items()):
            lines.append(f"  none -> stage {b}: {n} notice(s) sent only under the proposal")
        lines += ["", "reminders by stage and state:"]
        for name, run in (("current", cur), ("proposed", new)):
            for stage, states in sorted(run.by_stage.items()):
                lines.append(f"  {name:<9} stage {stage:>3}: " + ", ".join(f"{k} {v}" for k, v in
                                                                        sorted(states.items())))
        reasons = sorted(set(cur.reasons) | set(new.reasons))
        if reasons:
            lines += ["", "why reminders were not sent (reason, numbers masked): current / proposed"]
            for key in reasons:
                lines.append(f"  {key[0]}: {key[1]}: {cur.reasons[key]} / {new.reasons[key]}")
        lines += ["", f"invoices already in dunning that the change affects ({self.affected_count}):"]
        if not self.affected:
            lines.append("  none")
        for inv in self.affected[:AFFECTED_TEXT]:
            lines.append(f"  {_printable(inv['number'])} ({_printable(inv['email'])}): current "
                         f"{inv['current'] or 'nothing'}; proposed {inv['proposed'] or 'nothing'}")
        if self.affected_count > AFFECTED_TEXT:
            lines.append(f"  … and {self.affected_count - AFFECTED_TEXT} more (--json lists up to {AFFECTED_JSON})")
        lines.append(f"\nwall time {self.wall_seconds:.1f} s")
        return "\n".join(lines)


def _printable(text: str) -> str:
    """Book data (an invoice number, an email) for one line of a terminal: unprintable characters escaped."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in str(text))


# --- the runs ------------------------------------------------------------------------------------------------
def _for_whatif(policy: Policy) -> Policy:
    """The policy as a what-if runs it: no team database read, no pruning, no relay limit (see module doc)."""
    return replace(policy, source=None, retention=None, max_per_minute=None, schedules=())


def _wakes(policy: Policy, zones: set[str], payments: list[Payment], t0: datetime, t_end: datetime) -> list[datetime]:
    """Every instant in ``(t0, t_end]`` at which something can happen: a scan that can serve someone, a payment.

    With ``send_zone = "customer"`` the scan fires every quarter hour, but only each zone's ``send_at`` can make
    a reminder due; the clock, woken there, fires that occurrence on time and records the quiet ones by its
    catch-up policy (as ``oncebeat demo`` does)."""
    wakes = {t_end} | {payment_instant(p, policy.tz) for p in payments}
    if policy.send_zone == "customer":
        day = t0.date() - timedelta(days=1)
        tzs = {z or policy.tz for z in zones} | {policy.tz}
        while day <= t_end.date() + timedelta(days=1):
            for z in tzs:
                try:
                    wakes.add(datetime.combine(day, policy.send_time, tzinfo=ZoneInfo(z)).astimezone(UTC))
                except (ZoneInfoNotFoundError, ValueError):
                    pass  # the scan counts an unknown zone in the schedule's zone, whose wakes are there
            day += timedelta(days=1)
    else:
        wakes |= set(Schedule(expression=policy.scan_schedule, tz=policy.tz).between(t0, t_end))
    return sorted(w for w in wakes if t0 < w <= t_end)


def _run(path: Path, policy: Policy, copied: BookCopy, zones: set[str], t0: datetime, t_end: datetime) -> None:
    """Run ``policy`` on the copy at ``path`` from ``t0`` to ``t_end`` (simulated), applying the book's payments."""
    clock = SimulatedClock(t0)
    store = open_store(f"sqlite:///{path}?synchronous=normal")  # a scratch copy: speed over durability
    try:
        service = ReminderService(store, policy, clock=clock, mailer=_NoDelivery())
        app = build_app(service)
        clk = ClockProcess(app, store, clock=clock, source=current_source("clock", name="what-if clock"))
        worker = Worker(app, store, clock=clock, source=current_source("worker", name="what-if worker"))
        clk.start()
        payments = iter(copied.payments)
        nxt = next(payments, None)
        for now in _wakes(policy, zones, copied.payments, t0, t_end):
            clock.set(now)
            arrived: list[Payment] = []
            while nxt is not None and payment_instant(nxt, policy.tz) <= now:
                arrived.append(nxt)
                nxt = next(payments, None)
            if arrived:
                service.apply_payments(arrived)
            clk.tick()
            while worker.drain(max_batches=1):
                pass
    finally:
        store.close()


def _apply_all(path: Path, policy: Policy, t0: datetime) -> dict[str, int]:
    """Move the open invoices of every ladder of ``policy`` to its settings on the copy at ``path`` (as of ``t0``);
    the number moved per ladder (those that moved any)."""
    from ..reminders.ladders import ladders_of
    from ..reminders.pinning import apply_to_open

    store = open_store(f"sqlite:///{path}?synchronous=normal")
    try:
        source = current_source("manual", name="what-if apply-to-open")
        moved = {s.name: apply_to_open(store, policy, s.name, now=t0, source=source)["moved"]
                 for s, _ in ladders_of(policy)}
    finally:
        store.close()
    return {name: n for name, n in moved.items() if n}


def _duplicate(src: Path, dst: Path) -> None:
    """A byte-for-byte copy of the SQLite database at ``src`` (its WAL included) through SQLite's backup API."""
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    a.close()
    b.close()


# --- the comparison ------------------------------------------------------------------------------------------
_NUMBERS = re.compile(r"\d[\d\-:T.Z]*")


def _reason_class(reason: str | None) -> str:
    """A reason with its numbers and dates masked (``hold 12`` -> ``hold #``), so like reasons count together."""
    return _NUMBERS.sub("#", reason or "(none)")[:80]


class _Calendars:
    """Per-customer lookups the comparison repeats: public holidays by country, UTC offsets by zone and date."""

    def __init__(self, default_tz: str, t0: datetime) -> None:
        self.default_tz = default_tz
        self.t0 = t0
        self._holidays: dict[tuple[str, int], Any] = {}
        self._change_days: dict[tuple[str, date], bool] = {}

    def zone(self, tz: str | None) -> ZoneInfo:
        try:
            return ZoneInfo(tz or self.default_tz)
        except (ZoneInfoNotFoundError, ValueError):
            return ZoneInfo(self.default_tz)

    def is_holiday(self, locale: str | None, day: date) -> bool:
        country = (locale or "").replace("-", "_").partition("_")[2][:2].upper()
        if not country:
            return False
        key = (country, day.year)
        if key not in self._holidays:
            import holidays  # a well-kept library; loaded only when a what-if runs

            try:
                self._holidays[key] = holidays.country_holidays(country, years=day.year)
            except NotImplementedError:  # a territory the package does not cover
                self._holidays[key] = None
        found = self._holidays[key]
        return found is not None and day in found

    def change_day(self, tz: str | None, day: date) -> bool:
        """True when the zone's UTC offset at the start of ``day`` differs from the start of the next day."""
        key = (tz or self.default_tz, day)
        if key not in self._change_days:
            zone = self.zone(tz)
            a = datetime.combine(day, time(0), tzinfo=zone).utcoffset()
            b = datetime.combine(day + timedelta(days=1), time(0), tzinfo=zone).utcoffset()
            self._change_days[key] = a != b
        return self._change_days[key]

    def shifted(self, tz: str | None, sent_at: datetime, policy: Policy) -> bool:
        """True when the notice reaches the customer at another local wall time than the policy means.

        ``send_zone = "customer"``: that day's ``send_at`` falls in the zone's DST gap (skipped: it goes out at
        another time) or fold (repeated). A send at another time for another cause (a catch-up at the first scan,
        a retry, a cap or a fence waiting) is no DST hit.
        ``send_zone = "schedule"``: the customer's offset from the schedule's zone differs from the one at the
        window's start (the two zones change on different dates), so the same scan time is another hour there.
        """
        zone = self.zone(tz)
        if policy.send_zone == "customer":
            wall = datetime.combine(sent_at.astimezone(zone).date(), policy.send_time)
            return wall.replace(tzinfo=zone, fold=0).utcoffset() != wall.replace(tzinfo=zone, fold=1).utcoffset()
        schedule_zone = policy.zone

        def gap(t: datetime) -> timedelta | None:
            a, b = t.astimezone(zone).utcoffset(), t.astimezone(schedule_zone).utcoffset()
            return None if a is None or b is None else a - b

        return gap(sent_at) != gap(self.t0)


def _tally(run: RunStats, rows: list[dict[str, Any]], start: date, cal: _Calendars) -> list[dict[str, Any]]:
    """Count one invoice's reminders of one run into ``run``; return its notices (sent rows) by date."""
    sent: list[dict[str, Any]] = []
    for r in rows:
        state, stage = str(r["state"]), int(r["stage"])
        run.states[state] += 1
        run.by_stage.setdefault(stage, Counter())[state] += 1
        superseded = r["superseded_stages"]
        if isinstance(superseded, str):
            import json

            superseded = json.loads(superseded)
        for low in superseded or ():
            run.states["skipped"] += 1
            run.by_stage.setdefault(int(low), Counter())["skipped"] += 1
            run.reasons[("skipped", f"superseded by stage {_reason_class(str(stage))}")] += 1
        reason = r["reason"] or ""
        if "holiday" in reason.lower():
            run.holiday_reasons += 1
        if state != "sent":
            run.reasons[(state, _reason_class(r["reason"]))] += 1
            continue
        run.notices += 1
        day: date = r["business_date"]
        # the window's first scan can serve a customer whose send time has not come yet on the start day (the
        # day before, by its business date): counted in week 0
        run.weekly[(int(r["customer_id"]), max(0, (day - start).days // 7))] += 1
        run.holiday_sends += cal.is_holiday(r["locale"], day)
        sent_at = r["sent_at"]
        if sent_at is not None:
            local = sent_at.astimezone(cal.zone(r["tz"]))
            run.dst_change_day += cal.change_day(r["tz"], local.date())
            # the window's first scan catches up what came due before it (an earlier business date, or the start
            # instant itself): its wall time says nothing about DST
            on_time = sent_at > cal.t0 and (run.policy.send_zone != "customer" or local.date() == day)
            run.dst_shifted += on_time and cal.shifted(r["tz"], sent_at, run.policy)
        sent.append(r)
    sent.sort(key=lambda r: (r["business_date"], r["stage"]))
    return sent


def _story(rows: list[dict[str, Any]]) -> str:
    return ", ".join(f"stage {r['stage']} {r['state']} {r['business_date']}" for r in rows)


def _merged(a: Iterator[tuple[int, list[dict[str, Any]]]], b: Iterator[tuple[int, list[dict[str, Any]]]]
            ) -> Iterator[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """Walk two invoice-id-ordered streams at once: ``(rows in a, rows in b)`` per invoice in either."""
    na, nb = next(a, None), next(b, None)
    while na is not None or nb is not None:
        if nb is None or (na is not None and na[0] < nb[0]):
            assert na is not None
            yield na[1], []
            na = next(a, None)
        elif na is None or nb[0] < na[0]:
            yield [], nb[1]
            nb = next(b, None)
        else:
            yield na[1], nb[1]
            na, nb = next(a, None), next(b, None)


def _compare(report: WhatIfReport, stores: dict[str, Store], t0: datetime, cal: _Calendars) -> None:
    cur, new = report.runs["current"], report.runs["proposed"]
    for rows_a, rows_b in _merged(iter_outcomes(stores["current"], t0=t0), iter_outcomes(stores["proposed"], t0=t0)):
        sent_a = _tally(cur, rows_a, report.start, cal)
        sent_b = _tally(new, rows_b, report.start, cal)
        for k in range(max(len(sent_a), len(sent_b))):
            if k >= len(sent_b):
                report.dropped[int(sent_a[k]["stage"])] += 1
            elif k >= len(sent_a):
                report.added[int(sent_b[k]["stage"])] += 1
            else:
                pair = (int(sent_a[k]["stage"]), int(sent_b[k]["stage"]))
                shift = (sent_b[k]["business_date"] - sent_a[k]["business_date"]).days
                kind = "earlier" if shift < 0 else "later" if shift > 0 else "same day"
                report.moves.setdefault(pair, Counter())[kind] += 1
                report.shift_days[pair] += shift
        story_a = [(r["stage"], r["state"], r["business_date"]) for r in rows_a]
        story_b = [(r["stage"], r["state"], r["business_date"]) for r in rows_b]
        if story_a == story_b:
            continue
        report.changed_invoices += 1
        first = (rows_a or rows_b)[0]
        if first["in_dunning"]:
            report.affected_count += 1
            if len(report.affected) < AFFECTED_JSON:
                report.affected.append({"number": first["number"], "email": first["email"],
                                        "current": _story(rows_a), "proposed": _story(rows_b)})


def run_whatif(live: Store, *, current: Policy, proposed: Policy, start: date, days: int,
               current_name: str = "current policy", proposed_name: str = "proposed policy",
               workdir: Path | None = None, batch: int = 2000, apply_to_open: bool = False) -> WhatIfReport:
    """Run the live book through ``current`` and ``proposed`` on simulated time and compare (see module doc).

    Invoices already in dunning keep the ladder version they are pinned to in both runs, as they would live after
    the file is edited; with ``apply_to_open`` the proposed run first moves the open invoices of every ladder to the
    proposal's settings (what ``oncebeat policies apply --apply-to-open`` would do after the edit).

    Args:
        live: the live store; only read.
        start: the first simulated business date; the window starts at its midnight in ``current.tz`` (UTC
            instants are derived from it) and lasts ``days`` days.
        workdir: where the temporary SQLite copies go (default: a new temporary folder, removed afterwards).
        batch: rows per page when copying and reading back.

    Returns:
        :class:`WhatIfReport`.

    Raises:
        OncebeatError: ``days`` out of 1..3650, or ``start`` before a reminder the live book already recorded
            (a what-if starts from the book as it is: pass a later start).
        StoreError: the live database could not be read (it is left as it was).
    """
    import time as _time

    if not 1 <= days <= 3650:
        raise OncebeatError(f"--days must be 1 to 3650 for a what-if (got {days})")
    wall = _time.monotonic()
    t0 = datetime.combine(start, time(0), tzinfo=current.zone).astimezone(UTC)
    t_end = t0 + timedelta(days=days)
    own = workdir is None
    folder = Path(tempfile.mkdtemp(prefix="oncebeat-whatif-")) if workdir is None else workdir
    folder.mkdir(parents=True, exist_ok=True)
    try:
        base = folder / "book.db"
        copy = open_store(f"sqlite:///{base}?synchronous=normal")
        try:
            copy.migrate()
            copied = copy_book(live, copy, start=start, before=t0, batch=batch)
        finally:
            copy.close()
        if copied.latest_reminder_on is not None and copied.latest_reminder_on > start:
            raise OncebeatError(f"the book already has reminders up to {copied.latest_reminder_on}, after the "
                                f"what-if's start {start}; start on {copied.latest_reminder_on} or later (--start)")
        report = WhatIfReport(start=start, days=days, zone=current.tz, current_name=current_name,
                              proposed_name=proposed_name, copied=copied,
                              runs={"current": RunStats(stages=current.stages, policy=current),
                                    "proposed": RunStats(stages=proposed.stages, policy=proposed)})
        stores: dict[str, Store] = {}
        try:
            for name, policy in (("current", current), ("proposed", proposed)):
                path = folder / f"{name}.db"
                _duplicate(base, path)
                if apply_to_open and name == "proposed":
                    report.applied_to_open = _apply_all(path, _for_whatif(policy), t0)
                _run(path, _for_whatif(policy), copied, copied.zones, t0, t_end)
                stores[name] = open_store(f"sqlite:///{path}", create=False)
            _compare(report, stores, t0, _Calendars(current.tz, t0))
        finally:
            for s in stores.values():
                s.close()
    finally:
        if own:
            shutil.rmtree(folder, ignore_errors=True)
    report.wall_seconds = round(_time.monotonic() - wall, 2)
    return report
