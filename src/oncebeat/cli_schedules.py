"""``oncebeat trigger``, ``backfill``, ``schedules ...`` and ``occurrences rerun``: an operator's actions on
schedules and their occurrence ledger.

Entry points only: parse, call :mod:`oncebeat.schedule_admin` (or :mod:`oncebeat.schedules_report` for the
listing), print. Every change is audited with the operator (:func:`oncebeat.cli_common._operator`).
"""

from __future__ import annotations

from datetime import UTC
from pathlib import Path

import click

from .cli_common import (
    APP_OPTION,
    CONFIG_OPTION,
    DB_OPTION,
    SECONDS_NONNEGATIVE,
    _operator,
    _parse_instant,
    _print_json,
    _runtime,
    _utc,
    _words,
)


# --- operator actions ----------------------------------------------------------------------------
@click.command()
@click.argument("key", default="reminders")
@DB_OPTION
@CONFIG_OPTION
@APP_OPTION
def trigger(key: str, database_url: str | None, config: Path | None, app: str | None) -> None:
    """Fire schedule KEY now (recorded as a manual occurrence with this process's provenance)."""
    from .schedule_admin import trigger_schedule

    rt = _runtime(config=config, database_url=database_url, app=app)
    try:
        fire = trigger_schedule(rt.store, rt.app, key, source=_operator(), clock=rt.clock)
    finally:
        rt.close()
    click.echo(f"triggered {fire.describe()}")


@click.command()
@click.argument("key")
@click.option("--from", "start", required=True, help="ISO instant with offset.")
@click.option("--until", "end", required=True, help="ISO instant with offset.")
@DB_OPTION
@CONFIG_OPTION
@APP_OPTION
def backfill(key: str, start: str, end: str, database_url: str | None, config: Path | None, app: str | None) -> None:
    """Enqueue the occurrences of KEY in a past range that are not in the ledger yet."""
    from .schedule_admin import backfill_schedule

    rt = _runtime(config=config, database_url=database_url, app=app)
    try:
        fires = backfill_schedule(rt.store, rt.app, key, _parse_instant(start, "--from"),
                                  _parse_instant(end, "--until"), source=_operator(), clock=rt.clock)
    finally:
        rt.close()
    for f in fires:
        click.echo(f.describe())
    click.echo(f"{sum(1 for f in fires if f.inserted)} backfilled, {sum(1 for f in fires if not f.inserted)} "
               "already in the ledger")


@click.group(invoke_without_command=True)
@DB_OPTION
@CONFIG_OPTION
@APP_OPTION
@click.option("--count", default=3, show_default=True, type=click.IntRange(1, 100))
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def schedules(ctx: click.Context, database_url: str | None, config: Path | None, app: str | None, count: int,
              as_json: bool) -> None:
    """List schedules with their next fire times in local time and UTC."""
    if ctx.invoked_subcommand is not None:
        return
    from .schedules_report import describe_schedules

    rt = _runtime(config=config, database_url=database_url, app=app, migrate=False)
    try:
        rows = describe_schedules(rt.app, rt.store, now=rt.clock.now(), count=count)
    finally:
        rt.close()
    if as_json:
        _print_json(rows)
        return
    for r in rows:
        origin = (", run-time edit (overrides the code until a deploy changes it)"
                  if r.get("origin") == "runtime" else "")
        task = f"{r['task']} to {r['target']}" if r.get("target") else r["task"]
        click.echo(f"{r['key']}: {r['expression']} in {r['tz']} -> {task} [{r['state']}{origin}]"
                   + (f" (last fire {r['last_fire_local']})" if r["last_fire_local"] else "")
                   + (f" (manual run {r['last_manual_local']})" if r.get("last_manual_local") else ""))
        click.echo(f"    catch-up {r['catchup']} within {_words(r['catchup_window'])}; DST gap {r['dst_gap']}, "
                   f"fold {r['dst_fold']}; overlap {r['overlap']}")
        for n in r["next"]:
            click.echo(f"    next {n['local']}   = {n['utc']}")
        if r["state"] == "paused":
            click.echo(f"    paused: nothing fires until `oncebeat schedules resume {r['key']}`")


