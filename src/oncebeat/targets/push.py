"""The built-in task ``oncebeat.push``: one push per occurrence, inside the effect ledger.

The clock records an occurrence and enqueues an ``oncebeat.push`` job carrying the target (G1); a worker runs
it: the push is ``ctx.effect("push:<schedule key>:<fire instant UTC>", …)`` with its point of no return right
before the bytes leave (G4). So:

- a worker killed before the point of no return (connecting) is retried and pushes once;
- a worker killed after it, or a reply lost (the broker's or the endpoint's), leaves the push **in doubt**: the
  job ends ``in_doubt``, ``oncebeat effects`` and the doctor list the key, and nothing is re-pushed until an
  operator says ``oncebeat effects resolve KEY done|not_done`` (``not_done`` pushes again, with the same
  derived id);
- a completed push is never repeated, whatever clocks, restarts, retries or rescues happen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..app import App, ScheduleDef
from ..effects import EffectAttempt
from ..errors import ConfigError, Discard, TargetRejected
from . import to_celery, to_http, to_sidekiq
from .spec import Occurrence, Target, parse_target

if TYPE_CHECKING:
    from ..worker import JobContext

__all__ = ["PUSH_TASK", "install", "push_task", "schedule"]

PUSH_TASK = "oncebeat.push"
PUSHERS: dict[str, Callable[[Target, Occurrence, EffectAttempt], dict[str, Any]]] = {
    "celery": to_celery.push, "sidekiq": to_sidekiq.push, "http": to_http.push}


def push_task(ctx: JobContext, **args: Any) -> dict[str, Any] | None:
    """The handler of ``oncebeat.push``: push the job's occurrence to its target once.

    Returns:
        The push's recorded result (the Sidekiq jid, the Celery task id, the HTTP reply), or None when it is in
        doubt (the job then ends ``in_doubt``).

    Raises:
        Discard: the arguments name no valid target, or the job has no occurrence (enqueued by hand).
        TargetRejected: a final refusal (discarded); TargetError: retried with backoff.
    """
    try:
        target = Target.from_args(args)
    except ConfigError as exc:
        raise Discard(str(exc)) from None
    row = ctx.occurrence()
    if row is None:
        raise Discard(f"{PUSH_TASK} pushes a schedule's occurrence; job {ctx.job.id} has none (use `oncebeat "
                      "trigger SCHEDULE` for a push outside the schedule)")
    occ = Occurrence.from_row(row)
    pusher = PUSHERS[target.kind]
    result: dict[str, Any] | None = ctx.effect(occ.key, lambda attempt: pusher(target, occ, attempt),
                                               payload=target.args(), marks_point_of_no_return=True)
    return result


def install(app: App, schedules: tuple[ScheduleDef, ...] | list[ScheduleDef] = ()) -> App:
    """Register ``oncebeat.push`` on ``app`` (once) and add ``schedules`` (target schedules, e.g. from
    :func:`oncebeat.targets.config.target_schedules`).

    Raises:
        ConfigError: a schedule's key is already defined by the app's code.
    """
    if PUSH_TASK not in app.tasks:
        app.task(PUSH_TASK, permanent_errors=(TargetRejected,))(push_task)
    for definition in schedules:
        if definition.key in app.schedules and app.schedules[definition.key] != definition:
            raise ConfigError(f"[[schedules]] key = {definition.key!r} is already a schedule of the app; give the "
                              "target schedule another key")
        app.schedules[definition.key] = definition
    return app


def schedule(app: App, key: str, expression: str, *, tz: str, target: str, catchup: str = "latest",
             catchup_window: float = 86400.0, dst_gap: str = "shift", dst_fold: str = "first",
             overlap: str = "allow", **options: Any) -> ScheduleDef:
    """Define a schedule whose occurrences are pushed to ``target`` (``KIND:NAME``, see
    :mod:`oncebeat.targets.spec`) with ``options`` (``redis``, ``broker``, ``queue``, ``args``, ``secret_env``...).

    Example::

        targets.schedule(app, "overdue", "0 8 * * *", tz="America/Chicago",
                         target="sidekiq:OverdueReminderJob", redis="$REDIS_URL", queue="default")

    Raises:
        ConfigError / ScheduleError: a bad target, option, expression or zone (the message names it).
    """
    spec = parse_target(target, options, where=f"schedule {key!r}")
    install(app)
    return app.schedule(key, expression, tz=tz, task=PUSH_TASK, args=spec.args(), catchup=catchup,
                        catchup_window=catchup_window, dst_gap=dst_gap, dst_fold=dst_fold, overlap=overlap)
