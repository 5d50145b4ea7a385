"""Which stages of one invoice a scan creates (:func:`stages_due`, the collapse and spacing rules outside SQL) and a
stage's human label (:func:`stage_label`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta

from oncebeat.reminders.calendar import BusinessCalendar


def stages_due(stages: Sequence[int], due_on: date, business: date, collapse: str,
                earlier: list[tuple[int, date]], calendar: BusinessCalendar | None = None,
                spacing: str = "from_sent") -> list[int]:
    """The stages of one open invoice that a scan for ``business`` creates, by the policy's ``collapse`` rule.

    The one statement of the rule outside SQL (the scan's ``scan_insert_next_reminders``); the demo and the
    invariant checker compute the due set with it, independently of the reminders the scan wrote.

    ``earlier``: (stage, business date) of the invoice's reminders from earlier business dates.
    ``highest``: every stage whose offset has come, above the highest one in ``earlier`` (the ladder never goes
    back; the scan sends the highest and records the others superseded). ``next``: at most the lowest stage
    above the highest one in ``earlier``, once its offset has come,
    a courtesy stage only while the invoice is not overdue, and no sooner than the gap between the two stages
    after the earlier one's business date (``spacing = "from_sent"``; ``"nominal"``: its own offset only).

    ``calendar`` (:mod:`.calendar`): nothing on a non-business ``business`` date, and a stage has come when its
    nominal date (calendar or business days) is on or before ``business``; the spacing rule of ``next`` and the
    courtesy rule stay in calendar days, as in the scan's SQL.
    """
    if calendar is not None and not calendar.is_business_day(business):
        return []
    reached = [s for s in stages if (due_on + timedelta(days=s) if calendar is None
                                     else calendar.nominal(due_on, s)) <= business]
    last = max(earlier, default=None)
    if collapse == "highest":
        return [s for s in reached if last is None or s > last[0]]
    candidates = [s for s in reached if (last is None or s > last[0]) and (s > 0 or business <= due_on)]
    if not candidates:
        return []
    stage = min(candidates)
    if spacing == "from_sent" and last is not None and business < last[1] + timedelta(days=stage - last[0]):
        return []
    return [stage]


def stage_label(stage: int) -> str:
    """Human label of a stage: "3 days before due", "on the due date", "1 day past due"."""
    if stage == 0:
        return "on the due date"
    days = abs(stage)
    unit = "day" if days == 1 else "days"
    return f"{days} {unit} before due" if stage < 0 else f"{days} {unit} past due"
