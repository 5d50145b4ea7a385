"""Read invoices and payments from CSV files, checking every row.

This module only parses and validates: it returns :class:`Customer`,
:class:`Invoice` and :class:`Payment` values plus a list of
:class:`RowProblem` (one per problem found, every row checked, never stopping
at the first). Nothing here touches the database and nothing raises for a bad
row. The caller decides what to apply: nothing unless ``problems`` is empty
(:meth:`InvoiceImport.raise_if_problems`), or, with ``--skip-invalid``, the
valid rows, writing the rejected ones with :func:`write_rejects`.

The file format is described in :data:`INVOICE_CSV_HELP`.
"""

from __future__ import annotations

import csv
import difflib
import gzip
import io
import os
import re
import unicodedata
import zoneinfo
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Context, Decimal, InvalidOperation
from email.utils import parseaddr
from pathlib import Path

from babel import Locale, UnknownLocaleError
from babel.numbers import get_currency_precision

from oncebeat.csvsafe import safe_row
from oncebeat.errors import ConfigError, ImportRejected
from oncebeat.mail.message import address_problem
from oncebeat.reminders.conversions import (
    DATE_RANGE_TEXT,
    Computed,
    DateFormat,
    currency_reason,
    date_range_reason,
    foreign_digits,
    iana_zones,
    split_column_map,
    text_reason,
    zone_reason,
)
from oncebeat.reminders.model import INVOICE_STATUSES, Customer, Invoice, Payment

__all__ = [
    "STANDARD_COLUMNS",
    "REQUIRED_COLUMNS",
    "OPTIONAL_COLUMNS",
    "PAYMENT_COLUMNS",
    "INVOICE_CSV_HELP",
    "RowProblem",
    "InvoiceImport",
    "parse_column_map",
    "read_invoices_csv",
    "read_payments_csv",
    "write_rejects",
    "write_problems",
    "raise_if_problems",
]

REQUIRED_COLUMNS: tuple[str, ...] = (
    "invoice_number",
    "customer_email",
    "customer_name",
    "currency",
    "amount_due",
    "issued_on",
    "due_on",
)
OPTIONAL_COLUMNS: tuple[str, ...] = ("customer_locale", "customer_tz", "status", "paid_on", "status_on")
#: Every column of the invoice CSV, in the order :func:`write_invoices_csv` writes them.
STANDARD_COLUMNS: tuple[str, ...] = REQUIRED_COLUMNS + OPTIONAL_COLUMNS
#: Columns of the payments CSV (both required).
PAYMENT_COLUMNS: tuple[str, ...] = ("invoice_number", "paid_on")
#: Optional column of the payments CSV: the exact instant (ISO with offset), for exact replays.
PAYMENT_OPTIONAL_COLUMNS: tuple[str, ...] = ("paid_at",)
#: A progress callback: (rows checked so far, rows in the file).
Progress = Callable[[int, int], None]

DEFAULT_LOCALE = "en_US"
DEFAULT_TZ = ""  # no zone of its own: the schedule's zone applies (send_zone = "customer" falls back to it)

INVOICE_CSV_HELP = """\
Invoice CSV: UTF-8 (a byte-order mark is fine), comma-separated (semicolon or
tab also detected), one header row, then one invoice per row.

Required columns:
  invoice_number   unique in the file, e.g. INV-2026-00042
  customer_email   one address per row, e.g. zoe@example.com (compared
                   case-insensitively; one customer per address)
  customer_name    e.g. Zoë Martin (the same address must always have the same name)
  currency         ISO 4217 code, e.g. USD, EUR, JPY
  amount_due       plain decimal in major units, no symbols or thousands
                   separators: 1234.50 USD, 1200 JPY, 12.345 BHD; never
                   more decimals than the currency has
  issued_on        YYYY-MM-DD
  due_on           YYYY-MM-DD, not before issued_on
Optional columns:
  customer_locale  e.g. de_DE or pt-BR (default en_US)
  customer_tz      IANA time zone, e.g. America/Chicago (default: none, the schedule's zone)
  status           open, paid, void or uncollectible (default open;
                   paid when paid_on is given)
  paid_on          YYYY-MM-DD; required when status is paid
  status_on        YYYY-MM-DD, the day status was set: a paid invoice is
                   reopened (open, void, uncollectible) only by a status_on
                   after its payment date, or with --reopen

Other names for the columns: --map invoice_number=InvoiceNo,customer_email=Email
(our name = your header). Extra columns are ignored. Every row is checked and
every problem reported with its line; nothing is imported unless all rows are
valid, or with --skip-invalid the valid rows are imported and the rejected
ones written to a CSV with an extra "error" column.

Payments CSV: columns invoice_number and paid_on (YYYY-MM-DD).
"""

_AMOUNT_RE = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)", re.ASCII)
_ISO_DATES = DateFormat("iso")
_PAID_AHEAD = timedelta(days=1)  # a payment may be dated tomorrow (zones ahead of ours), not later
_MAX_MINOR = 10**15  # far below a 64-bit integer column


# --------------------------------------------------------------------------- values


@dataclass(frozen=True, kw_only=True, slots=True)
class RowProblem:
    """One problem in one row (or in the file as a whole, then ``line`` is 1).

    ``line`` is the physical line number in the file, the header being line 1.
    ``source`` is the file name shown in messages.
    """

    line: int
    column: str | None
    value: str | None
    reason: str
    source: str = ""

    def describe(self) -> str:
        """The problem without the file and line: ``column due_on: '2026-02-30' is not a valid date …``."""
        text = self.reason if self.value is None else f"{self.value!r} {self.reason}"
        return f"column {self.column}: {text}" if self.column else text

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.source else f"line {self.line}"
        return f"{where}: {self.describe()}"


