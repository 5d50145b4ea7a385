"""A CSV file read as a stream of rows, and the mapping of its columns to ours (``--map``).

:class:`CsvTable` never holds the file: the header is read when it is opened, and :meth:`CsvTable.rows`
reads the rows one at a time (each call reads the file again, so the rejected rows can be written in a
second pass). UTF-8 with or without a byte-order mark, gzip-compressed or not; the delimiter (comma,
semicolon or tab) is taken from the first line. Undecodable bytes are kept as surrogate escapes and
reported per row and column (:func:`row_values`).
"""

from __future__ import annotations

import csv
import difflib
import gzip
import io
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

from ...errors import ConfigError, ImportRejected
from ..conversions import Computed, length_reason, split_column_map, text_reason
from .problems import RowProblem

__all__ = ["CsvTable", "Progress", "clean", "computed_columns", "fit_fields", "parse_column_map", "resolve_columns",
           "row_dict", "row_values"]

#: A progress callback: (bytes of the file read so far, bytes in the file).
Progress = Callable[[int, int], None]


class CsvTable:
    """The CSV file at ``path``: its ``header`` (``[]`` when unusable) and the file-level ``problems``.

    Raises:
        ImportRejected: the file cannot be opened at all.
    """

    def __init__(self, path: Path, source: str) -> None:
        self.path = Path(path)
        self.source = source
        self.header: list[str] = []
        self.problems: list[RowProblem] = []
        self.rows_read = 0  # data rows (blank lines excluded) seen by the last complete rows() pass
        self.size = 0
        self._error: RowProblem | None = None
        try:
            with self.path.open("rb") as fh:
                start = fh.read(3)
            self.size = self.path.stat().st_size
        except OSError as exc:
            problem = self._problem(f"cannot read the file: {exc.strerror or exc}")
            raise ImportRejected(f"{source}: cannot read the file: {exc.strerror or exc}", [str(problem)]) from exc
        self.gzipped = start.startswith(b"\x1f\x8b")
        if start.startswith((b"\xff\xfe", b"\xfe\xff")):
            self.problems.append(self._problem("the file is UTF-16 encoded; save it as CSV UTF-8"))
            return
        self.delimiter = ","
        self._read_header()

    def _problem(self, reason: str, line: int = 1) -> RowProblem:
        return RowProblem(line=line, column=None, value=None, reason=reason, source=self.source)

    def _open(self) -> tuple[BinaryIO, io.TextIOWrapper]:
        raw: BinaryIO = self.path.open("rb")
        binary: BinaryIO | gzip.GzipFile = gzip.GzipFile(fileobj=raw, mode="rb") if self.gzipped else raw
        # utf-8-sig drops a byte-order mark; undecodable bytes stay as surrogate escapes (reported per cell).
        return raw, io.TextIOWrapper(binary, encoding="utf-8-sig", errors="surrogateescape", newline="")

    def _read_header(self) -> None:
        try:
            raw, text = self._open()
            with raw, text:
                first = next((line for line in text if line.strip("\r\n")), None)
                blank = first is None or (not first.strip() and not any(line.strip() for line in text))
        except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError
            self.problems.append(self._problem(f"is gzip-compressed but cannot be decompressed ({exc})"))
            return
        if blank or first is None:
            self.problems.append(self._problem(
                f"the file is empty; expected a header row with {', '.join(_REQUIRED_HINT)}"))
            return
        if "," not in first:
            if ";" in first:
                self.delimiter = ";"
            elif "\t" in first:
                self.delimiter = "\t"
        for _line, fields in self._records(header=True):
            if fields is not None:
                self.header = [clean(f.strip()) for f in fields]
            else:
                assert self._error is not None
                self.problems.append(self._error)
            return
        self.problems.append(self._problem("the file has no header row"))

    def _records(self, *, header: bool, progress: Progress | None = None
                 ) -> Iterator[tuple[int, list[str] | None]]:
        """(first physical line, fields) of each non-blank record; (line, None) once for a CSV error (then stops)."""
        raw, text = self._open()
        with raw, text:
            reader = csv.reader(text, delimiter=self.delimiter, strict=False)
            previous_end = 0
            seen_header = False
            try:
                for index, fields in enumerate(reader):
                    start = previous_end + 1
                    previous_end = reader.line_num
                    if progress is not None and index % 10_000 == 0 and index:
                        progress(raw.tell(), self.size)
                    if not fields or all(not f.strip() for f in fields):
                        continue  # blank line
                    if not seen_header:
                        seen_header = True
                        if not header:
                            continue
                    yield start, fields
            except csv.Error as exc:
                self._error = self._problem(f"cannot be read as CSV ({exc})", previous_end + 1)
                yield previous_end + 1, None
            except (OSError, EOFError) as exc:  # a gzip stream cut short or corrupt
                self._error = self._problem(f"is gzip-compressed but cannot be decompressed ({exc})",
                                            previous_end + 1)
                yield previous_end + 1, None
            if progress is not None and previous_end > 10_000:  # only a file that showed progress ends it
                progress(self.size, self.size)

    def rows(self, progress: Progress | None = None) -> Iterator[tuple[int, list[str]]]:
        """(first physical line, fields) of each data row, read from the file now.

        A CSV error (an unterminated quote at the end, a field over 128 KiB) ends the rows; it is then in
        :attr:`read_error` once the iteration is done. :attr:`rows_read` counts the rows of a complete pass.
        """
        self._error = None
        n = 0
        if not self.header:
            return
        for line, fields in self._records(header=False, progress=progress):
            if fields is None:
                break
            n += 1
            yield line, fields
        self.rows_read = n

    @property
    def read_error(self) -> RowProblem | None:
        """The CSV error that ended the last :meth:`rows` pass, if any."""
        return self._error


