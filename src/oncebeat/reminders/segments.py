"""A customer's country and tags (reminders migration 0019): the value rules every source and ``[[ladders]]`` use.

- ``country``: an ISO 3166-1 alpha-2 code, upper case (``"US"``, ``"DE"``), checked against CLDR's territory list
  (Babel's; regions such as ``"EU"`` or ``"001"`` and CLDR's private codes are refused, Kosovo's widely used
  ``"XK"`` is accepted). Stored ``''`` when unknown.
- ``tags``: words the team gives a customer (``enterprise``, ``vip``, ``reseller-emea``): lower-case letters, digits,
  ``-``, ``_`` or ``.``, 1-40 characters each, at most :data:`MAX_TAGS`. Written ``"a;b"`` in a CSV cell, a
  column of the team's database or an API field (``,`` also separates; a list where the source has lists).
  Stored canonically: sorted, without duplicates, joined by ``;`` (``''`` none), so both backends store and
  compare the same text; :func:`tag_set` reads it back.

Each ``check_*`` function is pure and returns ``(value, None)`` or ``(None, reason)``, the reason worded to follow
the column and its value in a message (``column customer_country: 'USA' is not ...``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from functools import cache

from babel import Locale

__all__ = ["MAX_TAGS", "check_country", "check_tags", "countries", "tag_set"]

#: At most this many tags per customer.
MAX_TAGS = 20
_TAG = re.compile(r"[a-z0-9][a-z0-9_.-]{0,39}")
# CLDR territories that are no ISO 3166-1 alpha-2 country: regions, groupings, reserved and pseudo codes.
_NOT_COUNTRIES = frozenset({"AC", "CP", "CQ", "DG", "EA", "EU", "EZ", "IC", "QO", "TA", "UN", "XA", "XB", "ZZ"})


@cache
def countries() -> dict[str, str]:
    """Every accepted country code -> its English name (CLDR, through Babel)."""
    names = Locale("en").territories
    return {code: str(names[code]) for code in sorted(names)
            if len(code) == 2 and code.isalpha() and code not in _NOT_COUNTRIES}


def check_country(value: str) -> tuple[str | None, str | None]:
    """``(code, None)`` for an ISO 3166-1 alpha-2 code in any case (``"us"`` gives ``"US"``), else ``(None, reason)``
    (a close code or the code of a country written by its English name is suggested)."""
    text = value.strip()
    code = text.upper()
    known = countries()
    if code in known:
        return code, None
    by_name = {name.casefold(): c for c, name in known.items()}
    if text.casefold() in by_name:
        return None, f"is a country name, not its code; write {by_name[text.casefold()]}"
    close = difflib.get_close_matches(text.casefold(), list(by_name), n=1, cutoff=0.8) if len(text) > 3 else []
    hint = f"; did you mean {by_name[close[0]]} ({known[by_name[close[0]]]})?" if close else ""
    return None, f"is not an ISO 3166-1 alpha-2 country code (two letters, e.g. US, DE, JP){hint}"


def check_tags(value: str | Iterable[str]) -> tuple[str | None, str | None]:
    """The canonical stored text of tags written ``"a;b"`` (or ``"a, b"``) or given as a list, else
    ``(None, reason)``. Tags are lower-cased; an empty text or list gives ``""`` (no tags)."""
    items = re.split(r"[;,]", value) if isinstance(value, str) else list(value)
    tags = set()
    for item in items:
        if not isinstance(item, str):
            return None, f"holds {item!r}, not a word (tags are text such as enterprise;vip)"
        tag = item.strip().lower()
        if not tag:
            continue
        if not _TAG.fullmatch(tag):
            return None, (f"holds the tag {item.strip()[:50]!r}: a tag is 1-40 letters, digits, -, _ or . starting "
                          "with a letter or digit (write e.g. enterprise;vip)")
        tags.add(tag)
    if len(tags) > MAX_TAGS:
        return None, f"holds {len(tags)} tags (at most {MAX_TAGS})"
    return ";".join(sorted(tags)), None


def tag_set(stored: str | None) -> frozenset[str]:
    """The tags of a stored ``tags`` value (``"a;b"``; ``''`` or None: none)."""
    return frozenset(t for t in (stored or "").split(";") if t)
