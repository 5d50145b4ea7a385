"""``oncebeat import``, ``sync``, ``sources``, ``preview``, ``aging`` and ``reminders retry``: the reminder app's
book in, what the scan would send, and its failed reminders.

Entry points only: parse, open the reminder app's runtime, call its service (:mod:`oncebeat.reminders`), print.
An import or a sync applies all its rows or none, and prints every problem (the first 50 on screen).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from .cli_common import (
    CONFIG_OPTION,
    DB_OPTION,
    _echo_problems,
    _operator,
    _parse_date,
    _print_json,
    _printable,
    _runtime,
)
from .errors import ImportRejected
from .redact import redact_url


@click.command(name="import")
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


# --- the team's own database ([source]) ---------------------------------------------------------
@click.command()
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


@click.command()
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


@click.command()
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


@click.command()
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


@click.group()
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
