"""``oncebeat report [KIND]``: the collection reports (docs/reports.md) as text, CSV or JSON.

Entry point only: parse, call :func:`oncebeat.reminders.reports.build`, print. ``KIND`` is one of ``dso``, ``cei``,
``stages``, ``aging``, ``promises``, ``disputes``, ``holds`` (promises and disputes), ``fees`` (late fees, the export
a team posts to its ledger) or ``all`` (the default: every collection table, for a monthly review); ``--kind`` is
the same as the argument, for scripts that prefer options.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import click

Decorator = Callable[[Callable[..., None]], Callable[..., None]]

#: Every kind ``report`` accepts; ``all`` prints each table of the others once (holds = promises + disputes).
CHOICES = ("all", "dso", "cei", "stages", "aging", "promises", "disputes", "holds", "fees")


def register(group: click.Group, cli_module: ModuleType) -> None:
    """Add ``report`` to the ``oncebeat`` group; ``cli_module`` gives the shared options and helpers (as in
    :mod:`oncebeat.cli_holds`: :mod:`oncebeat.cli_common`, passed in by :mod:`oncebeat.cli`)."""
    db_option: Decorator = cli_module.DB_OPTION
    config_option: Decorator = cli_module.CONFIG_OPTION
    h: Any = cli_module

    @click.command(name="report")
    @click.argument("kind", required=False, type=click.Choice(CHOICES))
    @click.option("--kind", "kind_option", type=click.Choice(CHOICES), default=None,
                  help="The report, as an option (same as the KIND argument).")
    @click.option("--from", "first", default=None, metavar="YYYY-MM",
                  help="First month (default: 11 months before --to).")
    @click.option("--to", "last", default=None, metavar="YYYY-MM",
                  help="Last month (default: the month of --as-of; a month not over yet shows no DSO/CEI).")
    @click.option("--currency", default=None, metavar="CODE", help="One ISO 4217 currency (default: each, apart).")
    @click.option("--as-of", default=None, metavar="YYYY-MM-DD",
                  help="Today for the report (default: today in the policy's zone).")
    @click.option("--locale", default="en_US", show_default=True, help="How text shows amounts and numbers.")
    @click.option("--csv", "as_csv", is_flag=True, help="CSV (one report): amounts in major units, a currency column.")
    @click.option("--json", "as_json", is_flag=True, help="JSON: amounts in minor units, null where data is missing.")
    @db_option
    @config_option
    def report_command(kind: str | None, kind_option: str | None, first: str | None, last: str | None,
                       currency: str | None, as_of: str | None, locale: str, as_csv: bool, as_json: bool,
                       database_url: str | None, config: Path | None) -> None:
        """Collection reports per currency and month: DSO (countback), CEI, stage effectiveness (paid within
        3/7/14 days after each stage vs. invoices not yet reminded), aging, promises (kept/broken) and disputes;
        `report fees`: each late fee recorded (one per invoice and stage), `--csv` to post them to your ledger.

        A figure the data cannot give (a month not over, before the first invoice, a payment without a date) is
        shown n/a with the reason, never guessed. Formulas: docs/reports.md."""
        from .reminders.reports import EVERY, Month, build_many, csv_text, default_range, report_document, text_lines

        if kind and kind_option and kind != kind_option:
            raise click.UsageError(f"report {kind} --kind {kind_option}: give the report once (argument or --kind)")
        chosen = kind or kind_option or "all"
        if as_csv and as_json:
            raise click.UsageError("--csv and --json: choose one output format")
        kinds = EVERY if chosen == "all" else (chosen,)
        if as_csv and (len(kinds) > 1 or chosen == "holds"):
            raise click.UsageError(f"--csv writes one table; name one report (e.g. `oncebeat report dso --csv`), "
                                   f"not {chosen}")
        months = (Month.parse(first, "--from") if first else None, Month.parse(last, "--to") if last else None)
        day = h._parse_date(as_of, "--as-of")
        rt = h._runtime(config=config, database_url=database_url, migrate=False)
        try:
            today = day or rt.clock.now().astimezone(rt.policy.zone).date()
            start, end = default_range(today, *months)
            tables = build_many(rt.store, kinds, first=start, last=end, as_of=today, currency=currency)
        finally:
            rt.close()
        if as_json:
            h._print_json(report_document(tables, as_of=today, first=start, last=end, currency=currency))
            return
        if as_csv:
            sys.stdout.write(csv_text(tables[0]))
            return
        click.echo(f"collection reports {start} to {end}, as of {today} ({rt.policy.tz})")
        for t in tables:
            click.echo("")
            for line in text_lines(t, locale):
                click.echo(line)

    group.add_command(report_command)
