"""Prometheus metrics: gauges read from the database at scrape time, and process instruments.

Two kinds of metric, both with Prometheus names (``oncebeat_…``, base units, ``_total`` counters):

- **Database gauges** are computed when scraped, by the read verbs of the layers that own the tables,
  so any process that can reach the database (``oncebeat web``'s ``/metrics``) reports the whole
  system: jobs per unfinished state and queue, effects per unfinished state, in-doubt effects,
  process heartbeat ages. Every query behind them reads a partial index whose size is the unfinished
  work, not the history, so a scrape stays fast with millions of finished jobs. Apps add their own
  gauges with :func:`register_db_source` (the reminder app adds reminders per stage and state).
- **Process instruments** (counters and histograms: job run seconds, claim-to-start latency,
  occurrences fired, duplicates turned away by the ledger, clock lag, SMTP replies, reminders
  finished) live in the process that observes them (workers, clocks) and are served by
  ``--metrics-port``. With ``PROMETHEUS_MULTIPROC_DIR`` set, prometheus_client keeps them in files
  in that folder, so several processes on one host (and ``oncebeat web`` on the same host) expose
  their sum; each process calls :func:`mark_process_dead` on exit.

Example::

    body, content_type = exposition(store, clock=SystemClock())
    serve_metrics(9100, store=store, clock=SystemClock())     # a worker's --metrics-port
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from . import telemetry
from .store import Store
from .timebase import Clock

# prometheus_client is imported where a metric is made or served: an app registers its gauges at start-up
# (register_db_source) in every process, and only the processes that serve metrics need the library.
if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import Metric

__all__ = [
    "DbCollector",
    "DbSource",
    "exposition",
    "install_instruments",
    "mark_process_dead",
    "multiprocess_dir",
    "register_db_source",
    "serve_metrics",
]

DbSource = Callable[[Store, Clock], Iterable["Metric"]]
_SOURCES: list[DbSource] = []
_SOURCES_LOCK = threading.Lock()


def register_db_source(source: DbSource) -> DbSource:
    """Add a function ``(store, clock) -> metric families`` to every database scrape (apps' own gauges).

    Registering the same function twice has no effect. Returns ``source`` (usable as a decorator).
    """
    with _SOURCES_LOCK:
        if source not in _SOURCES:
            _SOURCES.append(source)
    return source


# Buckets in seconds: jobs and latencies from milliseconds to hours; clock lag around the misfire grace.
_RUN_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
_LAG_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 3600, 86400)
_installed: dict[str, Any] = {}
_install_lock = threading.Lock()


def install_instruments() -> dict[str, Any]:
    """Create this process's counters and histograms and subscribe them to :mod:`oncebeat.telemetry`.

    Idempotent. Returns the instruments by name (tests read them). Names and labels:

    - ``oncebeat_job_run_seconds{task,outcome}`` histogram — handler run time.
    - ``oncebeat_job_start_latency_seconds{queue}`` histogram — from ``run_at`` to the start (claim-to-start).
    - ``oncebeat_jobs_finished_total{task,outcome}`` counter.
    - ``oncebeat_occurrences_total{schedule,outcome}`` counter — occurrences recorded.
    - ``oncebeat_occurrence_duplicates_total{schedule}`` counter — second records turned away by the ledger.
    - ``oncebeat_clock_lag_seconds{schedule}`` histogram — recording instant minus fire instant of scheduled
      (``enqueued``) occurrences.
    - ``oncebeat_smtp_replies_total{reply_class}`` counter — ``2xx``, ``4xx``, ``5xx``, ``none``.
    - ``oncebeat_reminders_finished_total{stage,state}`` counter — sent, skipped, failed, in_doubt.
    """
    from prometheus_client import Counter, Histogram

    with _install_lock:
        if _installed:
            return _installed
        run = Histogram("oncebeat_job_run_seconds", "Job handler run time.", ["task", "outcome"], buckets=_RUN_BUCKETS)
        latency = Histogram("oncebeat_job_start_latency_seconds", "Seconds from a job's run_at to its start "
                            "(claim-to-start latency).", ["queue"], buckets=_RUN_BUCKETS)
        finished = Counter("oncebeat_jobs_finished", "Job attempts finished, by outcome.", ["task", "outcome"])
        occurrences = Counter("oncebeat_occurrences", "Occurrences recorded in the ledger.", ["schedule", "outcome"])
        duplicates = Counter("oncebeat_occurrence_duplicates", "Second records of an occurrence turned away by "
                             "the ledger's unique constraint.", ["schedule"])
        lag = Histogram("oncebeat_clock_lag_seconds", "Recording instant minus fire instant of scheduled "
                        "occurrences.", ["schedule"], buckets=_LAG_BUCKETS)
        smtp = Counter("oncebeat_smtp_replies", "SMTP deliveries by the class of the server's final reply.",
                       ["reply_class"])
        reminders = Counter("oncebeat_reminders_finished", "Reminders decided by a send, by stage and state.",
                            ["stage", "state"])

        def on_job_started(_: str, d: Any) -> None:
            latency.labels(d["queue"]).observe(d["latency_seconds"])

        def on_job_finished(_: str, d: Any) -> None:
            run.labels(d["task"], d["outcome"]).observe(d["seconds"])
            finished.labels(d["task"], d["outcome"]).inc()

        def on_occurrence(_: str, d: Any) -> None:
            occurrences.labels(d["schedule"], d["outcome"]).inc()
            if d["outcome"] == "enqueued":
                lag.labels(d["schedule"]).observe(max(0.0, d["lag_seconds"]))

        handlers = {
            "job.started": on_job_started,
            "job.finished": on_job_finished,
            "occurrence.recorded": on_occurrence,
            "occurrence.duplicate": lambda _, d: duplicates.labels(d["schedule"]).inc(),
            "mail.reply": lambda _, d: smtp.labels(d["reply_class"]).inc(),
            "reminder.finished": lambda _, d: reminders.labels(str(d["stage"]), d["state"]).inc(),
        }
        for event, handler in handlers.items():
            telemetry.attach(event, handler)
        _installed.update(run=run, latency=latency, finished=finished, occurrences=occurrences,
                          duplicates=duplicates, lag=lag, smtp=smtp, reminders=reminders)
        return _installed


def multiprocess_dir() -> str | None:
    """``PROMETHEUS_MULTIPROC_DIR`` when set (process instruments are then shared through files)."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def _engine_gauges(store: Store, clock: Clock) -> Iterator[Metric]:
    from prometheus_client.core import GaugeMetricFamily

    from .effects import EffectLedger
    from .processes import list_processes
    from .provenance import current_source
    from .queue import UNFINISHED_STATES, Queue

    jobs = GaugeMetricFamily("oncebeat_jobs", "Jobs per unfinished state and queue (finished jobs: "
                             "oncebeat_jobs_finished_total).", labels=["state", "queue"])
    seen: set[tuple[str, str]] = set()
    source = current_source("api")
    rows = Queue(store, clock=clock, source=source).counts_by_queue()
    queues = sorted({r["queue"] for r in rows} | {"default"})
    for r in rows:
        jobs.add_metric([r["state"], r["queue"]], float(r["n"]))
        seen.add((r["state"], r["queue"]))
    for state in UNFINISHED_STATES:  # a state with no job is 0, not absent: alerts compare with 0
        for q in queues:
            if (state, q) not in seen:
                jobs.add_metric([state, q], 0.0)
    yield jobs

    counts = EffectLedger(store, clock=clock, source=source).counts_unfinished()
    effects = GaugeMetricFamily("oncebeat_effects", "Effects per unfinished state (started, in_doubt, failed).",
                                labels=["state"])
    for state in ("started", "in_doubt", "failed"):
        effects.add_metric([state], float(counts.get(state, 0)))
    yield effects
    yield GaugeMetricFamily("oncebeat_effects_in_doubt", "Effects in doubt: each needs an operator's decision "
                            "(oncebeat effects resolve KEY done|not_done).", value=float(counts.get("in_doubt", 0)))

    now = clock.now()
    age = GaugeMetricFamily("oncebeat_process_heartbeat_age_seconds", "Seconds since each running process's "
                            "last heartbeat.", labels=["role", "host", "pid", "process_id"])
    alive = GaugeMetricFamily("oncebeat_processes", "Registered, not stopped processes per role whose heartbeat "
                              "is younger than 2 minutes.", labels=["role"])
    by_role: dict[str, int] = {"clock": 0, "worker": 0}
    for p in list_processes(store, running=True):
        seconds = max(0.0, (now - p["heartbeat_at"]).total_seconds())
        age.add_metric([p["role"], p["host"], str(p["pid"]), str(p["id"])], seconds)
        by_role.setdefault(p["role"], 0)
        if seconds <= 120:
            by_role[p["role"]] += 1
    for role, n in sorted(by_role.items()):
        alive.add_metric([role], float(n))
    yield age
    yield alive

    from .ratelimit import usage

    in_use = GaugeMetricFamily("oncebeat_rate_limit_permits", "Permits of each rate-limited key still counting in its "
                               "window; equal to oncebeat_rate_limit_max: the key is saturated and its sends wait "
                               "(snoozed, not failed).", labels=["key"])
    most = GaugeMetricFamily("oncebeat_rate_limit_max", "Each rate-limited key's limit per window "
                             "([delivery] max_per_minute for the relay).", labels=["key"])
    for r in usage(store, now):
        in_use.add_metric([r["key"]], float(r["in_use"]))
        most.add_metric([r["key"]], float(r["max_count"]))
    yield in_use
    yield most


class DbCollector:
    """A prometheus_client collector (its ``Collector`` protocol) that reads the database gauges at each scrape."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def collect(self) -> Iterator[Metric]:
        yield from _engine_gauges(self.store, self.clock)
        with _SOURCES_LOCK:
            sources = list(_SOURCES)
        for source in sources:
            yield from source(self.store, self.clock)

    def describe(self) -> list[Metric]:
        return []  # collected on demand: never at registration time


def _registry(store: Store | None, clock: Clock | None) -> CollectorRegistry:
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    folder = multiprocess_dir()
    if folder:
        from prometheus_client import multiprocess

        multiprocess.MultiProcessCollector(registry, path=folder)  # type: ignore[no-untyped-call]
    else:
        registry.register(_ProcessLocal())
    if store is not None and clock is not None:
        registry.register(DbCollector(store, clock))
    return registry


class _ProcessLocal:
    """This process's own instruments (the default registry), without multiprocess files."""

    def collect(self) -> Iterator[Metric]:
        from prometheus_client import REGISTRY

        yield from REGISTRY.collect()

    def describe(self) -> list[Metric]:
        return []


def exposition(store: Store | None, *, clock: Clock | None = None, **_: Any) -> tuple[bytes, str]:
    """One scrape: ``(body, content type)`` of the process instruments and, given a store, the database gauges.

    Raises:
        StoreError: the database cannot be read (the scrape fails, which Prometheus records as ``up == 0``).
    """
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    return generate_latest(_registry(store, clock)), CONTENT_TYPE_LATEST


def serve_metrics(port: int, *, host: str = "127.0.0.1", store: Store | None = None,
                  clock: Clock | None = None) -> Any:
    """Serve ``/metrics`` on ``host:port`` from a daemon thread (``--metrics-port`` of worker and clock).

    With ``store``, the database gauges are included. Returns the WSGI server (``.shutdown()`` stops it).

    Raises:
        OSError: the port is taken (the message names it).
    """
    from prometheus_client import start_http_server

    install_instruments()
    try:
        server, _thread = start_http_server(port, addr=host, registry=_registry(store, clock))
    except OSError as exc:
        raise OSError(f"--metrics-port {port}: cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    return server


def mark_process_dead(pid: int | None = None) -> None:
    """Tell the multiprocess files that process ``pid`` (default this one) exited (no-op without the folder)."""
    if multiprocess_dir():
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid if pid is not None else os.getpid())  # type: ignore[no-untyped-call]
