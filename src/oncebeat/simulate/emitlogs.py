"""The logs the naive design would have written, for ``doctor --logs`` to read: ground truth with known causes.

``oncebeat simulate --compare-naive --emit-logs FORMAT DIR`` runs the naive
baseline (:mod:`.naive`) under the injected faults and writes, from its trace,
what that design logs on a real stack:

- ``heroku-sidekiq``: ``DIR/heroku.log`` as ``heroku logs`` prints it — a
  Clockwork ``clock`` dyno (Ruby Logger stamps in the dyno's ``TZ``), Active Job
  over Sidekiq 7 on ``worker`` dynos, Action Mailer deliveries, Heroku's own
  lines (restarts, daily cycling, one-off ``scheduler`` dynos, releases) and
  router noise;
- ``celery``: ``DIR/celery.log`` as ``journalctl -o short-iso`` prints it —
  ``celery beat`` and workers on hosts in the host zone, systemd restarts,
  an old cron host, task-logger deliveries, retries and a killed pool child.

Each fault shows where it bites: ``double-clock`` a second clock dyno / beat
host, ``clock-restart`` a clock restarted 2–20 min after the fire that fires on
boot, ``leftover-trigger`` a Heroku Scheduler dyno or cron entry 25–40 min after
the fire, ``worker-crash`` a worker killed (R15 / SIGKILL) after a delivery and
the job run again, ``db-blip`` an exception and a retry, ``host-tz`` the clock
hosts in Pacific/Kiritimati. When the naive runs overlapped, they run on
different workers at once.

``DIR/heroku.truth.json`` (``celery.truth.json``) lists the causes injected, as ``(code, day)`` pairs in the
doctor's cause codes (``day`` is the schedule-zone date; null for ``timezone``),
computed from the trace alone — never from the logs. Timings and ids come from
``random.Random(seed)``, so the same seed writes the same files.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from .naive import NaiveDay, NaiveRun

__all__ = ["FORMATS", "emit_logs", "expected_causes", "score_logs"]

FORMATS = ("heroku-sidekiq", "celery")
JOB_CLASS = "SendInvoiceOverdueRemindersJob"
CLOCK_NAME = "invoice_reminders"
TASK = "billing.tasks.send_overdue_reminders"
BEAT_ENTRY = "send-overdue-reminders"
UTC_ZONE = ZoneInfo("UTC")


def expected_causes(trace: list[NaiveDay], *, tz: str, host_tz: str | None) -> list[tuple[str, date | None]]:
    """The causes the doctor must find in logs of ``trace``: ``(code, schedule-zone day)``, sorted, unique."""
    zone = ZoneInfo(tz)
    host = ZoneInfo(host_tz) if host_tz else UTC_ZONE
    out: set[tuple[str, date | None]] = set()
    for d in trace:
        day = d.fire.astimezone(zone).date()
        triggers = {r.trigger for r in d.runs}
        for trig, code in (("double-clock", "multiple-clocks"), ("clock-restart", "clock-restart"),
                           ("leftover-trigger", "leftover-trigger")):
            if trig in triggers:
                out.add((code, day))
        if d.overlapped and len(d.runs) > 1:
            out.add(("concurrent-run", day))
        for run in d.runs:
            if any(a.crash and a.sends for a in run.attempts[:-1]):
                out.add(("retry-side-effect", day))
        if host_tz and d.fire.astimezone(host).date() != day:
            out.add(("timezone", None))
    return sorted(out, key=lambda p: (p[1] or date.min, p[0]))


@dataclass
class _Log:
    """Lines with their instants; written sorted by instant, as a log export is."""

    rng: random.Random
    lines: list[tuple[datetime, int, str]] = field(default_factory=list)

    def add(self, at: datetime, text: str) -> None:
        self.lines.append((at, len(self.lines), text))

    def write(self, path: Path) -> None:
        self.lines.sort()
        with open(path, "w", encoding="utf-8") as fh:
            for _, _, text in self.lines:
                fh.write(text + "\n")

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def hex(self, n: int) -> str:
        return f"{self.rng.getrandbits(4 * n):0{n}x}"


@dataclass
class _Plan:
    """When and by whom each run of a day was enqueued, and where it runs."""

    enqueue_at: list[datetime]
    workers: list[int]


def _plan(log: _Log, d: NaiveDay) -> _Plan:
    rng = log.rng
    at: list[datetime] = []
    for run in d.runs:
        t = d.fire
        if run.trigger == "clock":
            at.append(t + timedelta(milliseconds=rng.randint(5, 30)))
        elif run.trigger == "double-clock":
            at.append(t + timedelta(milliseconds=rng.randint(31, 80)))
        elif run.trigger == "clock-restart":
            at.append(t + (timedelta(seconds=rng.uniform(1.0, 2.0)) if d.overlapped
                           else timedelta(minutes=rng.uniform(2, 20))))
        else:
            at.append(t + (timedelta(seconds=rng.uniform(2.2, 3.2)) if d.overlapped
                           else timedelta(minutes=rng.uniform(25, 40))))
    workers = list(range(1, len(d.runs) + 1)) if d.overlapped else [1] * len(d.runs)
    return _Plan(enqueue_at=at, workers=workers)


# --- Heroku + Clockwork + Active Job/Sidekiq -------------------------------------------------------------------

def _h(at: datetime, source: str, text: str) -> str:
    return f"{at.astimezone(UTC).isoformat(timespec='microseconds')} {source}: {text}"


def _ruby(at: datetime, zone: ZoneInfo, text: str) -> str:
    local = at.astimezone(zone).replace(tzinfo=None).isoformat(timespec="microseconds")
    return f"I, [{local} #4]  INFO -- : {text}"


def _sq(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


class _Heroku:
    def __init__(self, log: _Log, host_zone: ZoneInfo) -> None:
        self.log = log
        self.zone = host_zone
        self.release = 41
        self.tids = {n: log.hex(3) for n in range(1, 6)}

    def ms(self, a: int, b: int) -> timedelta:
        return timedelta(milliseconds=self.log.rng.randint(a, b))

    def boot_clock(self, at: datetime, dyno: str) -> datetime:
        add = self.log.add
        add(at, _h(at, f"heroku[{dyno}]", "Starting process with command `bundle exec clockwork config/clock.rb`"))
        at += self.ms(800, 1500)
        add(at, _h(at, f"heroku[{dyno}]", "State changed from starting to up"))
        at += self.ms(900, 2000)
        add(at, _h(at, f"app[{dyno}]", _ruby(at, self.zone, f"Starting clock for 2 events: [ {CLOCK_NAME} "
                                                               "nightly.cleanup ]")))
        return at

    def restart(self, at: datetime, dyno: str, why: str = "Restarting") -> datetime:
        add = self.log.add
        add(at, _h(at, f"heroku[{dyno}]", why))
        at += self.ms(50, 200)
        add(at, _h(at, f"heroku[{dyno}]", "State changed from up to starting"))
        at += self.ms(300, 900)
        add(at, _h(at, f"heroku[{dyno}]", "Stopping all processes with SIGTERM"))
        at += self.ms(200, 600)
        add(at, _h(at, f"heroku[{dyno}]", "Process exited with status 143"))
        return at + self.ms(1000, 3000)

    def enqueue(self, at: datetime, dyno: str, job_id: str, trigger: bool = True) -> None:
        if trigger:
            self.log.add(at, _h(at, f"app[{dyno}]", _ruby(at, self.zone, f"Triggering '{CLOCK_NAME}'")))
        at += self.ms(10, 25)
        self.log.add(at, _h(at, f"app[{dyno}]", f"[ActiveJob] Enqueued {JOB_CLASS} (Job ID: {job_id}) to "
                                                 "Sidekiq(default)"))

    def trigger(self, run: NaiveRun, at: datetime, job_id: str, overlapped: bool) -> None:
        if run.trigger == "clock":
            self.enqueue(at, "clock.1", job_id)
        elif run.trigger == "double-clock":
            self.enqueue(at, "clock.2", job_id)
        elif run.trigger == "clock-restart":
            back = at - timedelta(seconds=0.9 if overlapped else 8)
            t = self.restart(back - timedelta(seconds=0.1 if overlapped else 6), "clock.1")
            self.boot_clock(min(t, back), "clock.1")
            self.enqueue(at, "clock.1", job_id)
        else:
            dyno = f"scheduler.{self.log.rng.randint(1000, 9999)}"
            start = at - timedelta(seconds=0.5 if overlapped else 7)
            self.log.add(start, _h(start, f"heroku[{dyno}]", "Starting process with command `bin/rails runner "
                                                              f"\"{JOB_CLASS}.perform_later\"`"))
            self.enqueue(at, dyno, job_id, trigger=False)
            end = at + self.ms(300, 900)
            self.log.add(end, _h(end, f"heroku[{dyno}]", "Process exited with status 0"))
            self.log.add(end, _h(end, f"heroku[{dyno}]", "State changed from up to complete"))

    def run(self, run: NaiveRun, start: datetime, worker: int, job_id: str, enqueued: datetime,
            min_length: timedelta) -> datetime:
        """Write the run's attempts from ``start``; returns when its last attempt ended."""
        add, rng = self.log.add, self.log.rng
        jid = self.log.hex(24)
        at = start
        tags = f"[ActiveJob] [{JOB_CLASS}] [{job_id}]"
        for i, attempt in enumerate(run.attempts):
            dyno = f"worker.{worker}"
            tid = self.tids[worker]
            began = at
            add(at, _h(at, f"app[{dyno}]", f"{_sq(at)} pid=4 tid={tid} class={JOB_CLASS} jid={jid} INFO: start"))
            at += self.ms(1, 4)
            add(at, _h(at, f"app[{dyno}]", f"{tags} Performing {JOB_CLASS} (Job ID: {job_id}) from Sidekiq(default) "
                                           f"enqueued at {_sq(enqueued)}"))
            for number, stage in attempt.sends:
                at += self.ms(250, 700)
                add(at, _h(at, f"app[{dyno}]", f"{tags} Delivered mail naive-{number}-{stage}-{self.log.hex(8)}"
                                               f"@billing.example.test ({rng.uniform(200, 600):.1f}ms)"))
            at = max(at + self.ms(100, 300), began + min_length)
            took = (at - began).total_seconds()
            if attempt.crash == "db-blip":
                err = "PG::ConnectionBad (PQconsumeInput() server closed the connection unexpectedly)"
                add(at, _h(at, f"app[{dyno}]", f"{tags} Error performing {JOB_CLASS} (Job ID: {job_id}) from "
                                               f"Sidekiq(default) in {took * 1000:.1f}ms: {err}"))
                at += self.ms(1, 3)
                add(at, _h(at, f"app[{dyno}]", f"{_sq(at)} pid=4 tid={tid} class={JOB_CLASS} jid={jid} "
                                               f"elapsed={took:.3f} INFO: fail"))
                payload = {"context": "Job raised exception", "job": {
                    "retry": True, "queue": "default", "class": JOB_CLASS, "jid": jid, "retry_count": i,
                    "error_class": "PG::ConnectionBad",
                    "error_message": "PQconsumeInput() server closed the connection unexpectedly"}}
                add(at, _h(at, f"app[{dyno}]", f"{_sq(at)} pid=4 tid={tid} WARN: {json.dumps(payload)}"))
                add(at, _h(at, f"app[{dyno}]", f"{_sq(at)} pid=4 tid={tid} WARN: PG::ConnectionBad: PQconsumeInput() "
                                               "server closed the connection unexpectedly"))
                at += timedelta(seconds=rng.uniform(16, 45))  # Sidekiq's first retries wait 15 s and more
            elif attempt.crash == "worker-crash":
                add(at, _h(at, f"heroku[{dyno}]", "Error R15 (Memory quota vastly exceeded)"))
                add(at, _h(at, f"heroku[{dyno}]", "Stopping process with SIGKILL"))
                at += self.ms(100, 400)
                add(at, _h(at, f"heroku[{dyno}]", "Process exited with status 137"))
                add(at, _h(at, f"heroku[{dyno}]", "State changed from up to crashed"))
                at += self.ms(1000, 3000)
                add(at, _h(at, f"heroku[{dyno}]", "State changed from crashed to starting"))
                add(at, _h(at, f"heroku[{dyno}]", "Starting process with command `bundle exec sidekiq -C "
                                                  "config/sidekiq.yml`"))
                at += self.ms(3000, 6000)
                add(at, _h(at, f"heroku[{dyno}]", "State changed from starting to up"))
                add(at, _h(at, f"app[{dyno}]", f"{_sq(at)} pid=4 tid={self.log.hex(3)} INFO: Booting Sidekiq 7.2.4 "
                                               "with Sidekiq::RedisConnection::RedisClientAdapter"))
                self.tids[worker] = self.log.hex(3)
                at += self.ms(500, 2000)
            else:
                add(at, _h(at, f"app[{dyno}]", f"{tags} Performed {JOB_CLASS} (Job ID: {job_id}) from "
                                               f"Sidekiq(default) in {took * 1000:.1f}ms"))
                at += self.ms(1, 3)
                add(at, _h(at, f"app[{dyno}]", f"{_sq(at)} pid=4 tid={tid} class={JOB_CLASS} jid={jid} "
                                               f"elapsed={took:.3f} INFO: done"))
        return at

    def noise(self, day_start: datetime, fire: datetime) -> None:
        """Web requests, daily cycling and the odd release, never within 2 h of the fire."""
        rng = self.log.rng
        for _ in range(rng.randint(2, 5)):
            at = _away(rng, day_start, fire)
            path = rng.choice(("/invoices", "/customers/42", "/health", "/invoices/INV-1001"))
            self.log.add(at, _h(at, "heroku[router]", f"at=info method=GET path=\"{path}\" host=billing.example.test "
                                                      f"request_id={self.log.uuid()} "
                                                      f"fwd=\"203.0.113.{rng.randint(1, 254)}"
                                                      f"\" dyno=web.1 connect=0ms service={rng.randint(5, 90)}ms "
                                                      "status=200 bytes=4120 protocol=https"))
            self.log.add(at, _h(at, "app[web.1]", f"Started GET \"{path}\" for 203.0.113.9"))
        for dyno in ("clock.1", "worker.1"):
            if rng.random() < 0.7:
                t = self.restart(_away(rng, day_start, fire), dyno, "Cycling")
                if dyno == "clock.1":
                    self.boot_clock(t, dyno)
                else:
                    self.log.add(t, _h(t, f"heroku[{dyno}]", "State changed from starting to up"))
        if rng.random() < 0.1:
            at = _away(rng, day_start, fire)
            self.release += 1
            self.log.add(at, _h(at, "app[api]", f"Deploy {self.log.hex(7)} by user dev@example.test"))
            self.log.add(at, _h(at, "app[api]", f"Release v{self.release} created by user dev@example.test"))
            self.restart(at + self.ms(2000, 4000), "web.1")


