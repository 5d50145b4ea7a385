"""The business calendar: which days reminders go out on, and how stage days are counted.

``[calendar]`` in oncebeat.toml (all keys optional; no table: every day is a business day, as before)::

    [calendar]
    country = "US"               # public holidays of this country (ISO 3166-1 alpha-2), from the holidays package
    subdivision = "IL"           # optional: a state, province or Land of it ("BY" for Bavaria with country = "DE")
    weekend = ["sat", "sun"]     # weekdays nothing goes out on; [] = none
    stage_days = "calendar"      # calendar | business: how the ladder's stage days are counted
    send_window = "08:00-17:00"  # optional: local hours a reminder may leave in (the customer's zone with
                                 # send_zone = "customer"); a send outside waits for the window to open

Rules (DESIGN.md §6, README "Business calendar"):

1. A business date (the schedule's, or each customer's with ``send_zone = "customer"``) that is a weekend day or
   a holiday creates no reminder for the customers it concerns; the next business day's scan creates the stages
   due by then, under the ladder's collapse rule, so a stage whose date fell on a non-business day goes out on
   the next business day at the send time.
2. ``stage_days = "calendar"``: stage N's date is ``due_on + N`` days. ``"business"``: it is the N-th business day
   after the due date (before it for a negative N; the due date itself for 0), so it is always a business day
   (except stage 0 on a non-business due date, which rule 1 moves). The spacing kept after a late stage under
   ``collapse = "next"``, days past due in reports and templates stay calendar days.
3. A held ladder resumes on the next business day after the promise or the release (:mod:`.holds`).

The calendar is a value (:class:`BusinessCalendar`): the scan, the preview, the hold rules and the simulator's
checker receive it, so each ladder can bring its own. Holiday tables come from the ``holidays`` package (never
our own), read once per country, subdivision and year.

Example::

    cal = calendar_config({"country": "US"}, source="oncebeat.toml")
    cal.why_not(date(2026, 12, 25))          # 'Christmas Day (US)'
    cal.next_business_day(date(2026, 12, 24))  # date(2026, 12, 28): the 25th a holiday, then a weekend
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from functools import lru_cache
from typing import Any

from ..errors import ConfigError

__all__ = ["CALENDAR_KEYS", "STAGE_DAYS", "WEEKDAYS", "BusinessCalendar", "calendar_config", "calendar_from_json",
           "calendar_problems", "calendar_to_json", "stage_cutoffs"]

#: Weekday names as written in ``weekend`` (``date.weekday()`` order: Monday = 0).
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_FULL_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_DAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
#: Allowed values of ``stage_days``.
STAGE_DAYS = ("calendar", "business")
CALENDAR_KEYS = ("country", "subdivision", "weekend", "stage_days", "send_window")
#: A search for a business day gives up after this many days (a year of holidays cannot be longer).
_MAX_SEARCH = 400


@lru_cache(maxsize=256)
def _holidays_of(country: str, subdivision: str | None, year: int) -> dict[date, str]:
    """The holidays of one year as ``{date: English name}`` (the country's own language when it has no English
    names). A plain dict built once: the package's lazily-filled object is not shared between threads."""
    import holidays  # here, like every use of it: ~0.06 s of import that a book without a calendar never needs

    try:
        table = holidays.country_holidays(country, subdiv=subdivision, years=year, language="en_US")
    except NotImplementedError:  # no English translation shipped for this country
        table = holidays.country_holidays(country, subdiv=subdivision, years=year)
    return {day: str(name) for day, name in table.items()}


