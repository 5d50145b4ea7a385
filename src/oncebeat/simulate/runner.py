"""``oncebeat simulate``: months of the reminder schedule through the real code, with faults injected.

Runs the real clock processes, workers, scan and send jobs, real SQL (SQLite
or PostgreSQL) and a real local SMTP server (aiosmtpd) on a
:class:`~oncebeat.timebase.SimulatedClock` that jumps from one event to the
next (a fire instant, a retry, a payment, a planned fault). Every random
decision comes from the seed (one ``random.Random(seed)``, generators of its
own for some faults, and ``db-blip``'s draws keyed by statement and instant),
so the same seed gives the same fault plan and the same report. After the
simulated range the faults stop and the system settles (retries finish, one
more scan runs); then the invariant checker (:mod:`oncebeat.simulate.checker`) judges the outcome.
"""

from __future__ import annotations

import os
import random
import time as _time
from bisect import insort
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from ..app import App, ScheduleDef
from ..clock import ClockProcess
from ..crashpoints import SimulatedCrash, crashpoints
from ..errors import TransientStoreError
from ..mail import Mailer, MailSink
from ..provenance import Source, current_source
from ..reminders.capfence import cap_zone
from ..reminders.holds import place_hold, release_holds
from ..reminders.model import Payment
from ..reminders.policy import Policy
from ..reminders.rows import pending_reminders
from ..reminders.service import ReminderService
from ..reminders.tasks import SCHEDULE_KEY, build_app
from ..sample import DEFAULT_DEMO_START, Book, load_book, payment_instant, prepare_workdir
from ..schedule_admin import pause_schedule, resume_schedule
from ..store import Store, open_store, redact_url
from ..timebase import SimulatedClock
from ..worker import Worker
from .checker import CheckReport, PaymentWindow, check
from .checkladders import ladder_timeline
from .emitlogs import emit_logs
from .faults import keyed_draw
from .ladderfaults import LADDER_EVENTS, apply_ladder_event, plan_ladder_events, with_sim_ladders
from .naive import NaiveReport, run_naive

__all__ = ["SimConfig", "SimReport", "simulate"]

MAX_STEP = timedelta(hours=6)  # wake-ups are event driven; this only bounds idle stretches
HOST_TZ = "Pacific/Kiritimati"  # UTC+14: the host's date differs from Chicago's for most of the day
PROBES = (("dst-chicago-0230", "30 2 * * *", "America/Chicago"), ("dst-berlin-0230", "30 2 * * *", "Europe/Berlin"),
          ("dst-lord-howe-0200", "0 2 * * *", "Australia/Lord_Howe"), ("dst-chicago-3-hourly", "15 */3 * * "
                                                                                               "*", "America/Chicago"))


@dataclass(kw_only=True)
class SimConfig:
    days: int = 30
    start: date = DEFAULT_DEMO_START
    seed: int = 7
    faults: dict[str, float] = field(default_factory=dict)
    db_url: str | None = None  # default: a fresh SQLite file in workdir
    workdir: Path = Path("oncebeat-sim")
    invoices_csv: Path | None = None
    payments_csv: Path | None = None
    policy: Policy = field(default_factory=Policy)
    settle_days: float = 2.0
    workers: int = 2
    compare_naive: bool = False
    invoices: int = 200  # size of the generated book (ignored with invoices_csv)
    emit_logs: list[tuple[str, Path]] = field(default_factory=list)  # (format, folder): the naive design's logs


