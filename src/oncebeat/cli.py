"""The ``oncebeat`` command: parse, call the library, print. No business logic here.

This module holds the command group, the logging options every command takes, ``init`` and ``migrate``, and
``main``; the commands live in rooms beside it, each added to the group below: ``cli_processes`` (clock, worker,
run, web, tick), ``cli_schedules`` (trigger, backfill, schedules, occurrences), ``cli_queues`` (jobs, queues,
effects, prune), ``cli_reminders`` (import, sync, sources, preview, aging, reminders), ``cli_demo`` (demo,
simulate, mailsink), ``cli_doctor`` (check, doctor), ``cli_holds``, ``cli_reports``, ``cli_policies``,
``cli_evidence`` and ``cli_jobs``. Their shared options and helpers are :mod:`oncebeat.cli_common`'s.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import click

from . import cli_common
from .cli_common import APP_OPTION as APP_OPTION
from .cli_common import CONFIG_OPTION as CONFIG_OPTION
from .cli_common import DB_OPTION as DB_OPTION
from .cli_common import JOB_STATES as JOB_STATES
from .cli_common import MAX_PROBLEMS_SHOWN as MAX_PROBLEMS_SHOWN
from .cli_common import SECONDS_NONNEGATIVE as SECONDS_NONNEGATIVE
from .cli_common import SECONDS_POSITIVE as SECONDS_POSITIVE
from .cli_common import TIME_SOURCE_OPTION as TIME_SOURCE_OPTION
from .cli_common import _echo_problems
from .cli_demo import demo, mailsink, simulate
from .cli_doctor import check, doctor
from .cli_evidence import register as register_evidence
from .cli_holds import register as register_holds
from .cli_jobs import register as register_jobs
from .cli_policies import register as register_policies
from .cli_processes import _warn_about_skew as _warn_about_skew  # tests/backends/test_lease_clock.py
from .cli_processes import clock, run, tick, web, worker
from .cli_queues import effects, jobs, prune, queues
from .cli_reminders import aging, import_, preview, reminders, sources, sync
from .cli_reports import register as register_reports
from .cli_schedules import backfill, occurrences, schedules, trigger
from .errors import ImportRejected, OncebeatError
from .logconfig import FORMATS as LOG_FORMATS
from .logconfig import LEVELS as LOG_LEVELS
from .logconfig import configure as configure_logging
from .redact import redact_url, remember_secrets

# Long-running processes log at INFO by default: their start and stop lines, one line per job and per fire.
LONG_RUNNING = ("clock", "worker", "run", "web")


def _logging_option(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Store a logging option given before or after the subcommand and (re)configure logging from all of them.

    Options are parsed before the command runs, so the command logs as its options say from its first line.
    """
    meta = ctx.find_root().meta
    if value not in (None, False):
        meta[param.name] = value
    command = ctx.info_name if ctx.parent is not None else None
    level = meta.get("log_level") or ("info" if meta.get("verbose") or command in LONG_RUNNING else "warning")
    configure_logging(level, meta.get("log_format") or "text")
    return value


_VERBOSE = click.option("-v", "--verbose", is_flag=True, expose_value=False, callback=_logging_option,
                        help="Log at INFO level (the default of clock, worker, run and web).")
_LOG_LEVEL = click.option("--log-level", type=click.Choice(LOG_LEVELS), default=None, expose_value=False,
                          envvar="ONCEBEAT_LOG_LEVEL", callback=_logging_option,
                          help="Log level (env ONCEBEAT_LOG_LEVEL; default warning, info for long-running processes).")
_LOG_FORMAT = click.option("--log-format", type=click.Choice(LOG_FORMATS), default=None, expose_value=False,
                           envvar="ONCEBEAT_LOG_FORMAT", callback=_logging_option,
                           help="text lines, or one JSON object per line for log drains (env ONCEBEAT_LOG_FORMAT).")


def _logging_options(fn: Any) -> Any:
    """-v, --log-level, --log-format: accepted before the subcommand and after it (on every subcommand)."""
    return _VERBOSE(_LOG_LEVEL(_LOG_FORMAT(fn)))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@_logging_options