def _away(rng: random.Random, day_start: datetime, fire: datetime) -> datetime:
    """A random instant of the day at least 2 h from the fire."""
    for _ in range(50):
        at = day_start + timedelta(seconds=rng.uniform(0, 86400))
        if abs(at - fire) > timedelta(hours=2):
            return at
    return fire + timedelta(hours=6)


def _emit_heroku(trace: list[NaiveDay], log: _Log, host_zone: ZoneInfo, zone: ZoneInfo) -> None:
    h = _Heroku(log, host_zone)
    if not trace:
        return
    first = trace[0].fire - timedelta(hours=3)
    h.boot_clock(first, "clock.1")
    if any(r.trigger == "double-clock" for d in trace for r in d.runs):
        log.add(first, _h(first, "app[api]", "Scaled to clock@2:Standard-1X web@1:Standard-1X worker@2:Standard-1X "
                                             "by user ops@example.test"))
        h.boot_clock(first + timedelta(seconds=5), "clock.2")
    for d in trace:
        local = d.fire.astimezone(zone)
        day_start = datetime(local.year, local.month, local.day, tzinfo=zone).astimezone(UTC)
        h.noise(day_start, d.fire)
        plan = _plan(log, d)
        free = d.fire
        min_length = timedelta(seconds=6) if d.overlapped else timedelta(0)
        for run, at, worker in zip(d.runs, plan.enqueue_at, plan.workers, strict=True):
            job_id = log.uuid()
            h.trigger(run, at, job_id, d.overlapped)
            start = at + h.ms(150, 400)
            if not d.overlapped:
                start = max(start, free + h.ms(50, 200))
            free = h.run(run, start, worker, job_id, at, min_length)


