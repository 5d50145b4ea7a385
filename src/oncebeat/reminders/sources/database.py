"""The team's own database as a source: ``[source] kind = "sql"`` in oncebeat.toml, read with plain DB-API.

::

    [source]
    kind = "sql"
    url = "$TEAM_DATABASE_URL"          # postgresql://… or sqlite:///path; read from the environment at each read
    invoices = \"\"\"
      SELECT i.number AS invoice_number, c.email AS customer_email, c.name AS customer_name,
             i.currency, i.amount_cents AS amount_due_minor, i.issued_on, i.due_date AS due_on,
             i.status, i.paid_at AS paid_on
      FROM invoices i JOIN customers c ON c.id = i.customer_id\"\"\"
    payments = \"\"\"
      SELECT i.number AS invoice_number, MAX(p.paid_on) AS paid_on
      FROM payments p JOIN invoices i ON i.id = p.invoice_id GROUP BY i.number\"\"\"
    every = "15m"                       # also read on this schedule (besides before each scan and `oncebeat sync`)
    max_rows = 200000                   # a read returning more rows is refused whole

Each query (or a view's name) names its columns as the invoice and payments CSV files do (``AS invoice_number``,
``AS due_on``, …: the mapping the CSV import's ``--map`` does, written in SQL); extra columns are ignored. An
amount is given either as ``amount_due`` in major units or as ``amount_due_minor``, an integer of ISO 4217 minor
units (Rails' ``amount_cents``). A NULL is an empty value: a ``customer_tz`` column that is NULL clears the
customer's zone, as an empty CSV cell does; a column the query does not have keeps the stored value. A customer's
country and tags are the CSV's ``customer_country`` and ``customer_tags`` (``"a;b"`` text, or a PostgreSQL
``text[]`` array), e.g. ``c.country_code AS customer_country, c.segments AS customer_tags``.

Rules:

- The URL is ``$NAME`` (read from the environment at each read) or a literal URL **without** a password; a
  literal password is refused (it would sit in a file and the process list). It is redacted in every message.
- One read is **one snapshot**: PostgreSQL reads in a ``REPEATABLE READ, READ ONLY`` transaction, SQLite in one
  read transaction on a read-only connection; rows are fetched in chunks (a server-side cursor on PostgreSQL)
  and at most ``max_rows`` over all queries are read.
- Rows are checked by the CSV import's own row checkers (:class:`~.invoices.InvoiceRowChecker`,
  :class:`~.payments.PaymentRowChecker`) and rules across rows; every problem is reported at once, named by
  query, row key and column (``source query invoices, row invoice_number='INV-7', column due_on: …``), and
  nothing is applied (:mod:`oncebeat.reminders.syncing` applies a clean read).
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Generator, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import unquote, urlsplit

from ...errors import ConfigError, OncebeatError
from ...redact import redact_url, remember_secrets, url_secret
from ..model import Customer, Invoice, Payment
from ..money import iso_minor_digits
from .invoices import STANDARD_COLUMNS, CustomerRow, InvoiceRowChecker, customer_rule, duplicate_problems
from .payments import PAYMENT_COLUMNS, PAYMENT_OPTIONAL_COLUMNS, PaymentRowChecker
from .problems import RowProblem

__all__ = ["DEFAULT_MAX_ROWS", "SOURCE_KEYS", "SourceConfig", "SourceProblem", "SourceRead", "SourceRejected",
           "SourceUnavailable", "read_source", "source_config"]

SOURCE_KEYS = ("kind", "url", "invoices", "payments", "every", "max_rows")
DEFAULT_MAX_ROWS = 200_000
MAX_PROBLEMS = 100
#: Rows fetched per round trip.
CHUNK = 1000
MINOR_COLUMN = "amount_due_minor"
#: Seconds one query of a read may run on PostgreSQL (statement_timeout) before the read fails.
READ_TIMEOUT = 300.0
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_VIEW_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")
_SELECT = re.compile(r"\s*(select|with)\b", re.IGNORECASE)
_DURATION = re.compile(r"(\d+)\s*([smhd])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_LINE = re.compile(r"\bline (\d+)\b")


class SourceUnavailable(OncebeatError):
    """The team's database could not be read (down, refused, a query failed, a variable unset); nothing was
    applied. The message is redacted (no password)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceProblem:
    """One problem of a read: the ``query`` (invoices, payments), the row's key (``invoice_number='INV-7'``, or
    ``#12`` for the 12th row when it has none), the column (None: the row or the query as a whole)."""

    query: str
    row: str | None
    column: str | None
    message: str

    def __str__(self) -> str:
        where = f"source query {self.query}"
        if self.row is not None:
            where += f", row {self.row}"
        if self.column:
            where += f", column {self.column}"
        return f"{where}: {self.message}"


