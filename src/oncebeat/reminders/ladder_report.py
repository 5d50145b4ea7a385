"""The ladders as data, for the HTTP API (``GET /api/v1/ladders``) and the dashboard's apply button: each ladder's
rule, settings, recorded versions with the invoices each holds, and what an apply would move
(:func:`.pinning.apply_plan`). Read-only; the verbs are :mod:`.pinning`'s.
"""

from __future__ import annotations

from typing import Any

from ..store import Store
from .ladders import LadderMatch, ladders_of
from .pinning import Holding, apply_plan, holdings
from .policy import Policy

__all__ = ["ladder_report", "rule_json"]


def rule_json(rule: LadderMatch | None) -> dict[str, Any] | None:
    """A ``match`` rule as the keys the file writes (only those given; amounts in minor units); None for the
    default ladder (everything else)."""
    if rule is None:
        return None
    out: dict[str, Any] = {}
    if rule.currency:
        out["currency"] = list(rule.currency)
    if rule.amount_min is not None:
        out["amount_min"] = rule.amount_min
    if rule.amount_max is not None:
        out["amount_max"] = rule.amount_max
    if rule.country:
        out["country"] = list(rule.country)
    if rule.tags_any:
        out["tags_any"] = list(rule.tags_any)
    if rule.columns:
        out["column"] = [{"name": name, "equals": list(values)} for name, values in rule.columns]
    return out


def _version(h: Holding) -> dict[str, Any]:
    return {"version": h.version, "id": h.id, "created_at": h.created_at.isoformat(), "current": h.current,
            "open_invoices": h.open_invoices, "invoices": h.invoices}


def ladder_report(store: Store, policy: Policy, name: str | None = None) -> list[dict[str, Any]]:
    """Every ladder of the file in matching order, then those only recorded (removed from the file), or only
    ladder ``name`` ([] when unknown).

    Each: ``{"name", "in_file", "rule" (words), "match" (:func:`rule_json`), "settings" (the file's, None for a
    removed ladder), "versions": [{"version", "id", "created_at" (ISO, UTC), "current", "open_invoices",
    "invoices"}], "open_invoices", "apply": {"to_version", "recorded", "moves": {"<version>": n}, "total"}}``
    (``apply`` None for a removed ladder: it cannot be applied).
    """
    held = holdings(store, policy)
    out: list[dict[str, Any]] = []
    in_file = ladders_of(policy)
    for settings, rule in in_file:
        if name is not None and settings.name != name:
            continue
        versions = [_version(h) for h in held if h.name == settings.name]
        plan = apply_plan(store, policy, settings.name)
        out.append({"name": settings.name, "in_file": True,
                    "rule": rule.describe() if rule else "everything else", "match": rule_json(rule),
                    "settings": settings.to_json(), "versions": versions,
                    "open_invoices": sum(v["open_invoices"] for v in versions),
                    "apply": {"to_version": plan["to_version"], "recorded": plan["recorded"],
                              "moves": {str(k): v for k, v in sorted(plan["moves"].items())},
                              "total": plan["total"]}})
    names = {s.name for s, _ in in_file}
    for removed in sorted({h.name for h in held} - names):
        if name is not None and removed != name:
            continue
        versions = [_version(h) for h in held if h.name == removed]
        out.append({"name": removed, "in_file": False, "rule": "no longer in the file", "match": None,
                    "settings": None, "versions": versions,
                    "open_invoices": sum(v["open_invoices"] for v in versions), "apply": None})
    return out
