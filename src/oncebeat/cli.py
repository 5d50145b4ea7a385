"""The ``oncebeat`` command: parse, call the library, print. No business logic here."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import click

from .errors import ImportRejected, OncebeatError
from .logconfig import FORMATS as LOG_FORMATS
from .logconfig import LEVELS as LOG_LEVELS
from .logconfig import configure as configure_logging
from .redact import redact_url, remember_secrets

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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@_logging_options
@click.version_option(package_name="oncebeat")
def cli() -> None:
    """oncebeat: scheduled jobs that run exactly once, and overdue-invoice reminders built on them."""
    import os

    for name in ("DATABASE_URL", "SMTP_URL"):
        remember_secrets(os.environ.get(name))


# --- the main job --------------------------------------------------------------------------------
@cli.command()
@click.option("--days", default=60, show_default=True, type=click.IntRange(1, 3650), help="Simulated days to run.")
@click.option("--seed", default=7, show_default=True, help="Seed of the generated invoice book.")
@click.option("--invoices", "invoices_csv", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Use this invoice CSV (documented format) instead of the generated book.")
@click.option("--payments", "payments_csv", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Payments (invoice_number,paid_on) arriving during the run.")
@click.option("--start", default=None, help="First simulated day, YYYY-MM-DD.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 16))
@click.option("--dir", "workdir", default="oncebeat-demo", show_default=True, type=click.Path(path_type=Path),
              help="Working folder (recreated): database and Maildir.")
@CONFIG_OPTION
@click.option("--send-zone", type=click.Choice(["customer", "schedule"]), default="customer", show_default=True,
              help="Send each reminder at send_at on the customer's calendar, or at the schedule's time for all.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def demo(days: int, seed: int, invoices_csv: Path | None, payments_csv: Path | None, start: str | None,
         workers: int, workdir: Path, config: Path | None, as_json: bool, send_zone: str | None) -> None:
    """Run the reminder schedule over simulated days, exactly once, through a real local SMTP server.

    Payments arrive on the business day: one dated D at the start of D in the schedule's zone (before
    that day's run), or at its exact paid_at (payments file column, ISO instant with offset).
    """
    from .reminders.policy import load_policy
    from .sample import run_demo

    policy = load_policy(config)
    if send_zone is not None:
        policy = dataclasses.replace(policy, send_zone=send_zone)
    if as_json:
        result = run_demo(workdir=workdir, days=days, seed=seed, invoices_csv=invoices_csv, payments_csv=payments_csv,
                          policy=policy, start=_parse_date(start, "--start"), workers=workers)
        _print_json(result.as_dict())
    else:
        # a progress bar only on a terminal: piped or logged output gets the summary alone
        bar: Any = (click.progressbar(length=days, label="simulated days", file=sys.stderr) if sys.stderr.isatty()
                    else contextlib.nullcontext(None))
        with bar as bar:
            result = run_demo(workdir=workdir, days=days, seed=seed, invoices_csv=invoices_csv,
                              payments_csv=payments_csv, policy=policy, start=_parse_date(start, "--start"),
                              workers=workers, progress=bar.update if bar is not None else None)
        click.echo(f"\noncebeat demo: {result.days} simulated days from {result.start[:10]}, schedule "
                   f"'{policy.scan_schedule}' in {policy.tz}")
        click.echo(f"  invoices:            {result.invoices}")
        click.echo(f"  reminders:           {', '.join(f'{n} {s}' for s, n in result.reminders.items()) or 'none'}")
        for stage, states in sorted(result.reminders_by_stage.items(), key=lambda kv: int(kv[0])):
            click.echo(f"    stage {stage:>4}:        {', '.join(f'{n} {s}' for s, n in sorted(states.items()))}")
        click.echo(f"  messages in Maildir: {result.messages_delivered}")
        if policy.send_zone == "customer":
            click.echo(f"  on their own {policy.send_at}: {result.on_time} sent at {policy.send_at} local time in the "
                       f"customer's zone ({result.zones} zones), {result.backlog} already due at the first scan")
        click.echo(f"  languages:           {', '.join(f'{n} {lang}' for lang, n in result.languages.items())}")
        click.echo(f"  duplicates:          {result.duplicates}   (same invoice and stage delivered twice, "
                   "counted from the Maildir)")
        click.echo(f"  lost:                {result.lost}   (due reminders with no final state)")
        click.echo(f"  in doubt:            {result.in_doubt}")
        click.echo(f"  wall time:           {result.wall_seconds:.1f} s")
        click.echo(f"  database {result.database}, Maildir {result.maildir}")
        for example in result.lost_examples:
            click.echo(f"  lost: {example}")
    if result.duplicates or result.lost:
        sys.exit(1)


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
    done = ", ".join(f"{line} {version:04d}" for line, version in applied) or "nothing"
    at = ", ".join(f"{line} {max(v):04d}" for line, v in sorted(versions.items()) if line)
    click.echo(f"{store.url}: applied {done}; schema at {at}")


@cli.command(name="import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--payments", "is_payments", is_flag=True,
              help="PATH holds payments (invoice_number, paid_on, optional paid_at).")
@click.option("--stripe", "is_stripe", is_flag=True,
              help="PATH holds Stripe invoice objects: an API list response, a JSON array or JSON lines.")
@click.option("--map", "column_map", multiple=True, metavar="OURS=THEIRS,…",
              help="Columns of another export: a header name (invoice_number=InvoiceNo), a constant "
                   "(currency=const:USD) or a template (customer_email=template:{CustomerID}@billing.example.test).")
@click.option("--date-format", default=None, metavar="iso|dmy|mdy|STRFTIME",
              help="How dates are written: iso (YYYY-MM-DD, default), dmy (31/1/2026), mdy (1/31/2026) or a "
                   "strftime pattern such as %m/%d/%Y or '%Y-%m-%d %H:%M:%S'.")
@click.option("--currency", "default_currency", default=None, metavar="CODE",
              help="Currency of rows without one (e.g. USD); the currency column becomes optional.")
@click.option("--due-days", type=click.IntRange(0, 3650), default=None, metavar="N",
              help="Due date = issue date + N days for rows without one (net terms); due_on becomes optional.")
@click.option("--skip-invalid", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="REJECTS.csv",
              help="Apply the valid rows and write the invalid ones (with an error column) to this file.")
@click.option("--reopen", is_flag=True,
              help="An explicit reopen: each row's status wins (by default statuses move forward only, and a paid "
                   "invoice stays paid unless a row says open with a status_on after its payment).")
@click.option("--errors-file", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="ERRORS.txt",
              help=f"Write every problem here, one per line (the screen shows the first {50}).")
@DB_OPTION
@CONFIG_OPTION
def import_(path: Path, is_payments: bool, is_stripe: bool, column_map: tuple[str, ...], date_format: str | None,
            default_currency: str | None, due_days: int | None, skip_invalid: Path | None, reopen: bool,
            errors_file: Path | None, database_url: str | None, config: Path | None) -> None:
    """Import invoices (upsert by invoice number) or payments from CSV (or .csv.gz). All rows or nothing.

    A raw export imports in one command, e.g. an accounts-receivable export with US dates, no currency
    and customer ids instead of emails:

    \b
      oncebeat import ar.csv --date-format %m/%d/%Y --currency USD --due-days 30 \\
        --map "invoice_number=InvoiceId,amount_due=Total,issued_on=InvoiceDate" \\
        --map "customer_email=template:{CustomerId}@billing.example.test" \\
        --map "customer_name=template:Customer {CustomerId}"
    """
    from .reminders.bulk import BulkOptions
    from .reminders.conversions import DateFormat
    from .reminders.importing import (
        INVOICE_CSV_HELP,
        PAYMENT_COLUMNS,
        PAYMENT_OPTIONAL_COLUMNS,
        check_output_path,
        parse_column_map,
        write_problems,
        write_rejects,
    )
    from .reminders.stripe import read_stripe_invoices

    if is_payments and is_stripe:
        raise click.UsageError("--payments and --stripe exclude each other: a Stripe export carries each invoice's "
                               "payment (status paid, status_transitions.paid_at)")
    columns = PAYMENT_COLUMNS + PAYMENT_OPTIONAL_COLUMNS if is_payments else None
    mapping = parse_column_map(column_map, **({"columns": columns} if columns else {}))
    fmt = DateFormat.parse(date_format)
    for option, output in (("--skip-invalid", skip_invalid), ("--errors-file", errors_file)):
        if output is not None:  # before anything is read or committed
            check_output_path(output, path, option=option)
    rt = _runtime(config=config, database_url=database_url)
    bar: Any = None

    def progress(done: int, total: int) -> None:  # bytes of the file read; called every 10,000 rows
        nonlocal bar
        if bar is None:
            bar = click.progressbar(length=total, label=f"checking {path.name}", file=sys.stderr)
            bar.__enter__()
        bar.update(done - bar.pos)

    def on_apply(valid: int, rows: int) -> None:
        nonlocal bar
        if bar is not None:
            bar.__exit__(None, None, None)
            bar = None
        if valid:
            what = "payments" if is_payments else "invoices"
            click.echo(f"applying {valid:,} {what} of {rows:,} rows in one transaction", err=True)

    errors_written = False
    try:
        today = rt.clock.now().astimezone(rt.policy.zone).date()
        if is_stripe:
            found = read_stripe_invoices(path, tz=rt.policy.tz, due_days=due_days)
            data = found.data
            click.echo(f"{path.name}: {data.rows_read} Stripe invoice(s); left out: {found.drafts} draft(s), "
                       f"{found.nothing_due} with nothing due", err=True)
            if errors_file is not None and data.problems:
                write_problems(errors_file, [str(p) for p in data.problems])
                errors_written = True
            if data.problems and skip_invalid is None:
                raise ImportRejected(f"{len(data.problems)} problem(s) in {path}; nothing imported. Fix them, or use "
                                     "--skip-invalid REJECTS.csv to import the valid rows.",
                                     [str(p) for p in data.problems])
            result = rt.service.apply_import(data, skip_invalid=True, reopen=reopen, watermark="stripe")
            if data.problems and skip_invalid is not None:
                n = write_rejects(skip_invalid, data.header, data.rejected_lines, data.problems)
                _echo_problems([str(p) for p in data.problems], errors_file)
                click.echo(f"{n} invalid row(s) written to {skip_invalid}", err=True)
        else:
            # Streamed: every row checked, then applied in one transaction (or nothing), in bounded memory.
            options = BulkOptions(column_map=mapping, date_format=fmt, default_currency=default_currency,
                                  due_days=due_days, today=today, skip_invalid=skip_invalid is not None,
                                  rejects=skip_invalid, errors_file=errors_file, reopen=reopen, progress=progress,
                                  on_apply=on_apply, calendar=rt.policy.calendar,
                                  on_problems=lambda first, total: _echo_problems(first, errors_file, total=total))
            errors_written = True  # the import writes the errors file itself (every problem)
            if is_payments:
                result = rt.service.import_payments_csv(path, options)
            else:
                result = rt.service.import_invoices_csv(path, options)
            if bar is not None:
                bar.__exit__(None, None, None)
            if result.get("rejected") and skip_invalid is not None:
                where = f"; every problem is in {errors_file}" if errors_file else ""
                click.echo(f"{result['rejected']:,} invalid row(s) written to {skip_invalid}{where}", err=True)
    except ImportRejected as exc:
        if bar is not None:
            bar.__exit__(None, None, None)
        if errors_file is not None and not errors_written:
            write_problems(errors_file, exc.problems)
        help_text = "" if is_stripe or is_payments else "\n" + INVOICE_CSV_HELP
        click.echo(redact_url(f"error: {exc}") + help_text, err=True)
        _echo_problems([redact_url(str(p)) for p in exc.problems], errors_file, total=exc.total)
        sys.exit(2)
    finally:
        rt.close()
    click.echo(", ".join(f"{k}: {v}" for k, v in result.items()))


MAX_PROBLEMS_SHOWN = 50


def _echo_problems(problems: list[str], errors_file: Path | None, *, total: int | None = None) -> None:
    """Print the first problems and how many more there are (``total`` found; all of them are in ``errors_file``)."""
    total = len(problems) if total is None else total
    for problem in problems[:MAX_PROBLEMS_SHOWN]:
        click.echo(f"  {problem}", err=True)
    if total > MAX_PROBLEMS_SHOWN:
        where = f"all {total:,} are in {errors_file}" if errors_file else "--errors-file FILE writes them all"
        click.echo(f"  … and {total - MAX_PROBLEMS_SHOWN:,} more problem(s) ({where})", err=True)


# --- the team's own database ([source]) ---------------------------------------------------------
@cli.command()
@DB_OPTION
@CONFIG_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
def sync(database_url: str | None, config: Path | None, as_json: bool) -> None:
    """Read the team's own database ([source] in oncebeat.toml) now and apply it: all or nothing.

    Prints the counts; exit 2 with every problem (query, row, column) when the read is refused or the source
    cannot be reached (recorded in `oncebeat sources` either way).
    """
    from .reminders.sources.database import SourceRejected, SourceUnavailable
    from .reminders.syncing import sync_source

    rt = _runtime(config=config, database_url=database_url)
    try:
        if rt.policy.source is None:
            raise click.UsageError("no [source] section in the policy file: add one (see README, \"Read your own "
                                   "database\") or pass --config")
        result = sync_source(rt.service, rt.policy.source, quiet=True)
    except SourceRejected as exc:
        click.echo(redact_url(f"error: {exc.summary}:"), err=True)
        _echo_problems([redact_url(str(p)) for p in exc.problems], None, total=exc.total)
        sys.exit(2)
    except SourceUnavailable as exc:
        click.echo(redact_url(f"error: {exc}; nothing was applied (the read is recorded as failed)"), err=True)
        sys.exit(2)
    finally:
        rt.close()
    if as_json:
        _print_json(result)
    else:
        click.echo(", ".join(f"{k}: {v}" for k, v in result.items()))


@cli.command()
@DB_OPTION
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 1000))
@click.option("--json", "as_json", is_flag=True, help="Print the reads as JSON.")
def sources(database_url: str | None, limit: int, as_json: bool) -> None:
    """List the latest reads of the team's own database, newest first, with the last successful one (the
    freshness watermark) of each source."""
    from .reminders.syncing import last_good_read, recent_reads

    rt = _runtime(database_url=database_url, migrate=False)
    try:
        reads = recent_reads(rt.store, limit)
        good = {name: last_good_read(rt.store, name) for name in {r["source"] for r in reads}}
    finally:
        rt.close()
    if as_json:
        _print_json({"reads": reads, "last_good": good})
        return
    if not reads:
        click.echo("no reads recorded yet: add a [source] section and run `oncebeat sync`")
        return
    for name, row in sorted(good.items()):
        when = row["started_at"].isoformat() if row else "never"
        click.echo(f"{name}: last successful read {when}")
    for r in reads:
        click.echo(f"  {r['started_at'].isoformat()}  {r['outcome']:<8} {r['rows']:>7} rows  {r['source']}")
        if r["error"]:
            click.echo(f"      {r['error']}")


# --- processes -----------------------------------------------------------------------------------
def _metrics_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option("--metrics-host", default="127.0.0.1", show_default=True,
                      help="Address of the --metrics-port listener.")(fn)
    return click.option("--metrics-port", default=None, type=click.IntRange(1, 65535),
                        help="Serve this process's Prometheus metrics (/metrics) on this port; with "
                             "PROMETHEUS_MULTIPROC_DIR set, the processes of one host share their counts.")(fn)


@contextmanager
def _serving_metrics(port: int | None, host: str) -> Iterator[None]:
    """Serve process metrics while the block runs (no-op without a port)."""
    if port is None:
        yield
        return
    from .metrics import mark_process_dead, serve_metrics

    try:
        server = serve_metrics(port, host=host)
    except OSError as exc:
        raise click.BadParameter(str(exc), param_hint="--metrics-port") from exc
    try:
        yield
    finally:
        server.shutdown()
        mark_process_dead()


@cli.command()
@DB_OPTION
@CONFIG_OPTION
@APP_OPTION
@TIME_SOURCE_OPTION
@click.option("--misfire-grace", default=60.0, show_default=True,
              help="Seconds the newest due instant may be late and still on time "
                   "(older ones follow the catch-up policy).")
@_metrics_options
def clock(database_url: str | None, config: Path | None, app: str | None, time_source: str,
          misfire_grace: float, metrics_port: int | None, metrics_host: str) -> None:
    """Run the clock process: turns schedules into occurrences and jobs, exactly once each."""
    from .clock import ClockProcess
    from .dbtime import time_source_clock

    rt = _runtime(config=config, database_url=database_url, app=app)
    try:
        _traces("clock", rt.store)
        with _serving_metrics(metrics_port, metrics_host):
            ClockProcess(rt.app, rt.store, clock=time_source_clock(rt.store, time_source),
                         misfire_grace=misfire_grace, echo=click.echo).run()
    finally:
        rt.close()


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


def _worker_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed([
        click.option("--concurrency", "-c", default=4, show_default=True, type=click.IntRange(1, 256)),
        click.option("--queue", "queues", multiple=True, default=["default"], show_default=True),
        click.option("--batch-size", default=None, type=click.IntRange(1, 10000),
                     help="Jobs claimed per statement (default 10 per slot; on SQLite up to twice that "
                          "while another process's writes queue with this worker's)."),
        click.option("--lease", default=30.0, show_default=True, type=SECONDS_POSITIVE,
                     help="Lease seconds, renewed by heartbeat."),
        click.option("--grace", default=25.0, show_default=True, type=SECONDS_NONNEGATIVE,
                     help="Seconds running jobs get after SIGTERM."),
        click.option("--rescue-interval", default=15.0, show_default=True, type=SECONDS_POSITIVE,
                     help="Seconds between looks for jobs whose worker died (lease expired)."),
    ]):
        fn = option(fn)
    return fn


@cli.command()
@DB_OPTION
@CONFIG_OPTION
@APP_OPTION
@_worker_options
@_metrics_options
@TIME_SOURCE_OPTION
@click.option("--burst", is_flag=True,
              help="Process the jobs due now (one at a time), then exit 0 with a summary: for cron and CI.")
@click.option("--wait-for-leases", default=0.0, type=SECONDS_NONNEGATIVE, metavar="SECONDS",
              help="With --burst: wait up to SECONDS for jobs under another worker's lease to become claimable "
                   "(a killed worker's jobs are rescued when their lease ends) instead of leaving them.")
def worker(database_url: str | None, config: Path | None, app: str | None, concurrency: int, queues: tuple[str, ...],
           batch_size: int | None, lease: float, grace: float, rescue_interval: float, metrics_port: int | None,
           metrics_host: str, time_source: str, burst: bool, wait_for_leases: float) -> None:
    """Run a worker: claims jobs with a lease and runs them; SIGTERM drains gracefully."""
    from .dbtime import time_source_clock
    from .logconfig import attach_job_lines
    from .worker import Worker

    attach_job_lines()  # one INFO line per job start and finish
    if wait_for_leases and not burst:
        raise click.UsageError("--wait-for-leases goes with --burst (a running worker rescues and takes those jobs "
                               "by itself)")
    rt = _runtime(config=config, database_url=database_url, app=app, need_smtp=app is None,
                  smtp_connections=concurrency)  # one SMTP connection per handler slot
    try:
        _traces("worker", rt.store)
        clock = time_source_clock(rt.store, time_source)
        _warn_about_skew(rt.store, time_source)
        with _serving_metrics(metrics_port, metrics_host):
            wrk = Worker(rt.app, rt.store, clock=clock, queues=queues, concurrency=concurrency, batch_size=batch_size,
                         lease_seconds=lease, grace_seconds=grace, rescue_interval=rescue_interval)
            if burst:
                done = wrk.burst(wait_for_leases=wait_for_leases)
                click.echo("burst done: " + ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in done.items()
                                                      if n or k not in ("other", "snoozed"))
                           + _left_text(wrk.left), err=True)
                return
            counts = wrk.run()
    finally:
        rt.close()
    click.echo(f"worker stopped: {counts['processed']} jobs processed, {counts['returned']} returned to the queue",
               err=True)


def _warn_about_skew(store: Any, time_source: str) -> None:
    """On PostgreSQL with host time: warn when this host's clock is more than a second from the database's.

    Leases are judged by the clock of whoever looks at them: a worker whose clock runs ahead rescues live jobs
    early (their bodies then run twice), one that runs behind renews leases past their end.
    """
    from .dbtime import SKEW_WARNING_SECONDS, host_skew

    if time_source != "host":
        return
    skew = host_skew(store)
    if skew is not None and abs(skew) > SKEW_WARNING_SECONDS:
        click.echo(f"warning: this host's clock is {abs(skew):.1f} s {'ahead of' if skew > 0 else 'behind'} the "
                   "database's; leases (expiry, heartbeat, rescue) are judged by this host's clock, so a skew "
                   "rescues live jobs or keeps dead ones: fix the host's time (NTP) or run with "
                   "--time-source database (ONCEBEAT_TIME_SOURCE=database)", err=True)


def _left_text(left: Any) -> str:
    """``; left: …`` for a burst's summary: jobs it could not take, with when they can run (UTC)."""
    parts = []
    if left.leased:
        parts.append(f"{left.leased} running under another worker's lease (until {_utc(left.leased_until)} at the "
                     "latest; --wait-for-leases SECONDS waits for them)")
    if left.later:
        parts.append(f"{left.later} due later (the first at {_utc(left.later_from)})")
    for h in left.held:
        resume = f"oncebeat {'queues' if h.kind == 'queue' else 'schedules'} resume {h.name}"
        parts.append(f"{h.n} held: {_printable(h.describe())}"
                     + (f" (queue {_printable(h.queue)})" if h.kind == "schedule" else "")
                     + f"; `{_printable(resume)}` releases them")
    return "; left: " + ", ".join(parts) if parts else "; nothing left that is due"


