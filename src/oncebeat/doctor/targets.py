"""Evidence for pushes to a schedule's target (:mod:`oncebeat.targets`): what to look for in the other system.

An in-doubt ``push:…`` key gets a note naming the target and the id the push carried — the Sidekiq ``jid``, the
Celery ``task_id``, the HTTP ``Idempotency-Key`` — so the operator can tell from Sidekiq Web, Flower, a worker's
log or the endpoint's records whether it arrived, and a fix that says where to look.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..effects import list_effects
from ..targets import Target, derived_jid, derived_uuid
from . import evidence as ev
from .registry import Context, Hooks, register_hooks

if TYPE_CHECKING:
    from .facts import Facts

__all__ = ["TargetHooks"]

_WHERE = {
    "sidekiq": "Sidekiq Web (Busy, Retries, Dead, or the queue) or the worker's log ('jid={id}')",
    "celery": "Flower, the result backend or the worker's log ('Task {name}[{id}] received')",
    "http": "the endpoint's records of Idempotency-Key {id}",
}


class TargetHooks(Hooks):
    """The target and derived id behind each in-doubt push."""

    name = "targets"

    def effect_context(self, facts: Facts, keys: Sequence[str]) -> dict[str, Context]:
        wanted = {k for k in keys if k.startswith("push:")}
        if not wanted:
            return {}
        rows = {e["key"]: e for e in list_effects(facts.store) if e["key"] in wanted}
        jobs = facts.load_jobs(int(r["job_id"]) for r in rows.values() if r.get("job_id") is not None)
        out: dict[str, Context] = {}
        for key, row in rows.items():
            job = jobs.get(int(row["job_id"])) if row.get("job_id") is not None else None
            try:
                target = Target.from_args(job["args"]) if job and isinstance(job.get("args"), dict) else None
            except Exception:  # noqa: BLE001 - a job row written by another version: no evidence, no failure
                target = None
            if target is None:
                continue
            ident = derived_jid(key) if target.kind == "sidekiq" else derived_uuid(key)
            label = {"sidekiq": "jid", "celery": "task_id", "http": "Idempotency-Key"}[target.kind]
            where = _WHERE[target.kind].format(id=ident, name=target.name)
            out[key] = Context(
                evidence=(ev.note(f"pushed to {target.describe()} with {label} {ident}", target=target.describe(),
                                  **{label.lower().replace("-", "_"): ident}),),
                fix=(f"Look for {label} {ident} in {where}. If it arrived run `oncebeat effects resolve {key} done`; "
                     f"if it certainly did not, `oncebeat effects resolve {key} not_done` pushes it once more with "
                     "the same id."))
        return out


register_hooks(TargetHooks())
