"""Zone transitions and what a schedule does at each: the doctor's view of the DST rules.

The rules themselves live in :mod:`oncebeat.schedules` (R0-R8); this module
only asks them. For a transition it finds the wall times the expression
matches inside the gap or fold (by matching the expression in UTC, where no
wall time is skipped or repeated) and resolves each with
:func:`oncebeat.schedules.resolve_wall_time`, exactly as the clock does.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from ..schedules import Schedule, resolve_wall_time

__all__ = ["Transition", "WallFate", "transitions", "fates", "offset_text"]

_STEP = timedelta(hours=12)  # zones change offset at most once a day


@dataclass(frozen=True, kw_only=True, slots=True)
class Transition:
    """A change of UTC offset in ``tz`` at ``at`` (UTC): a gap when the offset grows, a fold when it shrinks."""

    tz: str
    at: datetime
    before: timedelta
    after: timedelta

    @property
    def kind(self) -> str:
        return "gap" if self.after > self.before else "fold"

    @property
    def width(self) -> timedelta:
        return abs(self.after - self.before)

    def window(self) -> tuple[datetime, datetime]:
        """The naive local wall times ``[start, end)`` that are skipped (gap) or happen twice (fold)."""
        naive = self.at.replace(tzinfo=None)
        if self.kind == "gap":
            return naive + self.before, naive + self.after
        return naive + self.after, naive + self.before

    def describe(self) -> str:
        start, end = self.window()
        zone = ZoneInfo(self.tz)
        before = (self.at - timedelta(seconds=1)).astimezone(zone).strftime("%Z")
        after = self.at.astimezone(zone).strftime("%Z")
        span = f"{start:%H:%M}-{end:%H:%M}"
        if self.kind == "gap":
            return (f"{start:%Y-%m-%d}: clocks in {self.tz} spring forward {before} {offset_text(self.before)} -> "
                    f"{after} {offset_text(self.after)} at {self.at:%H:%M} UTC; local {span} does not exist")
        return (f"{start:%Y-%m-%d}: clocks in {self.tz} fall back {before} {offset_text(self.before)} -> "
                f"{after} {offset_text(self.after)} at {self.at:%H:%M} UTC; local {span} happens twice")


@dataclass(frozen=True, kw_only=True, slots=True)
class WallFate:
    """What the schedule does with one matched wall time inside a transition's window."""

    wall: datetime
    instants: tuple[datetime, ...]
    rule: str

    def describe(self, tz: str) -> str:
        zone = ZoneInfo(tz)
        shown = ", ".join(f"{t.astimezone(zone):%H:%M:%S %Z} (= {t:%H:%M} UTC)" for t in self.instants)
        return f"{self.wall:%H:%M} -> {shown or 'no run'}: {self.rule}"


def offset_text(offset: timedelta) -> str:
    minutes = int(offset.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    h, m = divmod(abs(minutes), 60)
    return f"{sign}{h:02d}:{m:02d}"


def _offset(zone: ZoneInfo, instant: datetime) -> timedelta:
    off = instant.astimezone(zone).utcoffset()
    assert off is not None
    return off


def transitions(tz: str, start: datetime, end: datetime) -> list[Transition]:
    """Offset changes of ``tz`` in ``(start, end]``, oldest first (exact to the second)."""
    zone = ZoneInfo(tz)
    out: list[Transition] = []
    t = start.astimezone(UTC)
    off = _offset(zone, t)
    while t < end:
        nxt = min(t + _STEP, end)
        off_next = _offset(zone, nxt)
        if off_next != off:
            lo, hi = int(t.timestamp()), int(nxt.timestamp())
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if _offset(zone, datetime.fromtimestamp(mid, UTC)) == off:
                    lo = mid
                else:
                    hi = mid
            out.append(Transition(tz=tz, at=datetime.fromtimestamp(hi, UTC), before=off, after=off_next))
        t, off = nxt, off_next
    return out


def fates(schedule: Schedule, tr: Transition, *, limit: int = 240) -> list[WallFate]:
    """For each wall time ``schedule`` matches inside ``tr``'s window: the instants it fires at, and the rule.

    Interval schedules follow elapsed time and are never affected (empty list).
    """
    if schedule.is_interval:
        return []
    in_utc = Schedule(expression=schedule.expression, tz="UTC")
    start, end = tr.window()
    lo = start.replace(tzinfo=UTC) - timedelta(microseconds=1)
    hi = end.replace(tzinfo=UTC) - timedelta(microseconds=1)
    zone = ZoneInfo(tr.tz)
    out: list[WallFate] = []
    for matched in in_utc.between(lo, hi):
        wall = matched.replace(tzinfo=None)
        instants = resolve_wall_time(wall, zone, wildcard=schedule.is_wildcard, dst_gap=schedule.dst_gap,
                                     dst_fold=schedule.dst_fold)
        out.append(WallFate(wall=wall, instants=instants, rule=_rule(schedule, tr, instants)))
        if len(out) >= limit:
            break
    return out


def _rule(schedule: Schedule, tr: Transition, instants: tuple[datetime, ...]) -> str:
    if tr.kind == "gap":
        if schedule.is_wildcard:
            return "R5: a wildcard job follows real time, nothing runs at a wall time that does not exist"
        if schedule.dst_gap == "skip":
            return "dst_gap=skip: the run that falls in the gap is dropped"
        return "R2 (dst_gap=shift): runs once, at the first instant after the gap"
    if schedule.is_wildcard:
        return "R5: a wildcard job runs at both passes of the repeated wall time"
    if schedule.dst_fold == "both":
        return "dst_fold=both: runs at both passes of the repeated wall time"
    if schedule.dst_fold == "second":
        return "dst_fold=second: runs once, at the second (later) pass"
    return "R3 (dst_fold=first): runs once, at the first (earlier) pass"
