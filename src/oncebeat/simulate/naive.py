"""The design most teams start with, run against the same days and faults, for comparison.

The naive design: a scheduler process remembers "last run" in memory and, at
08:00 (or when it boots later that day and has no memory of a run), enqueues a
job; the job selects invoices not yet reminded for their current stage, sends
each email, then marks the invoice. "Today" is the host's date. There is no
occurrence ledger, no effect ledger, no unique reminder rows.

Each fault is applied where it bites this design: a restarted or second
scheduler runs the job again (two runs that overlap both select before either
marks); a worker that dies after sending and before marking, or a database
error on the mark, retries the job and resends; an invoice paid between the
select and the send is still sent; a host zone ahead of the business zone
moves "today" and so the stage.

The report also keeps a trace of each fire (:class:`NaiveDay`): which triggers
ran the job, its attempts, what each delivered and how it failed. The log
emitter (:mod:`.emitlogs`) turns it into the logs this design would have
written on Heroku + Clockwork + Sidekiq or Celery, for ``doctor --logs``.

The report counts duplicates from the Maildir (the same invoice and stage
delivered more than once), sends after payment, sends on the wrong business
date, and lost reminders (a stage that was due while the invoice was open and
was never delivered).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from ..mail import Mailer, MailSink, StoredMessage, build_message, make_message_id, read_maildir
from ..reminders.policy import Policy
from ..sample import Book, payment_instant
from ..schedules import Schedule

__all__ = ["NaiveReport", "NaiveDay", "NaiveRun", "NaiveAttempt", "TRIGGERS", "run_naive"]

# Why a run of the job happened on a fire: the scheduler, a second scheduler, a restarted one that fired on boot,
# or an old cron entry / Heroku Scheduler job.
TRIGGERS = ("clock", "double-clock", "clock-restart", "leftover-trigger")


@dataclass(kw_only=True)
class NaiveAttempt:
    """One attempt of a run: the (invoice number, stage) pairs it delivered, in order, and how it failed."""

    sends: list[tuple[str, int]] = field(default_factory=list)
    crash: str | None = None  # None (finished), "worker-crash" or "db-blip"


@dataclass(kw_only=True)
class NaiveRun:
    """One run of the job, caused by ``trigger`` (one of :data:`TRIGGERS`), with its attempts."""

    trigger: str
    attempts: list[NaiveAttempt] = field(default_factory=list)


@dataclass(kw_only=True)
class NaiveDay:
    """One fire instant (UTC) and the runs it caused; ``overlapped``: they selected before any of them marked."""

    fire: datetime
    runs: list[NaiveRun] = field(default_factory=list)
    overlapped: bool = False


@dataclass(kw_only=True)
class NaiveReport:
    messages_delivered: int = 0
    duplicates: int = 0
    lost: int = 0
    sent_after_paid: int = 0
    wrong_business_date: int = 0
    runs: int = 0
    examples: list[str] = field(default_factory=list)
    trace: list[NaiveDay] = field(default_factory=list)  # not in as_dict(): see emitlogs
    logs: list[str] = field(default_factory=list)  # logs written from the trace (--emit-logs)

    def as_dict(self) -> dict[str, Any]:
        return {"messages_delivered": self.messages_delivered, "duplicates": self.duplicates, "lost": self.lost,
                "sent_after_paid": self.sent_after_paid, "wrong_business_date": self.wrong_business_date,
                "runs": self.runs, "examples": self.examples[:10], "logs": self.logs}


class _Crash(Exception):
    def __init__(self, kind: str, text: str) -> None:
        super().__init__(text)
        self.kind = kind


def run_naive(book: Book, policy: Policy, *, faults: dict[str, float], seed: int, start: datetime, end: datetime,
              workdir: Path, host_tz: str | None) -> NaiveReport:
    """Simulate the naive design over ``[start, end)`` with ``faults``; see the module docstring."""
    rng = random.Random(seed)
    maildir = workdir / "naive-maildir"
    zone = ZoneInfo(policy.tz)
    host = ZoneInfo(host_tz) if host_tz else zone
    sched = Schedule(expression=policy.scan_schedule, tz=policy.tz)
    fires = list(sched.between(start, end))
    with MailSink(maildir) as sink, Mailer(sink.url, timeout=5) as mailer:
        naive = _Naive(book, policy, faults=faults, rng=rng, host=host, mailer=mailer)
        for t in fires:
            naive.fire(t)
        messages = read_maildir(maildir)
    _score(naive, messages, fires, zone)
    return naive.report


class _Naive:
    """The naive design's state through a run: what it marked, what it sent, and the report it fills."""

    def __init__(self, book: Book, policy: Policy, *, faults: dict[str, float], rng: random.Random, host: ZoneInfo,
                 mailer: Mailer) -> None:
        self.policy = policy
        self.faults = faults
        self.rng = rng
        self.host = host
        self.mailer = mailer
        self.paid_at = {p.number: payment_instant(p, policy.tz) for p in book.payments}
        self.invoices = [i for i in book.invoices if i.status == "open"]
        self.marked: dict[str, int] = {}  # invoice → highest stage marked as reminded
        self.emails = {c.email: c for c in book.customers}
        self.report = NaiveReport()
        self.sent_log: list[tuple[str, int, datetime]] = []

    def is_open(self, number: str, at: datetime) -> bool:
        return number not in self.paid_at or self.paid_at[number] > at

    def select(self, at: datetime) -> list[tuple[Any, int]]:
        today = at.astimezone(self.host).date()  # the naive mistake: the host's date
        todo = []
        for inv in self.invoices:
            if not self.is_open(inv.number, at):
                continue
            due = [s for s in self.policy.stages if inv.due_on + timedelta(days=s) <= today]
            if due and max(due) > self.marked.get(inv.number, -10**6):
                todo.append((inv, max(due)))
        return todo

    def send(self, inv: Any, stage: int, at: datetime, attempt: NaiveAttempt) -> None:
        customer = self.emails[inv.customer_email]
        msg = build_message(sender=self.policy.sender, to=customer.email, subject=f"Invoice {inv.number} reminder",
                            text="Please pay.", html=None,
                            message_id=make_message_id(f"naive:{inv.number}:{stage}:{self.rng.random()}",
                                                       "example.com"),
                            headers={"X-Oncebeat-Invoice": inv.number, "X-Oncebeat-Stage": str(stage)})
        self.mailer.send(msg)
        self.sent_log.append((inv.number, stage, at))
        attempt.sends.append((inv.number, stage))

    def run_job(self, at: datetime, run: NaiveRun) -> None:
        """One job; retried from the start (up to 3 times) when it fails midway."""
        faults, rng = self.faults, self.rng
        for _attempt in range(3):
            todo = self.select(at)
            self.report.runs += 1
            attempt = NaiveAttempt()
            run.attempts.append(attempt)
            try:
                for inv, stage in todo:
                    if faults.get("payment-race") and rng.random() < faults["payment-race"] / 5:
                        self.paid_at.setdefault(inv.number, at)  # paid just after the select
                    self.send(inv, stage, at, attempt)
                    if faults.get("worker-crash") and rng.random() < faults["worker-crash"] * 5:
                        raise _Crash("worker-crash", "worker died after sending, before marking")
                    if faults.get("db-blip") and rng.random() < faults["db-blip"] * 5:
                        raise _Crash("db-blip", "database error on the mark")
                    self.marked[inv.number] = stage
                return
            except _Crash as crash:
                attempt.crash = crash.kind
                continue

    def fire(self, t: datetime) -> None:
        """One fire instant: the runs its triggers cause, overlapping (each selects before any marks) or in turn."""
        faults, rng = self.faults, self.rng
        triggers = ["clock"]
        if faults.get("double-clock"):
            triggers.append("double-clock")  # a second scheduler with its own memory fires too
        if faults.get("clock-restart") and rng.random() < faults["clock-restart"]:
            triggers.append("clock-restart")  # restarted after 08:00 with no memory of today's run: fires on boot
        if faults.get("leftover-trigger") and rng.random() < min(1.0, faults["leftover-trigger"] * 24):
            triggers.append("leftover-trigger")  # the old cron entry
        runs = len(triggers)
        day = NaiveDay(fire=t, runs=[NaiveRun(trigger=k) for k in triggers])
        self.report.trace.append(day)
        if runs > 1 and rng.random() < 0.5:
            # overlapping runs: each selects before the other marks
            day.overlapped = True
            selections = [self.select(t) for _ in range(runs)]
            self.report.runs += runs
            for run, todo in zip(day.runs, selections, strict=True):
                attempt = NaiveAttempt()
                run.attempts.append(attempt)
                for inv, stage in todo:
                    self.send(inv, stage, t, attempt)
                    self.marked[inv.number] = stage
        else:
            for run in day.runs:
                self.run_job(t, run)


