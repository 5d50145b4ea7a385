"""How raw export values become invoice fields: date formats, computed columns, value rules.

Used by :mod:`oncebeat.reminders.importing` (CSV) and :mod:`oncebeat.reminders.stripe`.
Everything here is a pure function of its arguments (no database, no clock):

- :class:`DateFormat` reads dates as ``iso`` (``YYYY-MM-DD``), ``dmy``/``mdy``
  (``2/1/2013`` with ``/``, ``.`` or ``-``, four-digit years) or any strftime
  pattern such as ``%m/%d/%Y`` or ``%Y-%m-%d %H:%M:%S`` (the time is dropped).
- :class:`Computed` is a ``--map`` value that is not a header name:
  ``const:USD`` or ``template:{CustomerID}@billing.example.test``.
- :func:`currency_reason` accepts only ISO 4217 codes that are legal tender
  somewhere today (CLDR data through Babel): ``XXX``/``XAU``/``XTS`` (no
  currency, gold, testing) and withdrawn codes such as ``DEM`` are refused, and so is one the ISO 4217 table
  (:mod:`.money`) has no minor unit for.
- :func:`text_reason` refuses NUL bytes, other control characters and invisible
  format characters (bidirectional overrides, zero-width spaces); :func:`length_reason`
  bounds every field (:data:`MAX_LENGTHS`); and
  :func:`foreign_digits` finds digits of other scripts (``١٠``), which
  Python's ``Decimal`` and ``strptime`` would otherwise accept silently.
- Dates must lie in :data:`DATE_MIN` … :data:`DATE_MAX`: placeholders such as
  ``9999-12-31`` ("no due date") and ``0001-01-01`` are refused at import
  instead of overflowing date arithmetic later.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from functools import lru_cache
from importlib import resources

from babel.core import get_global
from babel.numbers import list_currencies

from ..errors import ConfigError
from ..textsafe import BIDI_CONTROLS, format_character
from .money import iso_minor_digits

__all__ = [
    "DATE_MAX",
    "DATE_MIN",
    "DATE_RANGE_TEXT",
    "Computed",
    "DateFormat",
    "currency_reason",
    "date_range_reason",
    "foreign_digits",
    "iana_zones",
    "length_reason",
    "MAX_LENGTHS",
    "MAX_OTHER_LENGTH",
    "split_column_map",
    "text_reason",
    "zone_reason",
]

#: The documented range of issue, due and payment dates (inclusive).
DATE_MIN = date(1970, 1, 1)
DATE_MAX = date(2099, 12, 31)
DATE_RANGE_TEXT = f"{DATE_MIN.isoformat()} to {DATE_MAX.isoformat()}"

_ISO_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)
_DMY_RE = re.compile(r"([0-9]{1,2})([/.\-])([0-9]{1,2})\2([0-9]{4})", re.ASCII)
_NAMED = {"iso": "YYYY-MM-DD", "dmy": "DD/MM/YYYY", "mdy": "MM/DD/YYYY"}


@dataclass(frozen=True, slots=True)
class DateFormat:
    """A way to read dates: ``iso``, ``dmy``, ``mdy`` or a strftime pattern (``%m/%d/%Y``).

    Build it with :meth:`parse`; :meth:`read` returns the date or None.
    """

    spec: str = "iso"

    @classmethod
    def parse(cls, spec: str | None) -> DateFormat:
        """Check ``--date-format``; raises :class:`ConfigError` naming what is missing."""
        if spec is None or not spec.strip():
            return cls("iso")
        text = spec.strip()
        if text.lower() in _NAMED:
            return cls(text.lower())
        if "%" not in text:
            raise ConfigError(f"--date-format: {spec!r} is neither iso, dmy, mdy nor a strftime pattern "
                              "such as %m/%d/%Y")
        missing = [what for what, codes in (("year", "%Y %y"), ("month", "%m %b %B"), ("day", "%d"))
                   if not any(code in text for code in codes.split())]
        if missing:
            raise ConfigError(f"--date-format: {spec!r} has no {' and no '.join(missing)} "
                              "(use %Y or %y, %m, %d, e.g. %m/%d/%Y)")
        try:
            datetime(2026, 1, 2, 3, 4, 5).strftime(text)
            datetime.strptime(datetime(2026, 1, 2, 3, 4, 5).strftime(text), text)
        except ValueError as exc:
            raise ConfigError(f"--date-format: {spec!r} is not a usable strftime pattern ({exc})") from None
        return cls(text)

    @property
    def example(self) -> str:
        """How a date looks in this format (for messages): ``MM/DD/YYYY`` or ``01/31/2026``."""
        return _NAMED.get(self.spec) or date(2026, 1, 31).strftime(self.spec)

    @property
    def reason(self) -> str:
        """The message for a value that does not match."""
        return f"is not a valid date (use {self.example}{'' if self.spec in _NAMED else f', {self.spec}'})"

    def read(self, value: str) -> date | None:
        """The date in ``value`` (surrounding spaces ignored), or None when it does not match."""
        value = value.strip()
        if foreign_digits(value):
            return None
        try:
            if self.spec == "iso":
                return date.fromisoformat(value) if _ISO_RE.fullmatch(value) else None
            if self.spec in ("dmy", "mdy"):
                m = _DMY_RE.fullmatch(value)
                if m is None:
                    return None
                first, second, year = int(m.group(1)), int(m.group(3)), int(m.group(4))
                day, month = (first, second) if self.spec == "dmy" else (second, first)
                return date(year, month, day)
            return datetime.strptime(value, self.spec).date()
        except ValueError:
            return None


# --------------------------------------------------------------------------- computed columns


@dataclass(frozen=True, slots=True)
class Computed:
    """A column value computed per row: a constant (``const:USD``) or a template (``template:{Id}@x.test``).

    ``fields`` are the header names a template reads (empty for a constant).
    """

    ours: str
    kind: str  # "const" | "template"
    text: str
    fields: tuple[str, ...]

    @classmethod
    def parse(cls, ours: str, spec: str) -> Computed | None:
        """The computed column for ``spec``, None when ``spec`` is a plain header name.

        Raises:
            ConfigError: a template with unbalanced braces, an empty field or a format spec.
        """
        kind, sep, text = spec.partition(":")
        if not sep or kind.strip().lower() not in ("const", "template"):
            return None
        kind = kind.strip().lower()
        if kind == "const":
            return cls(ours, kind, text, ())
        try:
            parts = list(string.Formatter().parse(text))
        except ValueError as exc:
            raise ConfigError(f"--map {ours}=template:{text}: {exc} (write fields as {{HeaderName}}, "
                              "braces as {{ and }})") from None
        fields: list[str] = []
        for _, name, fmt, conv in parts:
            if name is None:
                continue
            if not name.strip() or fmt or conv:
                raise ConfigError(f"--map {ours}=template:{text}: each {{…}} must name one header column, "
                                  "e.g. {CustomerID}")
            fields.append(name)
        if not fields:
            raise ConfigError(f"--map {ours}=template:{text}: the template names no column; use const:{text} "
                              "for a constant")
        return cls(ours, kind, text, tuple(fields))

    def render(self, values: Mapping[str, str]) -> tuple[str, str | None]:
        """(value, None), or ("", reason) when a field the template needs is empty on this row."""
        if self.kind == "const":
            return self.text, None
        empty = [f for f in self.fields if not values.get(f, "").strip()]
        if empty:
            return "", f"is computed from {', '.join(empty)}, which is empty on this line"
        out = []
        for literal, name, _, _ in string.Formatter().parse(self.text):
            out.append(literal)
            if name is not None:
                out.append(values[name].strip())
        return "".join(out), None

    def describe(self) -> str:
        return f"{self.kind}:{self.text}"


def split_column_map(column_map: Mapping[str, str]) -> tuple[dict[str, str], dict[str, Computed]]:
    """Split ``{ours: spec}`` into header renames and computed columns (see :class:`Computed`)."""
    headers: dict[str, str] = {}
    computed: dict[str, Computed] = {}
    for ours, spec in column_map.items():
        value = Computed.parse(ours, spec)
        if value is None:
            headers[ours] = spec
        else:
            computed[ours] = value
    return headers, computed


# --------------------------------------------------------------------------- value rules


@lru_cache(maxsize=1)
def _tender_history() -> tuple[frozenset[str], dict[str, str]]:
    """(codes tender somewhere today, {withdrawn code: last day it was tender anywhere}) from CLDR."""
    today = date.today()
    current: set[str] = set()
    last_day: dict[str, date] = {}
    for entries in get_global("territory_currencies").values():
        for code, start, end, tender in entries:
            if not tender:
                continue
            if end is None or date(*end) >= today:
                if start is None or date(*start) <= today:
                    current.add(code)
            else:
                last_day[code] = max(last_day.get(code, date.min), date(*end))
    withdrawn = {code: day.isoformat() for code, day in last_day.items() if code not in current}
    return frozenset(current), withdrawn


def currency_reason(code: str) -> str | None:
    """Why ``code`` (upper case) cannot be an invoice currency, or None when it is legal tender today."""
    current, withdrawn = _tender_history()
    if code in current:
        if iso_minor_digits(code) is None:  # CLDR knows a new currency before the ISO 4217 table shipped here does
            return ("is legal tender, but the ISO 4217 table installed (the iso4217 package) has no minor unit for "
                    "it yet; upgrade that package")
        return None
    if code in withdrawn:
        return f"was withdrawn (last legal tender on {withdrawn[code]}); use the currency that replaced it"
    if len(code) == 3 and code.isalpha() and code.isascii() and code in list_currencies():
        return "is an ISO 4217 code but not legal tender (no currency, precious metal, testing or fund code)"
    return "is not an ISO 4217 currency code (e.g. USD, EUR, JPY)"


def foreign_digits(value: str) -> str:
    """The digits in ``value`` that are not ASCII 0-9 (``'١٠'`` → ``'١٠'``), or ``''``."""
    if value.isascii():  # no character to look at (an import asks for each date and amount cell: 300,000 calls)
        return ""
    return "".join(ch for ch in value if not ch.isascii() and unicodedata.category(ch) == "Nd")


def text_reason(value: str, *, allow_joiners: bool = False) -> str | None:
    """Why ``value`` cannot be stored as text, or None: a NUL byte, another control character, or an invisible
    format character such as a bidirectional override U+202E (:mod:`oncebeat.textsafe`; position given).

    ``allow_joiners``: U+200C and U+200D are allowed (names: Persian, Indic scripts, emoji); never in identifiers.
    """
    if value.isascii() and value.isprintable():  # U+0020-U+007E only: no control, no format character (an
        return None  # import checks every cell: 420,000 calls for 60,000 invoices; the loop below costs ~1 µs a char)
    for i, ch in enumerate(value, start=1):
        if ch == "\x00":
            return f"contains a NUL byte at character {i}; remove it (the export may be UTF-16 or binary)"
        if unicodedata.category(ch) == "Cc" and ch not in "\t":
            return f"contains the control character U+{ord(ch):04X} at character {i}; remove it"
    found = None if value.isascii() else format_character(value, allow_joiners=allow_joiners)
    if found:
        position, name = found
        kind = "a bidirectional control" if value[position - 1] in BIDI_CONTROLS else "an invisible format character"
        return (f"contains {kind} ({name}) at character {position}, which changes how the text is shown or "
                "compared; remove it")
    return None


#: The longest value of each field, in characters (README, "Limits"); :data:`MAX_OTHER_LENGTH` for the others.
MAX_LENGTHS: dict[str, int] = {
    "invoice_number": 64,
    "customer_email": 254,  # RFC 5321: a path holds at most 256 octets including the angle brackets
    "customer_name": 200,
    "currency": 16,  # ISO 4217 codes have 3 letters; a longer value gets the currency rule's own message below this
    "customer_locale": 32,
    "customer_tz": 64,
    "customer_tags": 1000,  # at most 20 tags of at most 40 characters, with separators
    "payment_url": 2048,  # what browsers and mail clients keep whole
    "pdf_path": 1024,  # a path inside [attachments] pdf_dir
}
#: The longest value of any other column (dates, amounts, status, paid_at), in characters.
MAX_OTHER_LENGTH = 64


def length_reason(column: str, value: str) -> str | None:
    """Why ``value`` is too long for ``column`` (:data:`MAX_LENGTHS`), or None. The value is not repeated."""
    limit = MAX_LENGTHS.get(column, MAX_OTHER_LENGTH)
    if len(value) <= limit:
        return None
    return (f"is {len(value):,} characters long (starts {value[:20]!r}); at most {limit} are allowed "
            f"(README, Limits)")


def date_range_reason(day: date) -> str | None:
    """Why ``day`` is outside the documented range, or None."""
    if DATE_MIN <= day <= DATE_MAX:
        return None
    return f"is outside the supported range {DATE_RANGE_TEXT} (a placeholder for 'no date'? leave it empty)"


@lru_cache(maxsize=1)
def iana_zones() -> frozenset[str]:
    """IANA zone names from the ``tzdata`` package: never ``localtime``, ``posixrules``, ``Factory`` or ``posix/…``.

    Those names depend on the host (``localtime`` is whatever the machine is set to) or mean no zone at
    all, so a schedule or customer zone must not use them (G7).
    """
    text = resources.files("tzdata").joinpath("zones").read_text(encoding="utf-8")
    return frozenset(z for z in (line.strip() for line in text.splitlines()) if z and z != "Factory")


def zone_reason(name: str) -> str | None:
    """Why ``name`` is not a usable IANA zone for the business or a customer, or None."""
    if name in iana_zones():
        return None
    if name in ("localtime", "posixrules", "Factory") or name.startswith(("posix/", "right/")):
        return "names the host's zone setting (it changes with the machine), not an IANA zone"
    return "is not an IANA time zone"
