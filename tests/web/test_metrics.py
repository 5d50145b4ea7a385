# ruff: noqa: F811  (fixtures imported from web_helpers are redefined as test arguments, as pytest intends)
"""Prometheus metrics: database gauges on /metrics, process instruments fed by the telemetry seam,
--metrics-port on real worker processes that share counts through PROMETHEUS_MULTIPROC_DIR."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient
from web_helpers import dashboard_client, runtime  # noqa: F401  (fixtures)

from oncebeat.app import App
from oncebeat.clock import ClockProcess
from oncebeat.effects import EffectLedger, Holder
from oncebeat.errors import EffectOutcomeUnknown, PermanentMailError
from oncebeat.mail import Mailer, MailSink, build_message
from oncebeat.metrics import exposition, install_instruments
from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.reminders.runtime import Runtime
from oncebeat.store import open_store
from oncebeat.timebase import SimulatedClock, SystemClock

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _value(text: str, name: str, **labels: str) -> float:
    return _samples(text)[(name, tuple(sorted(labels.items())))]


def test_metrics_report_unfinished_jobs_per_state_and_queue_and_effects_in_doubt(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    q = Queue(runtime.store, clock=runtime.clock, source=current_source("api"))
    for _ in range(3):
        q.enqueue("reminders.scan", {}, queue="default")
    q.enqueue("reminders.scan", {}, queue="mail", run_at=runtime.clock.now() + timedelta(hours=1))
    ledger = EffectLedger(runtime.store, clock=runtime.clock, source=current_source("worker"))

    def unknown() -> None:
        raise EffectOutcomeUnknown("connection dropped after the final dot")

    with pytest.raises(Exception):  # noqa: B017 - the ledger reports the doubt in its own way
        ledger.run("mail:1", unknown, holder=Holder(job_id=None, attempt=None, process_id=None))
    text = dashboard_client().get("/metrics").text
    assert _value(text, "oncebeat_jobs", state="available", queue="default") == 3
    assert _value(text, "oncebeat_jobs", state="scheduled", queue="mail") == 1
    assert _value(text, "oncebeat_jobs", state="running", queue="default") == 0
    assert _value(text, "oncebeat_effects_in_doubt") == 1
    assert _value(text, "oncebeat_effects", state="in_doubt") == 1


def test_metric_names_follow_prometheus_conventions(runtime: Runtime,
                                                    dashboard_client: Callable[..., TestClient]) -> None:
    text = dashboard_client().get("/metrics").text
    for family in text_string_to_metric_families(text):
        if family.name.startswith(("process_", "python_")):
            continue  # prometheus_client's own
        assert re.fullmatch(r"oncebeat_[a-z_]+", family.name), family.name
        if family.type == "counter":
            assert all(s.name.endswith(("_total", "_created")) for s in family.samples), family.name
        if family.type == "histogram":
            assert family.name.endswith("_seconds"), family.name  # base unit in the name


def test_a_duplicate_fire_turned_away_by_the_ledger_is_counted(runtime: Runtime) -> None:
    install_instruments()
    clock = SimulatedClock(runtime.clock.now())
    key = f"metrics-{os.getpid()}-{id(runtime)}"
    app = App()
    app.task("noop")(lambda ctx: None)
    app.schedule(key, "every 1m", tz="UTC", task="noop")
    before = REGISTRY.get_sample_value("oncebeat_occurrence_duplicates_total", {"schedule": key}) or 0.0
    fired_before = REGISTRY.get_sample_value("oncebeat_occurrences_total", {"schedule": key, "outcome": "manual"}) or 0
    first = ClockProcess(app, runtime.store, clock=clock)
    first.sync()
    fire = first.trigger(key)
    from oncebeat.clock import fire_occurrence

    with runtime.store.transaction() as tx:  # a second clock records the same instant: the ledger refuses it
        fire_occurrence(tx, queue=first.queue, definition=app.schedules[key], schedule=app.schedules[key].schedule(),
                        instant=fire.fire_at, outcome="manual", source=current_source("clock"), now=clock.now())
    assert REGISTRY.get_sample_value("oncebeat_occurrence_duplicates_total", {"schedule": key}) == before + 1
    assert REGISTRY.get_sample_value("oncebeat_occurrences_total",
                                     {"schedule": key, "outcome": "manual"}) == fired_before + 1


def test_smtp_replies_are_counted_by_class(tmp_path: Path) -> None:
    install_instruments()
    sink = MailSink(tmp_path / "maildir").start()
    try:
        def count(cls: str) -> float:
            return REGISTRY.get_sample_value("oncebeat_smtp_replies_total", {"reply_class": cls}) or 0.0

        ok, rejected = count("2xx"), count("5xx")
        with Mailer(sink.url) as mailer:
            msg = build_message(sender="Billing <billing@example.test>", to="ana@example.test", subject="hi",
                                text="hello", html="<p>hello</p>", message_id="<metrics-test@example.test>")
            mailer.send(msg)
            sink.faults.fail_next(1, code=550, text="5.1.1 mailbox unavailable")
            with pytest.raises(PermanentMailError):
                mailer.send(msg)
        assert count("2xx") == ok + 1 and count("5xx") == rejected + 1
    finally:
        sink.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode()


@pytest.mark.slow
def test_two_worker_processes_serve_metrics_and_share_counts_through_the_multiprocess_folder(
        db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = 12
    with open_store(db_url) as store:
        store.migrate()
        q = Queue(store, clock=SystemClock(), source=current_source("api"))
        for i in range(jobs):
            q.enqueue("metrics_test.nap", {"seconds": 0.01 * (i % 3)})
    folder = tmp_path / "prom"
    folder.mkdir()
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(folder),
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    ports = [_free_port(), _free_port()]
    procs = [subprocess.Popen([sys.executable, "-m", "oncebeat.cli", "worker", "--db", db_url, "--app",
                               "metrics_app:app", "--concurrency", "2", "--metrics-port", str(port)],
                              env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for port in ports]
    try:
        deadline = time.monotonic() + 60
        while True:
            with open_store(db_url) as store:
                done = Queue(store, clock=SystemClock(), source=current_source("api")).counts().get("completed", 0)
            if done == jobs or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert done == jobs
        # Each worker's own endpoint answers, and with the shared folder each reports the host's sum.
        for port in ports:
            while True:  # a worker on a loaded machine may still be starting: its endpoint comes up at start
                try:
                    text = _scrape(port)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            assert _value(text, "oncebeat_jobs_finished_total", task="metrics_test.nap", outcome="completed") == jobs
            assert _value(text, "oncebeat_job_run_seconds_count", task="metrics_test.nap",
                          outcome="completed") == jobs
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            assert p.stderr is not None
            p.stderr.close()
    # oncebeat web on the same host reads the same folder.
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(folder))
    text = exposition(None)[0].decode()
    assert _value(text, "oncebeat_jobs_finished_total", task="metrics_test.nap", outcome="completed") == jobs


def test_the_alert_rules_and_the_grafana_dashboard_use_only_metrics_that_exist(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    text = dashboard_client().get("/metrics").text
    known = {f.name for f in text_string_to_metric_families(text)}
    known |= {n + suffix for n in set(known) for suffix in ("_total", "_bucket", "_count", "_sum")}
    for name in ("prometheus-alerts.yml", "grafana-dashboard.json"):
        used = set(re.findall(r"\boncebeat_[a-z_]+", (DOCS / name).read_text()))
        assert used, name
        assert used <= known, f"{name} uses metrics oncebeat does not export: {sorted(used - known)}"


def test_a_mail_outage_shows_as_reminders_waiting_and_its_age(runtime: Runtime,
                                                              dashboard_client: Callable[..., TestClient]) -> None:
    from oncebeat.reminders.model import Customer, Invoice
    from oncebeat.reminders.policy import Policy
    from oncebeat.reminders.service import ReminderService
    from oncebeat.reminders.tasks import build_app
    from oncebeat.worker import Worker

    with socket.socket() as s:  # a port nothing listens on: the mail server is down (connection refused)
        s.bind(("127.0.0.1", 0))
        down = s.getsockname()[1]
    clock = SystemClock()
    mailer = Mailer(f"smtp://127.0.0.1:{down}")
    try:
        service = ReminderService(runtime.store, Policy(), clock=clock, mailer=mailer)
        app = build_app(service)
        today = clock.now().date()
        service.upsert([Customer(email="ana@example.com", name="Ana")],
                       [Invoice(number="INV-9", customer_email="ana@example.com", currency="USD", amount_due=100,
                                issued_on=today - timedelta(days=40), due_on=today - timedelta(days=3))])
        ClockProcess(app, runtime.store, clock=clock).trigger("reminders")
        Worker(app, runtime.store, clock=clock).drain()
    finally:
        mailer.close()
    text = dashboard_client().get("/metrics").text
    assert _value(text, "oncebeat_reminders_waiting_on_outage") == 1
    assert 0 <= _value(text, "oncebeat_reminders_outage_seconds") < 120


def test_a_rate_limited_key_shows_its_permits_in_use_and_its_limit(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    from oncebeat.ratelimit import RateLimit, RateLimiter

    limiter = RateLimiter(runtime.store, clock=runtime.clock)
    relay = RateLimit(key="smtp:relay.example.com", limit=3, per_seconds=60)
    for _ in range(2):
        limiter.take(relay)
    text = dashboard_client().get("/metrics").text
    assert _value(text, "oncebeat_rate_limit_permits", key="smtp:relay.example.com") == 2
    assert _value(text, "oncebeat_rate_limit_max", key="smtp:relay.example.com") == 3
