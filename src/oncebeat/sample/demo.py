"""The main job, end to end: ``oncebeat demo``.

Builds (or reads) an invoice book, then runs the real clock and a real worker
on SQLite against a :class:`~oncebeat.timebase.SimulatedClock` for ``days``
simulated days, delivering through a real local SMTP server (aiosmtpd) into
a Maildir. Payments arrive as simulated time passes: a payment dated D at
the start of D in the schedule's zone (before that day's run), or at its
exact ``paid_at`` when the payments file gives one (:func:`payment_instant`).
The summary counts **duplicates** from the Maildir (the
same invoice and stage delivered more than once — evidence from outside the
database) and **lost** reminders: (invoice, stage) pairs that were due at
some scan — computed independently from the book, the payment instants, the
stage ladder and the schedule's own fire instants, not read back from the
reminders table — and have no terminal state.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from datetime import time as dtime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from .. import ledger
from ..clock import ClockProcess
from ..mail import Mailer, MailSink, read_maildir
from ..provenance import current_source
from ..reminders.importing import read_invoices_csv
from ..reminders.model import Invoice, Payment, with_superseded
from ..reminders.policy import Policy, stages_due
from ..reminders.rows import all_invoices, all_reminders
from ..reminders.service import ReminderService
from ..reminders.tasks import build_app
from ..reminders.translations import language_of
from ..store import Store, open_store
from ..timebase import SimulatedClock
from ..worker import Worker
from .book import Book, load_book
from .workdir import prepare_workdir

__all__ = ["DemoResult", "run_demo", "payment_instant", "expected_reminders", "count_duplicates",
           "DEFAULT_DEMO_START"]

DEFAULT_DEMO_START = date(2026, 1, 5)  # fixed, so the seeded demo gives the same book on every machine
TERMINAL = ("sent", "skipped", "failed", "in_doubt", "held")


@dataclass(kw_only=True, slots=True)
class DemoResult:
    invoices: int
    reminders: dict[str, int]
    reminders_by_stage: dict[str, dict[str, int]]
    messages_delivered: int
    duplicates: int
    lost: int
    in_doubt: int
    days: int
    start: str
    end: str
    wall_seconds: float
    database: str
    maildir: str
    lost_examples: list[str] = field(default_factory=list)
    on_time: int = 0  # sent reminders whose occurrence was at send_at in the customer's (or schedule's) zone
    backlog: int = 0  # sent by the first scan: already due when the demo started, whatever the local time
    zones: int = 0  # distinct zones the sent reminders went out in
    languages: dict[str, int] = field(default_factory=dict)  # sent reminders per language of the words

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def payment_instant(payment: Payment, tz: str | ZoneInfo) -> datetime:
    """When a replay (demo, simulate) applies ``payment`` and when ``check`` assumes it happened (UTC).

    The business-day rule: a payment dated D counts from the start of D in the schedule's zone ``tz``, so
    it stops D's reminders whatever the zone. ``payment.paid_at`` (an exact instant) wins when given.
    """
    if payment.paid_at is not None:
        return payment.paid_at.astimezone(UTC)
    zone = tz if isinstance(tz, ZoneInfo) else ZoneInfo(tz)
    return datetime.combine(payment.paid_on, dtime(0, 0), tzinfo=zone).astimezone(UTC)


def expected_reminders(invoices: list[Invoice], payments: list[Payment], policy: Policy,
                       start: datetime, end: datetime,
                       customer_tz: dict[str, str | None] | None = None) -> set[tuple[str, int]]:
    """(invoice number, stage) pairs due at some scan in ``(start, end]``, from first principles.

    At each fire instant T (local business date B in the schedule's zone) while
    the invoice is open, the stages due are those of :func:`stages_due` under the
    policy's ``collapse`` rule (``highest``: every N with ``due_on + N <= B`` above the stages already due;
    ``next``: the next stage of the ladder, once its day and its gap have come).
    """
    from ..schedules import Schedule

    paid_at = {p.number: payment_instant(p, policy.tz) for p in payments}
    sched = Schedule(expression=policy.scan_schedule, tz=policy.tz)
    fires = list(sched.between(start, end))
    due: set[tuple[str, int]] = set()
    for inv in invoices:
        if inv.status != "open":
            continue
        earlier: list[tuple[int, date]] = []
        for t in fires:
            if inv.number in paid_at and paid_at[inv.number] <= t:
                break
            b = policy.business_date(t, (customer_tz or {}).get(inv.customer_email), sched.local(t).date())
            for s in stages_due(policy.stages, inv.due_on, b, policy.collapse, earlier, policy.calendar):
                due.add((inv.number, s))
                earlier.append((s, b))
    return due


def _wake_instants(policy: Policy, book: Book, start: datetime, end: datetime) -> list[datetime]:
    """The instants in ``(start, end]`` at which the demo wakes its clock and workers, sorted (UTC).

    Every instant at which a scan can serve someone (each customer zone's ``send_at`` with
    ``send_zone = "customer"``, else the schedule's own instants) and every payment. In between nothing
    can become due, so the demo skips those quarter hours: the clock, woken at a send instant, fires it on time
    and records the skipped instants in its ledger by the catch-up policy, as after any pause.
    """
    wakes = {end} | {payment_instant(p, policy.tz) for p in book.payments}
    if policy.send_zone == "customer":
        zones = {c.tz or policy.tz for c in book.customers} | {policy.tz}
        day = start.date() - timedelta(days=1)
        while day <= end.date() + timedelta(days=1):
            wakes |= {datetime.combine(day, policy.send_time, tzinfo=ZoneInfo(z)).astimezone(UTC) for z in zones}
            day += timedelta(days=1)
    else:
        from ..schedules import Schedule

        wakes |= set(Schedule(expression=policy.scan_schedule, tz=policy.tz).between(start, end))
    return sorted(w for w in wakes if start < w <= end)


@dataclass(frozen=True, slots=True)
class _LocalSend:
    zone: str
    on_time: bool
    first_scan: bool
    language: str


def _local_sends(store: Store, policy: Policy, reminders: list[dict[str, Any]]) -> list[_LocalSend]:
    """Where, when (locally) and in which language each sent reminder went out, from its occurrence and customer."""
    fired = {o["id"]: o["fire_at"] for o in ledger.list_occurrences(store)
             if o["outcome"] in ("enqueued", "manual", "backfilled")}
    first = min(fired, key=lambda k: fired[k], default=None)
    invoices = {i["number"]: i for i in all_invoices(store)}
    send_at = policy.send_time if policy.send_zone == "customer" else None
    out = []
    for r in reminders:
        if r["state"] != "sent" or r["occurrence_id"] not in fired:
            continue
        inv = invoices[r["number"]]
        zone = (inv["customer_tz"] or policy.tz) if policy.send_zone == "customer" else policy.tz
        local = fired[r["occurrence_id"]].astimezone(ZoneInfo(zone))
        first_scan = r["occurrence_id"] == first
        on_time = not first_scan and (local.time() == send_at if send_at else local.date() == r["business_date"])
        language = language_of(inv["locale"], policy.fallback_locale)
        out.append(_LocalSend(zone=zone, on_time=on_time, first_scan=first_scan, language=language))
    return out


def count_duplicates(maildir: Path) -> tuple[int, int]:
    """(messages, duplicates): duplicates = deliveries beyond the first of one (invoice, stage), of one grouped
    notice (``X-Oncebeat-Notice``, which lists several invoices: ``group = "customer"``) or of one Message-ID.
    The team's internal final-stage notices (``X-Oncebeat-Final-Stage``, ``notify_final``) are messages but no
    reminder: they are counted as messages, never against a customer's (invoice, stage)."""
    messages = read_maildir(maildir)
    customers = [m for m in messages if m.headers.get("X-Oncebeat-Final-Stage") is None]
    by_pair = Counter(("notice", m.headers["X-Oncebeat-Notice"]) if m.headers.get("X-Oncebeat-Notice") else
                      (m.headers.get("X-Oncebeat-Invoice"), m.headers.get("X-Oncebeat-Stage")) for m in customers)
    by_id = Counter(m.message_id for m in messages)
    dup = max(sum(n - 1 for n in by_pair.values()), sum(n - 1 for n in by_id.values()))
    return len(messages), dup


def run_demo(*, workdir: Path, days: int = 60, seed: int = 7, invoices_csv: Path | None = None,
             payments_csv: Path | None = None, policy: Policy | None = None, start: date | None = None,
             workers: int = 1, progress: Callable[[int], None] | None = None) -> DemoResult:
    """Run the demo in ``workdir`` (recreated); return the summary.

    Args:
        days: simulated days to run.
        seed: seed of the generated book (ignored with ``invoices_csv``).
        invoices_csv: a file in the documented import format instead of the generated book.
        payments_csv: payments (invoice_number, paid_on) that arrive during the run.
        start: first simulated day (default 2026-01-05 for the generated book; for a CSV,
            the day after its latest issue date).
        progress: called with the number of simulated days done.
    Raises:
        ImportRejected: the CSV has invalid rows (nothing run).
    """
    wall = time.monotonic()
    policy = policy or Policy()
    if start is None:
        if invoices_csv is None:
            start = DEFAULT_DEMO_START
        else:
            probe = read_invoices_csv(invoices_csv)
            start = max((i.issued_on for i in probe.invoices), default=DEFAULT_DEMO_START) + timedelta(days=1)
    book = load_book(seed=seed, start=start, invoices_csv=invoices_csv, payments_csv=payments_csv)
    prepare_workdir(workdir)
    db_path = workdir / "oncebeat.db"
    maildir = workdir / "maildir"
    t0 = datetime.combine(start, dtime(0, 0), tzinfo=UTC)
    t_end = t0 + timedelta(days=days)
    clock = SimulatedClock(t0)
    store: Store = open_store(f"sqlite:///{db_path}?synchronous=normal")  # a demo: speed over power-loss durability
    store.migrate()
    with MailSink(maildir) as sink, Mailer(sink.url) as mailer:
        service = ReminderService(store, policy, clock=clock, mailer=mailer)
        service.upsert(book.customers, book.invoices)
        app = build_app(service)
        clk = ClockProcess(app, store, clock=clock, source=current_source("clock", name="demo clock"))
        clk.start()
        pool = [Worker(app, store, clock=clock, source=current_source("worker", name=f"demo worker.{i + 1}"))
                for i in range(workers)]
        pending = sorted(book.payments, key=lambda p: payment_instant(p, policy.tz))
        day_done = 0
        for now in _wake_instants(policy, book, t0, t_end):
            clock.set(now)
            arrived = [p for p in pending if payment_instant(p, policy.tz) <= now]
            if arrived:
                pending = [p for p in pending if p not in arrived]
                service.apply_payments(arrived)
            clk.tick()
            while sum(w.drain(max_batches=1) for w in pool):
                pass
            d = int((now - t0) / timedelta(days=1))
            if progress is not None and d > day_done:
                progress(d - day_done)
                day_done = d
        messages, duplicates = count_duplicates(maildir)
        reminders = with_superseded(all_reminders(store))  # a superseded stage counts as skipped
        local = _local_sends(store, policy, [r for r in reminders if r["superseded_by"] is None])
    store.close()
    terminal = {(r["number"], int(r["stage"])) for r in reminders if r["state"] in TERMINAL}
    expected = expected_reminders(book.invoices, book.payments, policy, t0, t_end,
                                  {c.email: c.tz for c in book.customers})
    missing = sorted(expected - terminal)
    states = Counter(r["state"] for r in reminders)
    by_stage: dict[str, dict[str, int]] = {}
    for r in reminders:
        by_stage.setdefault(str(r["stage"]), {}).setdefault(r["state"], 0)
        by_stage[str(r["stage"])][r["state"]] += 1
    return DemoResult(
        invoices=len(book.invoices), reminders=dict(sorted(states.items())), reminders_by_stage=by_stage,
        messages_delivered=messages, duplicates=duplicates, lost=len(missing), in_doubt=states.get("in_doubt", 0),
        days=days, start=t0.isoformat(), end=t_end.isoformat(), wall_seconds=round(time.monotonic() - wall, 2),
        database=str(db_path), maildir=str(maildir), lost_examples=[f"{n} stage {s}" for n, s in missing[:10]],
        on_time=sum(1 for s in local if s.on_time), backlog=sum(1 for s in local if s.first_scan),
        zones=len({s.zone for s in local}), languages=dict(Counter(s.language for s in local).most_common()))
