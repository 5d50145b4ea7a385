"""Simulated ladder changes (faults ``ladder-edit`` and ``segment-move``): what the pin must survive.

With either fault the run's policy gets two ladders besides the default (:data:`SIM_LADDERS`): ``large``
(invoices of 5,000.00 and more in their currency's minor units, spacing ``nominal``) and ``german`` (customers
whose locale is German, collapse ``highest``).

- ``ladder-edit``: at 35 % of the run the policy file is edited (every ladder's stages change, so each gets a new
  version at the next scan); at 50 % an operator applies each ladder's new version to its open invoices with
  probability = the fault's rate (``ladder-edit=0``: edited, never applied; ``=1``: every ladder applied).
- ``segment-move``: a customer's locale changes mid-run (German <-> English) with probability = the rate per
  customer, at a random instant: its invoices already in dunning keep their ladder, later ones follow the rule.

The checker proves each (invoice, stage) ends once from each invoice's pinned versions
(:mod:`.checkladders`): no duplicate, none lost, no stage out of order.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import datetime
from typing import Any

from ..provenance import Source
from ..reminders.ladders import ladder_defs, ladders_of
from ..reminders.model import Customer
from ..reminders.pinning import apply_to_open
from ..reminders.policy import Policy
from ..reminders.service import ReminderService

__all__ = ["LADDER_EVENTS", "SIM_LADDERS", "apply_ladder_event", "plan_ladder_events", "with_sim_ladders"]

_GERMAN = ["de_DE", "de_AT", "de_CH"]
SIM_LADDERS = ladder_defs([
    {"name": "large", "match": {"amount_min": 500_000}, "stages": [3, 10, 21], "spacing": "nominal"},
    {"name": "german", "match": {"column": {"name": "customer_locale", "equals": _GERMAN}}, "stages": [2, 9, 20],
     "collapse": "highest"},
])
_EDITED = ladder_defs([
    {"name": "large", "match": {"amount_min": 500_000}, "stages": [2, 7, 14, 28], "spacing": "nominal"},
    {"name": "german", "match": {"column": {"name": "customer_locale", "equals": _GERMAN}}, "stages": [2, 5, 12],
     "collapse": "highest"},
])
_EDITED_DEFAULT_STAGES = (1, 5, 12, 30)
#: The planned events of these faults: (instant, kind, payload) kinds.
LADDER_EVENTS = ("ladder-edit", "ladder-apply", "segment-move")
_OPERATOR = Source(kind="cli", host="ops-laptop", pid=8, name="oncebeat policies apply")


def with_sim_ladders(policy: Policy, faults: dict[str, float]) -> Policy:
    """``policy`` with :data:`SIM_LADDERS` when a ladder fault is on (and the policy has no ladders of its own)."""
    if policy.ladders or not ({"ladder-edit", "segment-move"} & set(faults)):
        return policy
    return replace(policy, ladders=SIM_LADDERS)


def _moved_escalation(policy: Policy) -> tuple[Any, ...]:
    """The default ladder's per-stage escalation (CC, BCC, fee) moved with the edit as a person would move the
    ``[stage.N]`` tables: the n-th stage's to the edited ladder's n-th stage."""
    old = list(policy.stages)
    return tuple(replace(e, stage=_EDITED_DEFAULT_STAGES[old.index(e.stage)]) for e in policy.escalation
                 if old.index(e.stage) < len(_EDITED_DEFAULT_STAGES))


def plan_ladder_events(faults: dict[str, float], customers: list[Customer], t0: datetime, t_end: datetime,
                       seed: int) -> list[tuple[datetime, str, Any]]:
    """The planned edits, applies and segment moves; their own random generator (other faults' draws stay)."""
    rng = random.Random(f"ladders:{seed}")
    span = t_end - t0
    events: list[tuple[datetime, str, Any]] = []
    if "ladder-edit" in faults:
        events += [(t0 + span * 0.35, "ladder-edit", None), (t0 + span * 0.5, "ladder-apply", None)]
    if "segment-move" in faults:
        for c in customers:
            if rng.random() < faults["segment-move"]:
                moved = "en_US" if (c.locale or "") in _GERMAN else "de_DE"
                events.append((t0 + span * rng.uniform(0.1, 0.9), "segment-move",
                               Customer(email=c.email, locale=moved)))
    return events


def apply_ladder_event(service: ReminderService, kind: str, payload: Any, *, now: datetime, rate: float,
                       rng: random.Random) -> int:
    """Apply one planned ladder event at ``now``; returns how many changes it made (for the injected counts)."""
    if kind == "ladder-edit":
        service.use_policy(replace(service.policy, stages=_EDITED_DEFAULT_STAGES, ladders=_EDITED,
                                   escalation=_moved_escalation(service.policy)))
        return 1
    if kind == "ladder-apply":
        applied = 0
        for settings, _ in ladders_of(service.policy):
            if rng.random() < rate:
                apply_to_open(service.store, service.policy, settings.name, now=now, source=_OPERATOR)
                applied += 1
        return applied
    service.upsert([payload], [])
    return 1
