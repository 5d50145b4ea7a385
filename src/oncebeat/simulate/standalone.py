"""``oncebeat check`` on a deployment: the checker's inputs taken from the database itself.

A payment counts from the instant the database recorded it (``invoices.paid_at``,
the same instant the simulator logs), so ``check`` counts the same due reminders
as ``simulate`` on one database; rows paid before that column existed count as
paid at some instant of their ``paid_on`` day in the policy zone. An invoice counts
from the instant it entered the database (``invoices.entered_at``, read by the checker). Definitions are the
current ones plus every earlier expression and zone recorded by
``schedule.changed`` events.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from .. import audit, ledger
from ..app import App, ScheduleDef
from ..reminders.capfence import cap_zone
from ..reminders.policy import Policy
from ..store import Store
from .checker import CheckReport, check, payments_from_db
from .checkladders import ladder_timeline

__all__ = ["check_deployment", "definitions_from_db"]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def definitions_from_db(store: Store, app: App) -> dict[str, list[ScheduleDef]]:
    """Every definition each schedule key has had: stored rows, the app's, and changed-from versions."""
    out: dict[str, list[ScheduleDef]] = {}
    for row in ledger.list_schedules(store):
        current = ScheduleDef.from_row(row)
        out.setdefault(row["key"], []).append(current)
    for key, d in app.schedules.items():
        out.setdefault(key, []).append(d)
    for e in audit.list_events(store, kind="schedule.changed", since=EPOCH):
        key = e["subject"].removeprefix("schedule:")
        old = e["detail"].get("old", {})
        if key in out and old.get("expression"):
            out[key].append(replace(out[key][0], expression=old["expression"], tz=old.get("tz", out[key][0].tz)))
    return out


def check_deployment(store: Store, app: App, policy: Policy, *, maildir: Path | None) -> CheckReport:
    """Run every invariant on a live or finished deployment (see module docstring).

    Failed reminders break no invariant (a failure is recorded, not lost) but were not delivered: they are
    listed in ``attention`` (so ``check`` exits 3) with the command that retries them. Due reminders still
    delayed (waiting out a mail outage, or queued) are in ``delayed`` (exit 4 when nothing else is wrong).
    """
    report = check(store, maildir=maildir, stages=policy.stages, collapse=policy.collapse,
                   cap=policy.max_notices_per_week, cap_zone=partial(cap_zone, policy),
                   calendar=policy.calendar,
                   business_date=policy.business_date, definitions=definitions_from_db(store, app),
                   payments=payments_from_db(store, policy.tz), in_doubt_budget=None,
                   ladders=ladder_timeline(store, policy))
    failed = int(report.summary.get("reminders", {}).get("failed", 0))
    if failed:
        report.attention.append(f"{failed} reminder(s) failed (not delivered): `oncebeat doctor` shows why; fix "
                                "the cause, then `oncebeat reminders retry --failed`")
    return report
