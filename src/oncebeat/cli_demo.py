"""``oncebeat demo``, ``simulate`` and ``mailsink``: oncebeat tried out on simulated days and a local mail server.

Entry points only: parse, call :func:`oncebeat.sample.run_demo`, :func:`oncebeat.simulate.simulate` (or
:func:`oncebeat.simulate.processes.run_processes`) or :func:`oncebeat.mail.serve_forever`, print. ``demo`` and
``simulate`` exit 1 when a guarantee failed (a duplicate or a lost reminder).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import sys
from pathlib import Path
from typing import Any

import click

from .cli_common import CONFIG_OPTION, _parse_date, _print_json


# --- the main job --------------------------------------------------------------------------------
@click.command()
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


class _FaultsOption(click.Option):
    """``--faults``: its help lists the simulator's faults, imported only when help is shown (the simulator
    loads the reminder app, which engine commands with --app must not)."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        from .simulate.faults import FAULTS

        self.help = "Faults to inject: " + ", ".join(FAULTS)
        return super().get_help_record(ctx)


@click.command()
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


@click.command()
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