@dataclass(frozen=True, kw_only=True, slots=True)
class BusinessCalendar:
    """Which days are business days, and how stage days count. Build it with :func:`calendar_config`.

    ``weekend``: ``date.weekday()`` numbers (Monday = 0); ``send_window``: local ``(open, close)`` wall times,
    ``open <= t < close``, or None (any time).
    """

    country: str | None = None
    subdivision: str | None = None
    weekend: frozenset[int] = frozenset({5, 6})
    stage_days: str = "calendar"
    send_window: tuple[time, time] | None = None

    # --- days ------------------------------------------------------------------------------------------------
    def holiday(self, day: date) -> str | None:
        """The name of the public holiday on ``day`` ("Christmas Day"), or None."""
        if self.country is None:
            return None
        return _holidays_of(self.country, self.subdivision, day.year).get(day)

    def why_not(self, day: date) -> str | None:
        """Why ``day`` is not a business day ("Christmas Day (US)", "weekend (Saturday)"), or None when it is."""
        name = self.holiday(day)
        if name is not None:
            where = self.country if self.subdivision is None else f"{self.country}-{self.subdivision}"
            return f"{name} ({where})"
        if day.weekday() in self.weekend:
            return f"weekend ({_DAY_NAMES[day.weekday()]})"
        return None

    def is_business_day(self, day: date) -> bool:
        """Whether reminders may go out on ``day`` (a local date): not a weekend day, not a holiday."""
        return day.weekday() not in self.weekend and self.holiday(day) is None

    def next_business_day(self, day: date) -> date:
        """The first business day strictly after ``day``."""
        return self.add_business_days(day, 1)

    def on_or_after(self, day: date) -> date:
        """``day`` when it is a business day, else the next one: where a stage dated ``day`` goes out."""
        return day if self.is_business_day(day) else self.next_business_day(day)

    def add_business_days(self, day: date, n: int) -> date:
        """The ``n``-th business day after ``day`` (``n`` > 0), before it (``n`` < 0), or ``day`` itself (0).

        ``day`` need not be a business day. Raises ConfigError if no business day is found within a year (a
        calendar whose every day is a weekend day or a holiday: :func:`calendar_config` refuses a full week).
        """
        step = timedelta(days=1 if n > 0 else -1)
        left, searched = abs(n), 0
        while left:
            day += step
            searched += 1
            if searched > _MAX_SEARCH * max(1, abs(n)):
                raise ConfigError(f"[calendar]: no business day within {searched} days of {day}; check weekend")
            if self.is_business_day(day):
                left -= 1
        return day

    def business_days_between(self, start: date, end: date) -> int:
        """Business days in ``(start, end]`` (0 when ``end <= start``)."""
        return sum(1 for k in range(1, (end - start).days + 1) if self.is_business_day(start + timedelta(days=k)))

    # --- stages ----------------------------------------------------------------------------------------------
    def nominal(self, due_on: date, stage: int) -> date:
        """Stage ``stage``'s own date for an invoice due ``due_on``: ``due_on + stage`` calendar days, or with
        ``stage_days = "business"`` the ``stage``-th business day from it."""
        if self.stage_days == "business":
            return self.add_business_days(due_on, stage)
        return due_on + timedelta(days=stage)

    def stage_cutoff(self, business_date: date, stage: int) -> date:
        """The latest due date whose stage ``stage`` has come by ``business_date``: ``nominal(d, stage) <=
        business_date`` exactly for ``d <= stage_cutoff(business_date, stage)`` (nominal grows with ``d``).

        Business days: for N > 0 the N-th business day counting back from ``business_date`` (itself included)
        must come after the due date, for N < 0 the due date may be up to |N| business days ahead.
        """
        if self.stage_days != "business" or stage == 0:
            return business_date - timedelta(days=stage)
        if stage > 0:
            return self.add_business_days(business_date + timedelta(days=1), -stage) - timedelta(days=1)
        return self.add_business_days(business_date, -stage)

    def late_reason(self, due_on: date, stage: int, sent_on: date) -> str | None:
        """Why stage ``stage`` goes out on ``sent_on`` rather than its nominal date, when the calendar moved it:
        "nominal 2026-12-25 (Christmas Day (US)), sent on the next business day"; None when it is on time or
        late for another reason (downtime, a hold, the spacing after a late stage)."""
        nominal = self.nominal(due_on, stage)
        if nominal >= sent_on or self.on_or_after(nominal) != sent_on:
            return None
        return f"nominal {nominal.isoformat()} ({self.why_not(nominal)}), sent on the next business day"

    # --- send window -----------------------------------------------------------------------------------------
    def window_wait(self, local: datetime) -> float:
        """Seconds from ``local`` (an aware wall-clock instant in the zone the window is read in) until a reminder
        may leave: 0 inside the window on a business day, else until the window opens on the next business day
        (the same day when it has not opened yet). 0 without a window."""
        if self.send_window is None:
            return 0.0
        opens, closes = self.send_window
        day = local.date()
        if self.is_business_day(day) and opens <= local.time().replace(tzinfo=None) < closes:
            return 0.0
        if not (self.is_business_day(day) and local.time().replace(tzinfo=None) < opens):
            day = self.next_business_day(day)
        start = datetime.combine(day, opens, tzinfo=local.tzinfo)
        # Real seconds (timestamps): subtracting two datetimes of one zone would count wall-clock time and miss a
        # DST change in between.
        return max(1.0, start.timestamp() - local.timestamp())

    def describe(self) -> str:
        """One line for a terminal: 'US-IL holidays, weekend Sat+Sun, stage days: business, window 08:00-17:00'."""
        where = "no holidays" if self.country is None else (
            f"{self.country}{'-' + self.subdivision if self.subdivision else ''} holidays")
        weekend = "+".join(WEEKDAYS[d].capitalize() for d in sorted(self.weekend)) or "none"
        window = (f", window {self.send_window[0]:%H:%M}-{self.send_window[1]:%H:%M}"
                  if self.send_window else "")
        return f"{where}, weekend {weekend}, stage days: {self.stage_days}{window}"


