"""Who fired a schedule by hand: an operator's own action, or a leftover (a cron entry, a scheduler add-on, a
script, an old release). Used by the ``leftover-trigger`` check (:mod:`oncebeat.doctor.checks`).

An occurrence recorded outside the schedule (``oncebeat trigger``, ``oncebeat occurrences rerun``,
``oncebeat backfill`` and their dashboard buttons) is an **operator action**, reported as ``info``, when the
audit event that recorded it names its operator (:class:`~oncebeat.provenance.Operator`: the CLI or the
dashboard, host, pid, version, user) and none of these holds (each keeps it a ``warning``):

- its version is older than the newest clock or worker in the process registry (an old release's command);
- it came from the CLI without a terminal and from a host where no oncebeat process ever registered (a
  cron entry or a scheduler add-on somewhere else);
- it came from the CLI without a terminal and repeats at about the same local time on several days (a cron
  entry, wherever it runs);
- it was recorded after its schedule was retired.

A fire whose event names no operator (a script calling the library, an older oncebeat, the API) is not an
operator action either. One whose event was pruned from the audit trail (:func:`~oncebeat.doctor.prune_audit`)
cannot be judged: it is reported as history (``info``), not as a leftover. Example::

    verdicts = judge(facts, occurrences)
    mine = [v for v in verdicts if v.by_operator]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from ..provenance import Operator
from .facts import Facts, version_key

__all__ = ["Verdict", "judge", "repeats_daily", "ACTION_EVENTS", "NO_OPERATOR", "PRUNED"]

ACTION_EVENTS = {"occurrence.manual": "triggered", "occurrence.rerun": "re-ran", "occurrence.backfilled": "backfilled"}
"""The audit events recording a hand-made occurrence (``detail.occurrence_id``), and the action each names."""
NO_OPERATOR = ("no operator recorded (not the oncebeat CLI or dashboard of this release: a script, an API call or an "
               "older version)")
PRUNED = "who did it is no longer known: its audit event was pruned"
REPEAT_MINUTES = 10  # fires on several days within this many minutes of local time look like a cron entry


@dataclass(frozen=True, kw_only=True, slots=True)
class Verdict:
    """One hand-made occurrence judged: its row, the operator its audit event names (None: none), the action
    (``triggered``, ``re-ran``, ``backfilled``) and why it is not taken as an operator's action (empty: it is)."""

    occurrence: dict[str, Any]
    operator: Operator | None
    action: str
    event: dict[str, Any] | None
    reasons: tuple[str, ...] = ()

    @property
    def by_operator(self) -> bool:
        return self.operator is not None and not self.reasons


def judge(facts: Facts, occurrences: Iterable[dict[str, Any]]) -> list[Verdict]:
    """Judge each hand-made occurrence (rows of ``occurrences``) by the rules of this module, in the given order."""
    occs = list(occurrences)
    events: dict[int, dict[str, Any]] = {}
    for e in facts.events(*ACTION_EVENTS):
        oid = (e.get("detail") or {}).get("occurrence_id")
        if isinstance(oid, int):
            events[oid] = e
    prunings = [str((e.get("detail") or {}).get("before") or "") for e in facts.events("audit.pruned")]
    pruned_before = max((datetime.fromisoformat(b) for b in prunings if b), default=None)
    hosts = {host for host, _pid in facts.registry()}
    versions = [p.version for p in facts.processes() if p.role in ("clock", "worker")]
    newest = max(versions, key=version_key) if versions else None
    verdicts = []
    for o in occs:
        event = events.get(int(o["id"]))
        operator = Operator.from_detail((event.get("detail") or {}).get("operator")) if event else None
        action = (ACTION_EVENTS[event["kind"]] if event else
                  "backfilled" if o["outcome"] == "backfilled" else "re-ran" if o.get("rerun_of") else "triggered")
        reasons: list[str] = []
        if event is None and pruned_before is not None and o["created_at"] < pruned_before:
            reasons.append(PRUNED)
        elif operator is None:
            reasons.append(NO_OPERATOR)
        else:
            version = str(o["source_version"])
            if newest is not None and version_key(version) < version_key(newest):
                reasons.append(f"its version v{version} is older than the newest clock or worker (v{newest})")
            if operator.via == "cli" and not operator.terminal and o["source_host"] not in hosts:
                reasons.append(f"run by the CLI without a terminal (user {operator.user or 'unknown'}) on host "
                               f"{o['source_host']}, where no oncebeat process ever registered")
            row = facts.schedules.get(str(o["schedule_key"]))
            if row is not None and row["state"] == "retired" and o["created_at"] > row["updated_at"]:
                reasons.append("it was recorded after its schedule was retired")
        verdicts.append(Verdict(occurrence=o, operator=operator, action=action, event=event, reasons=tuple(reasons)))
    return _unattended_repeats(verdicts, facts)


def repeats_daily(instants: Sequence[datetime], zone: Any) -> bool:
    """Fires on at least two local dates, all within :data:`REPEAT_MINUTES` of one local time of day."""
    times = [t.astimezone(zone) for t in instants]
    minutes = [t.hour * 60 + t.minute for t in times]
    return len({t.date() for t in times}) >= 2 and max(minutes) - min(minutes) <= REPEAT_MINUTES


def _unattended_repeats(verdicts: list[Verdict], facts: Facts) -> list[Verdict]:
    """CLI actions without a terminal that repeat daily at one local time (per schedule, host and command) are
    a cron entry's, not an operator's."""
    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, v in enumerate(verdicts):
        if v.by_operator and v.operator is not None and v.operator.via == "cli" and not v.operator.terminal:
            o = v.occurrence
            groups.setdefault((str(o["schedule_key"]), str(o["source_host"]), str(o["source_name"])), []).append(i)
    out = list(verdicts)
    for (key, _host, _name), idx in groups.items():
        zone = facts.face.zone(facts.tz_of(key) or str(verdicts[idx[0]].occurrence["tz"]))
        if repeats_daily([verdicts[i].occurrence["created_at"] for i in idx], zone):
            for i in idx:
                out[i] = replace(out[i], reasons=("run by the CLI without a terminal at about the same local time "
                                                  "on several days",))
    return out
