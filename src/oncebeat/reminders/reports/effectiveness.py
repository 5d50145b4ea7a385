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

from ...store import Store
from .months import Month

__all__ = ["WINDOWS", "StageGroup", "StageRow", "stage_effectiveness"]

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
    groups: dict[int, dict[str, StageGroup]] = {}
    for r in store.read("report_stage_effectiveness", start=first.start, end=last.end, as_of=as_of,
                        currency=currency):
        groups.setdefault(int(r["stage"]), {})[r["grp"]] = StageGroup(
            unpaid=int(r["unpaid"]), undated=int(r["undated"] or 0),
            eligible={n: int(r[f"eligible_{n}"] or 0) for n in WINDOWS},
            paid={n: int(r[f"paid_{n}"] or 0) for n in WINDOWS})
    return [StageRow(stage=s, reminded=g.get("reminded", StageGroup()), baseline=g.get("baseline", StageGroup()))
            for s, g in sorted(groups.items())]