@dataclass(kw_only=True)
class SimReport:
    seed: int
    days: int
    start: str
    end: str
    faults: dict[str, float]
    faults_injected: dict[str, int]
    check: CheckReport
    wall_seconds: float
    database: str
    maildir: str
    naive: NaiveReport | None = None

    @property
    def passed(self) -> bool:
        """Every invariant holds and, the run having settled, no due reminder is still delayed."""
        return self.check.passed and not self.check.summary.get("delayed")

    def as_dict(self) -> dict[str, Any]:
        return {"pass": self.passed, "seed": self.seed, "days": self.days, "start": self.start, "end": self.end,
                "faults": self.faults, "faults_injected": self.faults_injected,
                "invariants": {k: v.as_dict() for k, v in self.check.invariants.items()},
                "summary": self.check.summary, "wall_seconds": self.wall_seconds, "database": self.database,
                "maildir": self.maildir, "naive": self.naive.as_dict() if self.naive else None}

    def to_text(self) -> str:
        s = self.check.summary
        lines = [f"oncebeat simulate: {self.days} days from {self.start[:10]}, seed {self.seed}, "
                 f"faults: {', '.join(self.faults) or 'none'}",
                 "  faults injected: " + (", ".join(f"{k} {v}" for k, v in sorted(self.faults_injected.items()))
                                          or "none"),
                 f"  invoices {s['invoices']}, reminders {s['reminders']}, due {s['due']}, "
                 f"messages {s['messages_delivered']}, duplicates {s['duplicates']}, lost {s['lost']}, "
                 f"delayed {s['delayed']}, in doubt {s['in_doubt']}",
                 f"  occurrences {s['occurrences']}",
                 self.check.to_text()]
        if self.naive is not None:
            n = self.naive
            lines += ["", "  same days and faults, side by side:",
                      f"  {'':<28}{'oncebeat':>10}{'naive':>10}",
                      f"  {'messages delivered':<28}{s['messages_delivered']:>10}{n.messages_delivered:>10}",
                      f"  {'duplicates':<28}{s['duplicates']:>10}{n.duplicates:>10}",
                      f"  {'lost':<28}{s['lost']:>10}{n.lost:>10}",
                      f"  {'sent after payment':<28}{0:>10}{n.sent_after_paid:>10}",
                      f"  {'sent on the wrong date':<28}{0:>10}{n.wrong_business_date:>10}"]
            lines += [f"    naive e.g. {e}" for e in n.examples[:3]]
            lines += [f"  the naive design's logs: {path} (causes injected: "
                      f"{path.removesuffix('.log')}.truth.json); read them with oncebeat doctor --logs"
                      for path in n.logs]
        lines.append(f"  wall time {self.wall_seconds:.1f} s")
        return "\n".join(lines)


def _transitions(zones: set[str], start: datetime, end: datetime) -> int:
    """How many UTC-offset changes (DST transitions) of ``zones`` fall in ``[start, end)``."""
    from zoneinfo import ZoneInfo

    count = 0
    for tz in zones:
        zone = ZoneInfo(tz)
        t = start
        offset = t.astimezone(zone).utcoffset()
        while t < end:
            t += timedelta(hours=6)
            now_offset = t.astimezone(zone).utcoffset()
            count += now_offset != offset
            offset = now_offset
    return count


@contextmanager
def _host_tz(zone: str | None) -> Iterator[None]:
    if zone is None:
        yield
        return
    old = os.environ.get("TZ")
    os.environ["TZ"] = zone
    _time.tzset()
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = old
        _time.tzset()


#: The old cron entry that still triggers the reminder schedule (fault ``leftover-trigger``).
_LEFTOVER = Source(kind="cli", host="old-cron-host", pid=4242, name="cron: oncebeat trigger reminders",
                   version="0.0.9")
#: The billing app's staff placing and releasing holds (fault ``holds``).
_HOLDER = Source(kind="api", host="billing-app", pid=5151, name="billing app: collections desk")

#: The operator who pauses and resumes the reminder schedule (fault ``pause``).
_OPERATOR = Source(kind="cli", host="ops-laptop", pid=7, name="oncebeat schedules pause")


def _attempt(fn: Callable[[], Any]) -> bool:
    """Run ``fn``; False when an (injected) transient database error stopped it."""
    try:
        fn()
        return True
    except TransientStoreError:
        return False


@dataclass(kw_only=True)
class _World:
    """One run's objects and moving parts, shared by the steps of :meth:`_Sim._loop`."""

    store: Store
    sink: MailSink
    clock: SimulatedClock
    policy: Policy
    service: ReminderService
    app: App
    definitions: dict[str, list[ScheduleDef]]  # every definition each schedule key had during the run
    clocks: dict[str, ClockProcess | None] = field(default_factory=dict)  # None: stopped
    pending_start: set[str] = field(default_factory=set)  # clocks to start at the next step
    generation: Counter[str] = field(default_factory=Counter)  # restarts per clock
    events: list[tuple[datetime, str, Any]] = field(default_factory=list)  # planned: (instant, kind, payload)
    payments: list[Payment] = field(default_factory=list)  # still to arrive, by instant
    workers: list[Worker] = field(default_factory=list)
    holds: list[str] = field(default_factory=list)  # pauses due now, applied once the clocks have ticked
    stale_until: datetime | None = None  # fault stale-import: payments reach oncebeat only from then on

    def stale(self, now: datetime) -> bool:
        return self.stale_until is not None and now < self.stale_until