# --------------------------------------------------------------------------- [calendar] in oncebeat.toml


@lru_cache(maxsize=1)
def _countries() -> dict[str, tuple[str, ...]]:
    """Supported country codes and their subdivision codes, from the holidays package."""
    import holidays

    return {code: tuple(subdivs) for code, subdivs in holidays.list_supported_countries().items()}


@lru_cache(maxsize=1)
def _country_names() -> dict[str, str]:
    """Lower-cased English country name → code ("germany" → "DE"), for hints when a name is written."""
    import holidays

    out: dict[str, str] = {}
    for code in _countries():
        cls = getattr(holidays, code, None)
        name = getattr(cls, "__name__", None)
        if isinstance(name, str) and name != code:
            out[name.lower()] = code
    for attr in dir(holidays):
        country = getattr(getattr(holidays, attr), "country", None)
        if isinstance(country, str) and country in _countries() and attr[:1].isupper() and len(attr) > 3:
            out.setdefault(attr.lower(), country)
    return out


def _close(word: str, options: list[str], extra: dict[str, str] | None = None) -> list[str]:
    extra = extra or {}
    named = [extra[m] for m in difflib.get_close_matches(word.lower(), list(extra), n=2, cutoff=0.6)]
    # A name that reads like a known one ("Germny") says more than codes that share letters with it.
    found = named or difflib.get_close_matches(word.upper(), options, n=3, cutoff=0.5)
    unique: list[str] = []
    for f in found:
        if f not in unique:
            unique.append(f)
    return unique[:4]


