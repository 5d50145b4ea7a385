"""Define tasks and schedules in code: the registry workers and clocks run from.

Example::

    from oncebeat import App

    app = App()

    @app.task(max_attempts=5)
    def send_digest(ctx, team_id: int) -> None:
        ctx.effect(f"digest:{team_id}:{ctx.business_date()}", lambda: mail_digest(team_id),
                   payload={"team_id": team_id})

    app.schedule("daily-digest", "0 8 * * *", tz="America/Chicago", task="send_digest", args={"team_id": 1})

Task handlers are called as ``fn(ctx, **args)`` where ``ctx`` is a
:class:`oncebeat.worker.JobContext`.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import ConfigError
from .ratelimit import RateLimit
from .schedules import Schedule

if TYPE_CHECKING:
    from .store import Store

__all__ = ["App", "TaskDef", "ScheduleDef", "CATCHUP_POLICIES", "OVERLAP_POLICIES"]

CATCHUP_POLICIES = ("none", "latest", "all")
OVERLAP_POLICIES = ("allow", "skip", "buffer_one")
"""Whether a run of a schedule may start while its previous run is unfinished (as Temporal schedules' overlap
policy): ``allow`` runs it, ``skip`` records it ``coalesced`` without a job, ``buffer_one`` keeps at most one
waiting run (held until the running one finishes; a further one is recorded ``coalesced``). Enforced by
:func:`oncebeat.clock.fire_occurrence`."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskDef:
    name: str
    fn: Callable[..., Any]
    queue: str = "default"
    max_attempts: int = 20
    priority: int = 0
    permanent_errors: tuple[type[BaseException], ...] = ()
    rate_limit: RateLimit | None = None  # each run takes a permit first (oncebeat.ratelimit); none free: snoozed


@dataclass(frozen=True, kw_only=True, slots=True)
class ScheduleDef:
    """A schedule as defined in code or config; synced to the ``schedules`` table by the clock.

    ``catchup_window`` is in seconds; ``overlap`` is one of :data:`OVERLAP_POLICIES`.
    """

    key: str
    expression: str
    tz: str
    task: str
    args: dict[str, Any] = field(default_factory=dict)
    queue: str = "default"
    catchup: str = "latest"
    catchup_window: float = 86400.0
    dst_gap: str = "shift"
    dst_fold: str = "first"
    overlap: str = "allow"
    _hash: str = field(init=False, repr=False, compare=False, default="")

    def __post_init__(self) -> None:
        if self.catchup not in CATCHUP_POLICIES:
            raise ConfigError(f"schedule {self.key!r}: catchup must be one of {', '.join(CATCHUP_POLICIES)}, "
                              f"not {self.catchup!r}")
        if self.overlap not in OVERLAP_POLICIES:
            raise ConfigError(f"schedule {self.key!r}: overlap must be one of {', '.join(OVERLAP_POLICIES)}, "
                              f"not {self.overlap!r}")
        if not math.isfinite(self.catchup_window) or self.catchup_window < 0:
            raise ConfigError(f"schedule {self.key!r}: catchup_window must be a finite number of seconds >= 0, "
                              f"not {self.catchup_window!r}")
        self.schedule()  # validates expression, zone and DST options (raises ScheduleError)
        body = {k: getattr(self, k) for k in ("key", "expression", "tz", "task", "args", "queue", "catchup",
                                              "catchup_window", "dst_gap", "dst_fold")}
        if self.overlap != "allow":  # the default leaves the digests of definitions made before 0.2 unchanged
            body["overlap"] = self.overlap
        object.__setattr__(self, "_hash", hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24])

    def schedule(self) -> Schedule:
        return Schedule(expression=self.expression, tz=self.tz, dst_gap=self.dst_gap, dst_fold=self.dst_fold)

    def definition_hash(self) -> str:
        """A digest of everything that defines when and what this schedule fires (computed once)."""
        return self._hash

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ScheduleDef:
        return cls(key=row["key"], expression=row["expression"], tz=row["tz"], task=row["task"],
                   args=dict(row["args"] or {}), queue=row["queue"], catchup=row["catchup"],
                   catchup_window=float(row["catchup_window"]), dst_gap=row["dst_gap"], dst_fold=row["dst_fold"],
                   overlap=row.get("overlap") or "allow")


