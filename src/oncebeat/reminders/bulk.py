"""The streaming import: a CSV of any size into the database in one transaction, in bounded memory.

``oncebeat import`` (invoices or ``--payments``) runs here. The file is read one row at a time and never
held: each row is checked on its own (:mod:`.sources`) and written, with its problems, to two temporary
staging tables inside the import's one transaction (``sql/*/bulk.sql``). The rules across rows then read
the staging table in order, a page at a time (:func:`~.sources.invoices.duplicate_problems`,
:func:`~.sources.invoices.customer_rule`; for payments, unknown invoices and payments before the issue date
are a join with ``invoices``), and the valid rows are upserted page by page. What stays in memory is a page
(:data:`PAGE` rows) and the first :data:`~.sources.problems.MAX_PROBLEMS_SHOWN` problems, whatever the size
of the file.

All or nothing: without ``skip_invalid``, any problem rolls the whole transaction back
(:class:`~oncebeat.errors.ImportRejected` with the first problems and the count); with it, the valid rows
are applied and the rejected ones written to ``rejects`` (original columns plus ``error``, formula-safe).
``errors_file`` gets every problem either way. Both files are written before the commit: a file that cannot
be written rolls the import back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

from ..errors import ImportRejected
from ..store import Store, Tx
from .calendar import BusinessCalendar
from .capfence import touch_watermark
from .conversions import DateFormat
from .holds import import_holds
from .model import Customer, Invoice
from .records import mark_paid, write_customers, write_invoices
from .sources.invoices import CustomerRow, customer_rule, duplicate_problems, open_invoice_table
from .sources.payments import open_payment_table
from .sources.problems import MAX_PROBLEMS_SHOWN, RejectsWriter, RowProblem, rejected_message, write_problems
from .sources.table import CsvTable, Progress, row_dict

__all__ = ["PAGE", "BulkOptions", "import_invoices", "import_payments"]

#: Rows written or read per statement (staging, rules, upserts).
PAGE = 5_000
_EMPTY_ROW = {"line": None, "bad": False, "number": None, "email": None, "name": None, "x_locale": None,
              "x_tz": None, "currency": None, "amount_due": None, "issued_on": None, "due_on": None, "status": None,
              "paid_on": None, "status_on": None, "paid_at": None, "hold_reason": None, "promise_until": None,
              "hold_note": None, "x_payment_url": None,
              "x_pdf_path": None, "x_country": None, "x_tags": None}


@dataclass(frozen=True, kw_only=True, slots=True)
class BulkOptions:
    """How to import one file (the ``oncebeat import`` options)."""

    column_map: Mapping[str, str] | None = None
    source_name: str | None = None
    date_format: DateFormat = DateFormat("iso")
    default_currency: str | None = None
    due_days: int | None = None
    today: date | None = None
    skip_invalid: bool = False  # apply the valid rows (write the rejected ones to ``rejects`` when given)
    rejects: Path | None = None
    errors_file: Path | None = None
    reopen: bool = False
    calendar: BusinessCalendar | None = None  # the policy's: a promise_until column resumes on its next business day
    progress: Progress | None = None
    #: Told (valid rows, rows read) once the checks are done, before the rows are applied.
    on_apply: Callable[[int, int], None] | None = None
    #: With ``skip_invalid``: told (the first problems, ``file:line: …``, and how many there are) before the commit.
    on_problems: Callable[[list[str], int], None] | None = None


class _Staging:
    """The staging tables of one import on ``tx``: rows and problems written a page at a time."""

    def __init__(self, tx: Tx, source: str) -> None:
        self.tx = tx
        self.source = source
        self.problems = 0
        self._rows: list[dict[str, Any]] = []
        self._problems: list[dict[str, Any]] = []
        self._bad: list[dict[str, Any]] = []
        tx.run("bulk_drop_rows")  # left by an earlier import on this connection that did not finish
        tx.run("bulk_drop_problems")
        tx.run("bulk_create_rows")
        tx.run("bulk_create_problems")
        tx.run("bulk_index_problems")

    def row(self, params: Mapping[str, Any]) -> None:
        self._rows.append(_EMPTY_ROW | dict(params))
        if len(self._rows) >= PAGE:
            self.tx.many("bulk_stage_row", self._rows)
            self._rows.clear()

    def problem(self, problem: RowProblem, *, mark: bool = False) -> None:
        """Record ``problem``; ``mark``: its line is staged and becomes bad (a rule across rows found it)."""
        self.problems += 1
        self._problems.append({"seq": self.problems, "line": problem.line, "text": problem.describe()})
        if mark:
            self._bad.append({"line": problem.line})
        if len(self._problems) >= PAGE or len(self._bad) >= PAGE:
            self.flush()

    def flush(self) -> None:
        if self._rows:
            self.tx.many("bulk_stage_row", self._rows)
            self._rows.clear()
        if self._problems:
            self.tx.many("bulk_stage_problem", self._problems)
            self._problems.clear()
        if self._bad:
            self.tx.many("bulk_mark_bad", self._bad)
            self._bad.clear()

    def pages(self, query: Callable[..., list[dict[str, Any]]], keys: tuple[str, ...], start: tuple[Any, ...]
              ) -> Iterator[dict[str, Any]]:
        """Every row of a keyset-paged query, in its order: ``query(page=, after_<key>=…)`` runs it (``keys``: the
        columns it pages after, ``start``: their values before the first row)."""
        after = dict(zip((f"after_{k}" for k in keys), start, strict=True))
        while True:
            self.flush()  # a page sees every mark made so far
            rows = query(page=PAGE, **after)
            yield from rows
            if len(rows) < PAGE:
                return
            after = {f"after_{k}": rows[-1][k] for k in keys}

    def problem_texts(self, limit: int | None = None) -> Iterator[str]:
        """``file:line: …`` for every recorded problem (the first ``limit``), by line, in the order found."""
        for n, r in enumerate(self.pages(lambda **k: self.tx.run("bulk_problems", **k), ("line", "seq"), (0, 0))):
            if limit is not None and n >= limit:
                return
            yield f"{self.source}:{r['line']}: {r['text']}"

    def rejected_lines(self) -> int:
        self.flush()
        row = self.tx.one("bulk_problem_count")
        return int(row["lines"]) if row else 0

    def drop(self) -> None:
        self.tx.run("bulk_drop_rows")
        self.tx.run("bulk_drop_problems")


@contextmanager
def _errors_written(options: BulkOptions) -> Iterator[None]:
    """A file that cannot be read at all: its one problem goes to the errors file too."""
    try:
        yield
    except ImportRejected as exc:
        if options.errors_file is not None:
            write_problems(options.errors_file, exc.problems)
        raise


def _write_rejects(staging: _Staging, table: CsvTable, path: Path) -> int:
    """The rows of every line with a problem, from the file (read again, in step with the problems by line)."""
    with RejectsWriter(path, table.header) as out:
        problems = staging.pages(lambda **k: staging.tx.run("bulk_problems", **k), ("line", "seq"), (0, 0))
        pending = next(problems, None)
        for line, fields in table.rows():
            if pending is None:
                break
            while pending is not None and pending["line"] < line:
                pending = next(problems, None)  # a line without a row (a CSV error)
            texts = []
            while pending is not None and pending["line"] == line:
                texts.append(pending["text"])
                pending = next(problems, None)
            if texts:
                out.write(line, row_dict(table.header, fields), texts)
        return out.count


def _finish(staging: _Staging, table: CsvTable, options: BulkOptions) -> int:
    """Write the errors file and, with ``skip_invalid``, the rejects; or raise ImportRejected (roll back).

    Returns the number of rejected rows.
    """
    if options.errors_file is not None and staging.problems:
        write_problems(options.errors_file, staging.problem_texts())
    if staging.problems and not options.skip_invalid:
        lines = staging.rejected_lines()
        first = list(staging.problem_texts(MAX_PROBLEMS_SHOWN))
        raise ImportRejected(rejected_message(staging.source, staging.problems, lines, table.rows_read), first,
                             total=staging.problems)
    if not staging.problems:
        return 0
    if options.on_problems is not None:
        options.on_problems(list(staging.problem_texts(MAX_PROBLEMS_SHOWN)), staging.problems)
    if options.rejects is not None:
        return _write_rejects(staging, table, options.rejects)
    return staging.rejected_lines()


def _reject_everything(table: CsvTable, problems: list[RowProblem], options: BulkOptions, source: str
                       ) -> dict[str, int]:
    """The header is unusable (or the file unreadable): every row is rejected with the file's problems."""
    if options.errors_file is not None:
        write_problems(options.errors_file, [str(p) for p in problems])
    rows = sum(1 for _ in table.rows()) if table.header else 0
    if not options.skip_invalid or not table.header:
        raise ImportRejected(rejected_message(source, len(problems), len({p.line for p in problems}), rows),
                             [str(p) for p in problems[:MAX_PROBLEMS_SHOWN]], total=len(problems))
    if options.on_problems is not None:
        options.on_problems([str(p) for p in problems[:MAX_PROBLEMS_SHOWN]], len(problems))
    if options.rejects is not None:
        texts = [p.describe() for p in problems]
        with RejectsWriter(options.rejects, table.header) as out:
            for line, fields in table.rows():
                out.write(line, row_dict(table.header, fields), texts)
    return {"rejected": rows}