@dataclass(frozen=True, kw_only=True, slots=True)
class InvoiceImport:
    """What :func:`read_invoices_csv` found.

    ``customers`` and ``invoices`` come from the valid rows only;
    ``rejected_lines`` holds ``(line, row)`` for every invalid row, ``row``
    keyed by the file's own header names; ``rows_read`` counts data rows
    (blank lines excluded); ``header`` is the file's header as read.
    """

    customers: list[Customer]
    invoices: list[Invoice]
    problems: list[RowProblem]
    rejected_lines: list[tuple[int, dict[str, str]]]
    rows_read: int
    header: list[str] = field(default_factory=list)
    source: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems

    def raise_if_problems(self) -> None:
        """Raise :class:`ImportRejected` listing every problem, unless there are none."""
        raise_if_problems(self.problems, source=self.source, rows_read=self.rows_read)


def raise_if_problems(problems: Sequence[RowProblem], *, source: str = "", rows_read: int | None = None) -> None:
    """Raise :class:`ImportRejected` (nothing applied) when ``problems`` is not empty."""
    if not problems:
        return
    lines = sorted({p.line for p in problems})
    name = source or "the file"
    of = f" of {rows_read} rows" if rows_read is not None else ""
    message = (
        f"{name}: {len(problems)} problem{'s' if len(problems) != 1 else ''} on "
        f"{len(lines)} line{'s' if len(lines) != 1 else ''}{of}; nothing was imported "
        "(fix the file, or use --skip-invalid to import the valid rows and write the rejects)"
    )
    raise ImportRejected(message, [str(p) for p in problems])


# --------------------------------------------------------------------------- column map


def parse_column_map(spec: str | Sequence[str] | None, *, columns: Sequence[str] = STANDARD_COLUMNS) -> dict[str, str]:
    """Parse ``--map``: ``"invoice_number=InvoiceNo,customer_email=Email"`` (ours=theirs).

    A value may also be a constant or a template over the file's columns
    (see :class:`~oncebeat.reminders.conversions.Computed`):
    ``currency=const:USD``, ``customer_email=template:{CustomerID}@billing.example.test``.
    Parts are separated by commas that start a new ``name=`` (so a template may
    contain commas); ``spec`` may also be a list of such strings (``--map`` given
    several times). Returns ``{our column: their header or const:/template: spec}``.
    Raises :class:`ConfigError` naming the bad part.
    """
    if spec is None:
        return {}
    specs = [spec] if isinstance(spec, str) else list(spec)
    result: dict[str, str] = {}
    for raw in (part for text in specs for part in re.split(r",(?=\s*[A-Za-z_]+\s*=)", text)):
        part = raw.strip()
        if not part:
            continue
        if "=" not in part:
            raise ConfigError(
                f"--map: {part!r} is not of the form our_column=TheirColumn "
                f"(e.g. invoice_number=InvoiceNo)"
            )
        ours, _, theirs = part.partition("=")
        ours, theirs = ours.strip(), theirs.strip()
        if not ours or not theirs:
            raise ConfigError(f"--map: {part!r} needs a name on both sides of '=' (e.g. invoice_number=InvoiceNo)")
        if ours not in columns:
            close = difflib.get_close_matches(ours, columns, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise ConfigError(
                f"--map: {ours!r} in {part!r} is not one of our columns ({', '.join(columns)}){hint}"
            )
        Computed.parse(ours, theirs)  # raises for a malformed template
        if ours in result:
            raise ConfigError(f"--map: {ours!r} is mapped twice ({result[ours]!r} and {theirs!r})")
        result[ours] = theirs
    return result


# --------------------------------------------------------------------------- reading CSV


@dataclass(slots=True)
class _Table:
    header: list[str]
    rows: list[tuple[int, list[str]]]  # (first physical line, fields)
    problems: list[RowProblem]


def _undecodable(text: str) -> bytes | None:
    """The raw bytes behind surrogate escapes in ``text``, or None if it was valid UTF-8."""
    if not any("\udc80" <= ch <= "\udcff" for ch in text):
        return None
    return bytes(ord(ch) - 0xDC00 for ch in text if "\udc80" <= ch <= "\udcff")


def _clean(text: str) -> str:
    """Text safe to write back as UTF-8: undecodable bytes become U+FFFD."""
    if _undecodable(text) is None:
        return text
    return "".join("\ufffd" if "\udc80" <= ch <= "\udcff" else ch for ch in text)


def _read_table(path: Path, source: str) -> _Table:
    try:
        data = path.read_bytes()
    except OSError as exc:
        problem = RowProblem(line=1, column=None, value=None, reason=f"cannot read the file: "
                                                                     f"{exc.strerror or exc}", source=source)
        raise ImportRejected(f"{source}: cannot read the file: {exc.strerror or exc}", [str(problem)]) from exc

    def file_problem(reason: str) -> _Table:
        problem = RowProblem(line=1, column=None, value=None, reason=reason, source=source)
        return _Table(header=[], rows=[], problems=[problem])

    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return file_problem("the file is UTF-16 encoded; save it as CSV UTF-8")
    if data.startswith(b"\x1f\x8b"):  # a gzip-compressed export (.csv.gz) is read as it is
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            return file_problem(f"is gzip-compressed but cannot be decompressed ({exc})")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    # Undecodable bytes are kept as surrogate escapes and reported per row and column below.
    text = data.decode("utf-8", errors="surrogateescape")
    if not text.strip():
        return file_problem(
            f"the file is empty; expected a header row with {', '.join(REQUIRED_COLUMNS)}"
            if source
            else "the file is empty"
        )
    first_line = text.lstrip("\r\n").split("\n", 1)[0]
    delimiter = ","
    if "," not in first_line:
        if ";" in first_line:
            delimiter = ";"
        elif "\t" in first_line:
            delimiter = "\t"
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=False)
    header: list[str] | None = None
    rows: list[tuple[int, list[str]]] = []
    problems: list[RowProblem] = []
    previous_end = 0
    try:
        for fields in reader:
            start = previous_end + 1
            previous_end = reader.line_num
            if not fields or all(not f.strip() for f in fields):
                continue  # blank line
            if header is None:
                header = [_clean(f.strip()) for f in fields]
                continue
            rows.append((start, fields))
    except csv.Error as exc:
        problems.append(
            RowProblem(line=previous_end + 1, column=None, value=None, reason=f"cannot be read as CSV "
                                                                              f"({exc})", source=source)
        )
    if header is None:
        return file_problem("the file has no header row")
    return _Table(header=header, rows=rows, problems=problems)