class SourceRejected(OncebeatError):
    """A read with problems; nothing was applied. ``problems``: the first :data:`MAX_PROBLEMS`; ``total``."""

    def __init__(self, problems: Sequence[SourceProblem], rows: int) -> None:
        self.problems = list(problems[:MAX_PROBLEMS])
        self.total = len(problems)
        self.rows = rows
        #: The count without the problems (the CLI lists them below it).
        self.summary = f"{self.total} problem(s) in {rows} row(s) read from the team's database; nothing was applied"
        super().__init__(f"{self.summary}. First: {problems[0]}" if problems else "the read was refused")


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceConfig:
    """A validated ``[source]`` section. ``url`` as written (``$NAME`` or a password-free URL); ``invoices`` and
    ``payments``: the SQL each runs (a view's name already turned into ``SELECT * FROM name``); ``every``: seconds
    between reads of their own (None: only before each scan and on ``oncebeat sync``)."""

    kind: str = "sql"
    url: str
    invoices: str
    payments: str | None = None
    every: float | None = None
    max_rows: int = DEFAULT_MAX_ROWS

    @property
    def name(self) -> str:
        """The source's name in ``source_reads`` and messages: the URL as written, redacted."""
        return redact_url(self.url)

    def resolve_url(self) -> str:
        """The URL to connect to (``$NAME`` read from the environment now).

        Raises:
            SourceUnavailable: the variable is not set or empty.
        """
        if not self.url.startswith("$"):
            return self.url
        value = os.environ.get(self.url[1:], "")
        if not value:
            raise SourceUnavailable(f"[source] url = {self.url!r}: the variable {self.url[1:]} is not set in this "
                                    f"process's environment; set it to the team database's URL")
        remember_secrets(value)
        return value


def _query(value: Any, key: str, problems: list[str]) -> str | None:
    if not isinstance(value, str) or not value.strip():
        problems.append(f"[source] {key} must be a SELECT query or a view's name, e.g. {key} = \"SELECT number AS "
                        "invoice_number, … FROM invoices\"")
        return None
    text = value.strip().rstrip(";").strip()
    if _VIEW_NAME.fullmatch(text):
        return f"SELECT * FROM {text}"  # a plain identifier: nothing to inject
    if not _SELECT.match(text) or ";" in text:
        problems.append(f"[source] {key} = {text[:60]!r} is neither one SELECT (or WITH) query nor a view's name. "
                        "Write one query without ';', or the name of a view")
        return None
    return text


def _check_url(raw: Any, problems: list[str]) -> str | None:
    example = 'url = "$TEAM_DATABASE_URL"'
    if not isinstance(raw, str) or not raw.strip():
        problems.append(f"[source] url is required: a $VARIABLE holding the team database's URL, e.g. {example}")
        return None
    value = raw.strip()
    if value.startswith("$"):
        if not _ENV_NAME.fullmatch(value[1:]):
            problems.append(f"[source] url = {value!r}: after $ comes an environment variable's name, e.g. {example}")
            return None
        return value
    parts = urlsplit(value)
    if parts.scheme not in ("postgresql", "postgres", "sqlite"):
        problems.append(f"[source] url = {redact_url(value)!r} is not a postgresql:// or sqlite:/// URL; write "
                        f"{example} and set TEAM_DATABASE_URL")
        return None
    if secret := url_secret(value):
        remember_secrets(value)
        problems.append(f"[source] url = {redact_url(value)!r} holds {secret}, which must not sit in "
                        f"oncebeat.toml; write {example} and set TEAM_DATABASE_URL in the environment instead")
        return None
    return value


