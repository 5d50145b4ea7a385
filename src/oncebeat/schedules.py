"""Schedules: 5-field cron expressions and fixed intervals, each in an IANA zone.

A :class:`Schedule` turns "when should this run?" into explicit UTC instants.
Every method takes and returns aware datetimes; results are in UTC, and
:meth:`Schedule.local` shows an instant in the schedule's zone.

Intervals (``every 30s``, ``every 5m``, ``every 2h``, ``every 1d``) are fixed
elapsed durations anchored at the Unix epoch: their instants are
``1970-01-01T00:00Z + k * period``, identical across processes and restarts.
Zones and DST never affect them.

Cron schedules follow the daylight-saving convention of Debian/Vixie cron
(the Debian cron(8) man page, "Daylight Saving Time and other time changes";
Healthchecks' write-up of how Debian cron handles DST; cronsim's stated aim of
matching Debian cron), made precise as rules R0-R8 of the conformance vectors
(``tests/unit/vectors/dst.json``):

- **R0** ``next_after(start)`` returns the first instant strictly after
  ``start``; results come in order. Computation starts from an instant, never
  from a naive wall time.
- **R1** A job is *wildcard* when its minute field or its hour field starts
  with ``*`` (``@hourly``, ``*/15 * * * *``, ``0 */2 * * *``, ``*/30 2 * * *``);
  otherwise it is *fixed* (``0 0-23/2 * * *`` is fixed: the test is textual,
  as in Vixie cron).
- **R2** Fixed job whose local time is skipped by a spring-forward gap: fires
  once, at the first instant after the gap (Chicago 02:30 -> 03:00 CDT;
  Australia/Lord_Howe, a 30-minute shift, 02:00 -> 02:30).
  ``dst_gap="skip"`` drops it instead.
- **R3** Fixed job whose local time is repeated by a fall-back fold: fires
  once, at the first (earlier) instant. ``dst_fold="second"`` fires at the
  later instant instead, ``dst_fold="both"`` at both.
- **R4** Several wall times of one job that map to one instant fire once.
- **R5** Wildcard job: fires at every real instant whose local wall time
  matches under the offset in force then - nothing is invented in a gap, and
  both passes of a repeated hour fire. ``dst_gap``/``dst_fold`` do not apply.
- **R6** A fixed job whose first-pass occurrence lies at or before ``start`` is
  not fired again in the second pass of the fold.
- **R7** Day-of-month and day-of-week are OR-ed when both are restricted and
  AND-ed when either starts with ``*``; 0 and 7 are Sunday; ``L`` (last day
  of month), ``LW``, ``NL`` (last weekday N) and ``N#k`` (k-th weekday N) are
  supported, as cronsim parses them.
- **R8** Zones without transitions use plain wall-clock matching.

How: cronsim only enumerates *local calendar* matches (naive wall times, no
zone, so no DST logic of its own is involved), and :func:`resolve_wall_time`
maps each wall time to the UTC instants it fires at. Because a fold makes UTC
order differ from wall-clock order, the search looks a fold's width behind
``start`` and keeps going until no later wall time can beat the best instant.
Zones are assumed to change offset at most once in any 24 hours (true of
every zone since 1900 in practice).
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from cronsim import CronSim, CronSimError

from oncebeat.errors import ScheduleError
from oncebeat.timebase import require_aware

__all__ = [
    "Schedule",
    "parse_schedule",
    "resolve_wall_time",
    "DST_GAP_OPTIONS",
    "DST_FOLD_OPTIONS",
    "EPOCH",
    "BUSINESS_PERIODS",
    "period_bounds",
]

DST_GAP_OPTIONS: tuple[str, ...] = ("shift", "skip")
DST_FOLD_OPTIONS: tuple[str, ...] = ("first", "second", "both")

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
"""Anchor of interval schedules: their instants are ``EPOCH + k * period``."""

BUSINESS_PERIODS: tuple[str, ...] = ("day", "week", "month")
"""Local calendar periods a schedule can serve at most once (weeks are ISO 8601: Monday to Sunday)."""

# A schedule's business period is found by enumerating a little more than one year of its instants
# (every zone's DST transitions happen once each within it) from this fixed anchor.
_PERIOD_PROBE_START = datetime(2025, 12, 24, tzinfo=UTC)
_PERIOD_PROBE_LENGTH = timedelta(days=400)

_ZERO = timedelta(0)
_SECOND = timedelta(seconds=1)
_MINUTE = timedelta(minutes=1)
_DAY = timedelta(days=1)
_LOOKBACK_LIMIT = timedelta(days=5 * 366)  # previous_before gives up after ~5 years

_ALIASES: dict[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

MAX_INTERVAL_SECONDS = 366 * 86400  # the longest interval schedule: a year (a longer one is a date, not a schedule)
_INTERVAL_RE = re.compile(r"every\s+(\d+)\s*([a-z]+)", re.IGNORECASE)
_INTERVAL_UNITS: dict[str, tuple[str, int]] = {}
for _short, _seconds, _names in (
    ("s", 1, ("s", "sec", "secs", "second", "seconds")),
    ("m", 60, ("m", "min", "mins", "minute", "minutes")),
    ("h", 3600, ("h", "hr", "hrs", "hour", "hours")),
    ("d", 86400, ("d", "day", "days")),
):
    for _name in _names:
        _INTERVAL_UNITS[_name] = (_short, _seconds)


# --------------------------------------------------------------------------
# Wall time -> UTC instants: the whole DST convention lives here.
# --------------------------------------------------------------------------


def resolve_wall_time(
    wall: datetime,
    zone: ZoneInfo,
    *,
    wildcard: bool,
    dst_gap: str = "shift",
    dst_fold: str = "first",
) -> tuple[datetime, ...]:
    """Return the UTC instants at which a job matching local ``wall`` time fires.

    ``wall`` is a naive local wall time in ``zone`` (a cron match). Three cases:

    - *ordinary* (the wall time happens once): that one instant;
    - *gap* (spring forward skipped it): a wildcard job gets nothing (R5); a
      fixed job gets the transition instant, the first instant after the gap,
      under ``dst_gap="shift"`` (R2) and nothing under ``dst_gap="skip"``;
    - *fold* (fall back repeats it): a wildcard job gets both instants (R5); a
      fixed job gets the earlier one under ``dst_fold="first"`` (R3), the later
      one under ``"second"``, both under ``"both"``.

    The result is in increasing order, with no duplicates.
    """
    off_first = _offset_of(wall.replace(tzinfo=zone, fold=0))
    off_second = _offset_of(wall.replace(tzinfo=zone, fold=1))
    if off_first == off_second:
        return ((wall - off_first).replace(tzinfo=UTC),)
    if off_first < off_second:
        # Gap: PEP 495 gives fold=0 the offset before the transition (smaller
        # after a spring forward) and fold=1 the offset after it.
        if wildcard or dst_gap == "skip":
            return ()
        return (_transition_instant(zone, wall - off_second, wall - off_first),)
    # Fold: fold=0 is the first pass (earlier instant), fold=1 the second.
    earlier = (wall - off_first).replace(tzinfo=UTC)
    later = (wall - off_second).replace(tzinfo=UTC)
    if wildcard or dst_fold == "both":
        return (earlier, later)
    if dst_fold == "first":
        return (earlier,)
    return (later,)


def _offset_of(aware: datetime) -> timedelta:
    offset = aware.utcoffset()
    if offset is None:  # pragma: no cover - ZoneInfo always answers
        raise ScheduleError(f"time zone {aware.tzinfo!r} gave no UTC offset")
    return offset


def _offset_at(zone: ZoneInfo, instant: datetime) -> timedelta:
    """UTC offset of ``zone`` at the aware ``instant``."""
    return _offset_of(instant.astimezone(zone))


def _transition_instant(zone: ZoneInfo, before: datetime, after: datetime) -> datetime:
    """First UTC instant in ``(before, after]`` (naive UTC) with the post-transition offset.

    At ``before`` the pre-gap offset is in force, at ``after`` the post-gap one;
    zone transitions fall on whole seconds, so a bisection on seconds is exact.
    """
    lo = int(before.replace(tzinfo=UTC).timestamp())
    hi = int(after.replace(tzinfo=UTC).timestamp())
    pre = _offset_of(datetime.fromtimestamp(lo, zone))
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _offset_of(datetime.fromtimestamp(mid, zone)) == pre:
            lo = mid
        else:
            hi = mid
    return datetime.fromtimestamp(hi, UTC)


# --------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _FieldSpec:
    name: str
    low: int
    high: int
    names: dict[str, int]


_MONTH_NAMES = {n: i + 1 for i, n in enumerate("JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split())}
_DAY_NAMES = {n: i for i, n in enumerate("SUN MON TUE WED THU FRI SAT".split())}
_FIELDS = (
    _FieldSpec("minute", 0, 59, {}),
    _FieldSpec("hour", 0, 23, {}),
    _FieldSpec("day of month", 1, 31, {}),
    _FieldSpec("month", 1, 12, _MONTH_NAMES),
    _FieldSpec("day of week", 0, 7, _DAY_NAMES),
)


def _zone(tz: object) -> ZoneInfo:
    if not isinstance(tz, str):
        raise ScheduleError(f"time zone must be an IANA name such as 'Europe/Berlin' (got {tz!r})")
    if tz in ("localtime", "posixrules", "Factory") or tz.startswith(("posix/", "right/")):
        # ZoneInfo loads these, but they name the host's setting or no zone at all: a schedule in them would fire
        # at different instants on different machines (G7).
        raise ScheduleError(f"time zone {tz!r} names the host's zone setting, not an IANA zone; "
                            "use an IANA name such as 'America/Chicago', 'Europe/Berlin' or 'UTC'")
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        pass
    by_lower: dict[str, str] = {}
    for name in sorted(available_timezones()):
        by_lower.setdefault(name.lower(), name)
    close = difflib.get_close_matches(tz.strip().lower(), list(by_lower), n=3, cutoff=0.6)
    if close:
        names = [by_lower[c] for c in close]
        listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
        hint = f"did you mean {listed}?"
    else:
        hint = "use an IANA name such as 'America/Chicago', 'Europe/Berlin' or 'UTC'"
    raise ScheduleError(f"unknown time zone {tz!r}; {hint}")


def _check_option(option: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        choices = ", ".join(repr(a) for a in allowed)
        raise ScheduleError(f"bad {option} {value!r}: allowed values are {choices}")


def _parse_interval(expression: str) -> tuple[timedelta, str] | None:
    """``(period, canonical text)`` for an interval expression, else None."""
    text = expression.strip()
    if not text.lower().startswith("every"):
        return None
    match = _INTERVAL_RE.fullmatch(text)
    unit = _INTERVAL_UNITS.get(match.group(2).lower()) if match else None
    if match is None or unit is None:
        raise ScheduleError(
            f"bad interval {expression!r}: write 'every N' with a unit s, m, h or d, e.g. 'every 30s', 'every 5m'"
        )
    count = int(match.group(1))
    if count < 1:
        raise ScheduleError(f"bad interval {expression!r}: the period must be at least 1{unit[0]}")
    if count * unit[1] > MAX_INTERVAL_SECONDS:  # beyond it, datetime arithmetic overflows (year 9999)
        raise ScheduleError(f"bad interval {expression!r}: the period must be at most 366 days")
    return timedelta(seconds=count * unit[1]), f"every {count}{unit[0]}"


def _check_cron_field(expression: str, spec: _FieldSpec, text: str) -> None:
    """Raise ScheduleError naming the field if ``text`` is not a valid ``spec`` field."""

    def fail(detail: str) -> ScheduleError:
        return ScheduleError(f"bad cron expression {expression!r}: {detail}")

    def where(token: str) -> str:
        return f"{spec.name} field {token!r}" if token == text else f"{spec.name} field {text!r}: {token!r}"

    allowed = f"{spec.low}-{spec.high}"
    if spec.names:
        first, last = list(spec.names)[0], list(spec.names)[-1]
        allowed_words = f"a number {allowed} or a name {first}-{last}"
    else:
        allowed_words = f"a number {allowed}"

    def value(token: str) -> int:
        if token in spec.names:
            return spec.names[token]
        if not token.isdigit() or not token.isascii():
            raise fail(f"{where(token)} is not {allowed_words}")
        number = int(token)
        if not spec.low <= number <= spec.high:
            raise fail(f"{where(token)} is out of range {allowed}")
        return number

    for term in text.split(","):
        if term == "":
            raise fail(f"{spec.name} field {text!r} has an empty list item")
        if spec.name == "day of month" and term in ("L", "LW"):
            continue
        if spec.name == "day of week" and term.endswith("L") and "/" not in term:
            value(term[:-1])
            continue
        if spec.name == "day of week" and "#" in term:
            day, _, nth = term.partition("#")
            value(day)
            if not (nth.isdigit() and nth.isascii() and 1 <= int(nth) <= 5):
                raise fail(f"{where(term)}: the week number after '#' must be 1-5")
            continue
        base, slash, step = term.partition("/")
        if slash:
            if not (step.isdigit() and step.isascii()) or int(step) < 1:
                raise fail(f"{where(term)}: the step after '/' must be a whole number of at least 1")
        if base == "*":
            continue
        low_text, dash, high_text = base.partition("-")
        low = value(low_text)
        if dash:
            high = value(high_text)
            if high < low:
                raise fail(f"{where(term)}: range start {low_text} is after its end {high_text}")


def _parse_cron(expression: str) -> tuple[str, bool]:
    """``(normalized 5-field expression, is_wildcard)``; raise ScheduleError if invalid."""
    text = " ".join(expression.split())
    if text.startswith("@"):
        alias = _ALIASES.get(text.lower())
        if alias is None:
            names = ", ".join(sorted(_ALIASES))
            raise ScheduleError(f"bad cron expression {expression!r}: unknown alias; use one of {names}")
        text = alias
    fields = text.upper().split()
    if len(fields) != 5:
        raise ScheduleError(
            f"bad cron expression {expression!r}: 5 fields are needed "
            f"(minute hour day-of-month month day-of-week), got {len(fields)}"
        )
    for spec, part in zip(_FIELDS, fields, strict=True):
        _check_cron_field(expression, spec, part)
    normalized = " ".join(fields)
    try:
        CronSim(normalized, datetime(2000, 1, 1))
    except CronSimError as exc:
        if str(exc) == "Bad day-of-month":
            raise ScheduleError(
                f"bad cron expression {expression!r}: day of month field {fields[2]!r} "
                f"never occurs in month field {fields[3]!r}"
            ) from None
        raise ScheduleError(f"bad cron expression {expression!r}: {exc}") from None
    # R1: the textual Vixie cron test.
    wildcard = fields[0].startswith("*") or fields[1].startswith("*")
    return normalized, wildcard


# --------------------------------------------------------------------------
# Schedule
# --------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Schedule:
    """When a job fires: a cron expression or an interval, in an IANA zone.

    Construction validates everything and raises :class:`ScheduleError` with a
    message naming the problem. ``dst_gap`` and ``dst_fold`` choose what a
    *fixed* cron job does at DST transitions (see the module docstring); the
    defaults are Debian cron's.
    """

    expression: str  # "0 8 * * *", "@daily", ... or "every 30s" / "every 5m" / "every 2h" / "every 1d"
    tz: str = "UTC"  # IANA zone
    dst_gap: str = "shift"  # "shift" | "skip"
    dst_fold: str = "first"  # "first" | "second" | "both"

    _zone: ZoneInfo = field(init=False, repr=False, compare=False)
    _cron: str | None = field(init=False, repr=False, compare=False)
    _wildcard: bool = field(init=False, repr=False, compare=False)
    _period: timedelta | None = field(init=False, repr=False, compare=False)
    _label: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.expression, str) or not self.expression.strip():
            raise ScheduleError(
                f"schedule expression must be a cron expression or 'every N<unit>' (got {self.expression!r})"
            )
        _check_option("dst_gap", self.dst_gap, DST_GAP_OPTIONS)
        _check_option("dst_fold", self.dst_fold, DST_FOLD_OPTIONS)
        object.__setattr__(self, "_zone", _zone(self.tz))
        interval = _parse_interval(self.expression)
        if interval is not None:
            period, label = interval
            object.__setattr__(self, "_cron", None)
            object.__setattr__(self, "_wildcard", False)
            object.__setattr__(self, "_period", period)
            object.__setattr__(self, "_label", label)
        else:
            cron, wildcard = _parse_cron(self.expression)
            object.__setattr__(self, "_cron", cron)
            object.__setattr__(self, "_wildcard", wildcard)
            object.__setattr__(self, "_period", None)
            object.__setattr__(self, "_label", " ".join(self.expression.split()))

    # -- public API -------------------------------------------------------

    @property
    def is_interval(self) -> bool:
        """True for ``every N<unit>`` schedules, False for cron."""
        return self._period is not None

    @property
    def is_wildcard(self) -> bool:
        """True for a cron job whose minute or hour field starts with ``*`` (R1)."""
        return self._wildcard

    def describe(self) -> str:
        """One line for humans, e.g. ``0 8 * * * in America/Chicago (DST: gap shift, fold first)``."""
        if self._period is not None:
            return f"{self._label} (elapsed time from the Unix epoch; DST does not apply; shown in {self.tz})"
        if self._wildcard:
            return (f"{self._label} in {self.tz} (DST: wildcard job, follows real time: none in a gap, "
                    "both passes of a fold)")
        return f"{self._label} in {self.tz} (DST: gap {self.dst_gap}, fold {self.dst_fold})"

    def local(self, instant: datetime) -> datetime:
        """``instant`` (aware) as an aware local time in the schedule's zone."""
        return require_aware(instant).astimezone(self._zone)

    def next_after(self, instant: datetime) -> datetime:
        """The first fire instant strictly after ``instant`` (aware, any zone), in UTC."""
        start = require_aware(instant)
        period = self._period
        if period is not None:
            return EPOCH + ((start - EPOCH) // period + 1) * period
        return self._cron_next(start)

    def previous_before(self, instant: datetime) -> datetime | None:
        """The last fire instant strictly before ``instant``, in UTC; None if none within ~5 years."""
        start = require_aware(instant)
        period = self._period
        if period is not None:
            found = EPOCH + ((start - EPOCH) // period) * period
            if found >= start:
                found -= period
            return found if start - found <= _LOOKBACK_LIMIT else None
        return self._cron_previous(start)

    def business_period(self) -> str | None:
        """The largest local calendar period this schedule fires in at most once, or None.

        Returns ``"month"``, ``"week"`` (ISO weeks, Monday to Sunday) or ``"day"`` when no
        month / week / local date of the schedule's zone holds two of its instants, and None
        for sub-daily schedules (``*/15 * * * *``, ``every 6h``, ``0 8,20 * * *``, a fixed time
        with ``dst_fold="both"``). Found by enumerating a year of instants (cached), so aliases,
        ``L`` and ``#`` fields and DST rules are all taken into account.
        """
        return _business_period(self.expression, self.tz, self.dst_gap, self.dst_fold)

    def between(self, start: datetime, end: datetime) -> Iterator[datetime]:
        """All fire instants ``t`` with ``start < t <= end``, in UTC, in order."""
        lo = require_aware(start, "start")
        hi = require_aware(end, "end")
        return self._between(lo, hi)

    # -- internals --------------------------------------------------------

    def _between(self, lo: datetime, hi: datetime) -> Iterator[datetime]:
        current = lo
        while True:
            current = self.next_after(current)
            if current > hi:
                return
            yield current

    def _resolve(self, wall: datetime) -> tuple[datetime, ...]:
        return resolve_wall_time(
            wall, self._zone, wildcard=self._wildcard, dst_gap=self.dst_gap, dst_fold=self.dst_fold
        )

    def _cron_next(self, start: datetime) -> datetime:
        zone = self._zone
        assert self._cron is not None
        # Instants after `start` can have an earlier wall time than `start`
        # only if the offset drops (a fold) within the next day: look back by
        # that drop.
        off_start = _offset_at(zone, start)
        lookback = max(_ZERO, off_start - _offset_at(zone, start + _DAY))
        wall_start = (start + off_start).replace(tzinfo=None)
        best: datetime | None = None
        horizon: datetime | None = None
        for wall in CronSim(self._cron, wall_start - lookback - _SECOND):
            if horizon is not None and wall >= horizon:
                break
            for t in self._resolve(wall):
                if t > start and (best is None or t < best):
                    best = t
                    # A later wall time can map to an earlier instant only
                    # across a fold ending at or before `best`: scan its width.
                    off_best = _offset_at(zone, best)
                    rise = max(_ZERO, _offset_at(zone, best - _DAY) - off_best)
                    horizon = (best + off_best).replace(tzinfo=None) + rise
            if horizon is not None and horizon <= wall + _MINUTE:
                break  # cron matches are whole minutes apart
        if best is None:
            raise ScheduleError(f"{self.describe()} has no fire time in the 50 years after {start.isoformat()}")
        return best

    def _cron_previous(self, start: datetime) -> datetime | None:
        zone = self._zone
        assert self._cron is not None
        # Instants before `start` can have a later wall time than `start` only
        # if the offset dropped (a fold) within the last day: look ahead by it.
        off_start = _offset_at(zone, start)
        lookahead = max(_ZERO, _offset_at(zone, start - _DAY) - off_start)
        wall_start = (start + off_start).replace(tzinfo=None)
        limit = wall_start - _LOOKBACK_LIMIT
        best: datetime | None = None
        horizon: datetime | None = None
        for wall in CronSim(self._cron, wall_start + lookahead + _SECOND, reverse=True):
            if wall < limit or (horizon is not None and wall <= horizon):
                break
            for t in self._resolve(wall):
                if t < start and (best is None or t > best):
                    best = t
                    off_best = _offset_at(zone, best)
                    drop = max(_ZERO, off_best - _offset_at(zone, best + _DAY))
                    horizon = (best + off_best).replace(tzinfo=None) - drop
            if horizon is not None and horizon >= wall - _MINUTE:
                break
        return best


def period_bounds(period: str, business_date: date) -> tuple[date, date]:
    """First and last local date of the ``period`` ("day", "week", "month") holding ``business_date``."""
    if period == "day":
        return business_date, business_date
    if period == "week":
        first = business_date - timedelta(days=business_date.weekday())
        return first, first + timedelta(days=6)
    if period == "month":
        first = business_date.replace(day=1)
        following = (first + timedelta(days=32)).replace(day=1)
        return first, following - timedelta(days=1)
    raise ValueError(f"period must be one of {', '.join(BUSINESS_PERIODS)}, not {period!r}")


@functools.lru_cache(maxsize=1024)
def _business_period(expression: str, tz: str, dst_gap: str, dst_fold: str) -> str | None:
    sched = Schedule(expression=expression, tz=tz, dst_gap=dst_gap, dst_fold=dst_fold)
    seen: dict[str, set[tuple[int, int]]] = {"day": set(), "week": set(), "month": set()}
    once = {"day": True, "week": True, "month": True}
    for instant in sched.between(_PERIOD_PROBE_START, _PERIOD_PROBE_START + _PERIOD_PROBE_LENGTH):
        d = sched.local(instant).date()
        iso = d.isocalendar()
        periods = (("day", (d.toordinal(), 0)), ("week", (iso.year, iso.week)), ("month", (d.year, d.month)))
        for period, label in periods:
            if label in seen[period]:
                once[period] = False
            seen[period].add(label)
        if not once["day"]:
            return None  # sub-daily: the common case ends here, after a handful of instants
    return next((p for p in reversed(BUSINESS_PERIODS) if once[p]), None)


def parse_schedule(expression: str, tz: str = "UTC", *, dst_gap: str = "shift", dst_fold: str = "first") -> Schedule:
    """Validate and build a :class:`Schedule`; raise :class:`ScheduleError` with a clear message."""
    return Schedule(expression=expression, tz=tz, dst_gap=dst_gap, dst_fold=dst_fold)
