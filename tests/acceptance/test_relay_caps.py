"""Issue 26 item 3, on both backends: a relay that allows 4 connections per client, against a worker with 16
handler slots (the issue: ``-c 16`` sent 545 of 626 after 90 s, each 421 at connect counted as an outage).

The 421s shrink the worker's SMTP pool to the 4 connections the relay took; every reminder goes out exactly
once, none is failed or recorded waiting out an outage, and no send job used up an attempt.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

from oncebeat.clock import ClockProcess
from oncebeat.mail import Mailer, MailSink, read_maildir
from oncebeat.provenance import current_source
from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.policy import Policy
from oncebeat.reminders.service import SEND_MAX_ATTEMPTS, ReminderService
from oncebeat.reminders.tasks import SCHEDULE_KEY, build_app
from oncebeat.store import Store
from oncebeat.timebase import SystemClock
from oncebeat.worker import Worker

REMINDERS = 60


def test_a_relay_allowing_4_connections_gets_every_reminder_from_16_slots_and_none_fails(
        store: Store, tmp_path: Path) -> None:
    clock = SystemClock()
    policy = Policy()
    today = clock.now().astimezone(policy.zone).date()
    with MailSink(tmp_path / "maildir") as sink, Mailer(sink.url, connections=16, regrow_after=3600) as mailer:
        sink.faults.cap_connections(4)
        service = ReminderService(store, policy, clock=clock, mailer=mailer)
        service.upsert([Customer(email=f"c{n}@example.com", name=f"Customer {n}") for n in range(REMINDERS)],
                       [Invoice(number=f"INV-{n}", customer_email=f"c{n}@example.com", currency="USD",
                                amount_due=10_000, issued_on=today - timedelta(days=33),
                                due_on=today - timedelta(days=3)) for n in range(REMINDERS)])
        app = build_app(service)
        ClockProcess(app, store, clock=clock, source=current_source("cli")).trigger(SCHEDULE_KEY)
        worker = Worker(app, store, clock=clock, concurrency=16, poll_interval=0.1)
        runner = threading.Thread(target=worker.run, kwargs={"install_signals": False, "stop_after": 90},
                                  daemon=True)
        runner.start()
        try:
            deadline = time.monotonic() + 80
            while {r["state"] for r in store.read("list_reminders")} != {"sent"} \
                    or len(store.read("list_reminders")) < REMINDERS:
                assert time.monotonic() < deadline, Counter(r["state"] for r in store.read("list_reminders"))
                time.sleep(0.2)
        finally:
            worker.request_stop()
            runner.join(30)
        rows = store.read("list_reminders")
        jobs = store.read("list_jobs", state=None, task="reminders.send", limit=1000)
        capped = sink.counters().capped
        pool = mailer.pool_size
    print(f"\n{REMINDERS} reminders, 16 slots, relay cap 4: {capped} connections refused, pool shrunk to {pool}")
    assert capped >= 1 and pool <= 4
    assert Counter(m.headers["X-Oncebeat-Invoice"] for m in read_maildir(tmp_path / "maildir")) == {
        f"INV-{n}": 1 for n in range(REMINDERS)}
    assert [r["state"] for r in rows] == ["sent"] * REMINDERS
    assert all(r["deferred_since"] is None for r in rows), "a refused extra connection is not an outage"
    assert {j["state"] for j in jobs} == {"completed"}
    for job in jobs:
        assert job["max_attempts"] - job["attempt"] == SEND_MAX_ATTEMPTS - 1
        assert {e["kind"] for e in job["errors"]} <= {"snooze"}