def _resolve_columns(
    header: list[str],
    wanted: Sequence[str],
    required: Sequence[str],
    column_map: Mapping[str, str] | None,
    source: str,
    provided: Sequence[str] = (),
) -> tuple[dict[str, int], list[RowProblem]]:
    """Map our column names to header positions; one problem (line 1) for all missing ones.

    ``provided`` are our columns that come from elsewhere (a computed ``--map``
    value or an option such as ``--currency``): never missing.
    """
    column_map, computed = split_column_map(column_map or {})
    wanted = [c for c in wanted if c not in computed]
    provided = [*provided, *computed]
    problems: list[RowProblem] = []
    positions: dict[str, int] = {}
    exact: dict[str, list[int]] = {}
    folded: dict[str, list[int]] = {}
    for i, name in enumerate(header):
        if name:
            exact.setdefault(name, []).append(i)
            folded.setdefault(_fold(name), []).append(i)
    for ours in wanted:
        theirs = column_map.get(ours, ours)
        found = exact.get(theirs) or folded.get(_fold(theirs))
        if not found:
            continue
        if len(found) > 1:
            problems.append(
                RowProblem(
                    line=1,
                    column=ours,
                    value=theirs,
                    reason=f"appears {len(found)} times in the header (columns "
                           f"{', '.join(str(i + 1) for i in found)}); keep one",
                    source=source,
                )
            )
        positions[ours] = found[0]
    for value in computed.values():
        absent = [f for f in value.fields if not (exact.get(f) or folded.get(_fold(f)))]
        if absent:
            problems.append(RowProblem(
                line=1, column=value.ours, value=value.describe(),
                reason=(f"uses {', '.join(absent)}, which the header does not have; the header has: "
                        f"{', '.join(h for h in header if h) or 'nothing'}"),
                source=source))
    missing = [c for c in required if c not in positions and c not in provided]
    if missing:
        mapped = [f"{c}={column_map[c]!r}" for c in missing if c in column_map]
        header_text = ", ".join(h for h in header if h) or "nothing"
        example = ",".join(f"{c}=YourColumn" for c in missing[:2])
        what = "required column is" if len(missing) == 1 else "required columns are"
        via = f" (mapped by --map {', '.join(mapped)})" if mapped else ""
        problems.append(
            RowProblem(
                line=1,
                column=", ".join(missing),
                value=None,
                reason=(
                    f"{what} missing from the header{via}; the header has: {header_text}. "
                    f"Rename the header, or map your names with --map {example}"
                ),
                source=source,
            )
        )
    return positions, problems


def _fold(name: str) -> str:
    return re.sub(r"[\s_\-]+", "_", name.strip().casefold())


def _row_dict(header: list[str], fields: list[str]) -> dict[str, str]:
    row: dict[str, str] = {}
    fields = list(fields)
    while len(fields) > len(header) and not fields[-1].strip():
        fields.pop()  # trailing empty fields (spreadsheet exports)
    for i, value in enumerate(fields):
        if i >= len(header):
            key = f"(extra {i + 1})"
        elif header[i] in row:
            key = f"{header[i]} (column {i + 1})"
        else:
            key = header[i]
        row[key] = _clean(value)
    return row


def _fit_fields(header: list[str], fields: list[str]) -> tuple[list[str], str | None]:
    """Fields aligned to the header, or a reason why the row has the wrong number of fields."""
    n = len(header)
    if len(fields) > n and all(not f.strip() for f in fields[n:]):
        fields = fields[:n]  # trailing empty fields (spreadsheet exports)
    if len(fields) != n:
        return fields, (f"has {len(fields)} field{'s' if len(fields) != 1 else ''} but the header has {n} "
                        "(check for an unquoted comma or a missing value)")
    return fields, None


# --------------------------------------------------------------------------- value checks


def _read_date(value: str, fmt: DateFormat) -> tuple[date | None, str | None]:
    """(date, None) or (None, reason): the format, digits of other scripts and the documented range."""
    digits = foreign_digits(value)
    if digits:
        return None, f"contains digits of another script ({digits!r}); write ASCII digits 0-9"
    day = fmt.read(value)
    if day is None:
        return None, fmt.reason
    reason = date_range_reason(day)
    return (None, reason) if reason else (day, None)