def source_config(content: Any, *, source: str) -> SourceConfig:
    """Validate the ``[source]`` table of oncebeat.toml (``source`` names the file in errors).

    Raises:
        ConfigError: every problem, each naming the key and the fix.
    """
    if not isinstance(content, dict):
        raise ConfigError(f"{source}: source must be a table. Write it as a [source] section header followed by "
                          "its keys.")
    problems: list[str] = []
    for key in content:
        if key not in SOURCE_KEYS:
            problems.append(f"[source] {key} is not a known key. Allowed keys: {', '.join(SOURCE_KEYS)}.")
    if content.get("kind", "sql") != "sql":
        problems.append(f"[source] kind = {content.get('kind')!r} is not a source kind; write kind = \"sql\"")
    url = _check_url(content.get("url"), problems)
    invoices = _query(content.get("invoices"), "invoices", problems)
    payments = _query(content["payments"], "payments", problems) if "payments" in content else None
    every: float | None = None
    if "every" in content:
        m = _DURATION.fullmatch(str(content["every"]).strip())
        every = float(int(m.group(1)) * _UNIT[m.group(2)]) if m else None
        if every is None or every < 60:
            problems.append(f"[source] every = {content['every']!r} must be a duration of at least 1 minute, e.g. "
                            'every = "15m"')
    max_rows = content.get("max_rows", DEFAULT_MAX_ROWS)
    if isinstance(max_rows, bool) or not isinstance(max_rows, int) or not 1 <= max_rows <= 10_000_000:
        problems.append(f"[source] max_rows = {max_rows!r} must be a whole number from 1 to 10000000")
    if problems:
        listing = problems[0] if len(problems) == 1 else f"{len(problems)} problems:\n" + "\n".join(
            f"  - {p}" for p in problems)
        raise ConfigError(f"{source}: {listing}")
    assert url is not None and invoices is not None
    return SourceConfig(url=url, invoices=invoices, payments=payments, every=every, max_rows=max_rows)


# --------------------------------------------------------------------------- reading


@dataclass(slots=True)
class SourceRead:
    """What one clean read found: the customers and invoices to upsert, the payments to record, rows read."""

    customers: list[Customer] = field(default_factory=list)
    invoices: list[Invoice] = field(default_factory=list)
    payments: list[Payment] = field(default_factory=list)
    rows: int = 0


