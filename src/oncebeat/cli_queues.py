"""``oncebeat jobs``, ``queues ...``, ``effects ...`` and ``prune``: the engine's queue, its effect ledger and its
history.

Entry points only: parse, call :class:`oncebeat.queue.Queue`, :mod:`oncebeat.pauses`,
:mod:`oncebeat.queue_limits`, :class:`oncebeat.effects.EffectLedger` or :func:`oncebeat.retention.prune`, print.
``jobs delete`` is :mod:`oncebeat.cli_jobs`'s, added to the ``jobs`` group by :mod:`oncebeat.cli`.
"""

from __future__ import annotations

from typing import Any

import click

from .cli_common import APP_OPTION, DB_OPTION, JOB_STATES, _operator, _print_json, _printable, _runtime, _utc
from .errors import OncebeatError


@click.group(invoke_without_command=True)
@click.option("--state", default=None, type=click.Choice(JOB_STATES), help="Only jobs in this state.")
@click.option("--limit", default=20, show_default=True)
@click.option("--cancel", "cancel_id", type=int, default=None, help="Cancel this job id.")
@click.option("--retry", "retry_id", type=int, default=None,
              help="Run this discarded, cancelled or waiting job again now (the dashboard's Retry now); refused while "
                   "another run of its occurrence is unfinished.")
@DB_OPTION
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def jobs(ctx: click.Context, state: str | None, limit: int, cancel_id: int | None, retry_id: int | None,
         database_url: str | None, as_json: bool) -> None:
    """List recent jobs (or cancel or retry one) and count jobs per state; ``jobs delete`` deletes finished ones."""
    if ctx.invoked_subcommand is not None:
        return
    if cancel_id is not None and retry_id is not None:
        raise OncebeatError("jobs: give --cancel or --retry, not both")
    rt = _runtime(database_url=database_url, migrate=cancel_id is not None or retry_id is not None)
    try:
        from .queue import Queue

        q = Queue(rt.store, clock=rt.clock, source=_operator())
        if cancel_id is not None:
            _cancel_job(q, cancel_id)
            return
        if retry_id is not None:
            _retry_job(q, retry_id)
            return
        rows = q.list_jobs(state=state, limit=limit)
        counts = q.counts()
    finally:
        rt.close()
    if as_json:
        _print_json({"counts": counts, "jobs": rows})
        return
    click.echo("jobs: " + (", ".join(f"{n} {s}" for s, n in counts.items()) or "none"))
    for r in rows:
        err = f"  last error: {r['last_error'][:80]}" if r["last_error"] else ""
        held = f" (held: {_printable(r['held'])})" if r.get("held") else ""
        click.echo(f"  #{r['id']} {r['task']} {r['state']}{held} attempt {r['attempt']}/{r['max_attempts']} "
                   f"run_at {r['run_at'].isoformat()} by {r['source_kind']}@{r['source_host']}{err}")


@click.group(invoke_without_command=True)
@DB_OPTION
@APP_OPTION
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def queues(ctx: click.Context, database_url: str | None, app: str | None, as_json: bool) -> None:
    """List queues: waiting, running and held jobs, and whether the queue is paused."""
    if ctx.invoked_subcommand is not None:
        return
    from .pauses import queue_overview
    from .queue_limits import queue_limits

    rt = _runtime(database_url=database_url, app=app, migrate=False, need_smtp=False)
    try:
        known = set(queue_limits(rt.store))
        limits = {q: int(r["max_running"]) for q, r in queue_limits(rt.store).items()}
        rows = queue_overview(rt.store, known=tuple(sorted({t.queue for t in rt.app.tasks.values()} | known)))
    finally:
        rt.close()
    if as_json:
        _print_json([r.to_json() | {"limit": limits.get(r.queue)} for r in rows])
        return
    if not rows:
        click.echo("no queues: no task, job or pause names one yet")
    for r in rows:
        state = f"PAUSED since {_utc(r.paused_at)} by {_printable(r.paused_by or '?')}" if r.paused else "active"
        held = f" ({', '.join(_printable(h) for h in r.held_by)})" if r.held_by else ""
        cap = f" (at most {limits[r.queue]} at once)" if r.queue in limits else ""
        click.echo(f"{_printable(r.queue)}: {state}; {r.waiting} waiting, {r.running} running{cap}, "
                   f"{r.held} held{held}")