@schedules.command(name="describe")
@click.argument("key")
@DB_OPTION
@CONFIG_OPTION
@APP_OPTION
@click.option("--count", default=5, show_default=True, type=click.IntRange(1, 100), help="Next fires to show.")
@click.option("--history", default=10, show_default=True, type=click.IntRange(0, 1000), help="Ledger rows to show.")
@click.option("--json", "as_json", is_flag=True)
def schedules_describe(key: str, database_url: str | None, config: Path | None, app: str | None, count: int,
                       history: int, as_json: bool) -> None:
    """One schedule: its definition and origin, state, next fires (local and UTC) and its newest occurrences."""
    from .schedule_admin import describe_schedule

    rt = _runtime(config=config, database_url=database_url, app=app, migrate=False)
    try:
        s = describe_schedule(rt.store, rt.app, key, now=rt.clock.now(), count=count, history=history)
    finally:
        rt.close()
    if as_json:
        _print_json(s)
        return
    origin = "run-time edit" if s["origin"] == "runtime" else s["origin"]
    task = f"{s['task']} to {s['target']}" if s.get("target") else s["task"]
    click.echo(f"{s['key']}: {s['describe']} -> {task} on queue {s['queue']}")
    click.echo(f"  state {s['state']}, origin {origin}, version {s['version']}; catch-up {s['catchup']} "
               f"(window {_words(s['catchup_window'])}), overlap {s.get('overlap', 'allow')}, DST gap {s['dst_gap']}, "
               f"fold {s['dst_fold']}")
    for n in s["next"]:
        click.echo(f"  next {n['local']}   = {n['utc']}" + (f"   ({n['dst']})" if n.get("dst") else ""))
    for o in s["occurrences"]:
        why = f" ({o['reason']})" if o.get("reason") else ""
        job = f", job {o['job_id']} {o['job_state']}" if o.get("job_id") else ""
        click.echo(f"  occurrence {o['id']}: {_utc(o['fire_at'])} {o['outcome']}{why}{job} by "
                   f"{o['source_kind']}@{o['source_host']}")