# --- Celery beat + workers under journald ---------------------------------------------------------------------

def _j(at: datetime, host_zone: ZoneInfo, host: str, ident: str, text: str) -> str:
    local = at.astimezone(host_zone)
    stamp = local.strftime("%Y-%m-%dT%H:%M:%S%z")
    return f"{stamp} {host} {ident}: {text}"


def _c(at: datetime, host_zone: ZoneInfo, proc: str, text: str, level: str = "INFO") -> str:
    local = at.astimezone(host_zone)
    return f"[{local.strftime('%Y-%m-%d %H:%M:%S')},{at.microsecond // 1000:03d}: {level}/{proc}] {text}"


class _Celery:
    def __init__(self, log: _Log, host_zone: ZoneInfo) -> None:
        self.log = log
        self.zone = host_zone
        self.beat_pid = {"billing-1": 812, "billing-2": 2812}
        self.worker_pid = {n: 900 + 1000 * n for n in range(1, 6)}

    def ms(self, a: int, b: int) -> timedelta:
        return timedelta(milliseconds=self.log.rng.randint(a, b))

    def line(self, at: datetime, host: str, ident: str, proc: str, text: str, level: str = "INFO") -> None:
        self.log.add(at, _j(at, self.zone, host, ident, _c(at, self.zone, proc, text, level)))

    def beat_boot(self, at: datetime, host: str) -> None:
        self.line(at, host, f"celery[{self.beat_pid[host]}]", "MainProcess", "beat: Starting...")

    def send(self, at: datetime, host: str) -> None:
        self.line(at, host, f"celery[{self.beat_pid[host]}]", "MainProcess",
                  f"Scheduler: Sending due task {BEAT_ENTRY} ({TASK})")

    def trigger(self, run: NaiveRun, at: datetime, overlapped: bool) -> None:
        if run.trigger == "clock":
            self.send(at, "billing-1")
        elif run.trigger == "double-clock":
            self.send(at, "billing-2")
        elif run.trigger == "clock-restart":
            t = at - timedelta(seconds=0.9 if overlapped else 6)
            self.log.add(t, _j(t, self.zone, "billing-1", "systemd[1]", "Stopping celery-beat.service - Celery "
                                                                        "beat..."))
            t += self.ms(100, 300)
            self.log.add(t, _j(t, self.zone, "billing-1", "systemd[1]", "Started celery-beat.service - Celery beat."))
            self.beat_pid["billing-1"] += self.log.rng.randint(10, 500)
            self.beat_boot(t + self.ms(100, 300), "billing-1")
            self.send(at, "billing-1")
        else:
            self.log.add(at, _j(at, self.zone, "old-cron", f"CRON[{self.log.rng.randint(2000, 9000)}]",
                                f"(billing) CMD (cd /srv/billing && .venv/bin/celery -A billing call {TASK})"))

    def run(self, run: NaiveRun, start: datetime, worker: int, min_length: timedelta) -> datetime:
        rng = self.log.rng
        task_id = self.log.uuid()
        host = f"billing-{worker}"
        ident = f"celery[{self.worker_pid[worker]}]"
        at = start
        for attempt in run.attempts:
            began = at
            child = f"ForkPoolWorker-{rng.randint(1, 4)}"
            self.line(at, host, ident, "MainProcess", f"Task {TASK}[{task_id}] received")
            for number, stage in attempt.sends:
                at += self.ms(250, 700)
                self.line(at, host, ident, child, f"{TASK}[{task_id}]: Delivered mail "
                                                  f"<naive-{number}-{stage}-{self.log.hex(8)}@billing.example.test>")
            at = max(at + self.ms(100, 300), began + min_length)
            if attempt.crash == "db-blip":
                self.line(at, host, ident, child, f"Task {TASK}[{task_id}] retry: Retry in 30s: "
                                                  "OperationalError('server closed the connection unexpectedly')")
                at += timedelta(seconds=rng.uniform(30, 31))
            elif attempt.crash == "worker-crash":
                self.line(at, host, ident, "MainProcess", f"Process '{child}' pid:{rng.randint(10000, 60000)} exited "
                                                          "with 'signal 9 (SIGKILL)'", level="ERROR")
                self.line(at + self.ms(1, 5), host, ident, "MainProcess", "Task handler raised error: WorkerLostError("
                          f"'Worker exited prematurely: signal 9 (SIGKILL) Job: {rng.randint(0, 99)}.')", level="ERROR")
                at += self.ms(500, 2000)  # acks_late + reject_on_worker_lost: the broker redelivers it
            else:
                took = (at - began).total_seconds()
                self.line(at, host, ident, child, f"Task {TASK}[{task_id}] succeeded in {took:.3f}s: None")
        return at

    def noise(self, day_start: datetime, fire: datetime) -> None:
        rng = self.log.rng
        for _ in range(rng.randint(1, 3)):
            at = _away(rng, day_start, fire)
            self.line(at, "billing-1", f"celery[{self.worker_pid[1]}]", "MainProcess",
                      "consumer: Connection to broker lost. Trying to re-establish the connection...", level="WARNING")
            self.line(at + self.ms(500, 3000), "billing-1", f"celery[{self.worker_pid[1]}]", "MainProcess",
                      "Connected to redis://127.0.0.1:6379/0")
        if rng.random() < 0.3:
            at = _away(rng, day_start, fire)
            self.log.add(at, _j(at, self.zone, "billing-1", "sshd[4410]", "Accepted publickey for deploy from "
                                                                          "192.0.2.10 port 50122 ssh2"))