def _utc(instant: datetime | None) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if instant is not None else "?"


@cli.command()
@DB_OPTION
@CONFIG_OPTION
@APP_OPTION
@_worker_options
@TIME_SOURCE_OPTION
@_metrics_options
def run(database_url: str | None, config: Path | None, app: str | None, concurrency: int, queues: tuple[str, ...],
        batch_size: int | None, lease: float, grace: float, rescue_interval: float, time_source: str,
        metrics_port: int | None, metrics_host: str) -> None:
    """Run the clock and a worker in one process (small deployments)."""
    from .dbtime import time_source_clock
    from .deploy import run_together
    from .logconfig import attach_job_lines

    attach_job_lines()  # one INFO line per job start and finish

    rt = _runtime(config=config, database_url=database_url, app=app, need_smtp=app is None,
                  smtp_connections=concurrency)  # one SMTP connection per handler slot
    try:
        _traces("run", rt.store)
        _warn_about_skew(rt.store, time_source)
        with _serving_metrics(metrics_port, metrics_host):
            run_together(rt.app, rt.store, clock=time_source_clock(rt.store, time_source), concurrency=concurrency,
                         queues=queues, echo=click.echo,
                         worker_options={"batch_size": batch_size, "lease_seconds": lease, "grace_seconds": grace,
                                         "rescue_interval": rescue_interval})
    finally:
        rt.close()


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; anything but a loopback address exposes the dashboard to the network and "
                   "needs ONCEBEAT_WEB_TOKEN.")