@click.version_option(package_name="oncebeat")
def cli() -> None:
    """oncebeat: scheduled jobs that run exactly once, and overdue-invoice reminders built on them."""
    import os

    for name in ("DATABASE_URL", "SMTP_URL"):
        remember_secrets(os.environ.get(name))


# --- setup ---------------------------------------------------------------------------------------
@cli.command()
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
@click.argument("path", default="oncebeat.toml", type=click.Path(path_type=Path))
def init(path: Path, force: bool) -> None:
    """Write a commented oncebeat.toml with the default policy."""
    from .reminders.policy import write_default_config

    write_default_config(path, force=force)
    click.echo(f"wrote {path}")


@cli.command()
@DB_OPTION
@APP_OPTION
def migrate(database_url: str | None, app: str | None) -> None:
    """Create or upgrade the database schema (safe to run from many processes at once).

    The engine's tables always; the reminder app's too unless --app names a library user's app (then the
    SQL lines that app's modules register).
    """
    from .deploy import database_url as deployment_url
    from .deploy import load_app
    from .store import open_store

    if app:
        load_app(app)  # importing it registers its SQL lines, if it has any
    else:
        import oncebeat.reminders  # noqa: F401 - registers the reminder app's SQL line
    with open_store(deployment_url(database_url)) as store:
        applied = store.migrate()
        versions = store.schema_versions()
        folded = 0
        if not app:  # the reminder app's customers without a stored folded name (reminders 0024), in batches
            from .reminders.names import backfill_folded_names

            folded = backfill_folded_names(store)
    done = ", ".join(f"{line} {version:04d}" for line, version in applied) or "nothing"
    at = ", ".join(f"{line} {max(v):04d}" for line, v in sorted(versions.items()) if line)
    names = f"; folded {folded:,} customers' names" if folded else ""
    click.echo(f"{store.url}: applied {done}; schema at {at}{names}")


def _add_logging_options(group: click.Group) -> None:
    """Give every subcommand (and theirs) the logging options, so `oncebeat worker -v` works as `oncebeat -v worker`."""
    for command in group.commands.values():
        if not any(p.name == "log_level" for p in command.params):
            for option in (_VERBOSE, _LOG_LEVEL, _LOG_FORMAT):  # appended in this order after the command's own
                option(command)
        if isinstance(command, click.Group):
            _add_logging_options(command)


# The rooms' commands, then the commands the older rooms build from the shared helpers (:mod:`.cli_common`); the
# logging options go on last, onto every command and subcommand.
for _command in (clock, worker, run, web, tick, trigger, backfill, schedules, occurrences, jobs, queues, effects, prune,
                 import_, sync, sources, preview, aging, reminders, demo, simulate, mailsink, check, doctor):
    cli.add_command(_command)
for _register in (register_holds, register_reports, register_policies, register_evidence):
    _register(cli, cli_common)
register_jobs(jobs, cli_common)
_add_logging_options(cli)


def main() -> None:
    """Entry point: run the CLI; print oncebeat errors as one clear message (exit status 2).

    Exit status: 0 fine, 1 a finding (``check``: an invariant violated; ``doctor``: an error found), 2 bad
    input, configuration or an internal error (the command could not do its job), 3 ``check``: every invariant
    holds but reminders failed (not delivered), 4 ``check``: none failed but due reminders are delayed.
    """
    try:
        cli.main(standalone_mode=False)
    except ImportRejected as exc:
        click.echo(redact_url(f"error: {exc}"), err=True)
        _echo_problems([redact_url(str(p)) for p in exc.problems], None)
        sys.exit(2)
    except OncebeatError as exc:
        click.echo(redact_url(f"error: {exc}"), err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:  # a bug, not a finding: exit 2 so `check`/`doctor` never look like "violation found" (1)
        logging.getLogger("oncebeat").info("internal error", exc_info=True)
        click.echo(f"error: internal error ({type(exc).__name__}: {redact_url(str(exc))}); this is a bug in "
                   "oncebeat, not a finding. Run with -v for the traceback.", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
