"""The value rules of imported rows: dates, instants, emails, zones, locales and amounts.

Each function is pure (no database, no clock) and returns the value or the reason it is refused, worded
to follow the column and the value in a message (``column due_on: '2026-02-30' is not a valid date``).
Used by the CSV readers (:mod:`.invoices`, :mod:`.payments`) and the Stripe import.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
import zoneinfo
from datetime import date, datetime, timedelta
from decimal import Context, Decimal, InvalidOperation
from email.utils import parseaddr

from babel import Locale, UnknownLocaleError

from ...mail.message import address_problem
from ..conversions import DateFormat, date_range_reason, foreign_digits, iana_zones, zone_reason
from ..money import minor_digits

__all__ = ["amount_minor", "check_locale", "check_payment_url", "check_zone", "email_reason", "paid_on_reason",
           "read_date", "read_instant", "status_on_reason"]

_AMOUNT_RE = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)", re.ASCII)
_PAID_AHEAD = timedelta(days=1)  # a payment may be dated tomorrow (zones ahead of ours), not later
_MAX_MINOR = 10**15  # far below a 64-bit integer column


def read_date(value: str, fmt: DateFormat) -> tuple[date | None, str | None]:
    """(date, None) or (None, reason): the format, digits of other scripts and the documented range."""
    digits = foreign_digits(value)
    if digits:
        return None, f"contains digits of another script ({digits!r}); write ASCII digits 0-9"
    day = fmt.read(value)
    if day is None:
        return None, fmt.reason
    reason = date_range_reason(day)
    return (None, reason) if reason else (day, None)


def read_instant(value: str) -> tuple[datetime | None, str | None]:
    """An ISO instant with a UTC offset (``2026-02-03T09:30:00-06:00``), or (None, reason)."""
    if foreign_digits(value):
        return None, "contains digits of another script; write ASCII digits 0-9"
    try:
        instant = datetime.fromisoformat(value)
    except ValueError:
        return None, "is not an ISO instant such as 2026-02-03T09:30:00-06:00"
    if instant.tzinfo is None:
        return None, "has no UTC offset; add one (e.g. +00:00 or -06:00)"
    reason = date_range_reason(instant.date())
    return (None, reason) if reason else (instant, None)


def paid_on_reason(paid_on: date, issued_on: date | None, today: date | None) -> str | None:
    """Why a payment date means nothing: before the invoice was issued, or in the future."""
    if issued_on is not None and paid_on < issued_on:
        return f"is before the invoice was issued ({issued_on.isoformat()}); check the date format"
    if today is not None and paid_on > today + _PAID_AHEAD:
        return f"is in the future (today is {today.isoformat()}); a payment is recorded once it happened"
    return None


def status_on_reason(status_on: date, today: date | None) -> str | None:
    """Why a status date cannot be taken: in the future. A status is dated when it was set, and a future date
    (a typo such as 2099) would outrank every payment and reopen a paid invoice (the transition rule)."""
    if today is not None and status_on > today + _PAID_AHEAD:
        return f"is in the future (today is {today.isoformat()}); date a status the day it was set"
    return None


def email_reason(value: str) -> str | None:
    """The reason ``value`` is not a usable address, or None."""
    # U+0020-U+007E only (most addresses): the one space there is the only white space, and no control character
    plain = value.isascii() and value.isprintable()
    if (" " in value) if plain else any(ch.isspace() for ch in value):
        return "is not a valid email address (it contains a space)"
    if value.count("@") != 1:
        return "is not a valid email address (it needs exactly one @)"
    if not plain and any(unicodedata.category(ch) == "Cc" for ch in value):
        return "is not a valid email address (it contains a control character)"
    _, addr = parseaddr(value)
    local, _, domain = value.partition("@")
    if addr != value or not local or not domain:
        return "is not a valid email address (use a bare address like name@example.com)"
    if "." not in domain or domain.startswith(".") or domain.endswith(".") or ".." in domain:
        return "is not a valid email address (the domain needs a dot, like example.com)"
    problem = address_problem(value)  # the rule every send applies: what imports is deliverable
    return f"is not a deliverable email address ({problem})" if problem else None


def check_payment_url(value: str) -> tuple[str | None, str | None]:
    """(url, None) for an https URL with a host and no spaces (the invoice's pay-now page), else (None, reason).

    Only https: a reminder must never send a customer to a page whose payment form travels in clear text, and a
    ``javascript:`` or ``data:`` link must never become a button in an email.
    """
    from urllib.parse import urlsplit

    fix = "write the invoice's https:// pay-now link, e.g. https://pay.example.com/i/INV-1, or leave the cell empty"
    if any(ch.isspace() for ch in value):
        return None, f"contains a space: {fix}"
    try:
        parts = urlsplit(value)
    except ValueError:
        return None, f"is not a URL: {fix}"
    if parts.scheme.lower() != "https":
        return None, f"is not an https:// URL: {fix}"
    if not parts.hostname or "@" in parts.netloc:
        return None, f"has no host (or carries a user name or password): {fix}"
    return value, None


def check_zone(value: str) -> tuple[str | None, str | None]:
    """(zone, None) when valid, else (None, reason)."""
    zones = iana_zones()
    if value in zones:
        return value, None
    if value in zoneinfo.available_timezones() or value == "localtime":
        return None, zone_reason(value)
    by_fold = {z.casefold(): z for z in zones}
    if value.casefold() in by_fold:
        return None, f"is not an IANA time zone (names are case-sensitive); did you mean {by_fold[value.casefold()]}?"
    guess = value.replace(" ", "_")
    close = difflib.get_close_matches(guess, sorted(zones), n=3, cutoff=0.6)
    if not close:
        tail = guess.rsplit("/", 1)[-1].casefold()
        close = sorted(z for z in zones if z.rsplit("/", 1)[-1].casefold() == tail)[:3]
    hint = f"; did you mean {' or '.join(close)}?" if close else " (use a name like America/Chicago or Europe/Berlin)"
    return None, f"is not an IANA time zone{hint}"


def check_locale(value: str) -> tuple[str | None, str | None]:
    """(canonical locale id, None) when Babel knows it, else (None, reason)."""
    ident = value.replace("-", "_").split(".", 1)[0].split("@", 1)[0]
    reason = "is not a known locale (use an id like en_US, de_DE or pt_BR)"
    parts = ident.split("_")
    if not ident or not parts[0].isalpha():
        return None, reason
    try:
        parsed = Locale.parse(ident)
    except (UnknownLocaleError, ValueError, TypeError):
        return None, reason
    territory = next((p for p in parts[1:] if (len(p) == 2 and p.isalpha()) or (len(p) == 3 and p.isdigit())), None)
    if parsed.language != parts[0].lower() or (territory is not None and (parsed.territory or "") != territory.upper()):
        return None, reason
    return str(parsed), None


def amount_minor(value: str, currency: str | None) -> tuple[int | None, str | None]:
    """Minor units for ``value`` in ``currency`` (None when the currency is unknown: only the number is checked)."""
    digits = foreign_digits(value)
    if digits:
        return None, f"contains digits of another script ({digits!r}); write ASCII digits 0-9"
    if not _AMOUNT_RE.fullmatch(value):
        return None, "is not a number (write a plain decimal like 1234.50: no currency symbol, no thousands separator)"
    try:
        amount = Decimal(value)
    except InvalidOperation:  # pragma: no cover - the regex excludes this
        return None, "is not a number"
    if amount < 0:
        return None, "is negative (amount_due must be more than 0; record credits and refunds separately)"
    if amount == 0:
        return None, "is zero: nothing is due, so no reminder may be sent (leave the invoice out, or mark it paid)"
    if currency is None:
        return None, None
    precision = minor_digits(currency)  # ISO 4217, never CLDR's display digits (HUF 8491.50 is valid)
    # Count the decimals in the text: Decimal arithmetic rounds to 28 digits, which would turn
    # 1.0000000000000000000000000000000000000001 into 1.00 silently.
    decimals = len(value.partition(".")[2].rstrip("0"))
    minor = amount.scaleb(precision, context=Context(prec=80))
    if decimals > precision or minor != minor.to_integral_value():
        if precision == 0:
            return None, f"has decimals, but {currency} has no minor unit (write a whole number)"
        return None, f"has more decimals than {currency} allows ({precision})"
    if minor > _MAX_MINOR:
        return None, "is too large (at most 10^15 minor units)"
    return int(minor), None