def _queue_pause(name: str, pause: bool, database_url: str | None) -> None:
    from .pauses import held_jobs, pause_queue, queue_overview, resume_queue

    rt = _runtime(database_url=database_url, need_smtp=False)
    try:
        known = sorted({t.queue for t in rt.app.tasks.values()} | {r.queue for r in queue_overview(rt.store)})
        if pause and name not in known:  # a typo (defualt) would pause nothing and leave the real queue running
            click.echo(f"warning: no task, job or pause names queue {_printable(name)!r} (known: "
                       f"{', '.join(_printable(k) for k in known) or 'none'}); pausing it anyway - check the "
                       "spelling", err=True)
        held = sum(h.n for h in held_jobs(rt.store) if h.kind == "queue" and h.name == name)
        changed = (pause_queue if pause else resume_queue)(rt.store, name, source=_operator(), clock=rt.clock)
        if pause:
            held = sum(h.n for h in held_jobs(rt.store) if h.kind == "queue" and h.name == name)
    finally:
        rt.close()
    shown = _printable(name)
    if not changed:
        click.echo(f"queue {shown}: no change (already {'paused' if pause else 'active'})")
    elif pause:
        click.echo(f"queue {shown}: paused; no worker claims its jobs ({held} waiting now, held) until "
                   f"`oncebeat queues resume {shown}`; jobs already running finish")
    else:
        click.echo(f"queue {shown}: resumed; {held} held job(s) released, each runs once")


@queues.command(name="pause")
@click.argument("name")
@DB_OPTION
def queues_pause(name: str, database_url: str | None) -> None:
    """Pause queue NAME: no worker in any process claims its jobs until resumed (enqueueing goes on)."""
    _queue_pause(name, True, database_url)


@queues.command(name="resume")
@click.argument("name")
@DB_OPTION
def queues_resume(name: str, database_url: str | None) -> None:
    """Resume queue NAME: its held jobs become claimable again, each as it was."""
    _queue_pause(name, False, database_url)


@queues.command(name="limit")
@click.argument("name")
@click.argument("max_running", metavar="N|none")
@DB_OPTION
def queues_limit(name: str, max_running: str, database_url: str | None) -> None:
    """Let at most N jobs of queue NAME run at once over every worker, process and host; `none` lifts the limit.

    Holds from the commit on, without a restart; lowering it stops no running job."""
    from .queue_limits import MAX_LIMIT, clear_queue_limit, set_queue_limit

    text = max_running.strip().lower()
    if text != "none" and not (text.isascii() and text.isdigit() and len(text) <= 6 and 1 <= int(text) <= MAX_LIMIT):
        raise click.BadParameter(f"{_printable(max_running[:20])!r} is not a limit: give a whole number of jobs from "
                                 f"1 to {MAX_LIMIT}, or none to lift it", param_hint="N")
    rt = _runtime(database_url=database_url, need_smtp=False)
    try:
        from .pauses import queue_overview

        known = sorted({t.queue for t in rt.app.tasks.values()} | {r.queue for r in queue_overview(rt.store)})
        if text != "none" and name not in known:  # a typo would limit nothing and leave the real queue unlimited
            click.echo(f"warning: no task, job or pause names queue {_printable(name)!r} (known: "
                       f"{', '.join(_printable(k) for k in known) or 'none'}); limiting it anyway - check the "
                       "spelling", err=True)
        if text == "none":
            before = clear_queue_limit(rt.store, name, source=_operator(), clock=rt.clock)
        else:
            before = set_queue_limit(rt.store, name, int(text), source=_operator(), clock=rt.clock)
    finally:
        rt.close()
    shown = _printable(name)
    if text == "none":
        click.echo(f"queue {shown}: no limit (it was {before} at once)" if before is not None
                   else f"queue {shown}: no change (it has no limit)")
    elif before == int(text):
        click.echo(f"queue {shown}: no change (already at most {text} at once)")
    else:
        click.echo(f"queue {shown}: at most {text} job(s) running at once over every worker (was "
                   f"{'no limit' if before is None else before}); running jobs finish")


def _cancel_job(q: Any, job_id: int) -> None:
    """Cancel one job; an unknown id or a job that can no longer be cancelled is an error (exit 2)."""
    if q.cancel(job_id):
        click.echo(f"job {job_id}: cancelled")
        return
    job = q.get(job_id)
    if job is None:
        raise OncebeatError(f"job {job_id} does not exist; `oncebeat jobs` lists the recent ones")
    raise OncebeatError(f"job {job_id} is {job.state} and cannot be cancelled (only jobs not yet running or "
                        "finished can); `oncebeat jobs --state available` lists the ones that can")


