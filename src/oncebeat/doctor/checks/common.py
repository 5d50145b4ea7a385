"""What every check shares: the evidence caps, thresholds, :class:`Skip`, wording helpers."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from ...schedules import Schedule
from .. import evidence as ev
from ..facts import Facts, Proc, source_text
from ..model import Evidence, Finding

MAX_EVIDENCE = 20  # evidence rows per finding; the rest is counted in a note
MAX_FINDINGS_PER_CHECK = 50
RESTART_WINDOW = timedelta(minutes=15)  # a clock start this soon after a fire instant is "near" it
# two clocks overlapping this briefly, rejecting nothing, are a deploy's handover
HANDOVER_GRACE = timedelta(seconds=60)
OLD_VERSION_GRACE = timedelta(minutes=10)  # an old version may outlive a new one's start by this much (rolling deploy)
OVERDUE_AFTER = timedelta(hours=1)  # a due job unclaimed this long means no worker takes its queue
LEASE_RESCUE_EXPECTED = timedelta(minutes=5)  # workers rescue every 15 s; an expired lease older than this is stuck
SKEW_TOLERANCE = timedelta(seconds=5)
SKEW_ERROR = timedelta(seconds=30)  # ahead by a lease (30 s default): live jobs get rescued early
UPCOMING_DST = timedelta(days=30)
PAST_DST_LOOKBACK = timedelta(days=60)  # without --since, past DST moves are shown for this long


class Skip(Exception):
    """A check could not run; the message says why (shown in the report's ``checks``).

    ``findings`` are still reported (e.g. the info finding saying clock skew is not checked on SQLite).
    """

    def __init__(self, reason: str, findings: Iterable[Finding] = ()) -> None:
        super().__init__(reason)
        self.findings = list(findings)


def capped(items: Iterable[Evidence], total: int | None = None, what: str = "rows") -> tuple[Evidence, ...]:
    """At most :data:`MAX_EVIDENCE` items, then a note counting the rest (of ``total`` when given)."""
    out = list(items)
    n = total if total is not None else len(out)
    if len(out) > MAX_EVIDENCE:
        out = out[:MAX_EVIDENCE]
    if n > len(out):
        out.append(ev.note(f"... and {n - len(out)} more {what}", more=n - len(out)))
    return tuple(out)


def plural(n: int, word: str, plural_form: str | None = None) -> str:
    """``plural(2, "job")`` → ``"2 jobs"``; ``plural_form`` for irregular words."""
    return f"{n} {word if n == 1 else (plural_form or word + 's')}"


def _clocks(facts: Facts) -> list[Proc]:
    out = []
    for p in facts.processes():
        if p.role != "clock":
            continue
        keys = p.schedules()
        if facts.schedule_keys is not None and keys is not None and not (set(keys) & facts.schedule_keys):
            continue
        out.append(p)
    return out


def why_in_doubt(detail: Any) -> str:
    """How the attempt lost track of its effect: its process died, or (detail ``outcome unknown: …``, written by
    ``effects`` when the effect itself could not report back, e.g. the SMTP connection dropped after the message
    content was sent) the process lived on but never heard whether the effect happened."""
    text = str(detail or "")
    if text.startswith("outcome unknown"):
        return f"did it but never learned whether it took effect ({text}); the worker itself kept running"
    return "died between its point of no return and recording it"


def dup_evidence(facts: Facts, d: dict[str, Any]) -> Evidence:
    """One ``occurrence.duplicate_rejected`` event as evidence: who tried to record which fire instant again."""
    detail = d.get("detail") or {}
    key = str(d["subject"]).partition(":")[2]
    tz = facts.tz_of(key)
    fire = parse_iso(detail.get("fire_at"))
    text = (f"{source_text(d)} tried to record {key} at {facts.face.text(fire, tz) if fire else detail.get('fire_at')} "
            f"({detail.get('attempted')}) again: rejected")
    return ev.event(d, facts.face, tz, text=text)


def parse_iso(value: Any) -> datetime | None:
    """An ISO 8601 text from an event's detail (or a datetime, as is) as a datetime; None for anything else."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def period_of(s: Schedule, now: datetime) -> timedelta:
    """The shortest gap between the next three fire instants of ``s`` after ``now`` (a daily schedule: ~24 h)."""
    a = s.next_after(now)
    b = s.next_after(a)
    c = s.next_after(b)
    return min(b - a, c - b)