def _score(naive: _Naive, messages: list[StoredMessage], fires: list[datetime], zone: ZoneInfo) -> None:
    """Fill ``naive.report`` from the Maildir and the send log: duplicates, late, wrong-date and lost reminders."""
    report, invoices = naive.report, naive.invoices
    report.messages_delivered = len(messages)
    pairs = Counter((m.headers.get("X-Oncebeat-Invoice"), m.headers.get("X-Oncebeat-Stage")) for m in messages)
    report.duplicates = sum(n - 1 for n in pairs.values() if n > 1)
    report.examples += [f"{n} stage {s} delivered {c} times" for (n, s), c in pairs.items() if c > 1][:5]
    for number, _stage, at in naive.sent_log:
        if not naive.is_open(number, at):
            report.sent_after_paid += 1
    delivered = {(n, int(s) if s else -1) for n, s in pairs}
    for number, stage, at in naive.sent_log:
        business = at.astimezone(zone).date()
        inv = next(i for i in invoices if i.number == number)
        if inv.due_on + timedelta(days=stage) > business:
            report.wrong_business_date += 1
    lost: set[tuple[str, int]] = set()
    for inv in invoices:
        for t in fires:
            if not naive.is_open(inv.number, t):
                break
            due = [s for s in naive.policy.stages if inv.due_on + timedelta(days=s) <= t.astimezone(zone).date()]
            if due and not any(n == inv.number and s >= max(due) for n, s in delivered):
                lost.add((inv.number, max(due)))
    report.lost = len(lost)