class App:
    """A registry of tasks and schedules."""

    def __init__(self) -> None:
        self.tasks: dict[str, TaskDef] = {}
        self.schedules: dict[str, ScheduleDef] = {}

    def task(self, name: str | None = None, *, queue: str = "default", max_attempts: int = 20, priority: int = 0,
             permanent_errors: tuple[type[BaseException], ...] = (), rate_limit: RateLimit | None = None
             ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator registering ``fn(ctx, **args)`` as a task (name defaults to the function's name).

        ``rate_limit``: every run of the task first takes a permit of it (:mod:`oncebeat.ratelimit`: at most
        ``limit`` runs in any ``per_seconds`` window, over every worker, a run counting until it ends); when
        none is free the job is snoozed (no attempt used up) until one frees. For a limit on one side effect
        rather than the whole run, use ``ctx.rate_limit(...)`` inside the effect instead.
        """

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            task_name = name or fn.__name__
            self.tasks[task_name] = TaskDef(name=task_name, fn=fn, queue=queue, max_attempts=max_attempts,
                                            priority=priority, permanent_errors=permanent_errors,
                                            rate_limit=rate_limit)
            return fn

        return register

    def run(self, store: Store, *, concurrency: int = 4, queues: Sequence[str] = ("default",),
            stop_after: float | None = None) -> dict[str, int]:
        """Run this app's clock and a worker in this process until SIGTERM/SIGINT (or ``stop_after`` seconds).

        The one-script way to start (``oncebeat run --app module:app`` does the same from the command line);
        for several hosts run ``oncebeat clock`` and ``oncebeat worker`` apart. The store stays open.

        Returns:
            The worker's counts (``processed``, ``returned``, ...).
        """
        from .deploy import run_together  # deploy imports this module

        return run_together(self, store, concurrency=concurrency, queues=queues, stop_after=stop_after)

    def schedule(self, key: str, expression: str, *, tz: str, task: str, args: dict[str, Any] | None = None,
                 queue: str | None = None, catchup: str = "latest", catchup_window: float = 86400.0,
                 dst_gap: str = "shift", dst_fold: str = "first", overlap: str = "allow") -> ScheduleDef:
        """Define a schedule that enqueues ``task`` with ``args`` at each occurrence of ``expression`` in ``tz``.

        ``overlap`` (:data:`OVERLAP_POLICIES`) says whether a run may start while the previous one is unfinished.
        """
        definition = ScheduleDef(key=key, expression=expression, tz=tz, task=task, args=args or {},
                                 queue=queue or (self.tasks[task].queue if task in self.tasks else "default"),
                                 catchup=catchup, catchup_window=catchup_window, dst_gap=dst_gap, dst_fold=dst_fold,
                                 overlap=overlap)
        self.schedules[key] = definition
        return definition

    def retention(self, older_than: float, *, cron: str = "30 3 * * *", tz: str = "UTC",
                  queue: str = "default") -> ScheduleDef:
        """Prune the engine's history on a schedule: the ``oncebeat.retention`` schedule runs ``oncebeat.prune``.

        What ``oncebeat prune --older-than … --apply`` does (:func:`oncebeat.retention.prune`: finished jobs, old
        occurrences, effects, audit events and stopped processes, keeping what the guarantees need), daily at
        03:30 UTC by default; ``overlap="skip"`` so two prunes never run side by side.

        Args:
            older_than: seconds (at least a day, :data:`oncebeat.retention.MIN_OLDER_THAN`).
        Raises:
            ConfigError: ``older_than`` below a day.
        """
        from .retention import MIN_OLDER_THAN, PRUNE_TASK

        if not older_than >= MIN_OLDER_THAN.total_seconds():
            raise ConfigError(f"retention older_than = {older_than:g} s: keep at least a day ("
                              f"{MIN_OLDER_THAN.total_seconds():.0f} s), e.g. older_than = \"30d\"")

        @self.task(PRUNE_TASK, queue=queue, max_attempts=5)
        def prune_history(ctx: Any, older_than: float) -> None:
            from datetime import timedelta

            from .retention import prune

            prune(ctx.store, timedelta(seconds=older_than), apply=True, now=ctx.clock.now(), source=ctx.source)

        return self.schedule("oncebeat.retention", cron, tz=tz, task=PRUNE_TASK, args={"older_than": older_than},
                             queue=queue, overlap="skip")