def _check_country(value: Any, problems: list[str]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        problems.append(f"[calendar] country = {value!r} must be a country code in quotes, e.g. country = \"US\"")
        return None
    code = value.strip().upper()
    if code in _countries():
        return code
    close = _close(value.strip(), sorted(_countries()), _country_names())
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    problems.append(f"[calendar] country = {value!r} is not a country the holidays package knows.{hint} Write an "
                    "ISO 3166-1 alpha-2 code such as \"US\", \"DE\" or \"GB\"")
    return None


def _check_subdivision(value: Any, country: str | None, problems: list[str]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        problems.append(f"[calendar] subdivision = {value!r} must be a subdivision code in quotes, e.g. "
                        "subdivision = \"IL\"")
        return None
    if country is None:
        problems.append("[calendar] subdivision needs a country: add country = \"US\" (or the subdivision's "
                        "country)")
        return None
    import holidays

    known = _countries()[country]
    by_lower = {k.lower(): k for k in known}
    # The package's own aliases ("Illinois", "Bayern") name a subdivision as well as its code does.
    aliases = {a.lower(): c for a, c in getattr(getattr(holidays, country, None), "subdivisions_aliases",
                                                {}).items()}
    key = value.strip().lower()
    if key in by_lower:
        return by_lower[key]
    if key in aliases:
        return str(aliases[key])
    if not known:
        problems.append(f"[calendar] subdivision = {value!r}: the holidays package has no subdivisions for "
                        f"{country}. Remove the key")
        return None
    close = _close(value.strip(), list(known), aliases)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    listing = ", ".join(known[:40]) + (", …" if len(known) > 40 else "")
    problems.append(f"[calendar] subdivision = {value!r} is not a subdivision of {country}.{hint} Known: {listing}")
    return None


def _check_weekend(value: Any, problems: list[str]) -> frozenset[int]:
    fix = 'Write weekday names, e.g. weekend = ["sat", "sun"] (or ["fri", "sat"]; [] for none)'
    if not isinstance(value, list):
        problems.append(f"[calendar] weekend = {value!r} must be a list. {fix}")
        return frozenset()
    days: set[int] = set()
    for n, item in enumerate(value):
        text = item.strip().lower() if isinstance(item, str) else ""
        name = text[:3] if text in WEEKDAYS or text in _FULL_DAYS else None  # "sat" or "saturday", nothing else
        if name not in WEEKDAYS:
            problems.append(f"[calendar] weekend[{n}] = {item!r} is not a weekday. {fix}")
            continue
        days.add(WEEKDAYS.index(name))
    if len(days) == 7:
        problems.append(f"[calendar] weekend = {value!r} leaves no business day: nothing would ever go out. {fix}")
    return frozenset(days)


def _check_stage_days(value: Any, problems: list[str]) -> str:
    if value in STAGE_DAYS:
        return str(value)
    close = difflib.get_close_matches(str(value).strip().lower(), STAGE_DAYS, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    problems.append(f"[calendar] stage_days = {value!r} must be \"calendar\" or \"business\".{hint} \"calendar\" "
                    "counts the ladder's days on the calendar; \"business\" counts business days only")
    return "calendar"


def _parse_hhmm(text: str) -> time | None:
    hour, sep, minute = text.strip().partition(":")
    if not sep or not (hour.isdigit() and minute.isdigit() and len(minute) == 2 and 1 <= len(hour) <= 2):
        return None
    if int(hour) == 24 and int(minute) == 0:
        return time.max
    if int(hour) > 23 or int(minute) > 59:
        return None
    return time(int(hour), int(minute))


def _check_window(value: Any, problems: list[str]) -> tuple[time, time] | None:
    fix = 'Write local opening and closing times, e.g. send_window = "08:00-17:00"'
    if value is None:
        return None
    if not isinstance(value, str) or value.count("-") != 1:
        problems.append(f"[calendar] send_window = {value!r} must be a string \"HH:MM-HH:MM\". {fix}")
        return None
    first, second = (_parse_hhmm(part) for part in value.split("-"))
    if first is None or second is None:
        problems.append(f"[calendar] send_window = {value!r} has a time that is not HH:MM (00:00 to 24:00). {fix}")
        return None
    if first >= second:
        problems.append(f"[calendar] send_window = {value!r} closes before it opens (a window over midnight is not "
                        f"supported). {fix}")
        return None
    return first, second


def calendar_config(content: Any, *, source: str) -> BusinessCalendar:
    """Validate the ``[calendar]`` table of oncebeat.toml (``source`` names the file in errors).

    Raises:
        ConfigError: every problem at once, each naming the key and the fix (an unknown country or subdivision
            lists close codes).
    """
    if not isinstance(content, dict):
        raise ConfigError(f"{source}: calendar must be a table. Write it as a [calendar] section header followed by "
                          "its keys.")
    found, problems = calendar_problems(content)
    if problems:
        listing = problems[0] if len(problems) == 1 else f"{len(problems)} problems:\n" + "\n".join(
            f"  - {p}" for p in problems)
        raise ConfigError(f"{source}: {listing}")
    assert found is not None
    return found


def calendar_problems(content: dict[str, Any], *, table: str = "[calendar] ") -> tuple[BusinessCalendar | None,
                                                                                      list[str]]:
    """Validate a calendar table (``[calendar]``, or a ladder's ``calendar = {...}``): ``(calendar, [])``, or
    ``(None, problems)``, each problem a sentence starting with ``table`` then the key (``[calendar] country
    = ...``; a ladder's ``[[ladders]][2] (eu) calendar.country = ...``) and giving the fix."""
    problems: list[str] = []
    for key in content:
        if key not in CALENDAR_KEYS:
            close = difflib.get_close_matches(key, CALENDAR_KEYS, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            problems.append(f"[calendar] {key} is not a known key.{hint} Allowed keys: {', '.join(CALENDAR_KEYS)}.")
    country = _check_country(content.get("country"), problems)
    subdivision = _check_subdivision(content.get("subdivision"), country, problems) \
        if country is not None or "country" not in content else None
    weekend = _check_weekend(content.get("weekend", ["sat", "sun"]), problems)
    stage_days = _check_stage_days(content.get("stage_days", "calendar"), problems)
    window = _check_window(content.get("send_window"), problems)
    if problems:
        return None, [table + p.removeprefix("[calendar] ") for p in problems]
    return BusinessCalendar(country=country, subdivision=subdivision, weekend=weekend, stage_days=stage_days,
                            send_window=window), []


def calendar_to_json(calendar: BusinessCalendar) -> dict[str, Any]:
    """The calendar as a ``[calendar]`` table would write it (a ladder version's stored settings): ``country``,
    ``subdivision``, ``weekend`` (names), ``stage_days``, ``send_window`` ("HH:MM-HH:MM"); None values left out."""
    out: dict[str, Any] = {"weekend": [WEEKDAYS[d] for d in sorted(calendar.weekend)],
                           "stage_days": calendar.stage_days}
    if calendar.country is not None:
        out["country"] = calendar.country
    if calendar.subdivision is not None:
        out["subdivision"] = calendar.subdivision
    if calendar.send_window is not None:
        opens, closes = calendar.send_window
        out["send_window"] = f"{opens:%H:%M}-{'24:00' if closes == time.max else f'{closes:%H:%M}'}"
    return out


def calendar_from_json(data: dict[str, Any]) -> BusinessCalendar:
    """From :func:`calendar_to_json`'s dict (validated again: a stored version is read as the file would be).

    Raises:
        ConfigError: the stored table is no longer valid (e.g. a country the holidays package dropped).
    """
    return calendar_config(dict(data), source="stored ladder version")


def stage_cutoffs(stages: Sequence[int], business_date: date, tz: str | None = None,
                  calendar: BusinessCalendar | None = None) -> list[dict[str, Any]]:
    """For each stage N, the latest due date for which stage N is due on ``business_date`` (date - N days).

    Rows are ``{"stage", "cutoff", "business_date", "tz"}`` as the scan queries read them; ``tz`` None applies
    to every customer, a zone name only to customers in that zone. With a ``calendar`` (:class:`BusinessCalendar`): no
    rows on a non-business date (nothing goes out then; the next business day's cutoffs include those stages),
    and cutoffs counted back in business days with ``stage_days = "business"``.
    """
    if calendar is not None and not calendar.is_business_day(business_date):
        return []
    day = business_date.isoformat()
    return [{"stage": s, "cutoff": (business_date - timedelta(days=s) if calendar is None
                                    else calendar.stage_cutoff(business_date, s)).isoformat(),
             "business_date": day, "tz": tz}
            for s in stages]
