"""The options and helpers every ``oncebeat`` command shares: ``--db``, ``--config``, ``--app``, ``--time-source``,
the runtime a command opens, the operator it records, instants, dates and durations read from the command line, and
JSON and one-line output.

The command rooms (``cli_processes``, ``cli_schedules``, ``cli_queues``, ``cli_reminders``, ``cli_demo``,
``cli_doctor``, ...) import these from here, never from :mod:`oncebeat.cli`: ``python -m oncebeat.cli`` runs that
module as ``__main__``, and a room importing it back would build a second command tree.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import click

# oncebeat.queue.JOB_STATES, written out so that parsing the command line imports no database driver
# (tests/acceptance/test_cli.py checks that the two agree)
JOB_STATES = ("available", "scheduled", "running", "retryable", "completed", "discarded", "cancelled", "in_doubt")

CONFIG_OPTION = click.option("--config", type=click.Path(path_type=Path), default=None,
                             help="Policy file (default ./oncebeat.toml, or ONCEBEAT_CONFIG).")
DB_OPTION = click.option("--db", "database_url", default=None, metavar="URL",
                         help="Database URL (default DATABASE_URL, else sqlite:///oncebeat.db).")
APP_OPTION = click.option("--app", default=None, metavar="MODULE:APP",
                          help="Your own oncebeat.App (tasks and schedules) instead of the reminder app.")
TIME_SOURCE_OPTION = click.option(
    "--time-source", type=click.Choice(["host", "database"]), default="host", show_default=True,
    envvar="ONCEBEAT_TIME_SOURCE",
    help="Where the clock reads the time: this host's wall clock, or PostgreSQL's clock_timestamp() "
         "(one clock for every host; env ONCEBEAT_TIME_SOURCE).")


def _print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, default=str, ensure_ascii=False))


def _operator() -> Any:
    """The provenance of a person's action through this CLI: kind ``cli`` with its operator (login user, whether
    stdin is a terminal), kept in the audit trail so the doctor tells it from a leftover cron entry."""
    from .provenance import cli_operator, current_source

    return current_source("cli", operator=cli_operator())


def _runtime(**kwargs: Any) -> Any:
    """The reminder app's runtime, or with ``app=`` a library user's engine deployment (no reminder app loaded)."""
    if kwargs.get("app"):
        from .deploy import open_deployment

        return open_deployment(kwargs["app"], url=kwargs.get("database_url"), migrate=kwargs.get("migrate", True))
    from .reminders.runtime import load_runtime

    return load_runtime(**kwargs)


def _traces(role: str, store: Any) -> None:
    """OpenTelemetry spans when the standard OTEL_* variables ask for them (oncebeat.tracing); one trace per
    occurrence across the clock and the workers of one database."""
    from .store import redact_url
    from .tracing import configure_from_env

    configure_from_env(role, namespace=redact_url(store.url))


def _printable(text: str) -> str:
    """``text`` for a one-line report: line breaks and other unprintable characters shown escaped (``\\n``)."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in str(text))


def _parse_instant(text: str, what: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError as exc:
        raise click.BadParameter(f"{text!r} is not an ISO instant such as "
                                 "2026-03-08T08:00:00-06:00", param_hint=what) from exc
    if value.tzinfo is None:
        raise click.BadParameter(f"{text!r} has no UTC offset; add one (e.g. +00:00 or -06:00)", param_hint=what)
    return value.astimezone(UTC)


def _parse_date(text: str | None, what: str) -> date | None:
    if text is None:
        return None
    try:
        day = date.fromisoformat(text)
    except ValueError as exc:
        raise click.BadParameter(f"{text!r} is not a date YYYY-MM-DD", param_hint=what) from exc
    if not 1900 <= day.year <= 2999:  # a day the date arithmetic of a run or a report can reach past year 9999
        raise click.BadParameter(f"{text!r} is outside the years 1900 to 2999", param_hint=what)
    return day


MAX_PROBLEMS_SHOWN = 50


def _echo_problems(problems: list[str], errors_file: Path | None, *, total: int | None = None) -> None:
    """Print the first problems and how many more there are (``total`` found; all of them are in ``errors_file``)."""
    total = len(problems) if total is None else total
    for problem in problems[:MAX_PROBLEMS_SHOWN]:
        click.echo(f"  {problem}", err=True)
    if total > MAX_PROBLEMS_SHOWN:
        where = f"all {total:,} are in {errors_file}" if errors_file else "--errors-file FILE writes them all"
        click.echo(f"  … and {total - MAX_PROBLEMS_SHOWN:,} more problem(s) ({where})", err=True)


def _words(seconds: float) -> str:
    """A duration as the CLI prints it and reads it back: ``24h``, ``90m``, ``2d`` (``86400`` seconds: ``24h``)."""
    from .durations import format_duration

    return format_duration(float(seconds))


class _Seconds(click.ParamType):  # type: ignore[type-arg]  # ParamType is generic only in newer click
    """A duration: seconds (``86400``) or in words (``24h``, ``90m``, ``1h30m``, ``2d``); finite, above 0 (or at
    least 0 when ``zero`` is allowed), at most a year."""

    name = "seconds"

    def __init__(self, *, zero: bool) -> None:
        self.zero = zero

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        from .durations import parse_duration

        try:
            seconds = float(value)
        except (TypeError, ValueError):
            try:
                seconds = parse_duration(str(value))
            except ValueError:
                self.fail(f"{value!r} is not a duration: give a number of seconds (86400) or 24h, 90m, 1h30m, 2d",
                          param, ctx)
        low = "0" if self.zero else "more than 0"
        if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not self.zero) or seconds > 366 * 86400:
            self.fail(f"{value!r}: give a number of seconds, {low} and at most 31622400 (a year)", param, ctx)
        return seconds


SECONDS_POSITIVE = _Seconds(zero=False)
SECONDS_NONNEGATIVE = _Seconds(zero=True)


def _utc(instant: datetime | None) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if instant is not None else "?"
