"""The checker's rules for the per-customer cap (issue 23 item 4), judged from the sent rows and the invoices.

Invariants (name → meaning):

- ``cap-per-customer``: with ``max_notices_per_week = N``, no customer got more than N notices (reminders sent or
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
              invoices: dict[str, dict[str, Any]], reminders: list[dict[str, Any]]) -> dict[str, int]:
    """Judge the two invariants of the module docstring. ``zone_of(customer_tz)``: the zone whose dates the cap
    counts (``capfence.cap_zone``). Returns ``{"deferred": rows the cap deferred, "max_in_7_days": the most notices
    one customer got in any 7 days}``."""
    days: dict[str, list[date]] = defaultdict(list)
    deferred = 0
    counted: set[int] = set()  # grouped notices (group = "customer") already counted: one notice, many rows
    for r in reminders:
        if r.get("superseded_by") is not None or r["number"] not in invoices:
            continue
        invoice = invoices[r["number"]]
        zone = zone_of(invoice.get("customer_tz"))
        at = _went_out(r)
        if at is not None and (r.get("notice_id") is None or r["notice_id"] not in counted):
            days[invoice["email"]].append(at.astimezone(zone).date())
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
        sent.sort()
        check = inv["cap-per-customer"]
        for i, day in enumerate(sent):
            check.checked += 1
            window = [d for d in sent[: i + 1] if d > day - timedelta(days=7)]
            most = max(most, len(window))
            if cap is not None and len(window) > cap:
                check.fail(f"{email} got {len(window)} notices in the 7 days to {day.isoformat()} (cap {cap}): "
                           + ", ".join(d.isoformat() for d in window))
                break
    return {"deferred": deferred, "max_in_7_days": most}