def _text(value: Any) -> str:
    """A database value as the text the CSV checkers read (NULL: empty)."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.date().isoformat()  # a timestamp column (Rails' paid_at) read as its day
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return format(value.normalize(), "f")
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list | tuple):  # a PostgreSQL array (text[] of tags): the CSV's "a;b"
        return ";".join(_text(v) for v in value)
    return str(value)


def _major(minor: str, currency: str) -> str:
    """``amount_due_minor`` as the major-unit text the checker reads (unchanged when it cannot be converted: the
    checker then names the problem)."""
    digits = iso_minor_digits(currency.strip().upper())
    if digits is None or not re.fullmatch(r"-?\d+", minor):
        return minor
    return format(Decimal(minor).scaleb(-digits), "f")


def _one_line(exc: Exception) -> str:
    """A driver's error on one line (libpq's run over several)."""
    return " ".join(str(exc).split()) or type(exc).__name__


class _Reader:
    """One read transaction over the team's database, yielding each query's rows in chunks."""

    def __init__(self, url: str) -> None:
        scheme = urlsplit(url).scheme
        self.conn: Any
        try:
            if scheme in ("postgresql", "postgres"):
                import psycopg

                self.conn = psycopg.connect(url, connect_timeout=10, autocommit=False)
                self.conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
                self.conn.read_only = True
                # No stall is unbounded (G3): a query that runs away is cut, and the read recorded failed.
                self.conn.execute(f"SET LOCAL statement_timeout = {int(READ_TIMEOUT * 1000)}")
                self.pg = True
            elif scheme == "sqlite":
                path = unquote(url[len("sqlite:///"):]) if url.startswith("sqlite:///") else ""
                if not path or not os.path.exists(path):
                    raise SourceUnavailable(f"the team's SQLite database {redact_url(url)!r} does not exist")
                self.conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None, timeout=10)
                self.conn.execute("BEGIN")  # one read transaction: every query reads the same snapshot
                self.pg = False
            else:
                raise SourceUnavailable(f"{redact_url(url)!r} is not a postgresql:// or sqlite:/// URL")
        except SourceUnavailable:
            raise
        except Exception as exc:
            raise SourceUnavailable(f"cannot connect to the team's database {redact_url(url)}: "
                                    f"{redact_url(_one_line(exc))}") from None

    def rows(self, name: str, sql: str) -> Generator[tuple[list[str], list[tuple[Any, ...]]], None, None]:
        """``(column names, chunk of rows)`` of ``sql``, fetched :data:`CHUNK` rows at a time."""
        cur = self.conn.cursor(name=f"oncebeat_{name}") if self.pg else self.conn.cursor()
        try:
            cur.execute(sql)
            columns: list[str] | None = None
            while True:
                chunk = cur.fetchmany(CHUNK)
                if columns is None:
                    columns = [str(d[0]).lower() for d in cur.description or ()]
                yield columns, chunk
                if not chunk:
                    break
        except Exception as exc:
            raise SourceUnavailable(f"source query {name} failed: {redact_url(_one_line(exc))}") from None
        finally:
            try:
                cur.close()  # also when the caller stops early (a missing column, max_rows)
            except Exception:  # noqa: BLE001 - the transaction is rolled back next; nothing to keep
                pass

    def close(self) -> None:
        try:
            self.conn.rollback() if self.pg else self.conn.execute("ROLLBACK")
        except Exception:  # noqa: BLE001 - closing a read-only transaction: nothing to keep
            pass
        self.conn.close()


@dataclass(slots=True)
class _Collected:
    problems: list[SourceProblem] = field(default_factory=list)
    keys: dict[tuple[str, int], str] = field(default_factory=dict)  # (query, row index) -> row key
    rows: int = 0

    def key(self, query: str, n: int) -> str:
        return self.keys.get((query, n), f"#{n}")

    def add(self, query: str, found: Sequence[RowProblem]) -> None:
        for p in found:
            text = p.reason if p.value is None else f"{p.value!r} {p.reason}"
            text = _LINE.sub(lambda m: f"row {self.key(query, int(m.group(1)))}", text)
            self.problems.append(SourceProblem(query=query, row=self.key(query, p.line), column=p.column,
                                               message=text))


def _read_query(reader: _Reader, name: str, sql: str, wanted: Sequence[str], required: Sequence[str],
                got: _Collected, max_rows: int) -> Iterator[tuple[int, list[str], dict[str, int]]]:
    """Each row of query ``name`` as ``(row number, its texts, {our column: position})``; a missing required
    column or more than ``max_rows`` rows in all is a problem of the query (its rows then stop)."""
    with closing(reader.rows(name, sql)) as chunks:
        yield from _numbered(name, chunks, wanted, required, got, max_rows)


def _numbered(name: str, chunks: Iterator[tuple[list[str], list[tuple[Any, ...]]]], wanted: Sequence[str],
              required: Sequence[str], got: _Collected, max_rows: int
              ) -> Iterator[tuple[int, list[str], dict[str, int]]]:
    positions: dict[str, int] | None = None
    n = 0
    for columns, chunk in chunks:
        if positions is None:
            positions = {c: i for i, c in enumerate(columns) if c in wanted}
            missing = [c for c in required if c not in positions]
            got.problems += [SourceProblem(query=name, row=None, column=c, message=(
                f"the query has no column {c}; name it in the SELECT, e.g. … AS {c}")) for c in missing]
            if name == "invoices" and "amount_due" not in positions and MINOR_COLUMN not in positions:
                missing.append("amount_due")
                got.problems.append(SourceProblem(query=name, row=None, column="amount_due", message=(
                    "the query has no column amount_due (major units) or amount_due_minor (ISO 4217 minor units, "
                    "e.g. amount_cents AS amount_due_minor)")))
            if missing:
                return
        for raw in chunk:
            n += 1
            got.rows += 1
            if got.rows > max_rows:
                got.problems.append(SourceProblem(query=name, row=None, column=None, message=(
                    f"the read returns more than max_rows = {max_rows} rows; nothing was applied. Raise [source] "
                    "max_rows or narrow the query")))
                return
            texts = [_text(v) for v in raw]
            if "invoice_number" in positions and texts[positions["invoice_number"]]:
                got.keys[(name, n)] = f"invoice_number={texts[positions['invoice_number']]!r}"
            yield n, texts, positions


def read_source(config: SourceConfig, *, today: date | None) -> SourceRead:
    """Read the team's database once (one snapshot) and check every row as the CSV import does.

    Args:
        config: the ``[source]`` section.
        today: payments dated after ``today`` + 1 day are refused (None: no such check).
    Returns:
        :class:`SourceRead`: the customers, invoices and payments of a read without problems.
    Raises:
        SourceUnavailable: the database cannot be reached or a query fails (redacted message).
        SourceRejected: every problem found, by query, row key and column (nothing to apply).
    """
    reader = _Reader(config.resolve_url())
    got = _Collected()
    out = SourceRead()
    try:
        invoice_columns = (*STANDARD_COLUMNS, MINOR_COLUMN)
        staged = []
        found: list[RowProblem] = []
        required = [c for c in STANDARD_COLUMNS[:7] if c != "amount_due"]
        for n, texts, positions in _read_query(reader, "invoices", config.invoices, invoice_columns, required,
                                               got, config.max_rows):
            ours = dict(positions)
            if MINOR_COLUMN in ours and "amount_due" not in ours:
                currency = texts[ours["currency"]]
                texts.append(_major(texts[ours.pop(MINOR_COLUMN)], currency))
                ours["amount_due"] = len(texts) - 1
            ours.pop(MINOR_COLUMN, None)
            header = [f"c{i}" for i in range(len(texts))]
            checker = InvoiceRowChecker(source="", header=header, positions=ours, computed=(), today=today)
            row, problems = checker.check(n, texts)
            found += problems
            if row is not None:
                staged.append(row)
        found += duplicate_problems(sorted((s.number, s.line) for s in staged if s.number), "")
        bad = {p.line for p in found}
        by_email = sorted((CustomerRow(email=s.email, line=s.line, name=s.name, x_locale=s.x_locale, x_tz=s.x_tz,
                                       x_country=s.x_country, x_tags=s.x_tags, bad=s.line in bad)
                           for s in staged if s.email and s.name),
                          key=lambda r: (r.email, r.line))
        for item in customer_rule(by_email, ""):
            if isinstance(item, RowProblem):
                found.append(item)
            else:
                out.customers.append(item)
        got.add("invoices", found)
        if not found:
            out.invoices = [s.invoice() for s in staged]
        if config.payments is not None:
            pay_found: list[RowProblem] = []
            pay_staged = []
            for n, texts, positions in _read_query(reader, "payments", config.payments,
                                                   PAYMENT_COLUMNS + PAYMENT_OPTIONAL_COLUMNS, PAYMENT_COLUMNS, got,
                                                   config.max_rows):
                checker_p = PaymentRowChecker(source="", header=[f"c{i}" for i in range(len(texts))],
                                              positions=positions, computed=(), today=today)
                prow, problems = checker_p.check(n, texts)
                pay_found += problems
                if prow is not None:
                    pay_staged.append(prow)
            pay_found += duplicate_problems(sorted((s.number, s.line) for s in pay_staged if s.number), "")
            got.add("payments", pay_found)
            if not pay_found:
                out.payments = [s.payment() for s in pay_staged]
    finally:
        reader.close()
    out.rows = got.rows
    if got.problems:
        raise SourceRejected(got.problems, got.rows)
    return out