def import_invoices(store: Store, path: Path, options: BulkOptions, *, now: datetime) -> dict[str, int]:
    """Check and upsert the invoice CSV at ``path`` in one transaction (see the module docstring).

    Writes follow :mod:`oncebeat.reminders.records`: a customer field the file does not carry is kept, an
    explicit empty one cleared; statuses move only under the transition rule (``options.reopen``: explicitly).

    Returns:
        ``{"customers", "invoices", "new", "updated", "kept paid", "stale", "rejected"}`` counts (``stale``: rows
        whose status the transition rule refused, ``kept paid`` among them).
    Raises:
        ImportRejected: problems without ``skip_invalid`` (nothing applied), or the file cannot be read.
        ConfigError: a bad ``default_currency``, or the errors file cannot be written.
    """
    path = Path(path)
    source = options.source_name if options.source_name is not None else path.name
    with _errors_written(options):
        table, checker, file_problems = open_invoice_table(
            path, column_map=options.column_map, source=source, date_format=options.date_format,
            default_currency=options.default_currency, due_days=options.due_days, today=options.today)
    if checker is None:
        return {"customers": 0, "invoices": 0, "new": 0, "updated": 0, "kept paid": 0, "stale": 0}  \
            | _reject_everything(table, file_problems, options, source)
    counts = {"customers": 0, "invoices": 0, "new": 0, "updated": 0, "kept paid": 0, "stale": 0}
    with store.transaction() as tx:
        staging = _Staging(tx, source)
        for p in file_problems:
            staging.problem(p)
        for line, fields in table.rows(options.progress):
            staged, found = checker.check(line, fields)
            for p in found:
                staging.problem(p)
            if staged is not None:
                staging.row(staged.as_params())
        if table.read_error is not None:
            staging.problem(table.read_error)
        staging.flush()
        tx.run("bulk_index_numbers")
        tx.run("bulk_index_emails")
        for p in duplicate_problems(_shared_numbers(staging), source):
            staging.problem(p, mark=True)
        customer_rows = (CustomerRow(email=r["email"], line=r["line"], name=r["name"], x_locale=r["x_locale"],
                                     x_tz=r["x_tz"], x_country=r["x_country"], x_tags=r["x_tags"],
                                     bad=bool(r["bad"]))
                         for r in staging.pages(lambda **k: tx.run("bulk_customer_rows", **k), ("email", "line"),
                                                ("", 0)))
        customers: list[Customer] = []
        for item in customer_rule(customer_rows, source):
            if isinstance(item, RowProblem):
                staging.problem(item, mark=True)
            elif options.skip_invalid or not staging.problems:  # else nothing will be applied: skip the writes
                customers.append(item)
                if len(customers) >= PAGE:
                    _upsert_customers(tx, customers, counts)
        _upsert_customers(tx, customers, counts)
        staging.flush()
        if not staging.problems or options.skip_invalid:
            valid = tx.one("bulk_valid_count")
            if options.on_apply is not None:
                options.on_apply(int(valid["n"]) if valid else 0, table.rows_read)
            rows = staging.pages(lambda **k: tx.run("bulk_valid_rows", **k), ("line",), (0,))
            while page := [r for _, r in zip(range(PAGE), rows, strict=False)]:
                invoices = [Invoice(number=r["number"], customer_email=r["email"], currency=r["currency"],
                                    amount_due=int(r["amount_due"]), issued_on=r["issued_on"], due_on=r["due_on"],
                                    status=r["status"], paid_on=r["paid_on"], status_on=r["status_on"],
                                    payment_url=r["x_payment_url"], pdf_path=r["x_pdf_path"]) for r in page]
                done = write_invoices(tx, invoices, reopen=options.reopen, now=now, source="csv")
                counts["invoices"] += len(invoices)
                counts["new"] += done.new
                counts["updated"] += done.updated
                counts["kept paid"] += done.kept_paid
                counts["stale"] += done.stale
                held = [r for r in page if r["hold_reason"]]
                if held:  # after the upsert: the invoices exist; a row imported again places no second hold
                    counts["holds"] = counts.get("holds", 0) + import_holds(tx, held, source=source, now=now,
                                                                                calendar=options.calendar)
        counts["rejected"] = _finish(staging, table, options)
        staging.drop()
        # The payment-freshness fence's watermark (capfence): statuses of this file are now known as of now.
        touch_watermark(tx, "csv", now=now, detail=f"invoices {source}"[:500])
    return counts


