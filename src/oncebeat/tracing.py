"""OpenTelemetry traces from the telemetry seam: clock fire → job → effect → SMTP reply.

Optional: needs the ``otel`` extra (``pip install 'oncebeat[otel]'``: ``opentelemetry-api``/``-sdk`` and the OTLP
HTTP exporter). :func:`install` subscribes to :mod:`oncebeat.telemetry`; engine code knows nothing of it.

Spans (names, attributes; instants from the events, durations in the spans themselves):

- ``oncebeat.fire <schedule>`` (clock): from the occurrence's fire instant to its recording, so its length is the
  firing lag. ``oncebeat.schedule``, ``oncebeat.occurrence_id``, ``oncebeat.outcome``, ``oncebeat.job_id``.
- ``oncebeat.job <task>`` (worker): one attempt, start to finish. ``oncebeat.job_id``, ``oncebeat.task``,
  ``oncebeat.queue``, ``oncebeat.attempt``, ``oncebeat.occurrence_id``, ``oncebeat.outcome``; status ERROR unless
  the attempt completed.
- ``oncebeat.effect`` (worker, child of the job): ``oncebeat.effect_key``; events ``no_return`` and ``performed``;
  ended when the ledger recorded it (an effect that failed or was left in doubt ends with its job, status ERROR).
- ``oncebeat.smtp`` (worker, child of the effect): connect to the server's reply; events ``data`` and
  ``final_dot``, ``oncebeat.smtp.reply_class`` (``2xx``, ``4xx``, ``5xx``, ``none``).

The clock and the workers are different processes: a fire and the runs of its occurrence share one trace because
its id is derived from the occurrence id (and ``namespace``, e.g. the database, so two deployments sending to one
collector do not meet), and both hang under the same (unrecorded) root span of that occurrence. No customer data
goes into a span: effect keys, task names, ids and reply classes only.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from . import telemetry
from .errors import ConfigError

__all__ = ["Tracing", "configure_from_env", "install"]

_EVENTS = ("occurrence.recorded", "job.started", "job.finished", "effect.requested", "effect.no_return",
           "effect.performed", "effect.recorded", "mail.connecting", "mail.data", "mail.final_dot", "mail.reply",
           "reminder.finished")


def _require_otel() -> None:
    try:
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        raise ConfigError("traces need the OpenTelemetry packages: pip install 'oncebeat[otel]' "
                          "(opentelemetry-api, opentelemetry-sdk, opentelemetry-exporter-otlp-proto-http)") from None


def _ns(instant: datetime) -> int:
    return int(instant.timestamp() * 1_000_000_000)


class Tracing:
    """Telemetry subscriber that turns engine events into spans of ``tracer_provider`` (default: the global one).

    Spans of one job live on the thread that runs it (the worker's slot): each thread keeps its own stack.
    """

    def __init__(self, tracer_provider: Any = None, *, namespace: str = "") -> None:
        _require_otel()
        from opentelemetry import trace

        from . import __version__

        provider = tracer_provider or trace.get_tracer_provider()
        self._trace = trace
        self.tracer = provider.get_tracer("oncebeat", __version__)
        self.namespace = namespace
        self._local = threading.local()

    # --- wiring ---------------------------------------------------------------------------------
    def install(self) -> Tracing:
        for event in _EVENTS:
            telemetry.attach(event, self._on)
        return self

    def uninstall(self) -> None:
        for event in _EVENTS:
            telemetry.detach(event, self._on)

    # --- the occurrence's trace -----------------------------------------------------------------
    def occurrence_context(self, occurrence_id: int) -> Any:
        """The context under which every span of occurrence ``occurrence_id`` hangs (derived, never random)."""
        from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

        digest = hashlib.sha256(f"oncebeat occurrence {self.namespace} {occurrence_id}".encode()).digest()
        trace_id = int.from_bytes(digest[:16], "big") or 1
        span_id = int.from_bytes(digest[16:24], "big") or 1
        root = SpanContext(trace_id=trace_id, span_id=span_id, is_remote=True,
                           trace_flags=TraceFlags(TraceFlags.SAMPLED))
        return set_span_in_context(NonRecordingSpan(root))

    # --- events -----------------------------------------------------------------------------------
    def _stack(self) -> list[tuple[str, Any]]:
        stack: list[tuple[str, Any]] | None = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def _top(self, kind: str) -> Any:
        return next((span for k, span in reversed(self._stack()) if k == kind), None)

    def _start(self, kind: str, name: str, attributes: dict[str, Any], start_time: int | None = None) -> None:
        stack = self._stack()
        parent = self._trace.set_span_in_context(stack[-1][1]) if stack else None
        stack.append((kind, self.tracer.start_span(name, context=parent, attributes=attributes,
                                                   start_time=start_time)))

    def _end_until(self, kind: str, *, error: str | None = None) -> None:
        """End the open spans of this thread down to and including the newest ``kind`` span."""
        from opentelemetry.trace import Status, StatusCode

        stack = self._stack()
        if not any(k == kind for k, _ in stack):
            return
        while stack:
            k, span = stack.pop()
            if error is not None:
                span.set_status(Status(StatusCode.ERROR, error))
            span.end()
            if k == kind:
                return

    def _on(self, event: str, data: Mapping[str, Any]) -> None:
        if event == "occurrence.recorded":
            self._fire(data)
        elif event == "job.started":
            self._end_until("job", error="the previous attempt on this thread ended without finishing")
            self._stack().clear()
            occ = data.get("occurrence_id")
            attributes = {"oncebeat.job_id": data["job_id"], "oncebeat.task": data["task"],
                          "oncebeat.queue": data["queue"], "oncebeat.attempt": data["attempt"],
                          "oncebeat.latency_seconds": data.get("latency_seconds", 0.0)}
            if occ is not None:
                attributes["oncebeat.occurrence_id"] = occ
            context = self.occurrence_context(int(occ)) if occ is not None else None
            self._stack().append(("job", self.tracer.start_span(f"oncebeat.job {data['task']}", context=context,
                                                                attributes=attributes)))
        elif event == "job.finished":
            job = self._top("job")
            if job is not None:
                job.set_attribute("oncebeat.outcome", str(data["outcome"]))
            self._end_until("job", error=None if data["outcome"] == "completed" else str(data["outcome"]))
        elif event == "effect.requested":
            if self._top("job") is not None:
                self._start("effect", "oncebeat.effect", {"oncebeat.effect_key": str(data["key"])})
        elif event in ("effect.no_return", "effect.performed"):
            span = self._top("effect")
            if span is not None:
                span.add_event(event.partition(".")[2])
        elif event == "effect.recorded":
            self._end_until("effect")
        elif event == "mail.connecting":
            if self._top("job") is not None:
                self._start("smtp", "oncebeat.smtp", {})
        elif event in ("mail.data", "mail.final_dot"):
            span = self._top("smtp")
            if span is not None:
                span.add_event(event.partition(".")[2])
        elif event == "mail.reply":
            span = self._top("smtp")
            if span is not None:
                reply = str(data["reply_class"])
                span.set_attribute("oncebeat.smtp.reply_class", reply)
                self._end_until("smtp", error=None if reply == "2xx" else f"SMTP reply {reply}")
        elif event == "reminder.finished":
            job = self._top("job")
            if job is not None:
                job.set_attribute("oncebeat.reminder.stage", int(data["stage"]))
                job.set_attribute("oncebeat.reminder.state", str(data["state"]))

    def _fire(self, data: Mapping[str, Any]) -> None:
        occ = data.get("occurrence_id")
        fire_at = data.get("fire_at")
        recorded = data.get("recorded_at")
        attributes: dict[str, Any] = {"oncebeat.schedule": data["schedule"], "oncebeat.outcome": data["outcome"],
                                      "oncebeat.lag_seconds": float(data["lag_seconds"])}
        if occ is not None:
            attributes["oncebeat.occurrence_id"] = int(occ)
        if data.get("job_id") is not None:
            attributes["oncebeat.job_id"] = int(data["job_id"])
        context = self.occurrence_context(int(occ)) if occ is not None else None
        span = self.tracer.start_span(f"oncebeat.fire {data['schedule']}", context=context, attributes=attributes,
                                      start_time=_ns(fire_at) if isinstance(fire_at, datetime) else None)
        span.end(end_time=_ns(recorded) if isinstance(recorded, datetime) else None)


_installed: Tracing | None = None


def install(tracer_provider: Any = None, *, namespace: str = "") -> Tracing:
    """Start turning engine events into spans (idempotent per process: a second call replaces the first).

    Raises:
        ConfigError: the OpenTelemetry packages are not installed.
    """
    global _installed
    if _installed is not None:
        _installed.uninstall()
    _installed = Tracing(tracer_provider, namespace=namespace).install()
    return _installed


def configure_from_env(role: str, *, namespace: str = "", environ: Mapping[str, str] | None = None) -> bool:
    """Install tracing when the standard OpenTelemetry variables ask for it; return whether it did.

    ``OTEL_TRACES_EXPORTER`` = ``otlp`` (or an ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``…_TRACES_ENDPOINT`` set) sends
    spans over OTLP/HTTP; ``console`` prints them (one JSON object per span, to stdout); ``none`` or nothing set:
    no tracing. ``OTEL_SERVICE_NAME`` names the service (default ``oncebeat-<role>``).

    Raises:
        ConfigError: an unknown exporter, or the packages are missing.
    """
    env = os.environ if environ is None else environ
    exporter_name = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if not exporter_name:
        has_endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        exporter_name = "otlp" if has_endpoint else "none"
    if exporter_name == "none":
        return False
    if exporter_name not in ("otlp", "console"):
        raise ConfigError(f"OTEL_TRACES_EXPORTER={exporter_name!r}: oncebeat supports otlp, console or none")
    _require_otel()
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

    exporter: SpanExporter
    if exporter_name == "console":
        exporter = ConsoleSpanExporter()
    else:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise ConfigError("OTLP traces need opentelemetry-exporter-otlp-proto-http: "
                              "pip install 'oncebeat[otel]'") from None
        exporter = OTLPSpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": env.get("OTEL_SERVICE_NAME")
                                                        or f"oncebeat-{role}"}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    import atexit

    atexit.register(provider.shutdown)  # flush the last spans when the process stops
    install(provider, namespace=namespace)
    return True