def _read_instant(value: str) -> tuple[datetime | None, str | None]:
    """An ISO instant with a UTC offset (``2026-02-03T09:30:00-06:00``), or (None, reason)."""
    if foreign_digits(value):
        return None, "contains digits of another script; write ASCII digits 0-9"
    try:
        instant = datetime.fromisoformat(value)
    except ValueError:
        return None, "is not an ISO instant such as 2026-02-03T09:30:00-06:00"
    if instant.tzinfo is None:
        return None, "has no UTC offset; add one (e.g. +00:00 or -06:00)"
    reason = date_range_reason(instant.date())
    return (None, reason) if reason else (instant, None)


def _paid_on_reason(paid_on: date, issued_on: date | None, today: date | None) -> str | None:
    """Why a payment date means nothing: before the invoice was issued, or in the future."""
    if issued_on is not None and paid_on < issued_on:
        return f"is before the invoice was issued ({issued_on.isoformat()}); check the date format"
    if today is not None and paid_on > today + _PAID_AHEAD:
        return f"is in the future (today is {today.isoformat()}); a payment is recorded once it happened"
    return None


def _check_email(value: str) -> str | None:
    """The reason ``value`` is not a usable address, or None."""
    if any(ch.isspace() for ch in value):
        return "is not a valid email address (it contains a space)"
    if value.count("@") != 1:
        return "is not a valid email address (it needs exactly one @)"
    if any(unicodedata.category(ch) == "Cc" for ch in value):
        return "is not a valid email address (it contains a control character)"
    _, addr = parseaddr(value)
    local, _, domain = value.partition("@")
    if addr != value or not local or not domain:
        return "is not a valid email address (use a bare address like name@example.com)"
    if "." not in domain or domain.startswith(".") or domain.endswith(".") or ".." in domain:
        return "is not a valid email address (the domain needs a dot, like example.com)"
    problem = address_problem(value)  # the rule every send applies: what imports is deliverable
    return f"is not a deliverable email address ({problem})" if problem else None


def _check_zone(value: str) -> tuple[str | None, str | None]:
    """(zone, None) when valid, else (None, reason)."""
    zones = iana_zones()
    if value in zones:
        return value, None
    if value in zoneinfo.available_timezones() or value == "localtime":
        return None, zone_reason(value)
    by_fold = {z.casefold(): z for z in zones}
    if value.casefold() in by_fold:
        return None, f"is not an IANA time zone (names are case-sensitive); did you mean {by_fold[value.casefold()]}?"
    guess = value.replace(" ", "_")
    close = difflib.get_close_matches(guess, sorted(zones), n=3, cutoff=0.6)
    if not close:
        tail = guess.rsplit("/", 1)[-1].casefold()
        close = sorted(z for z in zones if z.rsplit("/", 1)[-1].casefold() == tail)[:3]
    hint = f"; did you mean {' or '.join(close)}?" if close else " (use a name like America/Chicago or Europe/Berlin)"
    return None, f"is not an IANA time zone{hint}"


def _check_locale(value: str) -> tuple[str | None, str | None]:
    """(canonical locale id, None) when Babel knows it, else (None, reason)."""
    ident = value.replace("-", "_").split(".", 1)[0].split("@", 1)[0]
    reason = "is not a known locale (use an id like en_US, de_DE or pt_BR)"
    parts = ident.split("_")
    if not ident or not parts[0].isalpha():
        return None, reason
    try:
        parsed = Locale.parse(ident)
    except (UnknownLocaleError, ValueError, TypeError):
        return None, reason
    territory = next((p for p in parts[1:] if (len(p) == 2 and p.isalpha()) or (len(p) == 3 and p.isdigit())), None)
    if parsed.language != parts[0].lower() or (territory is not None and (parsed.territory or "") != territory.upper()):
        return None, reason
    return str(parsed), None


def _amount_minor(value: str, currency: str | None) -> tuple[int | None, str | None]:
    """Minor units for ``value`` in ``currency`` (None when the currency is unknown: only the number is checked)."""
    digits = foreign_digits(value)
    if digits:
        return None, f"contains digits of another script ({digits!r}); write ASCII digits 0-9"
    if not _AMOUNT_RE.fullmatch(value):
        return None, "is not a number (write a plain decimal like 1234.50: no currency symbol, no thousands separator)"
    try:
        amount = Decimal(value)
    except InvalidOperation:  # pragma: no cover - the regex excludes this
        return None, "is not a number"
    if amount < 0:
        return None, "is negative (amount_due must be more than 0; record credits and refunds separately)"
    if amount == 0:
        return None, "is zero: nothing is due, so no reminder may be sent (leave the invoice out, or mark it paid)"
    if currency is None:
        return None, None
    precision = get_currency_precision(currency)
    # Count the decimals in the text: Decimal arithmetic rounds to 28 digits, which would turn
    # 1.0000000000000000000000000000000000000001 into 1.00 silently.
    decimals = len(value.partition(".")[2].rstrip("0"))
    minor = amount.scaleb(precision, context=Context(prec=80))
    if decimals > precision or minor != minor.to_integral_value():
        if precision == 0:
            return None, f"has decimals, but {currency} has no minor unit (write a whole number)"
        return None, f"has more decimals than {currency} allows ({precision})"
    if minor > _MAX_MINOR:
        return None, "is too large (at most 10^15 minor units)"
    return int(minor), None


# --------------------------------------------------------------------------- invoices


def _computed_columns(header: list[str], column_map: Mapping[str, str] | None) -> list[tuple[Computed, dict[str, int]]]:
    """The computed ``--map`` columns with the header position of each field they read."""
    exact = {name: i for i, name in reversed(list(enumerate(header))) if name}
    folded = {_fold(name): i for i, name in reversed(list(enumerate(header))) if name}
    out: list[tuple[Computed, dict[str, int]]] = []
    for value in split_column_map(column_map or {})[1].values():
        where = {f: exact.get(f, folded.get(_fold(f), -1)) for f in value.fields}
        out.append((value, where))
    return out


