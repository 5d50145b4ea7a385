"""Where each ``[stage.N]`` table and key sits in oncebeat.toml: the line numbers its problems give.

``tomllib`` keeps no positions, so the text is scanned once, linearly (as :mod:`oncebeat.reminders.ladder_lines`
does for ``[[ladders]]``): a ``[stage.N]`` header (``N`` bare or quoted) starts table ``N``, which runs to the next
header; a key is the first line of that range assigning it (``cc =``, ``"cc" =``). A file that writes the stages in a
``[stage]`` table (``30 = { cc = [...] }``) gives the line of that assignment. A table or key the scan does not find
(dotted keys such as ``stage.30.cc = ...`` at the top level) keeps its message without a line.
"""

from __future__ import annotations

import re

from ..ladder_lines import assigns as _assigns

__all__ = ["StageLines"]

_KEY = r"""(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)'|(?P<bare>[A-Za-z0-9_-]+))"""
_STAGE_HEADER = re.compile(rf"\s*\[\s*stage\s*\.\s*{_KEY}\s*\]\s*(#.*)?$")
_STAGE_TABLE = re.compile(r"\s*\[\s*stage\s*\]\s*(#.*)?$")
_ANY_HEADER = re.compile(r"\s*\[")
_PROBLEM = re.compile(r"\[stage\.(?P<stage>[^\]\s]*)\](?: (?P<key>\w+))?")


class StageLines:
    """The 1-based line numbers of the ``[stage.N]`` tables of one file's text (None: no text, no lines)."""

    def __init__(self, text: str | None) -> None:
        self._lines = (text or "").splitlines()
        self._tables: dict[str, tuple[int, int]] = {}  # stage key as written -> (header index, end exclusive)
        self._inline: dict[str, int] = {}  # stage key -> index of its `N = {...}` line inside a [stage] table
        for start, line in enumerate(self._lines):
            header = _STAGE_HEADER.match(line)
            if header is None and not _STAGE_TABLE.match(line):
                continue
            end = next((i for i in range(start + 1, len(self._lines)) if _ANY_HEADER.match(self._lines[i])),
                       len(self._lines))
            if header is not None:
                key = next(g for g in (header["dq"], header["sq"], header["bare"]) if g is not None)
                self._tables.setdefault(key, (start, end))
                continue
            for i in range(start + 1, end):
                found = re.match(rf"\s*{_KEY}\s*=", self._lines[i])
                if found is not None:
                    self._inline.setdefault(next(g for g in found.groups() if g is not None), i)

    def line(self, stage: str, key: str | None = None) -> int | None:
        """The line of table ``stage`` (its key as written, e.g. ``"30"``), or of its ``key`` (``cc``, ``bcc``,
        ``fee``) when found in the table; None when the text has no such table."""
        if stage in self._inline:
            return self._inline[stage] + 1
        if stage not in self._tables:
            return None
        start, end = self._tables[stage]
        if key is not None:
            found = next((i for i in range(start + 1, end) if _assigns(self._lines[i], key)), None)
            if found is not None:
                return found + 1
        return start + 1

    def at(self, problem: str) -> str:
        """``problem`` (a message that starts ``[stage.N]``, e.g. ``[stage.30] cc[0] = ...``) prefixed with the line
        of its table or key (``line 12: ...``); any other message, or one whose table is not found, unchanged."""
        m = _PROBLEM.match(problem)
        if m is None:
            return problem
        line = self.line(m["stage"], m["key"])
        return problem if line is None else f"line {line}: {problem}"
