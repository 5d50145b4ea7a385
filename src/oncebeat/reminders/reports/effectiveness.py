"""Per-stage effectiveness: of the invoices still unpaid when a stage went out, the share paid within 3, 7 and 14
days, next to a baseline of invoices not reminded by the day the stage would have gone (docs/reports.md, "Stage
effectiveness"; an invoice reminded within a window before paying is left out of that window).

Counts, not amounts, so currencies may be reported together (``currency`` narrows to one). A window of N days
counts an invoice only once it is over: its anchor + N is before ``as_of``; a younger invoice is in ``unpaid`` but
not yet in ``eligible``. A share with no eligible invoice is None ("not enough data"), never 0 %.

The counts are kept by triggers on invoices and reminders in ``stage_outcomes`` (reminders migration 0025), so the
report reads a few rows per (stage, group, currency, day) instead of every invoice once per stage; the query over
the invoices themselves stays as the reference (``report_stage_effectiveness_from_invoices``), read instead while a
stage that has been sent is not tracked yet (:func:`track_stage_outcomes` adds it after the next scan), and the
tests compare the two after every kind of write.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from fractions import Fraction

from ...store import Store, Tx
from .months import Month

__all__ = ["WINDOWS", "StageGroup", "StageRow", "compact_stage_outcomes", "stage_effectiveness",
           "track_stage_outcomes"]

#: Days after the anchor within which a payment counts.
WINDOWS: tuple[int, ...] = (3, 7, 14)


@dataclass(frozen=True, kw_only=True, slots=True)
class StageGroup:
    """Invoices of one group at one stage: ``unpaid`` still unpaid on their anchor day; ``undated`` among them paid
    without a payment date (left out of every window); per window N, ``eligible[N]`` whose window is over and
    ``paid[N]`` paid within it."""

    unpaid: int = 0
    undated: int = 0
    eligible: dict[int, int] = field(default_factory=dict)
    paid: dict[int, int] = field(default_factory=dict)

    def share(self, window: int) -> Fraction | None:
        """paid / eligible for the window (0..1), None when no invoice's window is over."""
        n = self.eligible.get(window, 0)
        return Fraction(self.paid.get(window, 0), n) if n else None


@dataclass(frozen=True, kw_only=True, slots=True)
class StageRow:
    """One ladder stage (days relative to the due date): its reminded invoices and the not-yet-reminded baseline."""

    stage: int
    reminded: StageGroup
    baseline: StageGroup


def stage_effectiveness(store: Store, *, first: Month, last: Month, as_of: date,
                        currency: str | None = None) -> list[StageRow]:
    """One row per stage that has sent reminders, anchors (send business dates) in ``first`` .. ``last``.

    Args:
        as_of: today in the business zone (a window is over when anchor + N < as_of).
        currency: one ISO 4217 code, or None for all.

    Returns:
        Rows ordered by stage; a group with no invoice has ``unpaid`` 0.
    """
    kept = not store.read("stage_outcomes_untracked")
    query = "report_stage_effectiveness" if kept else "report_stage_effectiveness_from_invoices"
    groups: dict[int, dict[str, StageGroup]] = {}
    for r in store.read(query, start=first.start, end=last.end, as_of=as_of, currency=currency):
        groups.setdefault(int(r["stage"]), {})[r["grp"]] = StageGroup(
            unpaid=int(r["unpaid"]), undated=int(r["undated"] or 0),
            eligible={n: int(r[f"eligible_{n}"] or 0) for n in WINDOWS},
            paid={n: int(r[f"paid_{n}"] or 0) for n in WINDOWS})
    return [StageRow(stage=s, reminded=g.get("reminded", StageGroup()), baseline=g.get("baseline", StageGroup()))
            for s, g in sorted(groups.items())]


def compact_stage_outcomes(tx: Tx) -> None:
    """Fold ``stage_outcomes`` (reminders 0025: rows of differences the triggers add) into one row per (stage,
    group, currency, anchor day). The sums, and so every count, are the same before and after; on PostgreSQL the
    fold is one statement (one snapshot), so concurrent writers neither wait on it nor lose a row."""
    last = tx.run("stage_outcomes_last")
    if not last or last[0]["id"] is None:
        return
    tx.run("stage_outcomes_fold", upto=int(last[0]["id"]))
    if tx.backend == "sqlite":  # PostgreSQL's fold deleted the rows it summed in the same statement
        tx.run("stage_outcomes_drop", upto=int(last[0]["id"]))


def track_stage_outcomes(store: Store) -> list[int]:
    """Keep the baseline rows of every stage that has a sent reminder (a stage first sent since the last call: a
    new ladder stage), so :func:`stage_effectiveness` reads ``stage_outcomes`` again instead of the reference.

    One transaction of its own (the scan task runs it after the scan's): on PostgreSQL it takes a SHARE lock on
    ``invoices`` and ``reminders`` while it reads every invoice for each new stage (writers wait that long, once
    per new stage; nothing is locked when no stage is new).

    Returns:
        The stages added, in order (usually none).
    """
    if not store.read("stage_outcomes_untracked"):
        return []
    with store.transaction() as tx:
        tx.run("stage_outcomes_lock")
        stages = [int(r["stage"]) for r in tx.run("stage_outcomes_untracked")]  # again, under the lock
        for stage in stages:
            tx.run("stage_outcome_stage_add", stage=stage)
            tx.run("stage_outcomes_track", stage=stage)
    return stages