def _row_values(
    fields: list[str],
    positions: Mapping[str, int],
    computed: Sequence[tuple[Computed, Mapping[str, int]]],
    problem: Callable[[str | None, str | None, str], None],
) -> dict[str, str]:
    """Our columns' values on one row: read (UTF-8 and NUL-checked) or computed from a ``--map`` template."""
    values: dict[str, str] = {}
    for ours, pos in positions.items():
        raw = fields[pos]
        bad_bytes = _undecodable(raw)
        if bad_bytes is not None:
            problem(
                ours,
                _clean(raw.strip()),
                f"contains bytes that are not UTF-8 ({' '.join(f'0x{b:02X}' for b in bad_bytes[:4])}); the file may be "
                "Latin-1 or Windows-1252: save it as CSV UTF-8",
            )
            values[ours] = ""
            continue
        reason = text_reason(raw)
        if reason:
            problem(ours, None, reason)
            values[ours] = ""
            continue
        values[ours] = raw.strip()
    for value, where in computed:
        row = {f: fields[pos] for f, pos in where.items() if 0 <= pos < len(fields)}
        text, reason = value.render(row)
        if reason is None:
            reason = text_reason(text)
        if reason:
            problem(value.ours, None, reason)
            text = ""
        values[value.ours] = text.strip()
    return values


def read_invoices_csv(
    path: Path,
    *,
    column_map: Mapping[str, str] | None = None,
    source_name: str | None = None,
    date_format: DateFormat = _ISO_DATES,
    default_currency: str | None = None,
    due_days: int | None = None,
    today: date | None = None,
    progress: Progress | None = None,
) -> InvoiceImport:
    """Read and check an invoice CSV (see :data:`INVOICE_CSV_HELP`); never raises for bad rows.

    Args:
        column_map: ``{our column: their header, const:VALUE or template:…}`` (see :func:`parse_column_map`).
        source_name: the file name used in messages (default: the file's name).
        date_format: how issued_on, due_on and paid_on are written (default ISO ``YYYY-MM-DD``).
        default_currency: the currency of rows without one (``--currency``); must be legal tender.
        due_days: due date = issued_on + this many days for rows without a due date (``--due-days``).
        today: payments dated after ``today`` + 1 day are refused (None: no such check).
        progress: called with (rows checked, rows in the file) every 1,000 rows and at the end.
    Raises:
        ImportRejected: the file cannot be read at all.
        ConfigError: ``default_currency`` is not a legal-tender ISO 4217 code.
    """
    path = Path(path)
    source = source_name if source_name is not None else path.name
    if default_currency is not None:
        default_currency = default_currency.strip().upper()
        reason = currency_reason(default_currency)
        if reason:
            raise ConfigError(f"--currency: {default_currency!r} {reason}")
    table = _read_table(path, source)
    problems = list(table.problems)
    header = table.header
    rows_read = len(table.rows)
    if not header:
        return InvoiceImport(customers=[], invoices=[], problems=problems, rejected_lines=[], rows_read=0, header=[],
                             source=source)

    provided = (["currency"] if default_currency else []) + (["due_on"] if due_days is not None else [])
    positions, header_problems = _resolve_columns(header, STANDARD_COLUMNS, REQUIRED_COLUMNS, column_map, source,
                                                  provided)
    computed = _computed_columns(header, column_map)
    problems.extend(header_problems)
    if any(p.line == 1 for p in header_problems):
        # The header is unusable: every row is rejected, the problem is reported once.
        rejected = [(line, _row_dict(header, fields)) for line, fields in table.rows]
        return InvoiceImport(
            customers=[], invoices=[], problems=problems, rejected_lines=rejected, rows_read=rows_read, header=header,
            source=source
        )

    rows = _InvoiceRows(source=source, date_format=date_format, default_currency=default_currency,
                        due_days=due_days, today=today, problems=problems, bad_lines={p.line for p in problems})
    for index, (line, raw_fields) in enumerate(table.rows):
        if progress is not None and index % 1000 == 0 and index:
            progress(index, rows_read)
        rows.check(line, raw_fields, header, positions, computed)

    customers, invoices = rows.accepted()
    rejected = [(line, _row_dict(header, fields)) for line, fields in table.rows if line in rows.bad_lines]
    problems.sort(key=lambda p: p.line)
    if progress is not None and rows_read > 1000:
        progress(rows_read, rows_read)
    return InvoiceImport(
        customers=customers,
        invoices=invoices,
        problems=problems,
        rejected_lines=rejected,
        rows_read=rows_read,
        header=header,
        source=source,
    )


@dataclass(slots=True)
class _Row:
    """One invoice row being checked: its values, its problems so far and what it parses to."""

    line: int
    source: str
    values: dict[str, str] = field(default_factory=dict)
    problems: list[RowProblem] = field(default_factory=list)
    failed: set[str | None] = field(default_factory=set)  # columns with a problem after the required check
    out: dict[str, object] = field(default_factory=dict)

    def problem(self, column: str | None, value: str | None, reason: str) -> None:
        self.problems.append(RowProblem(line=self.line, column=column, value=value, reason=reason, source=self.source))

    def columns_with_problems(self) -> set[str | None]:
        return {p.column for p in self.problems}