def _retry_job(q: Any, job_id: int) -> None:
    """Retry one job now; an unknown id, a running or completed job, or a second run of its occurrence is an error
    (exit 2)."""
    if q.retry(job_id):  # raises RunUnfinished naming the unfinished run of its occurrence
        click.echo(f"job {job_id}: put back in the queue, runs now")
        return
    job = q.get(job_id)
    if job is None:
        raise OncebeatError(f"job {job_id} does not exist; `oncebeat jobs` lists the recent ones")
    raise OncebeatError(f"job {job_id} is {job.state} and cannot be retried (only discarded, cancelled or waiting "
                        "jobs can)")


@click.group()
def effects() -> None:
    """Inspect and resolve the effect ledger."""


@effects.command(name="list")
@click.option("--state", default=None, type=click.Choice(["started", "done", "in_doubt", "failed"]))
@DB_OPTION
def effects_list(state: str | None, database_url: str | None) -> None:
    """List effects (in-doubt ones first need an operator's decision)."""
    from .effects import EffectLedger

    rt = _runtime(database_url=database_url, migrate=False)
    try:
        ledger = EffectLedger(rt.store, clock=rt.clock, source=_operator())
        rows = ledger.list_page(state=state, limit=500)
        while rows and len(rows) % 500 == 0:  # page through a long ledger (keyset: no OFFSET)
            more = ledger.list_page(state=state, after=(rows[-1]["started_at"], rows[-1]["key"]), limit=500)
            if not more:
                break
            rows += more
    finally:
        rt.close()
    for r in rows:
        click.echo(f"{r['key']}: {r['state']} (job {r['job_id']} attempt {r['attempt']}, started "
                   f"{r['started_at'].isoformat()}){' - ' + r['detail'] if r['detail'] else ''}")


@effects.command(name="resolve")
@click.argument("key")
@click.argument("outcome", type=click.Choice(["done", "not_done"]))
@DB_OPTION
def effects_resolve(key: str, outcome: str, database_url: str | None) -> None:
    """Record whether in-doubt effect KEY (any key) happened: done (recorded, never run again) or not_done
    (its job runs again; the job's done effects are not repeated)."""

    rt = _runtime(database_url=database_url, migrate=False)
    try:
        click.echo(rt.service.resolve_effect(key, outcome, source=_operator()))
    finally:
        rt.close()


@click.command()
@click.option("--older-than", "older_than", default="30d", show_default=True, metavar="DURATION",
              help='Age from which history may go: "30d", "12h", seconds (at least a day).')
@click.option("--apply", is_flag=True, help="Delete. Without it, count what would go (a dry run).")
@click.option("--batch", default=2000, show_default=True, type=click.IntRange(1, 100_000),
              help="Rows per transaction.")
@click.option("--table", "tables", multiple=True,
              type=click.Choice(["jobs", "occurrences", "effects", "events", "processes"]),
              help="Only these tables (repeatable; default all).")
@DB_OPTION
@APP_OPTION
@click.option("--json", "as_json", is_flag=True)
def prune(older_than: str, apply: bool, batch: int, tables: tuple[str, ...], database_url: str | None,
          app: str | None, as_json: bool) -> None:
    """Delete engine history (finished jobs, old occurrences, effects, audit events, stopped processes) older
    than --older-than, keeping every row a guarantee still needs (README, "Retention"). Dry run unless --apply."""
    from datetime import timedelta

    from .durations import parse_duration
    from .retention import prune as prune_history

    try:
        age = timedelta(seconds=parse_duration(older_than))
        if age > timedelta(days=36_500):
            raise ValueError(f"{older_than!r} is more than a hundred years")
    except (ValueError, OverflowError) as exc:
        raise click.BadParameter(f"{exc}; write a duration such as 30d, 72h or 604800",
                                 param_hint="--older-than") from None
    rt = _runtime(database_url=database_url, app=app, migrate=False)
    progress = (lambda part: click.echo(f"  {part.table}: {part.examined} examined, {part.pruned} "
                                        f"{'deleted' if apply else 'would go'}", err=True)) if not as_json else None
    try:
        report = prune_history(rt.store, age, apply=apply, batch=batch, tables=tables or None, source=_operator(),
                               on_progress=progress)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--older-than") from None
    finally:
        rt.close()
    if as_json:
        _print_json(report.as_dict())
        return
    verb = "deleted" if apply else "would delete"
    click.echo(f"prune: {verb} {report.total} rows older than {_utc(report.before)} "
               f"(occurrences older than {_utc(report.occurrences_before)})")
    for t in report.tables:
        click.echo(f"  {t.table:<12} {t.pruned:>10}   of {t.examined} examined")
    click.echo("kept, whatever their age:")
    for line in report.kept:
        click.echo(f"  - {line}")
    if not apply:
        click.echo("dry run: nothing deleted. Run again with --apply to delete.")
