"""Issue 26 item 3: a relay's rate limit holds over every worker process, and nothing is lost.

Three real ``oncebeat worker`` processes (4 handler slots each, at most 2 SMTP connections each by
``[delivery] max_connections``) send 150 reminders through a real SMTP server (aiosmtpd) under
``[delivery] max_per_minute = 20`` counted over ``rate_window = "5s"`` — the code path of a per-minute limit
with a window short enough for a test. From the instants the server stored each message (its Maildir keys):
no 5-second window holds more than 20, every reminder is sent exactly once, none failed or waited out an
"outage", and the sends over the limit were snoozed (their attempts kept), not failed.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from oncebeat.mail import MailSink, read_maildir
from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.policy import Policy
from oncebeat.reminders.service import SEND_MAX_ATTEMPTS, ReminderService
from oncebeat.store import open_store
from oncebeat.timebase import SystemClock

pytestmark = [pytest.mark.slow]

SRC = Path(__file__).resolve().parents[2] / "src"
REMINDERS = 150
LIMIT = 20
WINDOW = 5.0  # seconds
WORKERS = 3
KEY = re.compile(r"^(\d+)\.M(\d+)P")


def stored_at(key: str) -> float:
    """The instant (epoch seconds) the sink stored a message: its Maildir key (seconds, then microseconds)."""
    match = KEY.match(key)
    assert match, key
    return int(match.group(1)) + int(match.group(2)) / 1e6


def most_in_any_window(instants: list[float], window: float) -> int:
    """The most instants in any half-open window [a, a + window): it is enough to start windows at instants."""
    instants = sorted(instants)
    best, j = 0, 0
    for i, start in enumerate(instants):
        j = max(j, i)
        while j < len(instants) and instants[j] < start + window:
            j += 1
        best = max(best, j - i)
    return best


def test_most_in_any_window_counts_windows_that_start_anywhere() -> None:
    assert most_in_any_window([0.0, 4.9, 5.0, 9.95], 5.0) == 2
    assert most_in_any_window([0.0, 4.99, 5.0, 5.1, 9.98], 5.0) == 4  # [4.99, 9.99) straddles the 5 s mark


def test_three_workers_never_send_more_than_the_limit_in_any_window_and_lose_nothing(
        db_url: str, tmp_path: Path) -> None:
    clock = SystemClock()
    with open_store(db_url) as store:
        store.migrate()
        policy = Policy()
        today = clock.now().astimezone(policy.zone).date()
        customers = [Customer(email=f"c{n}@example.com", name=f"Customer {n}") for n in range(REMINDERS)]
        invoices = [Invoice(number=f"INV-{n}", customer_email=f"c{n}@example.com", currency="USD", amount_due=10_000,
                            issued_on=today - timedelta(days=33), due_on=today - timedelta(days=3))
                    for n in range(REMINDERS)]
        ReminderService(store, policy, clock=clock).upsert(customers, invoices)
    (tmp_path / "oncebeat.toml").write_text(
        f'[delivery]\nmax_per_minute = {LIMIT}\nrate_window = "{WINDOW:g}s"\nmax_connections = 2\n', encoding="utf-8")
    workers: list[subprocess.Popen[bytes]] = []
    with MailSink(tmp_path / "maildir") as sink:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH")) if p),
               "SMTP_URL": sink.url}
        env.pop("ONCEBEAT_CONFIG", None)  # ./oncebeat.toml of the working folder
        triggered = subprocess.run([sys.executable, "-m", "oncebeat.cli", "trigger", "reminders", "--db", db_url],
                                   cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert triggered.returncode == 0, triggered.stdout + triggered.stderr
        logs = [tmp_path / f"worker-{n}.log" for n in range(WORKERS)]
        started = time.monotonic()
        try:
            for log in logs:
                with log.open("wb") as out:
                    workers.append(subprocess.Popen(
                        [sys.executable, "-m", "oncebeat.cli", "worker", "--db", db_url, "--concurrency", "4"],
                        cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT))
            with open_store(db_url) as store:
                deadline = time.monotonic() + 150
                while True:
                    rows = store.read("list_reminders")
                    # A send job completes just after its reminder is recorded sent (the next claim commits it):
                    # wait for both, so the jobs read below are the finished ones.
                    jobs = store.read("list_jobs", state=None, task="reminders.send", limit=1000)
                    if len(rows) == REMINDERS and {r["state"] for r in rows} == {"sent"} \
                            and len(jobs) == REMINDERS and {j["state"] for j in jobs} == {"completed"}:
                        break
                    for w, log in zip(workers, logs, strict=True):
                        assert w.poll() is None, f"a worker exited ({w.returncode})\n{log.read_text()}"
                    assert time.monotonic() < deadline, (Counter(r["state"] for r in rows),
                                                         logs[0].read_text()[-3000:])
                    time.sleep(0.5)
                elapsed = time.monotonic() - started
                jobs = store.read("list_jobs", state=None, task="reminders.send", limit=1000)
        finally:
            for w in workers:
                if w.poll() is None:
                    w.send_signal(signal.SIGTERM)
            for w in workers:
                try:
                    w.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    w.kill()
        messages = read_maildir(sink.maildir)
    assert [w.returncode for w in workers] == [0] * WORKERS, [log.read_text()[-2000:] for log in logs]
    delivered = Counter(m.headers["X-Oncebeat-Invoice"] for m in messages)
    assert delivered == {f"INV-{n}": 1 for n in range(REMINDERS)}, "every reminder exactly once"
    instants = [stored_at(m.key) for m in messages]
    busiest = most_in_any_window(instants, WINDOW)
    span = max(instants) - min(instants)
    print(f"\n{REMINDERS} reminders by {WORKERS} workers in {elapsed:.1f} s; delivered over {span:.1f} s; "
          f"at most {busiest} in any {WINDOW:g} s window (limit {LIMIT})")
    assert busiest <= LIMIT
    assert span >= (REMINDERS / LIMIT - 1) * WINDOW, "the limit was binding"
    assert all(r["deferred_since"] is None for r in rows), "a rate limit is no mail outage"
    assert {j["state"] for j in jobs} == {"completed"} and len(jobs) == REMINDERS
    snoozed = [e for j in jobs for e in j["errors"] if "rate limit" in e["error"]]
    assert snoozed and {e["kind"] for e in snoozed} == {"snooze"}
    for job in jobs:
        assert job["max_attempts"] - job["attempt"] == SEND_MAX_ATTEMPTS - 1, "a snooze uses up no attempt"
