"""Every report as one table shape, printed three ways: text for people (Babel's money and numbers in a locale),
CSV for spreadsheets (amounts in major units with their currency column, cells formula-safe) and JSON for programs
(amounts in minor units, ratios as numbers rounded as shown, each "not enough data" as null with its note).

A :class:`Table` holds raw values: ints in minor units (``money`` columns, whose row carries ``currency``),
:class:`~fractions.Fraction` for ``days``, ``percent`` (0..100) and ``share`` (0..1) columns, ints and text.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from typing import Any

from babel.numbers import format_decimal, format_percent

from ...csvsafe import safe_row
from ..money import minor_digits
from ..render import format_money, resolve_locale

__all__ = ["Column", "Table", "cell_text", "csv_text", "json_value", "text_lines"]

#: Decimals kept (JSON, CSV) and shown (text) per ratio kind: days 0.1, percent 0.1, share 0.1 % (0.001).
DECIMALS = {"days": 1, "percent": 1, "share": 3}


@dataclass(frozen=True, slots=True)
class Column:
    """``key`` in each row; ``label`` for people; ``kind``: text, count, money, days, percent or share."""

    key: str
    label: str
    kind: str = "text"


@dataclass(slots=True)
class Table:
    """One report: a title, its columns, its rows (dicts by column key), and notes printed under it."""

    name: str
    title: str
    columns: list[Column]
    rows: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def rounded(value: Fraction, kind: str) -> Decimal:
    """A ratio rounded half to even to its kind's decimals (exact: no float in between)."""
    places = DECIMALS[kind]
    exact = Decimal(value.numerator) / Decimal(value.denominator)
    return exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_EVEN)


def major_units(amount: int, currency: str) -> Decimal:
    """Minor units -> a Decimal of major units: (123450, "EUR") -> Decimal("1234.50"), (500, "JPY") -> 500."""
    return Decimal(amount).scaleb(-minor_digits(currency))


def json_value(value: Any, column: Column) -> Any:
    """A cell for JSON: minor units stay ints; ratios become numbers rounded as in text; None stays null."""
    if isinstance(value, Fraction):
        return float(rounded(value, column.kind))
    return value


def cell_text(value: Any, column: Column, row: dict[str, Any], locale: str) -> str:
    """One cell for people: money with Babel in ``locale``, ratios rounded, "n/a" where data is missing."""
    if value is None:
        return "n/a" if column.kind in ("days", "percent", "share", "money") else ""
    loc = resolve_locale(locale)
    if column.kind == "money":
        return format_money(int(value), row["currency"], locale)
    if column.kind == "days":
        return format_decimal(rounded(value, "days"), format="#,##0.0", locale=loc)
    if column.kind == "percent":
        return format_decimal(rounded(value, "percent"), format="#,##0.0", locale=loc) + " %"
    if column.kind == "share":
        return format_percent(rounded(value, "share"), format="#,##0.0%", locale=loc)
    if column.kind == "count":
        return format_decimal(int(value), locale=loc)
    return str(value)


def text_lines(table: Table, locale: str = "en_US") -> Iterator[str]:
    """The table for a terminal: a title, aligned columns (numbers right-aligned), then its notes."""
    yield table.title
    cells = [[c.label for c in table.columns]]
    cells += [[cell_text(r.get(c.key), c, r, locale) for c in table.columns] for r in table.rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(table.columns))]
    for row in cells:
        parts = [text.ljust(w) if c.kind == "text" else text.rjust(w)
                 for text, w, c in zip(row, widths, table.columns, strict=True)]
        yield "  " + "  ".join(parts).rstrip()
    if not table.rows:
        yield "  (no data in this period)"
    for note in table.notes:
        yield f"  {note}"


def csv_text(table: Table) -> str:
    """The table as CSV: a header of column keys, money in major units (e.g. 1234.50) next to its currency column,
    ratios rounded as in text, empty cells for "not enough data"; every cell formula-safe."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(safe_row(c.key for c in table.columns))
    for r in table.rows:
        cells: list[object] = []
        for c in table.columns:
            value = r.get(c.key)
            if value is None:
                cells.append("")
            elif c.kind == "money":
                cells.append(major_units(int(value), r["currency"]))
            elif isinstance(value, Fraction):
                cells.append(rounded(value, c.kind))
            else:
                cells.append(value)
        writer.writerow(safe_row(cells))
    return out.getvalue()


def json_table(table: Table) -> dict[str, Any]:
    """The table as JSON-ready data: ``{"report", "title", "columns", "rows", "notes"}``."""
    return {"report": table.name, "title": table.title,
            "columns": [{"key": c.key, "label": c.label, "kind": c.kind} for c in table.columns],
            "rows": [{c.key: json_value(r.get(c.key), c) for c in table.columns} for r in table.rows],
            "notes": table.notes}