@schedules.command(name="next")
@click.argument("expression")
@click.option("--tz", required=True, help="IANA zone, e.g. America/Chicago.")
@click.option("--after", default=None, help="ISO instant with offset (default now).")
@click.option("--count", default=5, show_default=True, type=click.IntRange(1, 1000))
@click.option("--dst-gap", type=click.Choice(["shift", "skip"]), default="shift", show_default=True)
@click.option("--dst-fold", type=click.Choice(["first", "second", "both"]), default="first", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of ISO instants with offsets.")
def schedules_next(expression: str, tz: str, after: str | None, count: int, dst_gap: str, dst_fold: str,
                   as_json: bool) -> None:
    """Print the next fire instants of EXPRESSION in ZONE (no database needed)."""
    from .schedules import Schedule
    from .timebase import SystemClock

    sched = Schedule(expression=expression, tz=tz, dst_gap=dst_gap, dst_fold=dst_fold)
    t = _parse_instant(after, "--after") if after else SystemClock().now()
    out = []
    for _ in range(count):
        t = sched.next_after(t)
        out.append(sched.local(t))
    if as_json:
        _print_json([x.isoformat() for x in out])
    else:
        for x in out:
            click.echo(f"{x.isoformat()}  ({x.tzname()})  = {x.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}")


def _set_state(key: str, state: str, database_url: str | None, config: Path | None, app: str | None) -> None:
    from .pauses import held_jobs
    from .schedule_admin import pause_schedule, resume_schedule

    verb = pause_schedule if state == "paused" else resume_schedule
    rt = _runtime(config=config, database_url=database_url, app=app)
    try:
        held = sum(h.n for h in held_jobs(rt.store, schedule_key=key) if h.kind == "schedule")
        changed = verb(rt.store, rt.app, key, source=_operator(), clock=rt.clock)
        if state == "paused":
            held = sum(h.n for h in held_jobs(rt.store, schedule_key=key) if h.kind == "schedule")
    finally:
        rt.close()
    if not changed:
        click.echo(f"{key}: no change (already {state})")
    elif state == "paused":
        click.echo(f"{key}: paused; {held} queued run(s) held (no worker takes them) until "
                   f"`oncebeat schedules resume {key}`; a run already running finishes")
    else:
        click.echo(f"{key}: resumed; {held} held run(s) released, each runs once; the occurrences during the "
                   "pause stay recorded 'paused' (no burst)")


@schedules.command(name="pause")
@click.argument("key")
@DB_OPTION
@CONFIG_OPTION
@APP_OPTION
def schedules_pause(key: str, database_url: str | None, config: Path | None, app: str | None) -> None:
    """Pause KEY: its occurrences are recorded 'paused' and enqueue nothing."""
    _set_state(key, "paused", database_url, config, app)


@schedules.command(name="resume")
@click.argument("key")
@DB_OPTION
@CONFIG_OPTION
@APP_OPTION
def schedules_resume(key: str, database_url: str | None, config: Path | None, app: str | None) -> None:
    """Resume KEY from now on (no burst of the occurrences paused)."""
    _set_state(key, "active", database_url, config, app)


@schedules.command(name="set")
@click.argument("key")
@click.option("--cron", "cron", default=None, metavar="EXPR", help='A 5-field cron expression, e.g. "30 9 * * 1-5".')
@click.option("--every", "every", default=None, metavar="N<unit>", help="A fixed interval instead: 30s, 5m, 2h, 1d.")
@click.option("--tz", default=None, help="IANA zone, e.g. Europe/Paris.")
@click.option("--dst-gap", type=click.Choice(["shift", "skip"]), default=None)
@click.option("--dst-fold", type=click.Choice(["first", "second", "both"]), default=None)
@click.option("--catchup", type=click.Choice(["none", "latest", "all"]), default=None)
@click.option("--catchup-window", type=SECONDS_NONNEGATIVE, default=None, metavar="DURATION",
              help="24h, 90m, 1h30m, 2d or seconds.")
@click.option("--overlap", type=click.Choice(["allow", "skip", "buffer_one"]), default=None,
              help="Whether a run may start while the previous one is unfinished.")
@DB_OPTION
@CONFIG_OPTION
@APP_OPTION
def schedules_set(key: str, cron: str | None, every: str | None, tz: str | None, dst_gap: str | None,
                  dst_fold: str | None, catchup: str | None, catchup_window: float | None, overlap: str | None,
                  database_url: str | None, config: Path | None, app: str | None) -> None:
    """Change KEY at run time: a new definition version every clock picks up without a restart.

    The database overrides the code's definition until a deploy changes that definition.
    """
    from .schedule_admin import set_schedule

    if cron and every:
        raise click.UsageError("give --cron or --every, not both")
    expression = cron or (f"every {every}" if every else None)
    rt = _runtime(config=config, database_url=database_url, app=app)
    try:
        edit = set_schedule(rt.store, key, expression=expression, tz=tz, dst_gap=dst_gap, dst_fold=dst_fold,
                            catchup=catchup, catchup_window=catchup_window, overlap=overlap,
                            source=_operator(), clock=rt.clock)
    finally:
        rt.close()
    new = edit["new"]
    if not edit["changed"]:
        click.echo(f"{key}: no change (already {new['expression']} in {new['tz']})")
        return
    click.echo(f"{key}: version {edit['version']}, {new['expression']} in {new['tz']} (DST gap {new['dst_gap']}, "
               f"fold {new['dst_fold']}; catch-up {new['catchup']}, window {_words(new['catchup_window'])}; "
               f"overlap {new['overlap']})")
    click.echo("every clock picks it up at its next re-read (30 s) without a restart; it overrides the code's "
               "definition until a deploy changes that definition")


@schedules.command(name="revert")
@click.argument("key")
@DB_OPTION
@CONFIG_OPTION
@APP_OPTION
def schedules_revert(key: str, database_url: str | None, config: Path | None, app: str | None) -> None:
    """Undo KEY's run-time edits: the code's definition again, from now on, without a restart."""
    from .schedule_admin import revert_schedule

    rt = _runtime(config=config, database_url=database_url, app=app)
    try:
        edit = revert_schedule(rt.store, rt.app, key, source=_operator(), clock=rt.clock)
    finally:
        rt.close()
    new = edit["new"]
    if not edit["changed"]:
        click.echo(f"{key}: no change (no run-time edit: it runs the code's {new['expression']} in {new['tz']})")
        return
    old = edit["old"]
    click.echo(f"{key}: version {edit['version']}, back to the code's {new['expression']} in {new['tz']} (was "
               f"{old['expression']} in {old['tz']}); every clock picks it up at its next re-read (30 s)")


@schedules.command(name="retire")
@click.argument("key")
@DB_OPTION
@CONFIG_OPTION
@APP_OPTION
def schedules_retire(key: str, database_url: str | None, config: Path | None, app: str | None) -> None:
    """Retire KEY: it never fires again on any clock, whatever the code defines."""
    from .schedule_admin import retire_schedule

    rt = _runtime(config=config, database_url=database_url, app=app)
    try:
        retired = retire_schedule(rt.store, key, source=_operator(), clock=rt.clock)
    finally:
        rt.close()
    click.echo(f"{key}: retired" if retired else f"{key}: already retired")


@click.group()
def occurrences() -> None:
    """The occurrence ledger: make-up runs."""


@occurrences.command(name="rerun")
@click.argument("occurrence_id", type=int)
@DB_OPTION
@CONFIG_OPTION
@APP_OPTION
def occurrences_rerun(occurrence_id: int, database_url: str | None, config: Path | None, app: str | None) -> None:
    """Run occurrence ID again: a manual run linked to it, for its business date (refused while its job runs)."""
    from .schedule_admin import rerun_occurrence

    rt = _runtime(config=config, database_url=database_url, app=app)
    try:
        fire = rerun_occurrence(rt.store, occurrence_id, source=_operator(), clock=rt.clock, app=rt.app)
    finally:
        rt.close()
    click.echo(f"re-run of occurrence {occurrence_id}: {fire.describe()}")
