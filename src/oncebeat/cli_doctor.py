"""``oncebeat check`` and ``doctor``: the guarantees checked on a deployment, and its duplicates, misses and risks
explained (from the audit trail, or from another scheduler's logs with ``--logs``).

Entry points only: parse, call :func:`oncebeat.simulate.standalone.check_deployment`,
:func:`oncebeat.doctor.run_doctor` / :func:`~oncebeat.doctor.explain` or :func:`oncebeat.doctor.logs.diagnose_logs`,
print, exit with the finding's status (``main``'s docstring lists them).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .cli_common import APP_OPTION, CONFIG_OPTION, DB_OPTION, _parse_instant, _print_json, _runtime


@click.command()
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


@click.command()
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
