"""Formatted amounts from a per-shape template instead of Babel per call (issue 27, round 3f).

Babel's ``format_currency`` costs ~30 µs per call, a fifth of a reminder's render once its templates are filled
from skeletons (:mod:`.render_skeleton`). Its output for one (currency, locale, sign, number of digits, rounding
branch) differs between amounts only in the digits: the affixes, the currency symbol, the group and decimal
separators and where they go depend on the pattern, the locale and how many digits the number has, never on
which digits they are (a standard pattern has no ``¤¤¤``, the one place where Babel's words depend on the
amount: the plural of the currency's name). So the first amount of a shape is formatted by Babel and its output
kept with its ASCII digits as slots; later amounts of the shape put their digits, zero-padded to the same count,
into those slots.

Kept only when provably the same: the pattern has no ``¤¤¤``, neither the pattern's affixes nor the currency
symbol hold an ASCII digit (so every digit of the output is the number's), and the output's digits in order are
the amount's digits zero-padded (Babel neither rounded nor dropped any). Otherwise that shape always goes to
Babel. ``tests/unit/test_money_shapes.py`` compares it with Babel over every locale of the shipped languages.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from babel import Locale
from babel.numbers import get_currency_symbol

__all__ = ["MAX_SHAPES", "shaped"]

#: Shapes kept per process (currencies × locales × signs × digit counts × two branches).
MAX_SHAPES = 8192
_DIGITS = frozenset("0123456789")
_NONE: tuple[str, ...] = ()
_shapes: dict[tuple[Any, ...], tuple[str, ...]] = {}


def shaped(amount_minor: int, currency: str, locale: Locale, branch: bool, babel: Callable[[], str]) -> str:
    """``babel()``'s output (``amount_minor`` of ``currency`` formatted for ``locale``), from the shape's
    template when one is kept. ``branch``: which of the caller's two Babel calls ``babel`` makes (CLDR's digits or
    all of the amount's), part of the shape."""
    digits = str(abs(amount_minor))
    key = (currency, locale, amount_minor < 0, len(digits), branch)
    template = _shapes.get(key)
    if template is not None and template is not _NONE:
        padded = digits.zfill(len(template) - 1)
        out = [template[0]]
        for digit, text in zip(padded, template[1:], strict=True):
            out.append(digit)
            out.append(text)
        return "".join(out)
    text = babel()
    if template is None and len(_shapes) < MAX_SHAPES:
        _shapes[key] = _learn(text, digits, currency, locale)
    return text


def _learn(text: str, digits: str, currency: str, locale: Locale) -> tuple[str, ...]:
    """(text before the first digit, text after each digit...) of Babel's ``text``; ``_NONE`` when unproven."""
    pattern = locale.currency_formats.get("standard")
    if pattern is None or "\xa4\xa4\xa4" in pattern.pattern:
        return _NONE
    affixes = "".join((*pattern.prefix, *pattern.suffix, get_currency_symbol(currency, locale)))
    if _DIGITS.intersection(affixes):
        return _NONE
    seen = [c for c in text if c in _DIGITS]
    if len(seen) < len(digits) or "".join(seen) != digits.zfill(len(seen)):
        return _NONE
    parts: list[str] = []
    current: list[str] = []
    for c in text:
        if c in _DIGITS:
            parts.append("".join(current))
            current = []
        else:
            current.append(c)
    parts.append("".join(current))
    return tuple(parts)
