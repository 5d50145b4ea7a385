"""The reminder app's gauges on every database scrape: reminders per stage and state.

Registered with :func:`oncebeat.metrics.register_db_source` when the app is built (the engine's
metrics module knows no reminder). Counters of what sends decided (``oncebeat_reminders_finished_total``)
come from the telemetry seam in the worker processes.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from ..metrics import register_db_source
from ..store import Store
from ..timebase import Clock

__all__ = ["install", "reminder_gauges"]

STATES = ("pending", "sent", "skipped", "failed", "in_doubt")


def reminder_gauges(store: Store, clock: Clock) -> Iterator[Metric]:
    """``oncebeat_reminders{stage,state}`` (every state of each stage present, zeros included)."""
    counts: dict[tuple[str, str], float] = {}
    for r in store.read("reminder_counts"):
        counts[(str(r["stage"]), r["state"])] = float(r["n"])
    gauge = GaugeMetricFamily("oncebeat_reminders", "Reminders per stage (days past due) and state.",
                              labels=["stage", "state"])
    for stage in sorted({s for s, _ in counts}, key=int):
        for state in STATES:
            gauge.add_metric([stage, state], counts.get((stage, state), 0.0))
    yield gauge


def install() -> None:
    """Add the reminder gauges to database scrapes (idempotent)."""
    register_db_source(reminder_gauges)