@click.option("--port", default=None, type=click.IntRange(1, 65535), help="Port (default $PORT, else 8000).")
@click.option("--allowed-host", "allowed_host", multiple=True, metavar="NAME",
              help="A Host name the dashboard answers besides 127.0.0.1, localhost and [::1] (repeat it; "
                   "*.example.com for subdomains); also ONCEBEAT_WEB_ALLOWED_HOSTS, comma-separated.")
@click.option("--secure-cookies", is_flag=True, help="Mark cookies Secure (when served over HTTPS, e.g. behind TLS).")
@DB_OPTION
@CONFIG_OPTION
@APP_OPTION
def web(host: str, port: int | None, allowed_host: tuple[str, ...], secure_cookies: bool, database_url: str | None,
        config: Path | None, app: str | None) -> None:
    """Serve the operator dashboard and /metrics. Every page needs a login.

    ONCEBEAT_WEB_TOKEN logs in the admin (every action), ONCEBEAT_WEB_VIEWER_TOKEN a read-only viewer. /metrics
    needs ``Authorization: Bearer $ONCEBEAT_METRICS_TOKEN``, or without that variable answers loopback clients
    only. The HTTP API (/api/v1, JSON) takes the bearer tokens of ONCEBEAT_API_TOKENS
    (``NAME:read|write:TOKEN``, comma-separated). A non-loopback --host without a token is refused (exit 2).
    Stripe webhooks: POST /webhooks/stripe, verified with STRIPE_WEBHOOK_SECRET (400 when forged, 413 past 1 MiB,
    503 when unset).
    """
    import os

    import uvicorn

    from .web import WebSettings, create_app
    from .web.api_auth import ApiTokens
    from .web.security import allowed_hosts, is_loopback

    token = os.environ.get("ONCEBEAT_WEB_TOKEN") or None
    viewer = os.environ.get("ONCEBEAT_WEB_VIEWER_TOKEN") or None
    metrics_token = os.environ.get("ONCEBEAT_METRICS_TOKEN") or None
    api_tokens = os.environ.get("ONCEBEAT_API_TOKENS") or None
    extra = (*allowed_host, *(os.environ.get("ONCEBEAT_WEB_ALLOWED_HOSTS") or "").split(","))
    public = not is_loopback(host)
    if public and not (token or viewer or api_tokens):
        click.echo(f"error: --host {host} exposes the dashboard to the network, and no token is set: set "
                   "ONCEBEAT_WEB_TOKEN (and optionally ONCEBEAT_WEB_VIEWER_TOKEN for read-only logins) or "
                   "ONCEBEAT_API_TOKENS, or bind 127.0.0.1", err=True)
        sys.exit(2)
    if public and host not in ("0.0.0.0", "::", ""):
        extra = (*extra, host)  # the bound address itself is a name clients use (an IP: no DNS to rebind)
    hosts = allowed_hosts(extra)  # ConfigError (exit 2) names a malformed entry
    application = create_app(WebSettings(database_url=database_url, config=config, app=app, token=token,
                                         viewer_token=viewer, metrics_token=metrics_token, api_tokens=api_tokens,
                                         allowed_hosts=tuple(extra), secure_cookies=secure_cookies))
    port = port or int(os.environ.get("PORT") or 8000)
    logins = ", ".join(name for name, value in (("admin", token), ("viewer", viewer)) if value) or (
        "none: every page asks for ONCEBEAT_WEB_TOKEN")
    metrics = "bearer ONCEBEAT_METRICS_TOKEN" if metrics_token else "loopback clients only"
    api = ", ".join(ApiTokens(api_tokens).names()) or "off (set ONCEBEAT_API_TOKENS)"
    click.echo(f"oncebeat web on http://{host}:{port}/ - logins: {logins}; Host names: {', '.join(hosts)}; "
               f"/metrics: {metrics}; /api/v1 tokens: {api}", err=True)
    if public and hosts == allowed_hosts():
        click.echo("note: only loopback Host names are answered; add --allowed-host NAME (or "
                   "ONCEBEAT_WEB_ALLOWED_HOSTS) for the name browsers use", err=True)
    uvicorn.run(application, host=host, port=port, log_level="warning", server_header=False, proxy_headers=False,
                access_log=False)


