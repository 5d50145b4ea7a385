"""``oncebeat jobs delete``: delete finished jobs many at a time, as the dashboard's bulk delete does.

Entry point only: parse, call :func:`oncebeat.job_admin.matching_jobs`, :func:`~oncebeat.job_admin.deletable`
(the dry run, the default) and :func:`~oncebeat.job_admin.bulk_action` (``--yes``), print. The jobs that may go
follow ``oncebeat prune``'s rules (:func:`oncebeat.retention.deletable_jobs`); the deletion is audited with the
operator (one ``jobs.bulk`` event naming the ids).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from types import ModuleType
from typing import Any

import click

from .durations import parse_duration

# oncebeat.job_admin.DELETABLE_STATES, written out so that building the command line imports no engine module
# (tests/unit/test_startup_imports.py compares the two)
DELETABLE_STATES = ("completed", "discarded", "cancelled")

Decorator = Callable[[Callable[..., None]], Callable[..., None]]


def _age(text: str) -> timedelta:
    try:
        age = timedelta(seconds=parse_duration(text))
        if age > timedelta(days=36_500):
            raise ValueError(f"{text!r} is more than a hundred years")
    except (ValueError, OverflowError) as exc:
        raise click.BadParameter(f"{exc}; write a duration such as 7d, 12h or 604800",
                                 param_hint="--older-than") from None
    return age


def register(group: click.Group, cli_module: ModuleType) -> None:
    """Add ``delete`` to the ``oncebeat jobs`` group; ``cli_module`` gives the options and helpers of
    :mod:`oncebeat.cli_common` (``DB_OPTION``, ``_runtime``, ``_operator``, ``_print_json``), passed in by
    :mod:`oncebeat.cli`."""
    db_option: Decorator = cli_module.DB_OPTION
    h: Any = cli_module

    @click.command(name="delete")
    @click.option("--state", default=None, type=click.Choice(DELETABLE_STATES),
                  help="Only jobs in this state (default: any finished state).")
    @click.option("--older-than", "older_than", default="0s", show_default=True, metavar="DURATION",
                  help='Only jobs that finished at least this long ago: "7d", "12h", seconds.')
    @click.option("--task", default=None, help="Only jobs of this task.")
    @click.option("--queue", default=None, help="Only jobs of this queue.")
    @click.option("--yes", is_flag=True, help="Delete. Without it, count what would go (a dry run).")
    @db_option
    @click.option("--json", "as_json", is_flag=True)
    def delete_command(state: str | None, older_than: str, task: str | None, queue: str | None, yes: bool,
                       database_url: str | None, as_json: bool) -> None:
        """Delete finished jobs (completed, discarded, cancelled) matching the filter, at most 1000 at a time;
        never a running (leased) or waiting job, nor one ``oncebeat prune`` would keep (an effect being sent or in
        doubt, the run of an occurrence the ledger keeps). Dry run unless --yes."""
        from .job_admin import BULK_MAX, JobFilter, bulk_action, deletable, matching_jobs
        from .queue import Queue

        age = _age(older_than)
        rt = h._runtime(database_url=database_url, migrate=False)
        try:
            q = Queue(rt.store, clock=rt.clock, source=h._operator())
            cutoff = q.clock.now() - age
            # A job that finished before the cutoff was created before it: the filter narrows, the delete decides.
            ids = [i for s in ((state,) if state else DELETABLE_STATES)
                   for i in matching_jobs(q, JobFilter(state=s, task=task, queue=queue, until=cutoff))]
            if len(ids) > BULK_MAX:
                raise click.UsageError(f"{len(ids)} jobs match, at most {BULK_MAX} per run: narrow the filter "
                                       "(--state, --task, --queue, a longer --older-than) or use `oncebeat prune`")
            if not yes:
                would = len(deletable(q, ids, finished_before=cutoff)) if ids else 0
                outcome = None
            else:
                outcome = bulk_action(q, "delete", ids, finished_before=cutoff) if ids else None
                would = len(outcome.done) if outcome else 0
        finally:
            rt.close()
        if as_json:
            h._print_json({"applied": yes, "matched": len(ids), "deleted" if yes else "would_delete": would,
                           "finished_before": cutoff.isoformat(),
                           "skipped": [{"id": i, "why": why} for i, why in (outcome.skipped if outcome else ())]})
            return
        where = f"finished before {cutoff.isoformat(timespec='seconds')}"
        if not yes:
            click.echo(f"jobs delete: would delete {would} of {len(ids)} matching job(s) {where}; the others stay "
                       "(an effect being sent or in doubt, or the run of an occurrence the ledger keeps)")
            click.echo("dry run: nothing deleted. Run again with --yes to delete.")
            return
        click.echo("jobs delete: " + (outcome.describe() if outcome else f"no job matches ({where})"))

    group.add_command(delete_command)