@dataclass(slots=True)
class _InvoiceRows:
    """The checks of :func:`read_invoices_csv`, row by row, and what they found across the file.

    ``problems`` and ``bad_lines`` are shared with the caller; a row's problems are added in the order the
    checks below find them (the caller sorts by line, stably), so messages keep their order.
    """

    source: str
    date_format: DateFormat
    default_currency: str | None
    due_days: int | None
    today: date | None
    problems: list[RowProblem]
    bad_lines: set[int]
    numbers_seen: dict[str, int] = field(default_factory=dict)
    # email -> (first line, name, explicit locale/tz)
    customers_seen: dict[str, tuple[int, str, dict[str, str]]] = field(default_factory=dict)
    parsed: list[tuple[int, dict[str, object]]] = field(default_factory=list)

    def check(self, line: int, raw_fields: list[str], header: list[str], positions: Mapping[str, int],
              computed: Sequence[tuple[Computed, Mapping[str, int]]]) -> None:
        """Check one data row (file line ``line``); record its problems, or what it parses to."""
        row = _Row(line=line, source=self.source)
        fields, count_reason = _fit_fields(header, raw_fields)
        if count_reason:
            row.problem(None, None, count_reason)
            self.problems.extend(row.problems)
            self.bad_lines.add(line)
            return

        values = row.values = _row_values(fields, positions, computed, row.problem)
        if self.default_currency and not values.get("currency") and "currency" not in row.columns_with_problems():
            values["currency"] = self.default_currency
        due_from_terms = self.due_days is not None and not values.get("due_on")
        self._required(row, due_from_terms)
        row.failed = row.columns_with_problems()

        self._number(row)
        email_ok = self._email(row)
        name = " ".join(values.get("customer_name", "").split())
        if name:
            row.out["name"] = name
        self._money(row)
        dates = self._dates(row, due_from_terms)
        self._status(row, dates)
        explicit = self._locale_and_zone(row)
        if email_ok and name:
            self._same_customer(row, name, explicit)

        self.problems.extend(row.problems)
        if row.problems:
            self.bad_lines.add(line)
        self.parsed.append((line, row.out))

    @staticmethod
    def _required(row: _Row, due_from_terms: bool) -> None:
        failed = row.columns_with_problems()
        for column in REQUIRED_COLUMNS:
            if column == "due_on" and due_from_terms:
                continue
            if not row.values.get(column) and column not in failed:
                row.problem(column, None, "required value is empty")

    def _number(self, row: _Row) -> None:
        """invoice_number, and duplicates across the file (reported on both lines)."""
        number = row.values.get("invoice_number", "")
        if not number:
            return
        if number in self.numbers_seen:
            first = self.numbers_seen[number]
            row.problem("invoice_number", number, f"is a duplicate of line {first}")
            self.problems.append(
                RowProblem(line=first, column="invoice_number", value=number, reason=f"is duplicated on line "
                                                                                     f"{row.line}", source=self.source)
            )
            self.bad_lines.add(first)
        else:
            self.numbers_seen[number] = row.line
        row.out["number"] = number

    @staticmethod
    def _email(row: _Row) -> bool:
        """customer_email: True when valid (``out["email"]`` holds it lower-cased)."""
        email = row.values.get("customer_email", "")
        if not email:
            return False
        reason = _check_email(email)
        if reason:
            row.problem("customer_email", email, reason)
            return False
        row.out["email"] = email.lower()
        return True

    @staticmethod
    def _money(row: _Row) -> None:
        """currency, then amount_due (precision needs a valid currency; sign and syntax do not)."""
        currency = row.values.get("currency", "")
        currency_ok: str | None = None
        if currency:
            code = currency.upper()
            reason = currency_reason(code)
            if reason is None:
                currency_ok = code
                row.out["currency"] = code
            elif "currency" not in row.failed:
                row.problem("currency", currency, reason)
        amount = row.values.get("amount_due", "")
        if amount:
            minor, reason = _amount_minor(amount, currency_ok)
            if reason:
                row.problem("amount_due", amount, reason)
            elif minor is not None:
                row.out["amount"] = minor

    def _dates(self, row: _Row, due_from_terms: bool) -> dict[str, date]:
        """issued_on, due_on (or issued_on + ``due_days``), paid_on and status_on that parse."""
        dates: dict[str, date] = {}
        for column in ("issued_on", "due_on", "paid_on", "status_on"):
            text = row.values.get(column, "")
            if text and column not in row.failed:
                day, reason = _read_date(text, self.date_format)
                if day is None:
                    row.problem(column, text, reason or self.date_format.reason)
                else:
                    dates[column] = day
        if due_from_terms and self.due_days is not None and "issued_on" in dates:
            dates["due_on"] = dates["issued_on"] + timedelta(days=self.due_days)
            if date_range_reason(dates["due_on"]):
                row.problem("due_on", None, f"issued_on + {self.due_days} days is outside {DATE_RANGE_TEXT}")
        row.out["issued_on"] = dates.get("issued_on")
        row.out["due_on"] = dates.get("due_on")
        if "issued_on" in dates and "due_on" in dates and dates["due_on"] < dates["issued_on"]:
            row.problem("due_on", row.values["due_on"], f"is before issued_on {dates['issued_on'].isoformat()}")
        return dates

    def _status(self, row: _Row, dates: dict[str, date]) -> None:
        """status, and whether paid_on and status_on agree with it."""
        values, failed = row.values, row.failed
        status_text = values.get("status", "")
        status: str | None = None
        if status_text:
            if status_text.lower() in INVOICE_STATUSES:
                status = status_text.lower()
            elif "status" not in failed:
                row.problem("status", status_text, f"is not a status (use {', '.join(INVOICE_STATUSES[:-1])} or "
                                                   f"{INVOICE_STATUSES[-1]})")
        elif not values.get("paid_on"):
            status = "open"
        paid_text = values.get("paid_on", "")
        if status_text == "" and paid_text:
            status = "paid"
        if status == "paid" and not paid_text and "paid_on" not in failed:
            row.problem("paid_on", None, "is empty, but status is paid (give the payment date, YYYY-MM-DD)")
        elif status is not None and status != "paid" and paid_text:
            row.problem("paid_on", paid_text, f"is set, but status is {status} (clear paid_on or set status to paid)")
        if status == "paid" and "paid_on" in dates:
            reason = _paid_on_reason(dates["paid_on"], dates.get("issued_on"), self.today)
            if reason:
                row.problem("paid_on", values["paid_on"], reason)
        if values.get("status_on") and not status_text:
            row.problem("status_on", values["status_on"], "is set, but status is empty (give the status it dates)")
        row.out["status"] = status
        row.out["paid_on"] = dates.get("paid_on") if status == "paid" else None
        row.out["status_on"] = dates.get("status_on")

    @staticmethod
    def _locale_and_zone(row: _Row) -> dict[str, str]:
        """customer_locale and customer_tz (optional); returns those the row gives explicitly and validly."""
        explicit: dict[str, str] = {}
        locale_text = row.values.get("customer_locale", "")
        row.out["locale"] = DEFAULT_LOCALE
        if locale_text and "customer_locale" not in row.failed:
            locale, reason = _check_locale(locale_text)
            if reason:
                row.problem("customer_locale", locale_text, reason)
            else:
                row.out["locale"] = explicit["locale"] = locale  # type: ignore[assignment]
        zone_text = row.values.get("customer_tz", "")
        row.out["tz"] = DEFAULT_TZ
        if zone_text and "customer_tz" not in row.failed:
            zone, reason = _check_zone(zone_text)
            if reason:
                row.problem("customer_tz", zone_text, reason)
            else:
                row.out["tz"] = explicit["tz"] = zone  # type: ignore[assignment]
        return explicit

    def _same_customer(self, row: _Row, name: str, explicit: dict[str, str]) -> None:
        """One customer per email: names (and explicit locale/zone) must agree with its first line."""
        email = str(row.out["email"])
        seen = self.customers_seen.get(email)
        if seen is None:
            self.customers_seen[email] = (row.line, name, dict(explicit))
            return
        first_line, first_name, first_explicit = seen
        if name.casefold() != first_name.casefold():
            row.problem(
                "customer_name",
                name,
                f"conflicts with {first_name!r} on line {first_line} for the same customer_email {email}",
            )
        for key, column in (("locale", "customer_locale"), ("tz", "customer_tz")):
            if key in explicit and key in first_explicit and explicit[key] != first_explicit[key]:
                row.problem(
                    column,
                    row.values[column],
                    f"conflicts with {first_explicit[key]!r} on line {first_line} for the same customer_email "
                    f"{email}",
                )
            elif key in explicit and key not in first_explicit:
                first_explicit[key] = explicit[key]

    def accepted(self) -> tuple[list[Customer], list[Invoice]]:
        """The customers (first name and explicit locale/zone per email) and invoices of the rows without problems."""
        customers: dict[str, Customer] = {}
        invoices: list[Invoice] = []
        for line, out in self.parsed:
            if line in self.bad_lines:
                continue
            email = str(out["email"])
            if email not in customers:
                _, first_name, explicit = self.customers_seen[email]
                customers[email] = Customer(
                    email=email,
                    name=first_name,
                    locale=explicit.get("locale", DEFAULT_LOCALE),
                    tz=explicit.get("tz", DEFAULT_TZ),
                )
            invoices.append(
                Invoice(
                    number=str(out["number"]),
                    customer_email=email,
                    currency=str(out["currency"]),
                    amount_due=int(out["amount"]),  # type: ignore[call-overload]
                    issued_on=out["issued_on"],  # type: ignore[arg-type]
                    due_on=out["due_on"],  # type: ignore[arg-type]
                    status=str(out["status"]),
                    paid_on=out["paid_on"],  # type: ignore[arg-type]
                    status_on=out["status_on"],  # type: ignore[arg-type]
                )
            )
        return list(customers.values()), invoices