@cli.command()
@DB_OPTION
@CONFIG_OPTION
@APP_OPTION
@TIME_SOURCE_OPTION
@click.option("--at", "at_text", default=None, metavar="ISO",
              help="The instant your external scheduler names (e.g. an EventBridge event's time), with offset: "
                   "occurrences are due up to it, so a duplicate or early delivery never runs anything twice.")
@click.option("--misfire-grace", default=3600.0, show_default=True,
              help="Seconds the newest due instant may be late and still on time; at least your scheduler's interval.")
def tick(database_url: str | None, config: Path | None, app: str | None, time_source: str, at_text: str | None,
         misfire_grace: float) -> None:
    """Fire every occurrence due now (ledger + catch-up policy), then exit 0; for cron, PaaS schedulers, CronJobs.

    Safe to run late, twice or concurrently: each occurrence still runs once.
    """
    from .clock import ClockProcess
    from .dbtime import time_source_clock

    at = _parse_instant(at_text, "--at") if at_text else None
    rt = _runtime(config=config, database_url=database_url, app=app)
    try:
        fires = ClockProcess(rt.app, rt.store, clock=time_source_clock(rt.store, time_source),
                             misfire_grace=misfire_grace, echo=click.echo).tick_once(at=at)
    finally:
        rt.close()
    counts: dict[str, int] = {}
    for f in fires:
        label = f.outcome if f.inserted else "already recorded by another process"
        counts[label] = counts.get(label, 0) + 1
    click.echo("tick: " + (", ".join(f"{n} {label}" for label, n in sorted(counts.items())) or "nothing was due"))