class _Sim:
    def __init__(self, cfg: SimConfig) -> None:
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.injected: Counter[str] = Counter()
        self.faults = cfg.faults
        self.active = True  # faults on; off while settling and while the simulator itself writes
        self.doubt_budget = 0
        self.payments_log: dict[str, PaymentWindow] = {}
        self._blip_run: Counter[str] = Counter()
        self._blip_seen: Counter[str] = Counter()  # statements per name at the instant _blip_at
        self._blip_at: datetime | None = None
        self.clock: SimulatedClock | None = None  # set by _run: the instant keys db-blip's draws
        self.wakes: list[datetime] = []
        self.hold_rng = random.Random(f"holds-race:{cfg.seed}")  # its own draws: the other faults' stay as they were
        self.world: _World | None = None

    # --- fault hooks --------------------------------------------------------------------------
    def _rate(self, name: str) -> float:
        return self.faults.get(name, 0.0) if self.active else 0.0

    def blip(self, query: str) -> None:
        """Fault ``db-blip``: the n-th statement named ``query`` at one simulated instant fails or not by a draw
        keyed on (seed, query, instant, n), not on ``self.rng``: a statement added or skipped elsewhere (an idle
        read) changes no other statement's draw, nor any other fault's. At most two blips in a row per name."""
        rate = self._rate("db-blip")
        if rate:
            now = self.clock.now() if self.clock is not None else None
            if now != self._blip_at:
                self._blip_at = now
                self._blip_seen.clear()
            n = self._blip_seen[query]
            self._blip_seen[query] += 1
            if keyed_draw("db-blip", self.cfg.seed, query, now, n) < rate and self._blip_run[query] < 2:
                self._blip_run[query] += 1
                self.injected["db-blip"] += 1
                raise TransientStoreError(f"simulated blip before {query}: database is locked")
        self._blip_run[query] = 0

    def crash(self, point: str) -> bool:
        rate = self._rate("worker-crash")
        if rate and self.rng.random() < rate:
            self.injected[f"worker-crash:{point}"] += 1
            if point in ("effect_no_return", "smtp_after_dot", "effect_before_record", "done_batch"):
                # past the effect's point of no return: it may have happened. done_batch: the simulator's workers
                # drain serially, so each write of done records carries one key
                self.doubt_budget += 1
            return True
        return False

    @contextmanager
    def quiet(self) -> Iterator[None]:
        """The simulator's own writes (payments, setup): no faults."""
        was, self.active = self.active, False
        try:
            yield
        finally:
            self.active = was

    # --- the run ------------------------------------------------------------------------------
    def run(self) -> SimReport:
        wall = _time.monotonic()
        with _host_tz(HOST_TZ if "host-tz" in self.faults else None):
            report = self._run()
        report.wall_seconds = round(_time.monotonic() - wall, 2)
        return report

    def _run(self) -> SimReport:
        cfg = self.cfg
        prepare_workdir(cfg.workdir)
        maildir = cfg.workdir / "maildir"
        # synchronous=normal: durability against power loss is not what a simulation tests
        url = cfg.db_url or f"sqlite:///{cfg.workdir / 'oncebeat.db'}?synchronous=normal"
        t0 = datetime.combine(cfg.start, time(0), tzinfo=UTC)
        t_end = t0 + timedelta(days=cfg.days)
        t_settled = t_end + timedelta(days=cfg.settle_days)
        clock = self.clock = SimulatedClock(t0)
        policy = cfg.policy
        if "dst" in self.faults:
            policy = replace(policy, schedule="30 2 * * *", tz="America/Chicago")
        policy = with_sim_ladders(policy, self.faults)
        book = load_book(seed=cfg.seed, start=cfg.start, invoices_csv=cfg.invoices_csv, payments_csv=cfg.payments_csv,
                         invoices=cfg.invoices)
        store = open_store(url)
        store.migrate()
        store.before_statement = self.blip
        crashpoints.hook = self.crash
        try:
            with MailSink(maildir) as sink, _FaultyMailer(self, sink) as mailer:
                return self._loop(store, sink, mailer, clock, policy, book, t0, t_end, t_settled, url, maildir)
        finally:
            crashpoints.hook = None
            store.before_statement = None
            store.close()

    def _loop(self, store: Store, sink: MailSink, mailer: Mailer, clock: SimulatedClock, policy: Policy, book: Book,
              t0: datetime, t_end: datetime, t_settled: datetime, url: str, maildir: Path) -> SimReport:
        service = ReminderService(store, policy, clock=clock, mailer=mailer)
        late, late_payments, held = self._plan_late_imports(book, policy, t0, t_end)
        late += self._plan_holds(book, policy, t0, t_end, arrivals={e[2].number: e[0] for e in late})
        with self.quiet():
            service.upsert(book.customers, [i for i in book.invoices if i.number not in held])
        app = build_app(service)
        w = _World(store=store, sink=sink, clock=clock, policy=policy, service=service, app=app,
                   definitions={k: [d] for k, d in app.schedules.items()})
        # the order of these steps is the order of the seeded random draws: keep it, so runs repeat exactly
        self._prepare_faults(w, book, t0, t_end)
        self._start_clocks(w)
        w.events = sorted(self._plan_events(w, t0, t_end) + late + self._plan_feed(w, t0, t_end, t_settled)
                          + plan_ladder_events(self.faults, book.customers, t0, t_end, self.cfg.seed),
                          key=lambda e: e[0])
        w.payments = sorted([p for p in book.payments if p.number not in held] + list(late_payments.values()),
                            key=lambda p: payment_instant(p, policy.tz))
        w.workers = [self._worker(app, store, clock, f"worker.{i + 1}") for i in range(self.cfg.workers)]
        self.world = w
        self._run_until(w, t_end, t_settled)
        with self.quiet():
            for worker in w.workers:
                worker.drain()
        report = check(store, maildir=maildir, stages=policy.stages, collapse=policy.collapse,
                       cap=policy.max_notices_per_week, cap_zone=partial(cap_zone, policy),
                       calendar=policy.calendar,
                       business_date=policy.business_date, definitions=w.definitions,
                       payments=self.payments_log, in_doubt_budget=self.doubt_budget,
                       ladders=ladder_timeline(store, w.service.policy, earlier=[policy],
                                               former={c.email: [{"customer_locale": c.locale}]
                                                       for c in book.customers}),
                       attachments=policy.attachments)
        return self._report(w, book, report, t0, t_end, url, maildir)

    def _plan_late_imports(self, book: Book, policy: Policy, t0: datetime, t_end: datetime
                           ) -> tuple[list[tuple[datetime, str, Any]], dict[str, Payment], set[str]]:
        """Fault ``late-import``: open invoices held back from the first import and imported mid-run (events
        ``import``), half of them paid an instant from a minute to three hours later, which is before the next
        daily scan for most; the payments the book had for the held invoices are dropped. Returns the events, the
        payments by invoice number and the held invoice numbers. Its own random generator, so the other faults'
        draws stay as they were."""
        rate = self.faults.get("late-import", 0.0)
        if not rate:
            return [], {}, set()
        rng = random.Random(f"late-import:{self.cfg.seed}")
        events: list[tuple[datetime, str, Any]] = []
        payments: dict[str, Payment] = {}
        span = (t_end - t0).total_seconds()
        for invoice in book.invoices:
            if invoice.status != "open" or rng.random() >= rate:
                continue
            arrives = t0 + timedelta(seconds=rng.uniform(0, span * 0.9))
            events.append((arrives, "import", invoice))
            if rng.random() < 0.5:
                paid = arrives + timedelta(seconds=rng.uniform(60, 3 * 3600))
                payments[invoice.number] = Payment(number=invoice.number, paid_at=paid,
                                                   paid_on=paid.astimezone(policy.zone).date())
        self.injected["late-import"] = len(events)
        return events, payments, {e[2].number for e in events}

    def _plan_holds(self, book: Book, policy: Policy, t0: datetime, t_end: datetime, *,
                    arrivals: dict[str, datetime]) -> list[tuple[datetime, str, Any]]:
        """Fault ``holds``: for some open invoices (or their customer), a hold placed at an arbitrary instant: a
        promise to pay kept (a payment before its date), a promise broken, a dispute closed days later, a manual
        customer hold released later. Events ``hold``, ``release``, ``pay``; its own random generator, so the
        other faults' draws stay as they were."""
        rate = self.faults.get("holds", 0.0)
        if not rate:
            return []
        rng = random.Random(f"holds:{self.cfg.seed}")
        events: list[tuple[datetime, str, Any]] = []
        last = t0 + (t_end - t0) * 0.9
        for invoice in book.invoices:
            if invoice.status != "open" or rng.random() >= rate:
                continue
            # while it is in dunning (from just before it is due to past the ladder's end), once it is imported
            due = datetime.combine(invoice.due_on, time(12), tzinfo=policy.zone)
            lo = max(t0, due - timedelta(days=3), arrivals.get(invoice.number, t0) + timedelta(seconds=1))
            hi = min(last, due + timedelta(days=max(policy.stages, default=30) + 5))
            if hi <= lo:
                lo, hi = max(t0, arrivals.get(invoice.number, t0) + timedelta(seconds=1)), last
            at = lo + timedelta(seconds=rng.uniform(0, max(0.0, (hi - lo).total_seconds())))
            today = at.astimezone(policy.zone).date()
            kind = rng.choice(("promise-kept", "promise-broken", "dispute", "customer"))
            ref = f"sim-hold:{invoice.number}"
            if kind.startswith("promise"):
                until = today + timedelta(days=rng.randint(0, 12))
                events.append((at, "hold", {"invoice": invoice.number, "reason": "promise", "until": until,
                                            "ref": ref}))
                if kind == "promise-kept":
                    last = datetime.combine(until + timedelta(days=1), time(0), tzinfo=policy.zone)
                    paid = at + timedelta(seconds=rng.uniform(1, max(2.0, (last - at).total_seconds() - 1)))
                    events.append((paid, "pay", Payment(number=invoice.number, paid_at=paid,
                                                        paid_on=paid.astimezone(policy.zone).date())))
            else:
                target = {"invoice": invoice.number} if kind == "dispute" else {"customer": invoice.customer_email}
                events.append((at, "hold", {**target, "reason": "dispute" if kind == "dispute" else "manual",
                                            "until": None, "ref": ref}))
                events.append((at + timedelta(seconds=rng.uniform(3600, 25 * 86400)), "release", ref))
            self.injected[f"holds:{kind}"] += 1
        return events

    def _hold(self, w: _World, payload: dict[str, Any]) -> None:
        """Place a planned hold (none when its external reference already has one: a customer held twice)."""
        with self.quiet():
            _attempt(lambda: place_hold(w.store, clock=w.clock, zone=w.policy.zone, source=_HOLDER,
                                        reason=payload["reason"], invoice=payload.get("invoice"),
                                        customer=payload.get("customer"), until=payload["until"],
                                        external_ref=payload["ref"], note="simulated",
                                        calendar=w.policy.calendar))

    def _dispute_race(self, w: _World) -> None:
        """Fault ``holds``: a dispute opened between a scan and its sends (on a pending reminder's invoice) and
        closed from an hour to ten days later."""
        rate = self._rate("holds")
        if not rate or self.hold_rng.random() >= rate:
            return
        with self.quiet():
            pending = pending_reminders(w.store)
        if not pending:
            return
        r = self.hold_rng.choice(pending)
        now = w.clock.now()
        ref = f"sim-race:{r['number']}:{r['stage']}"
        self._hold(w, {"invoice": r["number"], "reason": "dispute", "until": None, "ref": ref})
        insort(w.events, (now + timedelta(seconds=self.hold_rng.uniform(3600, 10 * 86400)), "release", ref),
               key=lambda e: e[0])
        self.injected["holds:dispute-mid-send"] += 1

    def _prepare_faults(self, w: _World, book: Book, t0: datetime, t_end: datetime) -> None:
        """Faults set up before the run: DST probe schedules, the host's zone, mailboxes that reject."""
        if "dst" in self.faults:
            @w.app.task("sim.probe")
            def probe(ctx: Any) -> None:
                ctx.effect(f"probe:{ctx.job.occurrence_id}", lambda: {"fired": ctx.job.occurrence_id})
            for key, expr, tz in PROBES:
                w.definitions[key] = [w.app.schedule(key, expr, tz=tz, task="sim.probe", catchup="all")]
            self.injected["dst"] = _transitions({tz for _, _, tz in PROBES} | {w.policy.tz}, t0, t_end)
        if "host-tz" in self.faults:
            self.injected["host-tz"] = 1
        if "smtp-permanent" in self.faults:
            for c in book.customers:
                if self.rng.random() < self.faults["smtp-permanent"]:
                    w.sink.faults.reject_recipient(c.email, code=550, text="5.1.1 mailbox unavailable")
                    self.injected["smtp-permanent"] += 1

    def _new_clock(self, w: _World, defs_app: App, name: str, version: str | None = None) -> ClockProcess:
        src = current_source("clock", name=name)
        if version:
            src = replace(src, version=version)
        # Each fire re-reads its schedule row in the firing transaction; the periodic re-read only
        # discovers new or resumed schedules, so simulated clocks need it rarely.
        return ClockProcess(defs_app, w.store, clock=w.clock, source=src, resync_interval=3600)

    def _start_clocks(self, w: _World) -> None:
        """The primary clock, and with ``double-clock`` an old release's clock and a second one (started next)."""
        if "double-clock" in self.faults:
            old_app = App()
            old_app.tasks.update(w.app.tasks)
            old_app.schedules.update(w.app.schedules)
            legacy = old_app.schedule("legacy-reminders", "0 7 * * *", tz="America/Chicago", task="reminders.scan")
            w.definitions["legacy-reminders"] = [legacy]
            w.clocks["old"] = self._new_clock(w, old_app, "clock.old", version="0.0.9")
            w.clocks["second"] = self._new_clock(w, w.app, "clock.2")
            w.pending_start |= {"old", "second"}
            self.injected["double-clock"] += 2
        w.clocks["primary"] = self._new_clock(w, w.app, "clock.1")
        w.pending_start.add("primary")

    def _plan_events(self, w: _World, t0: datetime, t_end: datetime) -> list[tuple[datetime, str, Any]]:
        """Planned events, sorted: (instant, kind, payload) for clock stops and starts, leftover triggers and
        the schedule change."""
        rng = self.rng
        events: list[tuple[datetime, str, Any]] = []
        reminder_fires = list(w.app.schedules[SCHEDULE_KEY].schedule().between(t0, t_end))
        if "clock-restart" in self.faults:
            for t in reminder_fires:
                if rng.random() < self.faults["clock-restart"]:
                    variant = rng.choice(("at", "before", "after", "downtime"))
                    self.injected[f"clock-restart:{variant}"] += 1
                    if variant == "downtime":
                        down, up = t - timedelta(hours=1), t + timedelta(hours=rng.uniform(1, 60))
                    else:
                        up = t + {"at": timedelta(0), "before": timedelta(seconds=-1),
                                  "after": timedelta(seconds=1)}[variant]
                        down = up - timedelta(minutes=5)
                    events += [(down, "stop", "primary"), (up, "start", "primary")]
        if "leftover-trigger" in self.faults:
            hour = t0
            while hour < t_end:
                if rng.random() < self.faults["leftover-trigger"]:
                    events.append((hour + timedelta(seconds=rng.randrange(3600)), "trigger", None))
                hour += timedelta(hours=1)
        if "schedule-change" in self.faults:
            events.append((t0 + (t_end - t0) * 0.4, "change", None))
        if "pause" in self.faults:
            # its own generator: the draws of the faults above stay as they were, so their runs repeat exactly
            hold_rng = random.Random(self.cfg.seed * 7919 + 22)
            for t in reminder_fires:
                if hold_rng.random() < self.faults["pause"]:
                    resume = min(t + timedelta(hours=hold_rng.uniform(1, 30)), t_end)
                    events += [(t, "pause", SCHEDULE_KEY), (max(resume, t + timedelta(minutes=1)), "resume",
                                                            SCHEDULE_KEY)]
        events.sort(key=lambda e: e[0])
        return events

    def _plan_feed(self, w: _World, t0: datetime, t_end: datetime, t_settled: datetime
                   ) -> list[tuple[datetime, str, Any]]:
        """The payment feed (issue 23 item 5): with ``max_payment_staleness`` set, an import refreshes the payment
        data at a fixed interval (half the limit, at most 3 h) even when nothing was paid (events ``feed``); fault
        ``stale-import`` stops it, and the payments, for 2 days from the middle of the run (event ``stale``). The
        feed goes on while the run settles (it is not a fault).
        Deterministic: no random draw, so the other faults' runs repeat exactly."""
        events: list[tuple[datetime, str, Any]] = []
        limit = w.policy.max_payment_staleness
        if limit is not None:
            step = timedelta(seconds=min(limit / 2, 3 * 3600.0))
            t = t0
            while t < t_settled:
                events.append((t, "feed", None))
                t += step
        if "stale-import" in self.faults:
            stops = t0 + (t_end - t0) / 2
            events.append((stops, "stale", stops + timedelta(days=2)))
        return events

    def _run_until(self, w: _World, t_end: datetime, t_settled: datetime) -> None:
        """Step simulated time from wake-up to wake-up until ``t_settled``; faults stop at ``t_end``."""
        settling = False
        while True:
            now = w.clock.now()
            if not settling and now >= t_end:
                settling = True
                self.active = False
                w.sink.faults.clear()
            # 1. payments that arrived
            while w.payments and payment_instant(w.payments[0], w.policy.tz) <= now and not w.stale(now):
                p = w.payments.pop(0)
                self._pay(w.service, [p], now)  # the instant the database records (paid_at), as check reads it
            # 2. planned events
            self._apply_events(w, now)
            # 3. clocks
            for name in sorted(w.clocks):
                clk = w.clocks[name]
                if clk is None:
                    continue
                if name in w.pending_start:
                    if _attempt(clk.start):
                        w.pending_start.discard(name)
                    continue
                _attempt(clk.tick)
            self._apply_holds(w)  # a pause at a fire instant comes after the fire: its run is queued, unclaimed
            # 4. workers: rescue, then drain
            _attempt(w.workers[0].rescue)
            self._drain(w.workers, w.app, w.store, w.clock, w.sink, w.service)
            # 5. next wake-up
            if now >= t_settled:
                break
            w.clock.set(max(self._next_wake(w, now, t_settled), now + timedelta(seconds=1)))

    def _apply_events(self, w: _World, now: datetime) -> None:
        """Apply the planned events due at ``now``."""
        while w.events and w.events[0][0] <= now:
            _, kind, payload = w.events.pop(0)
            if kind == "stop":
                w.clocks[payload] = None
            elif kind == "start" and w.clocks.get(payload) is None:
                w.generation[payload] += 1
                w.clocks[payload] = self._new_clock(w, w.app, f"clock.1 (restart {w.generation[payload]})")
                w.pending_start.add(payload)
            elif kind == "pause" and self.active:
                w.holds.append(payload)
            elif kind == "resume":  # even while settling: a pause always ends, and what it held runs then
                with self.quiet():
                    resume_schedule(w.store, w.app, payload, source=_OPERATOR, clock=w.clock)
            elif kind == "hold":
                self._hold(w, payload)
            elif kind == "release":
                with self.quiet():
                    _attempt(lambda: release_holds(w.store, clock=w.clock, zone=w.policy.zone, source=_HOLDER,
                                                   external_ref=payload, note="simulated",  # noqa: B023
                                                   calendar=w.policy.calendar))
            elif kind == "pay":
                self._pay(w.service, [payload], now)
            elif kind == "feed" and not w.stale(now):  # the periodic import, nothing new paid: data fresh as of now
                with self.quiet():
                    _attempt(lambda: w.service.apply_payments([]))  # noqa: B023
            elif kind == "stale":
                w.stale_until = payload
                self.injected["stale-import"] += 1
            elif kind == "import":  # a late invoice: its CSV import or webhook arrives now
                with self.quiet():
                    w.service.upsert([], [payload])
            elif kind == "trigger" and self.active:
                self.injected["leftover-trigger"] += 1
                _attempt(lambda: ClockProcess(w.app, w.store, clock=w.clock, source=_LEFTOVER).trigger(SCHEDULE_KEY,
                                                                                                       kind="cli"))
            elif kind in LADDER_EVENTS:
                fault = "segment-move" if kind == "segment-move" else "ladder-edit"
                with self.quiet():
                    self.injected[kind] += apply_ladder_event(w.service, kind, payload, now=now,
                                                              rate=self.faults[fault],
                                                              rng=random.Random(f"ladder-apply:{self.cfg.seed}"))
            elif kind == "change":
                changed = replace(w.app.schedules[SCHEDULE_KEY], expression="0 9 * * *", tz="America/Denver")
                w.app.schedules[SCHEDULE_KEY] = changed
                w.definitions[SCHEDULE_KEY].append(changed)
                self.injected["schedule-change"] += 1
                w.clocks["primary"] = self._new_clock(w, w.app, "clock.1 (new config)")
                w.pending_start.add("primary")

    def _apply_holds(self, w: _World) -> None:
        """Fault ``pause``: pause the schedule now, after the clocks fired (no worker has claimed the run yet)."""
        for key in w.holds:
            with self.quiet():
                if pause_schedule(w.store, w.app, key, source=_OPERATOR, clock=w.clock):
                    self.injected["pause"] += 1
        w.holds.clear()

    def _next_wake(self, w: _World, now: datetime, t_settled: datetime) -> datetime:
        """The earliest instant anything can happen next: a fire, a payment, an event, a lease or a retry."""
        candidates = [t_settled, now + MAX_STEP]
        fires = [k.next_fire_at() for k in w.clocks.values() if k is not None]
        candidates += [t for t in fires if t is not None]
        if w.payments:  # held back while the import is stopped (fault stale-import): they arrive when it resumes
            candidates.append(w.stale_until if w.stale(now) and w.stale_until is not None
                              else payment_instant(w.payments[0], w.policy.tz))
        if w.events:
            candidates.append(w.events[0][0])
        self.wakes = [t for t in self.wakes if t > now]
        candidates += self.wakes
        with self.quiet():
            nra = w.workers[0].queue.next_run_at(("default",))
        if nra is not None:
            candidates.append(nra)
        return min(candidates)

    def _report(self, w: _World, book: Book, report: CheckReport, t0: datetime, t_end: datetime, url: str,
                maildir: Path) -> SimReport:
        """The run's report, with the naive design's run on the same book and faults when asked."""
        naive = None
        if self.cfg.compare_naive:
            naive = run_naive(book, w.policy, faults=self.faults, seed=self.cfg.seed, start=t0, end=t_end,
                              workdir=self.cfg.workdir, host_tz=HOST_TZ if "host-tz" in self.faults else None)
            for fmt, folder in self.cfg.emit_logs:
                truth = emit_logs(naive.trace, fmt, folder, tz=w.policy.tz, seed=self.cfg.seed, faults=self.faults,
                                  host_tz=HOST_TZ if "host-tz" in self.faults else None)
                naive.logs.append(str(folder / truth["log"]))
        injected: Counter[str] = Counter()
        for k, v in self.injected.items():
            injected[k.split(":")[0]] += v
        return SimReport(seed=self.cfg.seed, days=self.cfg.days, start=t0.isoformat(), end=t_end.isoformat(),
                         faults=dict(self.faults), faults_injected=dict(sorted(injected.items())), check=report,
                         wall_seconds=0.0, database=redact_url(url), maildir=str(maildir), naive=naive)

    def _wake_for_rescue(self, worker: Worker, clock: SimulatedClock) -> None:
        """Jobs the dead (or interrupted) worker held come back when their leases expire: wake then."""
        self.wakes.append(clock.now() + timedelta(seconds=worker.lease_seconds + 1))

    def _worker(self, app: App, store: Store, clock: SimulatedClock, name: str) -> Worker:
        """A worker whose retry jitter comes from the simulation's seed (so runs repeat exactly)."""
        return Worker(app, store, clock=clock, source=current_source("worker", name=name),
                      rng=random.Random(self.rng.random()))

    def _pay(self, service: ReminderService, payments: list[Payment], at: datetime) -> None:
        with self.quiet():
            service.apply_payments(payments)
        for p in payments:
            self.payments_log.setdefault(p.number, (at, at))

    def _drain(self, workers: list[Worker], app: App, store: Store, clock: SimulatedClock, sink: MailSink,
               service: ReminderService) -> None:
        """The workers take turns, one batch each, until every one in a row has found nothing to claim.

        Then no job ran since the first of those empty claims and the simulated time has not moved, so one more
        claim would find the queue as empty (the races between turns pay invoices and place holds; neither
        enqueues a job): it is not made.
        """
        empty = 0  # turns in a row that claimed nothing
        for _ in range(100_000):
            for i, w in enumerate(workers):
                try:
                    claimed = w.drain(max_batches=1)
                except SimulatedCrash:
                    claimed = 1
                    workers[i] = self._worker(app, store, clock, f"worker.{i + 1} (restarted)")
                    self._wake_for_rescue(w, clock)
                except TransientStoreError:
                    claimed = 1
                    self._wake_for_rescue(w, clock)
                empty = 0 if claimed else empty + 1
                self._payment_race(store, service, clock)
                if self.world is not None:
                    self._dispute_race(self.world)
                if empty >= len(workers):
                    return
        raise RuntimeError("simulation made no progress: a job is claimed and fails forever")

    def _payment_race(self, store: Store, service: ReminderService, clock: SimulatedClock) -> None:
        rate = self._rate("payment-race")
        if not rate or self.rng.random() >= rate:
            return
        with self.quiet():
            pending = pending_reminders(store)
        if not pending:
            return
        r = self.rng.choice(pending)
        now = clock.now()
        self.injected["payment-race"] += 1
        local_day = now.astimezone(service.policy.zone).date()
        self._pay(service, [Payment(number=r["number"], paid_on=local_day)], now)