# --------------------------------------------------------------------------- payments


def read_payments_csv(
    path: Path,
    *,
    column_map: Mapping[str, str] | None = None,
    source_name: str | None = None,
    date_format: DateFormat = _ISO_DATES,
    today: date | None = None,
) -> tuple[list[Payment], list[RowProblem]]:
    """Read a payments CSV (``invoice_number``, ``paid_on``, optional ``paid_at``); never raises for bad rows.

    Only rows without problems become payments. An invoice number given twice
    is reported on both lines (even with the same date: the file is ambiguous).
    ``paid_at`` (an ISO instant with offset) is the exact moment for replays; its
    local date is not checked against ``paid_on`` (zones differ). Payments dated
    after ``today`` + 1 day are refused when ``today`` is given; a payment before its
    invoice's issue date is refused when the payment is applied (the invoice is in the database).
    """
    path = Path(path)
    source = source_name if source_name is not None else path.name
    table = _read_table(path, source)
    problems = list(table.problems)
    if not table.header:
        return [], problems
    positions, header_problems = _resolve_columns(table.header, PAYMENT_COLUMNS + PAYMENT_OPTIONAL_COLUMNS,
                                                  PAYMENT_COLUMNS, column_map, source)
    computed = _computed_columns(table.header, column_map)
    problems.extend(header_problems)
    if header_problems:
        return [], problems

    bad_lines: set[int] = set()
    seen: dict[str, int] = {}
    parsed: list[tuple[int, Payment]] = []
    for line, raw_fields in table.rows:
        row_problems: list[RowProblem] = []

        def problem(column: str | None, value: str | None, reason: str) -> None:
            # called only within this iteration, so the loop variables are the current row's
            row_problems.append(RowProblem(line=line, column=column, value=value, reason=reason,  # noqa: B023
                                           source=source))

        fields, count_reason = _fit_fields(table.header, raw_fields)
        if count_reason:
            problem(None, None, count_reason)
        else:
            values = _row_values(fields, positions, computed, problem)
            failed = {p.column for p in row_problems}
            number, paid_text = values.get("invoice_number", ""), values.get("paid_on", "")
            for column in PAYMENT_COLUMNS:
                if not values.get(column) and column not in failed:
                    problem(column, None, "required value is empty")
            paid_on = None
            if paid_text:
                paid_on, reason = _read_date(paid_text, date_format)
                if reason:
                    problem("paid_on", paid_text, reason)
                elif paid_on is not None and (reason := _paid_on_reason(paid_on, None, today)):
                    problem("paid_on", paid_text, reason)
                    paid_on = None
            paid_at = None
            if values.get("paid_at"):
                paid_at, reason = _read_instant(values["paid_at"])
                if reason:
                    problem("paid_at", values["paid_at"], reason)
            if number:
                if number in seen:
                    problem("invoice_number", number, f"is a duplicate of line {seen[number]}")
                    problems.append(
                        RowProblem(line=seen[number], column="invoice_number", value=number,
                                   reason=f"is duplicated on line {line}", source=source)
                    )
                    bad_lines.add(seen[number])
                else:
                    seen[number] = line
            if number and paid_on is not None:
                parsed.append((line, Payment(number=number, paid_on=paid_on, paid_at=paid_at)))
        problems.extend(row_problems)
        if row_problems:
            bad_lines.add(line)

    problems.sort(key=lambda p: p.line)
    return [payment for line, payment in parsed if line not in bad_lines], problems


