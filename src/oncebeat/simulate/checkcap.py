"""The checker's rules for the per-customer cap (issue 23 item 4), judged from the sent rows and the invoices.

Invariants (name → meaning):

- ``cap-per-customer``: with ``max_notices_per_week = N`` (the ladder's own, else the policy's: each notice is
  judged by the cap of the ladder its invoice was pinned to), no customer got more than N notices (reminders sent or
  left in doubt, each on the local date it went out in the customer's business zone; the rows one grouped notice
  lists count once) in any 7 consecutive days;
- ``deferred-then-sent``: a reminder the cap deferred (``capped_at`` set) went out, if it did, after it was
  deferred and not before the day its last cap sentence named ("next allowed D" / "next try D"); one still
  ``deferred`` has its (invoice, stage) row only (counted delayed by ``due-reminders-terminal``, never lost).

"Each (invoice, stage) ends exactly once as sent, held, deferred→sent, skipped or failed, in order" is the
checker's ``stage-recorded-once``, ``due-reminders-terminal`` (``deferred`` is not an end: delayed while its
send job is snoozed, lost without one) and ``stage-order`` (:mod:`.checkholds`) together.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Mapping
from datetime import date, datetime, timedelta
from typing import Any, Protocol
from zoneinfo import ZoneInfo

__all__ = ["CAP_INVARIANTS", "check_cap"]

CAP_INVARIANTS = ("cap-per-customer", "deferred-then-sent")
_NEXT_DAY = re.compile(r"next (?:allowed|try) (\d{4}-\d{2}-\d{2})")


class _Invariant(Protocol):
    checked: int

    def fail(self, example: str) -> None: ...


def _went_out(r: dict[str, Any]) -> datetime | None:
    if r["state"] == "sent":
        return r.get("sent_at")
    if r["state"] == "in_doubt":
        return r["updated_at"]  # type: ignore[no-any-return]
    return None


def check_cap(inv: Mapping[str, _Invariant], *, cap: int | None, zone_of: Callable[[str | None], ZoneInfo],
              invoices: dict[str, dict[str, Any]], reminders: list[dict[str, Any]],
              cap_of: Callable[[dict[str, Any], datetime], int | None] | None = None) -> dict[str, int]:
    """Judge the two invariants of the module docstring. ``zone_of(customer_tz)``: the zone whose dates the cap
    counts (``capfence.cap_zone``). ``cap_of(invoice row, instant it went out)``: the cap of the ladder the
    invoice was pinned to then (:func:`oncebeat.reminders.ladder_calendars.cap_or`; None: no cap), else ``cap``
    for every notice. Returns ``{"deferred": rows the cap deferred, "max_in_7_days": the most notices one
    customer got in any 7 days}``.

    The rule judged: each notice was placed while fewer than ITS ladder's cap went out to the customer in the
    7 days ending on its day (notices of every ladder counted). Notices of one day may have been placed in any
    order: the day passes when some order fits (smallest caps first is the best one).
    """
    days: dict[str, list[tuple[date, int | None]]] = defaultdict(list)
    deferred = 0
    counted: set[int] = set()  # grouped notices (group = "customer") already counted: one notice, many rows
    for r in reminders:
        if r.get("superseded_by") is not None or r["number"] not in invoices:
            continue
        invoice = invoices[r["number"]]
        zone = zone_of(invoice.get("customer_tz"))
        at = _went_out(r)
        if at is not None and (r.get("notice_id") is None or r["notice_id"] not in counted):
            days[invoice["email"]].append((at.astimezone(zone).date(), cap if cap_of is None else cap_of(invoice, at)))
            if r.get("notice_id") is not None:
                counted.add(int(r["notice_id"]))
        if r.get("capped_at") is None:
            continue
        deferred += 1
        check = inv["deferred-then-sent"]
        check.checked += 1
        where = f"{r['number']} stage {r['stage']} ({r['state']}, deferred {r['capped_at'].isoformat()})"
        if at is not None and at < r["capped_at"]:
            check.fail(f"{where} went out at {at.isoformat()}, before the cap deferred it")
        found = _NEXT_DAY.search(str(r.get("cap_reason") or ""))
        if at is not None and found and at.astimezone(zone).date() < date.fromisoformat(found.group(1)):
            check.fail(f"{where} went out on {at.astimezone(zone).date()}, before the day its cap named: "
                       f"{r['cap_reason']}")
    most = 0
    for email, sent in days.items():
        by_day: dict[date, list[int | None]] = defaultdict(list)
        for day, limit in sent:
            by_day[day].append(limit)
        check = inv["cap-per-customer"]
        for day in sorted(by_day):
            before = sum(len(by_day[d]) for d in by_day if day - timedelta(days=7) < d < day)
            limits = sorted(by_day[day], key=lambda c: _UNCAPPED if c is None else c)
            most = max(most, before + len(limits))
            for j, limit in enumerate(limits, start=1):
                check.checked += 1
                if limit is not None and before + j > limit:
                    window = sorted(d for d in by_day for _ in by_day[d] if day - timedelta(days=7) < d <= day)
                    check.fail(f"{email} got {before + len(limits)} notices in the 7 days to {day.isoformat()} "
                               f"(a notice of that day under cap {limit}): "
                               + ", ".join(d.isoformat() for d in window))
                    break
    return {"deferred": deferred, "max_in_7_days": most}


#: Sorts a notice without a cap after every capped one.
_UNCAPPED = 10**9