def _upsert_customers(tx: Tx, customers: list[Customer], counts: dict[str, int]) -> None:
    if customers:
        write_customers(tx, customers)
        counts["customers"] += len(customers)
        customers.clear()


def import_payments(store: Store, path: Path, options: BulkOptions, *, now: datetime) -> dict[str, int]:
    """Check and apply the payments CSV at ``path`` in one transaction (see the module docstring).

    A payment marks its invoice paid under the transition rule (:mod:`oncebeat.reminders.records`): an open or
    uncollectible invoice becomes paid; one already paid or void is counted ``unchanged (already closed)``.
    Refused, naming the line: an unknown invoice number, a payment dated before its invoice was issued, an invoice
    number given twice, and every per-row problem.

    Returns:
        ``{"payments", "marked_paid", "unchanged (already closed)", "rejected"}`` counts.
    Raises:
        ImportRejected: problems without ``skip_invalid`` (nothing applied), or the file cannot be read.
    """
    path = Path(path)
    source = options.source_name if options.source_name is not None else path.name
    with _errors_written(options):
        table, checker, file_problems = open_payment_table(path, column_map=options.column_map, source=source,
                                                           date_format=options.date_format, today=options.today)
    if checker is None:
        return {"payments": 0, "marked_paid": 0, "unchanged (already closed)": 0} \
            | _reject_everything(table, file_problems, options, source)
    with store.transaction() as tx:
        staging = _Staging(tx, source)
        for line, fields in table.rows(options.progress):
            staged, found = checker.check(line, fields)
            for p in found:
                staging.problem(p)
            if staged is not None:
                staging.row(staged.as_params())
        if table.read_error is not None:
            staging.problem(table.read_error)
        staging.flush()
        tx.run("bulk_index_numbers")
        for p in duplicate_problems(_shared_numbers(staging), source):
            staging.problem(p, mark=True)
        for p in _unpayable(staging):
            staging.problem(p, mark=True)
        staging.flush()
        payments = paid = 0
        if not staging.problems or options.skip_invalid:
            valid = tx.one("bulk_valid_count")
            payments = int(valid["n"]) if valid else 0
            if options.on_apply is not None:
                options.on_apply(payments, table.rows_read)
            rows = staging.pages(lambda **k: tx.run("bulk_valid_payments", **k), ("line",), (0,))
            while page := [r for _, r in zip(range(PAGE), rows, strict=False)]:
                paid += mark_paid(tx, [(r["number"], r["paid_on"]) for r in page], now=now)
        rejected = _finish(staging, table, options)
        staging.drop()
        touch_watermark(tx, "csv", now=now, detail=f"payments {source}"[:500])  # the freshness fence's watermark
    return {"payments": payments, "marked_paid": paid, "unchanged (already closed)": payments - paid,
            "rejected": rejected}


def _shared_numbers(staging: _Staging) -> Iterator[tuple[str, int]]:
    """(number, line) of every row whose invoice number another row has too, by number then line."""
    for r in staging.pages(lambda **k: staging.tx.run("bulk_shared_numbers", **k), ("number", "line"), ("", 0)):
        yield r["number"], r["line"]


def _unpayable(staging: _Staging) -> Iterator[RowProblem]:
    """A problem for each valid payment naming an unknown invoice or dated before its invoice was issued."""
    for r in staging.pages(lambda **k: staging.tx.run("bulk_unpayable", **k), ("line",), (0,)):
        if r["invoice_id"] is None:
            yield RowProblem(line=r["line"], column="invoice_number", value=r["number"], source=staging.source,
                             reason="is not a known invoice; import the invoices first, or fix the number")
        else:
            yield RowProblem(line=r["line"], column="paid_on", value=r["paid_on"].isoformat(), source=staging.source,
                             reason=f"is before the invoice was issued ({r['issued_on'].isoformat()}); check the "
                                    "date (and --date-format)")
