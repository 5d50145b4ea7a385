"""Which ladder each invoice was on at each scan, for the invariant checker (README "Several ladders").

The due set of an invoice comes from the ladder version it was pinned to when a scan ran: its pin
(``invoice_pins``), the operator's moves (``ladders.applied`` in the audit trail, each with the
version it left) and the stored settings of those versions. An invoice never pinned is judged by the ladders the
policy file's rules gave it while the run went on (:func:`~oncebeat.reminders.ladders.match_ladder` under each
file the run used, with each value its customer's fields had): a stage due under every one of them should have
been pinned and created, so a missing one counts as lost; one due under only some of them is allowed, not
required (the checker does not know at which scan the file or the customer changed). Nothing here reads the
reminders table.

Invariant:

- ``reminder-on-pinned-ladder``: each reminder created under a ladder version (``reminders.ladder_version_id``)
  names a version its invoice was pinned to, and its stage is one of that version's stages.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from ..reminders.ladders import LadderSettings, ladders_of, match_ladder
from ..reminders.pinning import all_versions, pin_moves
from ..reminders.policy import Policy
from ..reminders.rows import all_invoices
from ..store import Store

__all__ = ["LADDER_INVARIANTS", "LadderTimeline", "check_ladders", "ladder_timeline"]

LADDER_INVARIANTS = ("reminder-on-pinned-ladder",)


class _Invariant(Protocol):
    checked: int

    def fail(self, example: str) -> None: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class LadderTimeline:
    """The versions, each invoice's pins over time and the files' ladders (for invoices never pinned)."""

    versions: dict[int, LadderSettings]
    pins: dict[str, list[tuple[datetime | None, int]]]  # number -> [(since, version id)]; the first since None
    configs: list[list[tuple[LadderSettings, Any]]]  # every file the run used, the one in force today first
    former: dict[str, list[dict[str, Any]]]  # customer email -> earlier values of its fields (a segment move)

    def candidates(self, invoice: dict[str, Any], start: datetime, end: datetime | None) -> list[LadderSettings]:
        """The ladder versions invoice row ``invoice`` may have been on for a scan that ran within [start, end]
        (None: not finished): one, or two when the operator moved it meanwhile."""
        history = self.pins.get(invoice["number"])
        if not history:
            fields = invoice | {"invoice_number": invoice["number"], "customer_email": invoice["email"],
                                "customer_name": invoice["name"], "customer_locale": invoice["locale"],
                                "customer_tz": invoice.get("customer_tz"),
                                "customer_country": invoice.get("customer_country"),
                                "customer_tags": invoice.get("customer_tags")}
            variants = [fields] + [fields | f for f in self.former.get(invoice["email"], [])]
            found: list[LadderSettings] = []
            for config in self.configs:
                for v in variants:
                    name = match_ladder(config, v)
                    settings = next(s for s, _ in config if s.name == name)
                    if settings not in found:
                        found.append(settings)
            return found
        out: list[LadderSettings] = []
        for n, (since, version_id) in enumerate(history):
            until = history[n + 1][0] if n + 1 < len(history) else None
            if (since is None or end is None or since <= end) and (until is None or until > start):
                out.append(self.versions[version_id])
        return out or [self.versions[history[-1][1]]]


def ladder_timeline(store: Store, policy: Policy, *, earlier: Sequence[Policy] = (),
                    former: dict[str, list[dict[str, Any]]] | None = None) -> LadderTimeline:
    """Read the ladder versions, the pins and the moves of ``store``; ``policy``: the file's ladders today,
    ``earlier``: the files the run used before it (a ladder edit), ``former``: customers' earlier field values
    by email (``{"customer_locale": "de_DE"}`` before a segment move)."""
    versions = {i: v.settings for i, v in all_versions(store).items()}
    pins: dict[str, list[tuple[datetime | None, int]]] = {}
    moves: dict[str, list[tuple[datetime, int, int]]] = defaultdict(list)
    for at, number, from_id, to_id in pin_moves(store):
        moves[number].append((at, from_id, to_id))
    for row in all_invoices(store):
        number, current = row["number"], row.get("ladder_version_id")
        history: list[tuple[datetime | None, int]] = []
        for at, from_id, to_id in moves.get(number, []):
            if not history:
                history.append((None, from_id))
            history.append((at, to_id))
        if not history and current is not None:
            history.append((None, int(current)))
        if history:
            pins[number] = history
    return LadderTimeline(versions=versions, pins=pins, configs=[ladders_of(p) for p in (policy, *earlier)],
                          former=former or {})


def check_ladders(inv: _Invariant, timeline: LadderTimeline, reminders: Sequence[dict[str, Any]]) -> None:
    """``reminder-on-pinned-ladder`` over every stored reminder (one row per stage, superseded ones included)."""
    for r in reminders:
        version_id = r.get("ladder_version_id")
        if version_id is None:
            continue  # created before ladder versions were recorded
        inv.checked += 1
        pinned = [v for _, v in timeline.pins.get(r["number"], [])]
        settings = timeline.versions.get(int(version_id))
        if int(version_id) not in pinned:
            inv.fail(f"{r['number']} stage {r['stage']} was created under ladder version {version_id}, which the "
                     f"invoice was never pinned to (pins: {pinned})")
        elif settings is None or int(r["stage"]) not in settings.stages:
            inv.fail(f"{r['number']} stage {r['stage']} is no stage of its ladder version {version_id}")
