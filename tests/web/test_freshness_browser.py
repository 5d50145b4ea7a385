# ruff: noqa: F401, F811  (the browser fixtures of test_browser are imported and used as test arguments)
"""The payment-freshness banner in a real browser (Chromium via Playwright) against a real ``oncebeat web`` server:
with ``max_payment_staleness = "6h"`` and the payment data 9 hours old, the reminders page says why reminders wait.
Set ``ONCEBEAT_SCREENSHOTS=docs/img`` to save ``dashboard-freshness-banner.png`` (README, Reminder policy)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from test_browser import CHROMIUM, TOKEN, VIEWER_TOKEN, _free_port, _log_in, browser, console_errors, page

from oncebeat.clock import ClockProcess
from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.policy import load_policy
from oncebeat.reminders.service import ReminderService
from oncebeat.reminders.tasks import build_app
from oncebeat.store import open_store
from oncebeat.timebase import SimulatedClock, SystemClock
from oncebeat.worker import Worker

pytestmark = pytest.mark.slow


def test_the_reminders_page_says_why_reminders_wait_for_fresh_payment_data(db_url: str, tmp_path: Path,
                                                                           page: object) -> None:
    config = tmp_path / "oncebeat.toml"
    config.write_text('[reminders]\nmax_payment_staleness = "6h"\n', encoding="utf-8")
    policy = load_policy(config)
    now = SystemClock().now()
    with open_store(db_url) as store:
        store.migrate()
        today = now.astimezone(policy.zone).date()
        ReminderService(store, policy, clock=SimulatedClock(now - timedelta(hours=9))).upsert(
            [Customer(email=f"c{n}@example.com", name=f"Customer {n}") for n in range(3)],
            [Invoice(number=f"INV-{n}", customer_email=f"c{n}@example.com", currency="USD", amount_due=12_500,
                     issued_on=today - timedelta(days=40), due_on=today - timedelta(days=3)) for n in range(3)])
        clock = SimulatedClock(now)
        app = build_app(ReminderService(store, policy, clock=clock))
        ClockProcess(app, store, clock=clock).trigger("reminders")
        Worker(app, store, clock=clock).drain()  # the sends wait: nothing is sent
    port = _free_port()
    env = {**os.environ, "ONCEBEAT_WEB_TOKEN": TOKEN, "ONCEBEAT_WEB_VIEWER_TOKEN": VIEWER_TOKEN}
    proc = subprocess.Popen([sys.executable, "-m", "oncebeat.cli", "web", "--port", str(port), "--db", db_url,
                             "--config", str(config)], env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url + "/metrics", timeout=5):
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "oncebeat web did not start"
                time.sleep(0.2)
        live = type("Live", (), {"url": url})()
        _log_in(page, live)  # type: ignore[arg-type]
        page.goto(url + "/reminders")  # type: ignore[attr-defined]
        banner = page.inner_text("p.banner")  # type: ignore[attr-defined]
        assert banner.startswith("Reminders waiting for fresh payment data: payment data last refreshed 9h"), banner
        assert "ago by API import; reminders wait until it is fresher than 6h (3 reminders waiting" in banner
        assert "deferred" not in banner
        folder = os.environ.get("ONCEBEAT_SCREENSHOTS")
        if folder:
            page.screenshot(path=str(Path(folder) / "dashboard-freshness-banner.png"))  # type: ignore[attr-defined]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
