"""The reminder app's gauges on every database scrape: reminders per stage and state.

Registered with :func:`oncebeat.metrics.register_db_source` when the app is built (the engine's
metrics module knows no reminder). Counters of what sends decided (``oncebeat_reminders_finished_total``)
come from the telemetry seam in the worker processes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..metrics import register_db_source
from ..store import Store
from ..timebase import Clock
from .outage import waiting_on_outage

if TYPE_CHECKING:
    from prometheus_client.core import Metric

__all__ = ["install", "reminder_gauges"]

# the unfinished ones (deferred: by the cap, not final); what was decided is counted by the workers' counters
STATES = ("pending", "in_doubt", "deferred")


def reminder_gauges(store: Store, clock: Clock) -> Iterator[Metric]:
    """``oncebeat_reminders{stage,state}`` for pending and in-doubt reminders (zeros included for each stage
    of the policy seen), read from a partial index sized by the unfinished reminders, not by the history."""
    from prometheus_client.core import GaugeMetricFamily  # only processes that serve metrics import it

    counts: dict[tuple[str, str], float] = {}
    for r in store.read("unfinished_reminder_counts"):
        counts[(str(r["stage"]), r["state"])] = float(r["n"])
    gauge = GaugeMetricFamily("oncebeat_reminders", "Unfinished reminders (pending, in_doubt) per stage (days "
                              "past due); decided ones: oncebeat_reminders_finished_total.",
                              labels=["stage", "state"])
    for stage in sorted({s for s, _ in counts}, key=int):
        for state in STATES:
            gauge.add_metric([stage, state], counts.get((stage, state), 0.0))
    yield gauge
    # A mail outage is a delay, not a failure: these two say how many reminders wait it out and for how long.
    waiting, oldest = waiting_on_outage(store)
    yield GaugeMetricFamily("oncebeat_reminders_waiting_on_outage",
                            "Pending reminders waiting out a mail outage (the server refused their session).",
                            value=float(waiting))
    age = (clock.now() - oldest).total_seconds() if oldest else 0.0
    yield GaugeMetricFamily("oncebeat_reminders_outage_seconds",
                            "Seconds since the oldest refusal of a reminder still waiting out a mail outage (0: none).",
                            value=max(0.0, age))


def install() -> None:
    """Add the reminder gauges to database scrapes (idempotent)."""
    register_db_source(reminder_gauges)
