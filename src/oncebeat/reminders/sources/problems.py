"""Problems found in an import file, and the files that report them (rejects CSV, errors list).

A :class:`RowProblem` names the file, the physical line (the header is line 1), the column, the value
and what is wrong. Invoice and payment imports, CSV or Stripe, report the same way: every problem is
collected (never stopping at the first), the screen shows the first :data:`MAX_PROBLEMS_SHOWN` and a count,
``--errors-file`` gets them all, ``--skip-invalid REJECTS.csv`` gets the rejected rows with an ``error``
column, formula-safe (:mod:`oncebeat.csvsafe`).
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from ...csvsafe import safe_row
from ...errors import ConfigError, ImportRejected

__all__ = ["MAX_PROBLEMS_SHOWN", "RowProblem", "RejectsWriter", "check_output_path", "raise_if_problems",
           "rejected_message", "write_problems", "write_rejects"]

#: Problems shown on screen and kept in :class:`~oncebeat.errors.ImportRejected` (all go to ``--errors-file``).
MAX_PROBLEMS_SHOWN = 50


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


def rejected_message(source: str, problems: int, lines: int, rows_read: int | None, *, applied: bool = False) -> str:
    """``pay.csv: 3 problems on 2 lines of 10 rows; nothing was imported (fix the file, or use --skip-invalid …)``."""
    of = f" of {rows_read:,} rows" if rows_read is not None else ""
    head = (f"{source or 'the file'}: {problems:,} problem{'s' if problems != 1 else ''} on "
            f"{lines:,} line{'s' if lines != 1 else ''}{of}")
    if applied:
        return head
    return head + ("; nothing was imported (fix the file, or use --skip-invalid REJECTS.csv to import the valid "
                   "rows and write the rejects)")


def raise_if_problems(problems: Sequence[RowProblem], *, source: str = "", rows_read: int | None = None) -> None:
    """Raise :class:`ImportRejected` (nothing applied) when ``problems`` is not empty.

    The exception keeps the first :data:`MAX_PROBLEMS_SHOWN` problems and the total count.
    """
    if not problems:
        return
    lines = len({p.line for p in problems})
    raise ImportRejected(rejected_message(source, len(problems), lines, rows_read),
                         [str(p) for p in problems[:MAX_PROBLEMS_SHOWN]], total=len(problems))


def write_problems(path: Path, problems: Iterable[str]) -> int:
    """Write every problem, one per line (``invoices.csv:3: column due_on: …``), UTF-8; returns the count."""
    n = 0
    try:
        with Path(path).open("w", encoding="utf-8", newline="\n") as fh:
            for problem in problems:
                fh.write(problem.replace("\r", " ").replace("\n", " ") + "\n")
                n += 1
    except OSError as exc:
        raise ConfigError(f"--errors-file {path}: cannot write it ({exc.strerror or exc}); "
                          "choose another path") from None
    return n


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


class RejectsWriter:
    """Writes rejected rows one at a time, in their original columns plus an ``error`` column (see
    :func:`write_rejects`); a context manager. ``count`` is the number of rows written."""

    def __init__(self, path: Path, header: Sequence[str]) -> None:
        self.columns = list(header)
        self.error_column = "error" if "error" not in self.columns else "import_error"
        self.count = 0
        self._fh: TextIO = Path(path).open("w", encoding="utf-8", newline="")
        self._writer = csv.writer(self._fh)
        self._writer.writerow(safe_row([*self.columns, self.error_column]))

    def write(self, line: int, row: Mapping[str, str], errors: Sequence[str]) -> None:
        """One rejected row of file line ``line``; ``errors`` are its problems (:meth:`RowProblem.describe`)."""
        text = f"line {line}: " + "; ".join(errors or ["rejected"])
        extras = [k for k in row if k not in self.columns]  # fields beyond the header follow the error column
        self._writer.writerow(safe_row([*(row.get(c, "") for c in self.columns), text, *(row[k] for k in extras)]))
        self.count += 1

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> RejectsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
    with RejectsWriter(path, columns) as out:
        for line, row in rejected_lines:
            out.write(line, row, by_line.get(line) or file_level)
        return out.count