# --------------------------------------------------------------------------- rejects


def write_problems(path: Path, problems: Sequence[str]) -> int:
    """Write every problem, one per line (``invoices.csv:3: column due_on: …``), UTF-8; returns the count."""
    try:
        with Path(path).open("w", encoding="utf-8", newline="\n") as fh:
            for problem in problems:
                fh.write(problem.replace("\r", " ").replace("\n", " ") + "\n")
    except OSError as exc:
        raise ConfigError(f"--errors-file {path}: cannot write it ({exc.strerror or exc}); "
                          "choose another path") from None
    return len(problems)


def check_output_path(path: Path, source: Path, *, option: str = "--skip-invalid") -> None:
    """Refuse an output file (rejects, errors) that is the file being imported or cannot be written.

    Called before anything is read or committed, so a bad path never leaves a half-applied import. The
    probe opens ``path`` for appending (nothing is truncated) and removes it again if it did not exist.

    Raises:
        ConfigError: ``path`` is ``source`` (also through a link), or opening it fails (missing folder,
            a folder, no permission, read-only file system); the message names the option and the path.
    """
    path, source = Path(path), Path(source)
    same = path.resolve() == source.resolve() or (path.exists() and source.exists() and os.path.samefile(path, source))
    if same:
        raise ConfigError(f"{option} {path}: that is the file being imported; writing there would destroy it. "
                          "Nothing was imported. Choose another file, e.g. rejects.csv")
    existed = path.exists()
    try:
        with path.open("a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise ConfigError(f"{option} {path}: cannot write it ({exc.strerror or exc}). Nothing was imported. "
                          "Choose a writable path") from None
    if not existed:
        path.unlink(missing_ok=True)


def write_rejects(
    path: Path,
    header: Sequence[str] | None,
    rejected_lines: Sequence[tuple[int, Mapping[str, str]]],
    problems: Sequence[RowProblem],
) -> int:
    """Write the rejected rows, in their original columns, plus an ``error`` column.

    ``error`` joins every problem of that line, starting with the line number
    in the original file ("line 4: column due_on: '2026-02-30' is not a valid
    date (use YYYY-MM-DD); ..."). A row with no problem of its own (the header
    was unusable) gets the file-level problems. The file is UTF-8; once fixed
    it can be imported again (the ``error`` column is ignored). A cell that
    starts with ``= + - @``, TAB or CR is written with a leading ``'`` so no
    spreadsheet runs it as a formula (:mod:`oncebeat.csvsafe`). ``header``
    None takes the columns from the rows. Returns the number of rows written.
    """
    by_line: dict[int, list[str]] = {}
    for p in problems:
        by_line.setdefault(p.line, []).append(p.describe())
    file_level = by_line.get(1, [])
    columns = list(header or [])
    if not columns:
        for _, row in rejected_lines:
            columns.extend(k for k in row if k not in columns)
    extras: list[str] = []
    for _, row in rejected_lines:
        extras.extend(k for k in row if k not in columns and k not in extras)
    error_column = "error" if "error" not in columns else "import_error"
    path = Path(path)
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(safe_row([*columns, error_column]))
        for line, row in rejected_lines:
            errors = by_line.get(line) or file_level or ["rejected"]
            text = f"line {line}: " + "; ".join(errors)
            # Fields beyond the header (a row with too many fields) follow the error column.
            writer.writerow(safe_row([*(row.get(c, "") for c in columns), text, *(row[c] for c in extras if c in row)]))
    return len(rejected_lines)
