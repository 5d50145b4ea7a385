"""Invisible format characters: refused in imported text, removed from mail headers.

Unicode's *format* characters (general category ``Cf``) are invisible but change how text is shown or
compared: the bidirectional controls U+202A–U+202E (LRE, RLE, PDF, LRO, RLO), U+2066–U+2069 (LRI, RLI,
FSI, PDI), U+200E/U+200F (LRM, RLM) and U+061C (ALM) reorder what follows them, so a display name
``"Zoë \\u202egnp.exe"`` shows as ``Zoë exe.png`` in a mail client (Trojan Source, CVE-2021-42574); a
zero-width space (U+200B) or a word joiner (U+2060) makes ``INV-1`` and ``INV-\\u200b1`` two invoices that
look the same. Such characters are refused at import (:func:`format_character` names the first one) and
removed when a header is built (:func:`strip_format_characters`).

Two format characters are part of ordinary writing and kept in names (``allow_joiners=True``): the
zero-width non-joiner U+200C (Persian, Hindi) and the zero-width joiner U+200D (emoji sequences, Indic
scripts). Identifiers (invoice numbers, emails, codes) allow none.

Example::

    >>> format_character("Zoë \\u202egnp.exe")
    (5, 'U+202E RIGHT-TO-LEFT OVERRIDE')
    >>> strip_format_characters("Zoë \\u202egnp.exe")
    'Zoë gnp.exe'
"""

from __future__ import annotations

import unicodedata

__all__ = ["BIDI_CONTROLS", "JOINERS", "format_character", "strip_format_characters"]

#: The bidirectional controls (all of category Cf), named in messages as such.
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
#: Format characters of ordinary writing: kept in names, refused in identifiers.
JOINERS = frozenset("\u200c\u200d")


def _is_format(ch: str, allow_joiners: bool) -> bool:
    return unicodedata.category(ch) == "Cf" and not (allow_joiners and ch in JOINERS)


def format_character(text: str, *, allow_joiners: bool = False) -> tuple[int, str] | None:
    """The first invisible format character of ``text``: (1-based position, ``"U+202E RIGHT-TO-LEFT OVERRIDE"``).

    None when ``text`` has none (U+200C and U+200D do not count with ``allow_joiners``).
    """
    for i, ch in enumerate(text, start=1):
        if _is_format(ch, allow_joiners):
            return i, f"U+{ord(ch):04X} {unicodedata.name(ch, 'FORMAT CHARACTER')}"
    return None


def strip_format_characters(text: str, *, allow_joiners: bool = True) -> str:
    """``text`` without its invisible format characters (the joiners kept unless ``allow_joiners`` is False)."""
    if text.isascii():
        return text
    return "".join(ch for ch in text if not _is_format(ch, allow_joiners))