class _FaultyMailer(Mailer):
    """A real Mailer whose server (the sink) misbehaves before some deliveries, as the plan says."""

    def __init__(self, sim: _Sim, sink: MailSink) -> None:
        super().__init__(sink.url, timeout=5)
        self.sim = sim
        self.sink = sink

    def send(self, msg: Any, *, before_final_dot: Callable[[], None] | None = None, envelope: Any = None,
             before_transaction: Callable[[], None] | None = None) -> str:
        sim = self.sim
        rate = sim._rate("smtp-transient")
        if rate and sim.rng.random() < rate:
            kind = sim.rng.choice(("451", "drop-before-reply", "drop-after-accept"))
            sim.injected[f"smtp-transient:{kind}"] += 1
            if kind == "451":
                self.sink.faults.fail_next(1, code=451, text="4.7.1 greylisted, try again later")
            elif kind == "drop-before-reply":
                self.sink.faults.drop_before_reply_next(1)
                sim.doubt_budget += 1  # the client cannot know whether the server kept it
            else:
                self.sink.faults.drop_after_accept_next(1)
        return super().send(msg, before_final_dot=before_final_dot, envelope=envelope,
                            before_transaction=before_transaction)


def simulate(cfg: SimConfig) -> SimReport:
    """Run one simulation (see module docstring) and return its report."""
    return _Sim(cfg).run()