def _emit_celery(trace: list[NaiveDay], log: _Log, host_zone: ZoneInfo, zone: ZoneInfo) -> None:
    c = _Celery(log, host_zone)
    if not trace:
        return
    first = trace[0].fire - timedelta(hours=3)
    log.add(first, _j(first, host_zone, "billing-1", "systemd[1]", "Started celery-beat.service - Celery beat."))
    c.beat_boot(first + timedelta(seconds=1), "billing-1")
    if any(r.trigger == "double-clock" for d in trace for r in d.runs):
        c.beat_boot(first + timedelta(seconds=30), "billing-2")
    for n in range(1, 5):
        c.line(first + timedelta(seconds=2 + n), f"billing-{n}", f"celery[{c.worker_pid[n]}]", "MainProcess",
               f"celery@billing-{n} ready.")
    for d in trace:
        local = d.fire.astimezone(zone)
        day_start = datetime(local.year, local.month, local.day, tzinfo=zone).astimezone(UTC)
        c.noise(day_start, d.fire)
        plan = _plan(log, d)
        free = d.fire
        min_length = timedelta(seconds=6) if d.overlapped else timedelta(0)
        for run, at, worker in zip(d.runs, plan.enqueue_at, plan.workers, strict=True):
            c.trigger(run, at, d.overlapped)
            start = at + c.ms(20, 200)
            if not d.overlapped:
                start = max(start, free + c.ms(50, 200))
            free = c.run(run, start, worker, min_length)


