"""Read invoices and payments from CSV files, checking every row: the public names in one place.

The code lives in :mod:`oncebeat.reminders.sources` (reading and checking; nothing there touches the
database and nothing raises for a bad row) and :mod:`oncebeat.reminders.bulk` (the streaming import into
the database, in one transaction, in bounded memory). The readers here return :class:`Customer`,
:class:`Invoice` and :class:`Payment` values plus a list of :class:`RowProblem` (one per problem found,
every row checked, never stopping at the first); the caller decides what to apply: nothing unless
``problems`` is empty (:meth:`InvoiceImport.raise_if_problems`), or, with ``--skip-invalid``, the valid rows,
writing the rejected ones with :func:`write_rejects`.

The file format is described in :data:`INVOICE_CSV_HELP`; the length limits of each column in
:data:`~oncebeat.reminders.conversions.MAX_LENGTHS` (README, "Limits").
"""

from __future__ import annotations

from collections.abc import Sequence

from .sources.invoices import (
    DEFAULT_LOCALE,
    DEFAULT_TZ,
    HOLD_COLUMNS,
    INVOICE_CSV_HELP,
    OPTIONAL_COLUMNS,
    REQUIRED_COLUMNS,
    STANDARD_COLUMNS,
    InvoiceImport,
    read_invoices_csv,
)
from .sources.payments import PAYMENT_COLUMNS, PAYMENT_OPTIONAL_COLUMNS, read_payments_csv
from .sources.problems import (
    MAX_PROBLEMS_SHOWN,
    RowProblem,
    check_output_path,
    raise_if_problems,
    write_problems,
    write_rejects,
)
from .sources.table import Progress
from .sources.table import parse_column_map as _parse_column_map
from .sources.values import email_reason as _check_email

__all__ = [
    "DEFAULT_LOCALE",
    "DEFAULT_TZ",
    "STANDARD_COLUMNS",
    "REQUIRED_COLUMNS",
    "OPTIONAL_COLUMNS",
    "HOLD_COLUMNS",
    "PAYMENT_COLUMNS",
    "PAYMENT_OPTIONAL_COLUMNS",
    "INVOICE_CSV_HELP",
    "MAX_PROBLEMS_SHOWN",
    "Progress",
    "RowProblem",
    "InvoiceImport",
    "check_output_path",
    "parse_column_map",
    "read_invoices_csv",
    "read_payments_csv",
    "write_rejects",
    "write_problems",
    "raise_if_problems",
    "_check_email",
]


def parse_column_map(spec: str | Sequence[str] | None, *,
                     columns: Sequence[str] = STANDARD_COLUMNS + HOLD_COLUMNS) -> dict[str, str]:
    """Parse ``--map`` for an invoice file (or ``columns``); see :func:`.sources.table.parse_column_map`."""
    return _parse_column_map(spec, columns=columns)
