"""Where each ``[[ladders]]`` table and key sits in oncebeat.toml: the line numbers its error messages give.

``tomllib`` keeps no positions, so the text is scanned once, linearly: the n-th ``[[ladders]]`` header is the n-th
table (its keys run to the next header that is not one of its own sub-tables, ``[ladders.match]``), and a key is
the first line of that range assigning it (``key =``, ``"key" =``, or inside ``match = {...}`` / a
``[ladders.match]`` sub-table for a ``match`` key). A file that writes the array inline (``ladders = [{...}]``) has
no headers: its messages name no line.
"""

from __future__ import annotations

import re

__all__ = ["LadderLines", "assigns"]

_HEADER = re.compile(r"\s*\[\[\s*ladders\s*\]\]\s*(#.*)?$")
_OWN_SUBTABLE = re.compile(r"\s*\[\s*ladders\s*\.")
_ANY_HEADER = re.compile(r"\s*\[")


def assigns(line: str, key: str) -> bool:
    """Whether TOML ``line`` assigns ``key`` (bare or quoted) at its start."""
    return re.match(rf"""\s*(?:{re.escape(key)}|"{re.escape(key)}"|'{re.escape(key)}')\s*=""", line) is not None


class LadderLines:
    """The 1-based line numbers of the ``[[ladders]]`` tables of one file's text."""

    def __init__(self, text: str | None) -> None:
        self._lines = (text or "").splitlines()
        self._tables: list[tuple[int, int]] = []  # (header index, end index exclusive), 0-based
        starts = [i for i, line in enumerate(self._lines) if _HEADER.match(line)]
        for start in starts:
            end = start + 1
            while end < len(self._lines) and not (_ANY_HEADER.match(self._lines[end])
                                                  and not _OWN_SUBTABLE.match(self._lines[end])):
                end += 1
            self._tables.append((start, end))

    def line(self, n: int, key: str | None = None, sub: str | None = None) -> int | None:
        """The line of table ``n`` (1-based), of its ``key``, or of ``match``'s ``sub`` key; the nearest known
        enclosing line when the exact one is not found; None when the file has no n-th ``[[ladders]]`` header."""
        if not 1 <= n <= len(self._tables):
            return None
        start, end = self._tables[n - 1]
        if key is None:
            return start + 1
        body = range(start + 1, end)
        found = next((i for i in body if assigns(self._lines[i], key)), None)
        if sub is not None:
            if found is not None and re.search(rf"\b{re.escape(sub)}\s*=", self._lines[found]):
                return found + 1  # match = { sub = ... } on one line
            sub_header = next((i for i in body if re.match(rf"\s*\[\s*ladders\s*\.\s*{re.escape(key)}\s*\]",
                                                           self._lines[i])), None)
            after = found if found is not None else sub_header
            if after is not None:
                exact = next((i for i in range(after, end) if assigns(self._lines[i], sub)
                              or re.search(rf"[{{,]\s*{re.escape(sub)}\s*=", self._lines[i])), None)
                return (exact if exact is not None else after) + 1
        return (found if found is not None else start) + 1