def emit_logs(trace: list[NaiveDay], fmt: str, directory: Path, *, tz: str, host_tz: str | None, seed: int,
              faults: dict[str, float]) -> dict[str, Any]:
    """Write ``DIR/heroku.log`` or ``DIR/celery.log`` and its ``.truth.json`` for ``trace``; return the truth.

    Args:
        trace: the naive run's days (:attr:`NaiveReport.trace`).
        fmt: ``heroku-sidekiq`` or ``celery``.
        tz: the schedule's zone (days of the truth are local dates in it).
        host_tz: the processes' zone when the ``host-tz`` fault is on, else None (Heroku dynos and the Celery
            hosts run in UTC).
    Raises:
        ValueError: an unknown ``fmt``.
    """
    if fmt not in FORMATS:
        raise ValueError(f"--emit-logs: unknown format {fmt!r}; use {' or '.join(FORMATS)}")
    directory.mkdir(parents=True, exist_ok=True)
    log = _Log(rng=random.Random(f"{seed}:{fmt}"))
    zone = ZoneInfo(tz)
    host_zone = ZoneInfo(host_tz) if host_tz else UTC_ZONE
    name = "heroku.log" if fmt == "heroku-sidekiq" else "celery.log"
    (_emit_heroku if fmt == "heroku-sidekiq" else _emit_celery)(trace, log, host_zone, zone)
    log.write(directory / name)
    truth = {"format": fmt, "log": name, "tz": tz, "host_tz": host_tz, "seed": seed, "faults": faults,
             "days": len(trace), "first_fire": trace[0].fire.isoformat() if trace else None,
             "expected": [{"code": c, "day": d.isoformat() if d else None}
                          for c, d in expected_causes(trace, tz=tz, host_tz=host_tz)]}
    (directory / name.replace(".log", ".truth.json")).write_text(json.dumps(truth, indent=2) + "\n", encoding="utf-8")
    return truth


def score_logs(log: Path, truth: dict[str, Any]) -> dict[str, Any]:
    """Run the log doctor on ``log`` and compare its ``(code, day)`` findings with ``truth["expected"]``.

    Returns:
        ``{"expected", "found", "true_positives", "precision", "recall", "missed", "false"}``; precision and
        recall are 1.0 when there is nothing to find and nothing was found.
    """
    from ..doctor.logs import diagnose_logs

    report = diagnose_logs([log], tz=truth["tz"])
    expected = {(e["code"], e["day"]) for e in truth["expected"]}
    found = {(f.finding.code, f.day.isoformat() if f.day else None) for f in report.findings}
    hits = expected & found
    return {"expected": len(expected), "found": len(found), "true_positives": len(hits),
            "precision": len(hits) / len(found) if found else 1.0,
            "recall": len(hits) / len(expected) if expected else 1.0,
            "missed": sorted(expected - found, key=str), "false": sorted(found - expected, key=str),
            "lines": report.stats.lines, "unknown": report.stats.unknown}
