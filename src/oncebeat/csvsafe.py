"""Writing CSV cells that a spreadsheet cannot run as a formula (CSV injection, OWASP).

A cell that starts with ``=``, ``+``, ``-``, ``@``, TAB or CR is a formula to Excel, LibreOffice
and Google Sheets (``=HYPERLINK(...)``, ``+cmd|' /C calc'!A0``, ``@SUM(...)``, ``-2+3``). Every
CSV the project writes passes its cells through :func:`safe_cell`, which prefixes such a cell with
a single quote (the OWASP rule): the spreadsheet shows the text, and nothing runs. Other cells are
written unchanged; quoting of commas, quotes and line breaks is left to :mod:`csv`.

Example::

    >>> safe_row(["INV-1", "=HYPERLINK(\\"http://x.example.test\\")", "-2+3", "10.00"])
    ['INV-1', '\\'=HYPERLINK("http://x.example.test")', "'-2+3", '10.00']
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["FORMULA_STARTS", "safe_cell", "safe_row"]

#: First characters that make a spreadsheet treat a cell as a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: object) -> str:
    """``value`` as CSV cell text, prefixed with ``'`` when it starts with one of :data:`FORMULA_STARTS`."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def safe_row(values: Iterable[object]) -> list[str]:
    """Every cell of a row through :func:`safe_cell`."""
    return [safe_cell(v) for v in values]
