"""Per-stage effectiveness: of the invoices still unpaid when a stage went out, the share paid within 3, 7 and 14
days, next to a baseline of invoices not reminded by the day the stage would have gone (docs/reports.md, "Stage
effectiveness"; an invoice reminded within a window before paying is left out of that window).

Counts, not amounts, so currencies may be reported together (``currency`` narrows to one). A window of N days
counts an invoice only once it is over: its anchor + N is before ``as_of``; a younger invoice is in ``unpaid`` but
not yet in ``eligible``. A share with no eligible invoice is None ("not enough data"), never 0 %.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from fractions import Fraction
from typing import Any

from ...store import Store, Tx
from .months import Month

__all__ = ["WINDOWS", "StageGroup", "StageRow", "stage_counts", "stage_effectiveness", "stage_rows"]

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


def stage_effectiveness(db: Store | Tx, *, first: Month, last: Month, as_of: date,
                        currency: str | None = None) -> list[StageRow]:
    """One row per stage that has sent reminders, anchors (send business dates) in ``first`` .. ``last``.

    Args:
        db: the store, or an open transaction (a stored run reads inside its snapshot: :mod:`.runs`).
        as_of: today in the business zone (a window is over when anchor + N < as_of).
        currency: one ISO 4217 code, or None for all.

    Returns:
        Rows ordered by stage; a group with no invoice has ``unpaid`` 0.
    """
    return stage_rows(stage_counts(db, first=first, last=last, as_of=as_of, currency=currency))


def stage_counts(db: Store | Tx, *, first: Month, last: Month, as_of: date,
                 currency: str | None = None) -> list[dict[str, int | str]]:
    """The report's counts as plain JSON values, one dict per (stage, group) as the SQL gives them: ``stage``,
    ``grp`` ("reminded" or "baseline"), ``unpaid``, ``undated``, ``eligible_N`` and ``paid_N`` per window N
    (NULL sums as 0). What a stored run keeps (:mod:`.runs`); :func:`stage_rows` turns them into rows."""
    return [{"stage": int(r["stage"]), "grp": str(r["grp"]), "unpaid": int(r["unpaid"]),
             "undated": int(r["undated"] or 0),
             **{f"eligible_{n}": int(r[f"eligible_{n}"] or 0) for n in WINDOWS},
             **{f"paid_{n}": int(r[f"paid_{n}"] or 0) for n in WINDOWS}}
            for r in db.read("report_stage_effectiveness", start=first.start, end=last.end, as_of=as_of,
                             currency=currency)]


def stage_rows(counts: list[dict[str, Any]]) -> list[StageRow]:
    """:class:`StageRow` per stage, ordered by stage, from :func:`stage_counts`' dicts (live or stored)."""
    groups: dict[int, dict[str, StageGroup]] = {}
    for r in counts:
        groups.setdefault(int(r["stage"]), {})[r["grp"]] = StageGroup(
            unpaid=int(r["unpaid"]), undated=int(r["undated"]),
            eligible={n: int(r[f"eligible_{n}"]) for n in WINDOWS},
            paid={n: int(r[f"paid_{n}"]) for n in WINDOWS})
    return [StageRow(stage=s, reminded=g.get("reminded", StageGroup()), baseline=g.get("baseline", StageGroup()))
            for s, g in sorted(groups.items())]
