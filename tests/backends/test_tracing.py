"""OpenTelemetry traces (oncebeat.tracing): clock fire → job → effect → SMTP reply, read back from the SDK's
in-memory exporter after a real scan and send through a real SMTP server (aiosmtpd), on both backends."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from oncebeat import tracing
from oncebeat.clock import ClockProcess
from oncebeat.errors import ConfigError
from oncebeat.mail import Mailer, MailSink
from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.policy import Policy
from oncebeat.reminders.service import ReminderService
from oncebeat.reminders.tasks import build_app
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock
from oncebeat.worker import Worker


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    installed = tracing.install(provider, namespace="test")
    yield exporter
    installed.uninstall()


def test_a_reminder_is_one_trace_from_the_fire_to_the_smtp_reply(store: Store, sim_clock: SimulatedClock,
                                                                   tmp_path: Path,
                                                                   spans: InMemorySpanExporter) -> None:
    sink = MailSink(tmp_path / "maildir").start()
    mailer = Mailer(sink.url)
    try:
        service = ReminderService(store, Policy(), clock=sim_clock, mailer=mailer)
        app = build_app(service)
        due = sim_clock.now().date() - timedelta(days=2)
        service.upsert([Customer(email="ana@example.com", name="Ana Lima")],
                       [Invoice(number="INV-1", customer_email="ana@example.com", currency="USD", amount_due=12_345,
                                issued_on=due - timedelta(days=30), due_on=due)])
        clock = ClockProcess(app, store, clock=sim_clock)
        clock.start()
        sim_clock.set(app.schedules["reminders"].schedule().next_after(sim_clock.now()))
        clock.tick()
        Worker(app, store, clock=sim_clock).drain()
    finally:
        mailer.close()
        sink.stop()

    by_name = {}
    for s in spans.get_finished_spans():
        by_name.setdefault(s.name, []).append(s)
    fire = by_name["oncebeat.fire reminders"][0]
    scan = by_name["oncebeat.job reminders.scan"][0]
    send = by_name["oncebeat.job reminders.send"][0]
    effect = by_name["oncebeat.effect"][0]
    smtp = by_name["oncebeat.smtp"][0]
    occ = fire.attributes["oncebeat.occurrence_id"]
    # The fire and its scan share the occurrence's trace (different processes in production: derived ids).
    assert scan.context.trace_id == fire.context.trace_id
    assert scan.attributes["oncebeat.occurrence_id"] == occ
    assert fire.attributes.get("oncebeat.job_id", scan.attributes["oncebeat.job_id"]) == scan.attributes["oncebeat.job_id"]
    assert fire.parent is not None and scan.parent is not None and fire.parent.span_id == scan.parent.span_id
    # The send: job → effect → SMTP, parent links on one thread, the reply class on the SMTP span.
    assert effect.parent.span_id == send.context.span_id
    assert smtp.parent.span_id == effect.context.span_id
    assert effect.attributes["oncebeat.effect_key"].startswith("reminder:")
    assert [e.name for e in effect.events] == ["no_return", "performed"]
    assert smtp.attributes["oncebeat.smtp.reply_class"] == "2xx"
    assert {e.name for e in smtp.events} >= {"data", "final_dot"}
    assert send.attributes["oncebeat.outcome"] == "completed"
    assert send.attributes["oncebeat.reminder.state"] == "sent"
    assert send.status.status_code != StatusCode.ERROR
    assert smtp.start_time >= effect.start_time >= send.start_time and smtp.end_time <= effect.end_time <= send.end_time
    # No customer data in any span: no address, name or amount.
    for s in spans.get_finished_spans():
        text = repr(dict(s.attributes or {})) + repr([e.attributes for e in s.events])
        assert "ana@example.com" not in text and "Ana Lima" not in text and "12345" not in text


def test_a_failed_attempt_ends_its_spans_with_an_error(store: Store, sim_clock: SimulatedClock,
                                                       spans: InMemorySpanExporter) -> None:
    from oncebeat.app import App
    from oncebeat.queue import Queue

    app = App()

    @app.task(max_attempts=1)
    def boom(ctx: object) -> None:
        ctx.effect("boom:1", lambda: (_ for _ in ()).throw(RuntimeError("refused")), payload={})  # type: ignore[attr-defined]

    from oncebeat.provenance import current_source

    Queue(store, clock=sim_clock, source=current_source("cli")).enqueue("boom")
    Worker(app, store, clock=sim_clock).drain()
    job = next(s for s in spans.get_finished_spans() if s.name == "oncebeat.job boom")
    effect = next(s for s in spans.get_finished_spans() if s.name == "oncebeat.effect")
    assert job.status.status_code == StatusCode.ERROR and effect.status.status_code == StatusCode.ERROR
    assert "oncebeat.occurrence_id" not in job.attributes  # no schedule fired it: a trace of its own


def test_configure_from_env_reads_the_standard_variables() -> None:
    assert tracing.configure_from_env("worker", environ={}) is False
    assert tracing.configure_from_env("worker", environ={"OTEL_TRACES_EXPORTER": "none"}) is False
    with pytest.raises(ConfigError, match="otlp, console or none"):
        tracing.configure_from_env("worker", environ={"OTEL_TRACES_EXPORTER": "zipkin"})
    try:
        assert tracing.configure_from_env("worker", environ={"OTEL_TRACES_EXPORTER": "console"}) is True
    finally:
        if tracing._installed is not None:
            tracing._installed.uninstall()


def test_the_occurrence_trace_id_is_stable_and_apart_per_namespace() -> None:
    t = tracing.Tracing(TracerProvider(), namespace="db-a")
    u = tracing.Tracing(TracerProvider(), namespace="db-b")
    from opentelemetry.trace import get_current_span

    a1 = get_current_span(t.occurrence_context(7)).get_span_context()
    a2 = get_current_span(t.occurrence_context(7)).get_span_context()
    b = get_current_span(u.occurrence_context(7)).get_span_context()
    assert a1.trace_id == a2.trace_id != b.trace_id  # stable per occurrence, apart per namespace
