"""Issue 9 item 8: one dropped connection never kills a worker.

A real ``oncebeat worker`` process on PostgreSQL sends reminders through a real SMTP server (aiosmtpd) that
stalls one second before each reply; meanwhile the test terminates every backend of the test's own database
(``pg_terminate_backend``) again and again. The database is created for this test only, so the termination
touches nobody else's sessions. The worker must keep running and every reminder must end sent exactly once,
which ``oncebeat check`` confirms from the Maildir.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from conftest import _libpq_url, require_postgres
from oncebeat.mail import MailSink, read_maildir
from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.policy import Policy
from oncebeat.reminders.service import ReminderService
from oncebeat.store import open_store
from oncebeat.timebase import SystemClock

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

SRC = Path(__file__).resolve().parents[2] / "src"
REMINDERS = 8
STALL = 1.0  # seconds the SMTP server waits before each reply


@pytest.fixture
def own_database() -> Iterator[str]:
    """A PostgreSQL database of this test's own (created and dropped here): its URL."""
    base = require_postgres()
    name = f"ob_fence_{secrets.token_hex(5)}"
    with psycopg.connect(_libpq_url(base), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(base)
    try:
        yield urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))
    finally:
        with psycopg.connect(_libpq_url(base), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def cli(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "oncebeat.cli", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=120, check=False)


class Terminator(threading.Thread):
    """Terminates every other backend of ``url``'s database every ``every`` seconds; counts the terminations."""

    def __init__(self, url: str, every: float) -> None:
        super().__init__(daemon=True)
        self.url, self.every, self.killed = _libpq_url(url), every, 0
        self.stop = threading.Event()

    def run(self) -> None:
        dbname = urlsplit(self.url).path[1:]
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.stop.wait(self.every):
                row = conn.execute("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
                                   "WHERE datname = %s AND pid <> pg_backend_pid()", (dbname,)).fetchone()
                self.killed += int(row[0]) if row else 0


def test_terminating_the_workers_connections_during_stalled_sends_never_kills_it_nor_sends_twice(
        own_database: str, tmp_path: Path) -> None:
    clock = SystemClock()
    with open_store(own_database) as store:
        store.migrate()
        policy = Policy()
        today = clock.now().astimezone(policy.zone).date()
        customers = [Customer(email=f"c{n}@example.com", name=f"Customer {n}") for n in range(REMINDERS)]
        invoices = [Invoice(number=f"INV-{n}", customer_email=f"c{n}@example.com", currency="USD", amount_due=10_000,
                            issued_on=today - timedelta(days=33), due_on=today - timedelta(days=3))
                    for n in range(REMINDERS)]
        ReminderService(store, policy, clock=clock).upsert(customers, invoices)
    with MailSink(tmp_path / "maildir") as sink:
        sink.faults.stall_next(10 * REMINDERS, seconds=STALL)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH")) if p),
               "SMTP_URL": sink.url}
        triggered = cli("trigger", "reminders", "--db", own_database, cwd=tmp_path, env=env)
        assert triggered.returncode == 0, triggered.stdout + triggered.stderr
        log = tmp_path / "worker.log"
        with log.open("wb") as out:
            worker = subprocess.Popen([sys.executable, "-m", "oncebeat.cli", "worker", "--db", own_database,
                                       "--concurrency", "2", "--lease", "5", "--rescue-interval", "1"],
                                      cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
        terminator = Terminator(own_database, every=0.4)
        try:
            deadline = time.monotonic() + 120
            while not read_maildir(sink.maildir):  # the first send is stalling: from now on, cut connections
                assert worker.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.05)
            terminator.start()
            while len(read_maildir(sink.maildir)) < REMINDERS:
                assert worker.poll() is None, f"the worker exited ({worker.returncode})\n{log.read_text()}"
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
        finally:
            terminator.stop.set()
            terminator.join(timeout=10)
        with open_store(own_database) as store:
            deadline = time.monotonic() + 60
            while {r["state"] for r in store.read("list_reminders")} != {"sent"}:
                assert worker.poll() is None, f"the worker exited ({worker.returncode})\n{log.read_text()}"
                assert time.monotonic() < deadline, f"{store.read('list_reminders')}\n{log.read_text()}"
                time.sleep(0.2)
            states = [r["state"] for r in store.read("list_reminders")]
        assert worker.poll() is None, log.read_text()
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0, log.read_text()
        messages = read_maildir(sink.maildir)
    print(f"\n{terminator.killed} backends terminated during {REMINDERS} stalled sends; {len(messages)} delivered")
    assert terminator.killed >= 5, "the connections were really cut during the sends"
    assert states == ["sent"] * REMINDERS
    assert sorted(r for m in messages for r in m.envelope_to) == sorted(c.email for c in customers), "each once"
    checked = cli("check", "--db", own_database, "--maildir", str(sink.maildir), cwd=tmp_path, env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