# --- operator actions ----------------------------------------------------------------------------
@cli.command()
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


@cli.command()
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


@cli.group(invoke_without_command=True)
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


@cli.group()
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


@cli.group(invoke_without_command=True)
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


@cli.group(invoke_without_command=True)
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


class _FaultsOption(click.Option):
    """``--faults``: its help lists the simulator's faults, imported only when help is shown (the simulator
    loads the reminder app, which engine commands with --app must not)."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        from .simulate.faults import FAULTS

        self.help = "Faults to inject: " + ", ".join(FAULTS)
        return super().get_help_record(ctx)


# --- reports -------------------------------------------------------------------------------------
@cli.command()
@click.option("--days", default=0, show_default=True, type=click.IntRange(0, 3650),
              help="Preview the scan this many days ahead (0 = today's business date); with --policy, the days "
                   "the what-if runs (0 = 30).")
@click.option("--policy", "proposed", type=click.Path(path_type=Path), default=None, metavar="NEW.toml",
              help="What-if: run the book through this policy and the current one on simulated time (on a copy; "
                   "nothing is written or sent) and print the difference.")
@click.option("--start", default=None, metavar="YYYY-MM-DD",
              help="With --policy: the what-if's first day (default today in the policy's zone).")
@click.option("--apply-to-open", "apply_to_open", is_flag=True,
              help="With --policy: the proposal also moves the open invoices of its ladders to its settings (as "
                   "`oncebeat policies apply --apply-to-open` would); without it they keep their pinned version.")
@DB_OPTION
@CONFIG_OPTION
@click.option("--json", "as_json", is_flag=True)
def preview(days: int, proposed: Path | None, start: str | None, apply_to_open: bool, database_url: str | None,
            config: Path | None, as_json: bool) -> None:
    """What the scan would send (dry run: nothing is written); with --policy, what a policy change would do."""
    from datetime import timedelta

    if proposed is not None:
        from .cli_whatif import preview_whatif

        preview_whatif(proposed_path=proposed, days=days, start=_parse_date(start, "--start"),
                       database_url=database_url, config=config, as_json=as_json, runtime=_runtime,
                       print_json=_print_json, apply_to_open=apply_to_open)
        return
    if start is not None or apply_to_open:
        raise click.UsageError(f"{'--start' if start is not None else '--apply-to-open'} goes with --policy (the "
                               "what-if); the plain preview uses --days")
    rt = _runtime(config=config, database_url=database_url, migrate=False)
    try:
        business_date = rt.clock.now().astimezone(rt.policy.zone).date() + timedelta(days=days)
        rows = rt.service.preview(business_date)
    finally:
        rt.close()
    calendar = rt.policy.calendar
    closed = calendar.why_not(business_date) if calendar else None
    if as_json:
        _print_json({"business_date": business_date, "reminders": rows, "not_a_business_day": closed,
                     "next_business_day": calendar.next_business_day(business_date) if closed and calendar
                     else None})
        return
    if closed and calendar and not rows:  # ladders with a calendar of their own may still send (rows)
        click.echo(f"{business_date} is not a business day ({closed}): nothing goes out; what is due then goes "
                   f"out on {calendar.next_business_day(business_date)} (oncebeat preview --days N shows that day)")
        return
    held = sum(1 for r in rows if r["held"])
    click.echo(f"scan on {business_date} ({rt.policy.tz}) would send {len(rows) - held} reminder(s)"
               + (f" and record {held} held:" if held else ":"))
    from .reminders.render import format_money

    for r in rows:
        extra = f" (+{r['superseded']} lower stage(s) recorded skipped)" if r["superseded"] else ""
        extra += f"; {r['moved']}" if r["moved"] else ""
        extra += f"; not sent, {r['held']}" if r["held"] else ""
        click.echo(f"  {_printable(r['number'])} stage {r['stage']} to {_printable(r['email'])}: "
                   f"{format_money(r['amount_due'], r['currency'], 'en_US')} due {r['due_on']}{extra}")


@cli.command()
@click.option("--as-of", default=None, help="Date YYYY-MM-DD (default today in the policy zone).")
@DB_OPTION
@CONFIG_OPTION
@click.option("--json", "as_json", is_flag=True)
def aging(as_of: str | None, database_url: str | None, config: Path | None, as_json: bool) -> None:
    """Open amounts by days-past-due bucket, per currency."""
    from .reminders.render import format_money

    rt = _runtime(config=config, database_url=database_url, migrate=False)
    try:
        day = _parse_date(as_of, "--as-of") or rt.clock.now().astimezone(rt.policy.zone).date()
        rows = rt.service.aging(day)
    finally:
        rt.close()
    if as_json:
        _print_json({"as_of": day, "buckets": rows})
        return
    click.echo(f"open invoices by days past due on {day}:")
    for r in rows:
        click.echo(f"  {r['currency']} {r['bucket']:>8}: {r['invoices']:>5} invoices "
                   f"{format_money(int(r['amount']), r['currency'], 'en_US'):>16}")


@cli.command()
@click.option("--maildir", default="maildir", show_default=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=1025, show_default=True)
@click.option("--max-connections", type=click.IntRange(min=1), default=None, metavar="N",
              help="Greet a client connection beyond N open at once with 421, as relays capping connections per "
                   "client do (to try [delivery] max_connections and the pool's shrinking).")
def mailsink(maildir: Path, host: str, port: int, max_connections: int | None) -> None:
    """Run a local SMTP server that stores every message in a Maildir (development)."""
    import errno

    from .mail import serve_forever

    try:
        serve_forever(maildir, host, port, max_connections=max_connections)
    except OSError as exc:  # a busy port or an unwritable Maildir is an operator's fix, not a traceback
        if exc.errno == errno.EADDRINUSE:
            raise click.ClickException(f"mailsink: {host}:{port} is already in use (another mailsink?); "
                                       "stop it or pick a free port with --port N") from None
        raise click.ClickException(f"mailsink: cannot serve on {host}:{port} into {maildir}: "
                                   f"{exc.strerror or exc}") from None


@cli.group()
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


@cli.command()
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


@cli.group()
def reminders() -> None:
    """Operate on reminders (retry the failed ones)."""


@reminders.command(name="retry")
@click.option("--failed", "failed", is_flag=True, required=True,
              help="Retry the reminders that ended failed (never a sent or in-doubt one).")
@click.option("--since", default=None, metavar="YYYY-MM-DD",
              help="Only those that failed on or after this date (in the policy's zone).")
@DB_OPTION
@CONFIG_OPTION
def reminders_retry(failed: bool, since: str | None, database_url: str | None, config: Path | None) -> None:  # noqa: ARG001 - --failed is required: it names what is retried
    """Put failed reminders back to pending with a send job (after fixing the cause: SMTP_URL, the mail server,
    an address). Prints how many; audited as reminders.retried."""

    day = _parse_date(since, "--since")
    rt = _runtime(config=config, database_url=database_url, migrate=True)
    try:
        ids = rt.service.retry_failed(since=day, source=_operator())
    finally:
        rt.close()
    scope = f" (failed since {day.isoformat()}, {rt.policy.tz})" if day else ""
    click.echo(f"{len(ids)} failed reminder(s) put back to pending with a send job{scope}"
               + (": " + ", ".join(str(i) for i in ids[:20]) + (" …" if len(ids) > 20 else "") if ids else ""))


@cli.command()
@click.option("--days", default=30, show_default=True, type=click.IntRange(1, 3650))
@click.option("--from", "start", default=None, help="First simulated day YYYY-MM-DD (default 2026-01-05).")
@click.option("--until", "until", default=None, help="Day after the last simulated day (instead of --days).")
@click.option("--seed", default=7, show_default=True)
@click.option("--faults", default="none", show_default=True, metavar="all|NAME[=RATE],…", cls=_FaultsOption,
              help="Faults to inject: ")
@click.option("--db", "database_url", default=None, metavar="URL",
              help="Database (default a fresh SQLite file in --dir).")
@click.option("--invoices", "invoices_csv", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--payments", "payments_csv", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--dir", "workdir", default="oncebeat-sim", show_default=True, type=click.Path(path_type=Path))
@click.option("--compare-naive", is_flag=True, help="Also run the naive design on the same days and faults.")
@click.option("--emit-logs", "emit_logs", nargs=2, multiple=True, metavar="heroku-sidekiq|celery DIR",
              type=(click.Choice(["heroku-sidekiq", "celery"]), click.Path(file_okay=False, path_type=Path)),
              help="With --compare-naive: write the naive design's logs in that format (for doctor --logs).")
@click.option("--processes", is_flag=True,
              help="Instead: real time, 2 clock + 4 worker OS processes SIGKILLed at random, then the checker.")
@click.option("--seconds", default=30.0, show_default=True, help="With --processes: how long to kill and restart.")
@CONFIG_OPTION
@click.option("--json", "as_json", is_flag=True)
def simulate(days: int, start: str | None, until: str | None, seed: int, faults: str, database_url: str | None,
             invoices_csv: Path | None, payments_csv: Path | None, workdir: Path, compare_naive: bool,
             emit_logs: tuple[tuple[str, Path], ...], processes: bool, seconds: float, config: Path | None,
             as_json: bool) -> None:
    """Replay the reminder schedule over simulated days through the real code, with faults, then check it.

    Payments arrive on the business day: one dated D at the start of D in the schedule's zone (before
    that day's run), or at its exact paid_at; `check` on the same database uses the same instants.
    """
    if emit_logs and (processes or not compare_naive):
        raise click.UsageError("--emit-logs writes the naive design's logs: use it with --compare-naive "
                               "(and without --processes)")
    if processes:
        from .simulate.processes import run_processes

        url = database_url or f"sqlite:///{workdir.resolve() / 'oncebeat.db'}"
        result = run_processes(url, workdir, seconds=seconds, seed=seed)
        _print_json(result.as_dict()) if as_json else click.echo(result.to_text())
        sys.exit(0 if result.passed else 1)
    from .reminders.policy import load_policy
    from .sample import DEFAULT_DEMO_START
    from .simulate import SimConfig, parse_faults
    from .simulate import simulate as run_simulation

    first = _parse_date(start, "--from") or DEFAULT_DEMO_START
    last = _parse_date(until, "--until")
    if last is not None:
        if last <= first:
            raise click.BadParameter("must be after --from", param_hint="--until")
        days = (last - first).days
    if not logging.getLogger().isEnabledFor(logging.INFO):
        logging.getLogger("oncebeat").setLevel(logging.ERROR)  # injected faults log by design
    report = run_simulation(SimConfig(days=days, start=first, seed=seed, faults=parse_faults(faults),
                                      db_url=database_url, workdir=workdir, invoices_csv=invoices_csv,
                                      payments_csv=payments_csv, policy=load_policy(config),
                                      compare_naive=compare_naive, emit_logs=list(emit_logs)))
    if as_json:
        _print_json(report.as_dict())
    else:
        click.echo(report.to_text())
    sys.exit(0 if report.passed else 1)


@cli.command()
@DB_OPTION
@click.option("--maildir", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="The Maildir the SMTP server delivered to (evidence from outside the database).")
@CONFIG_OPTION
@click.option("--json", "as_json", is_flag=True)
def check(database_url: str | None, maildir: Path | None, config: Path | None, as_json: bool) -> None:
    """Check the invariants (nothing twice, nothing lost) on a database and a Maildir.

    Exit status 1 on a violation, 3 when every invariant holds but reminders failed (not delivered: retry them
    with `oncebeat reminders retry --failed` once the cause is fixed), 4 when none failed but due reminders are
    delayed (waiting out a mail outage, or their send job not run yet: they go out by themselves), 2 when the
    check itself could not run (bad input or an internal error).
    A payment counts from the instant the database recorded it (a replay applies a payment dated D at the
    start of D in the schedule's zone, or at its paid_at), so check counts the same due reminders as simulate;
    a scan answers only for invoices that had entered the database (entered_at) when it ran.
    """
    from .simulate.standalone import check_deployment

    rt = _runtime(config=config, database_url=database_url, migrate=False)
    try:
        report = check_deployment(rt.store, rt.app, rt.policy, maildir=maildir)
    finally:
        rt.close()
    if as_json:
        _print_json(report.as_dict())
    else:
        click.echo(report.to_text())
    sys.exit(report.exit_code)


@cli.command()
@click.option("--since", default=None, help="Only history after this ISO instant (with offset).")
@click.option("--schedule", default=None, help="Only this schedule key.")
@click.option("--invoice", default=None, help="Only this invoice number (the reminder app's scope).")
@click.option("--maildir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="A Maildir the SMTP server delivered to: duplicate deliveries are found there.")
@click.option("--explain", "explain_", nargs=2, default=None, metavar="KIND ID",
              help="Tell the full story of one thing instead: occurrence ID, job ID (and, with the reminder app, "
                   "invoice NUMBER).")
@click.option("--logs", "logs", is_flag=True,
              help="Instead: read FILE... (- for stdin), logs of Heroku/Clockwork/Sidekiq or Celery, not a database.")
@click.option("--until", default=None, help="With --logs: only lines before this instant (or through this date).")
@click.option("--tz", "tz", default="UTC", show_default=True, help="With --logs: the schedule's IANA zone.")
@click.option("--job", default=None, help="With --logs: only this job (class, task or clock name).")
@click.option("--log-tz", default="UTC", show_default=True, help="With --logs: zone of stamps without an offset.")
@click.option("--mail-pattern", default=None, metavar="REGEX",
              help="With --logs: a regular expression for the app's own 'mail sent' lines (default: an address "
                   "with an SMTP 250 reply or 'sent'/'e-mailed').")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
@DB_OPTION
@CONFIG_OPTION
@APP_OPTION
@click.option("--json", "as_json", is_flag=True)
def doctor(since: str | None, schedule: str | None, invoice: str | None, maildir: Path | None,
           explain_: tuple[str, str] | None, logs: bool, until: str | None, tz: str, job: str | None, log_tz: str,
           mail_pattern: str | None, files: tuple[str, ...], database_url: str | None, config: Path | None,
           app: str | None,
           as_json: bool) -> None:
    """Explain duplicates, misses and risks from the audit trail (or, with --logs, from FILE...).

    Exit status 1 when an error is found, 2 when the doctor itself could not run (an internal error).
    """
    from .doctor import explain, explain_kinds, numeric_kind, run_doctor

    if logs or files:
        _doctor_logs(logs, files, since, until, tz, job, log_tz, as_json, mail_pattern)
    if until or job or tz != "UTC" or log_tz != "UTC" or mail_pattern is not None:
        raise click.UsageError("--until, --tz, --job, --log-tz and --mail-pattern read logs: add --logs FILE...")
    rt = _runtime(config=config, database_url=database_url, app=app, migrate=False)
    try:
        if explain_ is not None:
            kind, ident = explain_
            if kind not in explain_kinds():
                raise click.BadParameter(f"use {' or '.join(explain_kinds())}", param_hint="--explain")
            if numeric_kind(kind) and not ident.isdigit():
                raise click.BadParameter(f"{kind} ids are whole numbers, not {ident!r}", param_hint="--explain")
            for line in explain(rt.store, kind, ident):
                click.echo(line)
            return
        report = run_doctor(rt.store, now=rt.clock.now(), since=_parse_instant(since, "--since") if since else None,
                            schedule=schedule, maildir=maildir, definitions=rt.app,
                            **({"invoice": invoice} if invoice is not None else {}))
    finally:
        rt.close()
    if as_json:
        _print_json(report.to_json())
    else:
        click.echo(report.to_text())
    sys.exit(report.exit_code)


def _doctor_logs(logs: bool, files: tuple[str, ...], since: str | None, until: str | None, tz: str,
                 job: str | None, log_tz: str, as_json: bool, mail_pattern: str | None = None) -> None:
    """``doctor --logs FILE...``: the log doctor (oncebeat.doctor.logs).

    Exits 0, 1 on an error finding, 2 when no scheduled job was found to judge."""
    from .doctor.logs import day_bound, diagnose_logs

    if not logs:
        raise click.UsageError("FILE arguments are log files: add --logs (oncebeat doctor --logs FILE...)")
    if not files:
        if sys.stdin.isatty():
            raise click.UsageError("--logs needs FILE... or - (standard input), e.g. heroku logs -n 1500 | "
                                   "oncebeat doctor --logs - --tz America/Chicago")
        files = ("-",)
    report = diagnose_logs(list(files), tz=tz, job=job, log_tz=log_tz, mail_pattern=mail_pattern,
                           since=day_bound(since, tz, "--since") if since else None,
                           until=day_bound(until, tz, "--until", end=True) if until else None)
    _print_json(report.to_json()) if as_json else click.echo(report.to_text(), nl=False)
    sys.exit(report.exit_code)


def _add_logging_options(group: click.Group) -> None:
    """Give every subcommand (and theirs) the logging options, so `oncebeat worker -v` works as `oncebeat -v worker`."""
    for command in group.commands.values():
        if not any(p.name == "log_level" for p in command.params):
            for option in (_VERBOSE, _LOG_LEVEL, _LOG_FORMAT):  # appended in this order after the command's own
                option(command)
        if isinstance(command, click.Group):
            _add_logging_options(command)


from .cli_holds import register as _register_holds  # noqa: E402 - its commands use the helpers above

_register_holds(cli, sys.modules[__name__])
from .cli_reports import register as _register_reports  # noqa: E402 - as cli_holds

_register_reports(cli, sys.modules[__name__])

from .cli_policies import register as _register_policies  # noqa: E402 - its commands use the helpers above

_register_policies(cli, sys.modules[__name__])

from .cli_evidence import register as _register_evidence  # noqa: E402 - its command uses the helpers above

_register_evidence(cli, sys.modules[__name__])

from .cli_jobs import register as _register_jobs  # noqa: E402 - its command uses the helpers above

_register_jobs(jobs, sys.modules[__name__])
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