_REQUIRED_HINT = ("invoice_number", "customer_email", "customer_name", "currency", "amount_due", "issued_on",
                  "due_on")


def undecodable(text: str) -> bytes | None:
    """The raw bytes behind surrogate escapes in ``text``, or None if it was valid UTF-8."""
    if text.isascii() or not any("\udc80" <= ch <= "\udcff" for ch in text):
        return None
    return bytes(ord(ch) - 0xDC00 for ch in text if "\udc80" <= ch <= "\udcff")


def clean(text: str) -> str:
    """Text safe to write back as UTF-8: undecodable bytes become U+FFFD."""
    if undecodable(text) is None:
        return text
    return "".join("\ufffd" if "\udc80" <= ch <= "\udcff" else ch for ch in text)


# --------------------------------------------------------------------------- column map


def parse_column_map(spec: str | Sequence[str] | None, *, columns: Sequence[str]) -> dict[str, str]:
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


def fold(name: str) -> str:
    return re.sub(r"[\s_\-]+", "_", name.strip().casefold())


def resolve_columns(
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
            folded.setdefault(fold(name), []).append(i)
    for ours in wanted:
        theirs = column_map.get(ours, ours)
        found = exact.get(theirs) or folded.get(fold(theirs))
        if not found:
            continue
        if len(found) > 1:
            problems.append(RowProblem(
                line=1, column=ours, value=theirs,
                reason=f"appears {len(found)} times in the header (columns "
                       f"{', '.join(str(i + 1) for i in found)}); keep one",
                source=source))
        positions[ours] = found[0]
    for value in computed.values():
        absent = [f for f in value.fields if not (exact.get(f) or folded.get(fold(f)))]
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
        problems.append(RowProblem(
            line=1, column=", ".join(missing), value=None,
            reason=(f"{what} missing from the header{via}; the header has: {header_text}. "
                    f"Rename the header, or map your names with --map {example}"),
            source=source))
    return positions, problems


def computed_columns(header: list[str], column_map: Mapping[str, str] | None
                     ) -> list[tuple[Computed, dict[str, int]]]:
    """The computed ``--map`` columns with the header position of each field they read."""
    exact = {name: i for i, name in reversed(list(enumerate(header))) if name}
    folded = {fold(name): i for i, name in reversed(list(enumerate(header))) if name}
    out: list[tuple[Computed, dict[str, int]]] = []
    for value in split_column_map(column_map or {})[1].values():
        where = {f: exact.get(f, folded.get(fold(f), -1)) for f in value.fields}
        out.append((value, where))
    return out


def row_dict(header: list[str], fields: list[str]) -> dict[str, str]:
    """A row keyed by the file's own header names (``(extra 9)`` for fields beyond it), for the rejects file."""
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
        row[key] = clean(value)
    return row


def fit_fields(header: list[str], fields: list[str]) -> tuple[list[str], str | None]:
    """Fields aligned to the header, or a reason why the row has the wrong number of fields."""
    n = len(header)
    if len(fields) > n and all(not f.strip() for f in fields[n:]):
        fields = fields[:n]  # trailing empty fields (spreadsheet exports)
    if len(fields) != n:
        return fields, (f"has {len(fields)} field{'s' if len(fields) != 1 else ''} but the header has {n} "
                        "(check for an unquoted comma or a missing value)")
    return fields, None


def row_values(
    fields: list[str],
    positions: Mapping[str, int],
    computed: Sequence[tuple[Computed, Mapping[str, int]]],
    problem: Callable[[str | None, str | None, str], None],
) -> dict[str, str]:
    """Our columns' values on one row, stripped: read or computed from a ``--map`` template.

    Refused (reported through ``problem``, the value then empty): bytes that are not UTF-8, control and
    invisible format characters (:func:`~oncebeat.reminders.conversions.text_reason`; U+200C/U+200D allowed in
    ``customer_name``) and values over the column's length limit (:data:`~oncebeat.reminders.conversions.MAX_LENGTHS`).
    """
    values: dict[str, str] = {}
    for ours, pos in positions.items():
        raw = fields[pos]
        bad_bytes = undecodable(raw)
        if bad_bytes is not None:
            problem(
                ours,
                clean(raw.strip())[:40],
                f"contains bytes that are not UTF-8 ({' '.join(f'0x{b:02X}' for b in bad_bytes[:4])}); the file may be "
                "Latin-1 or Windows-1252: save it as CSV UTF-8",
            )
            values[ours] = ""
            continue
        text = raw.strip()
        reason = text_reason(text, allow_joiners=ours == "customer_name") or length_reason(ours, text)
        if reason:
            problem(ours, None, reason)
            values[ours] = ""
            continue
        values[ours] = text
    for value, where in computed:
        row = {f: fields[pos] for f, pos in where.items() if 0 <= pos < len(fields)}
        text, reason = value.render(row)
        text = text.strip()
        if reason is None:
            reason = text_reason(text, allow_joiners=value.ours == "customer_name") or length_reason(value.ours, text)
        if reason:
            problem(value.ours, None, reason)
            text = ""
        values[value.ours] = text
    return values

