"""``oncebeat simulate --processes``: real clock and worker OS processes, killed with SIGKILL at random.

In real time, for ``seconds``: 2 ``oncebeat clock`` and 4 ``oncebeat worker``
processes share one database (PostgreSQL, or SQLite), with the reminder scan
scheduled ``every 5s``; the driver runs a real SMTP server (aiosmtpd) into a
Maildir, keeps importing new overdue invoices (one of each batch paid at once) and paying some, and every
``kill_every`` seconds sends SIGKILL to a random process and restarts it.
Then the killing stops, the survivors settle, everything gets SIGTERM, and
the invariant checker runs. A killed worker can leave at most ``concurrency``
deliveries in doubt, so the in-doubt budget is kills × concurrency.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

from ..app import ScheduleDef
from ..mail import MailSink
from ..reminders.capfence import cap_zone
from ..reminders.model import Payment
from ..reminders.policy import Policy
from ..reminders.rows import pending_reminders
from ..reminders.service import ReminderService
from ..sample import generate_book, prepare_workdir
from ..store import open_store
from ..timebase import SystemClock
from .checker import CheckReport, PaymentWindow, check
from .checkladders import ladder_timeline

__all__ = ["ProcessRunReport", "run_processes"]

CONFIG = """[schedule]
cron = "every 5s"
tz = "America/Chicago"
catchup = "latest"
catchup_window = "1h"

[reminders]
stages = [1, 7, 14, 30]
"""
CONCURRENCY = 2


@dataclass(kw_only=True)
class ProcessRunReport:
    seconds: float
    kills: dict[str, int]
    check: CheckReport

    @property
    def passed(self) -> bool:
        """Every invariant holds and, the cluster having settled, no due reminder is still delayed."""
        return self.check.passed and not self.check.summary.get("delayed")

    def as_dict(self) -> dict[str, Any]:
        return {"pass": self.passed, "seconds": self.seconds, "kills": self.kills,
                "invariants": {k: v.as_dict() for k, v in self.check.invariants.items()},
                "summary": self.check.summary}

    def to_text(self) -> str:
        s = self.check.summary
        return "\n".join([
            f"oncebeat simulate --processes: {self.seconds:.0f} s, kills {self.kills}",
            f"  reminders {s['reminders']}, due {s['due']}, messages {s['messages_delivered']}, "
            f"duplicates {s['duplicates']}, lost {s['lost']}, delayed {s['delayed']}, in doubt {s['in_doubt']}",
            self.check.to_text()])


def run_processes(db_url: str, workdir: Path, *, seconds: float = 30.0, settle: float = 15.0, kill_every: float = 2.0,
                  seed: int = 7, clocks: int = 2, workers: int = 4) -> ProcessRunReport:
    """Run the cluster (see module docstring) against ``db_url`` and check it."""
    rng = random.Random(seed)
    prepare_workdir(workdir)
    config = workdir / "oncebeat.toml"
    config.write_text(CONFIG, encoding="utf-8")
    clock = SystemClock()
    store = open_store(db_url)
    store.migrate()
    policy = Policy(schedule="every 5s", tz="America/Chicago", catchup_window=3600.0)
    service = ReminderService(store, policy, clock=clock)
    today = clock.now().astimezone(policy.zone).date()
    book = generate_book(seed=seed, start=today, customers=30, invoices=400, history_days=90)
    overdue = [i for i in book.invoices if i.status == "open"]
    rng.shuffle(overdue)
    service.upsert(book.customers, overdue[:40])
    batches = [overdue[n:n + 20] for n in range(40, len(overdue), 20)]
    payments: dict[str, PaymentWindow] = {}
    kills: dict[str, int] = {"clock": 0, "worker": 0}
    with MailSink(workdir / "maildir") as sink:
        env = {**os.environ, "DATABASE_URL": db_url, "SMTP_URL": sink.url, "ONCEBEAT_CONFIG": str(config),
               "PYTHONPATH": os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[2]),
                                                          os.environ.get("PYTHONPATH", "")) if p)}
        cmds = {f"clock.{i}": ["clock"] for i in range(1, clocks + 1)}
        cmds |= {f"worker.{i}": ["worker", "--concurrency", str(CONCURRENCY), "--lease", "3", "--grace", "5",
                                 "--rescue-interval", "1"] for i in range(1, workers + 1)}
        logs = {name: open(workdir / f"{name}.log", "ab") for name in cmds}  # noqa: SIM115 - closed below

        def spawn(name: str) -> subprocess.Popen[bytes]:
            return subprocess.Popen([sys.executable, "-m", "oncebeat.cli", *cmds[name]], cwd=workdir,
                                    env={**env, "ONCEBEAT_PROCESS_NAME": name}, stdout=logs[name],
                                    stderr=subprocess.STDOUT)

        procs = {name: spawn(name) for name in cmds}
        try:
            start = time.monotonic()
            next_kill = start + kill_every
            next_batch = start + 2
            while time.monotonic() - start < seconds:
                time.sleep(0.2)
                now = time.monotonic()
                if now >= next_batch and batches:
                    next_batch = now + 2
                    batch = batches.pop(0)
                    service.upsert([], batch)
                    # one overdue invoice of the batch paid at once: imported and paid between two scans (or
                    # during one), so no scan ever saw it open
                    paid = next((i for i in batch if i.due_on + timedelta(days=policy.stages[0]) <= today), batch[0])
                    before = clock.now()
                    service.apply_payments([Payment(number=paid.number, paid_on=today)])
                    payments.setdefault(paid.number, (before, clock.now()))
                    open_now = pending_reminders(store)
                    for r in rng.sample(open_now, k=min(3, len(open_now))):
                        before = clock.now()
                        service.apply_payments([Payment(number=r["number"], paid_on=today)])
                        payments.setdefault(r["number"], (before, clock.now()))
                if now >= next_kill:
                    next_kill = now + kill_every
                    name = rng.choice(sorted(procs))
                    procs[name].send_signal(signal.SIGKILL)
                    procs[name].wait(timeout=10)
                    kills[name.split(".")[0]] += 1
                    procs[name] = spawn(name)
            time.sleep(settle)
        finally:
            for p in procs.values():
                p.send_signal(signal.SIGTERM)
            for p in procs.values():
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
            for f in logs.values():
                f.close()
        definitions = {"reminders": [ScheduleDef(key="reminders", expression="every 5s", tz="America/Chicago",
                                                 task="reminders.scan", catchup="latest", catchup_window=3600.0)]}
        report = check(store, maildir=workdir / "maildir", stages=policy.stages, collapse=policy.collapse,
                       cap=policy.max_notices_per_week, cap_zone=partial(cap_zone, policy),
                       calendar=policy.calendar,
                       business_date=policy.business_date, definitions=definitions,
                       payments=payments, in_doubt_budget=kills["worker"] * CONCURRENCY,
                       ladders=ladder_timeline(store, policy))
    store.close()
    return ProcessRunReport(seconds=seconds, kills=kills, check=report)


