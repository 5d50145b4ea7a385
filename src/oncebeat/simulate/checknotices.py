"""The checker's grouped-notice invariants (issue 24 item 1, DESIGN G9), judged from the notices, the rows they
list, the payments (their instants, from the run) and the Maildir.

- ``one-notice-per-customer-day``: at most one notice per (customer, business date, ladder version);
- ``notice-delivered-once``: every sent row a notice lists points to a notice that is sent, carries the
  notice's Message-ID, and that Message-ID was delivered exactly once (with a Maildir); an in-doubt row's notice
  is in doubt, and a sent notice lists no row left pending;
- ``notice-never-lists-paid``: no notice lists an invoice that was certainly paid before the notice was frozen
  (its payment window ends before ``frozen_at``): such an invoice is left out, never listed stale.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from ..mail import StoredMessage

__all__ = ["NOTICE_INVARIANTS", "check_notices"]

NOTICE_INVARIANTS = ("one-notice-per-customer-day", "notice-delivered-once", "notice-never-lists-paid")


class Invariant(Protocol):
    checked: int

    def fail(self, example: str) -> None: ...


def check_notices(inv: Mapping[str, Invariant], *, notices: Sequence[Mapping[str, Any]],
                  messages: Sequence[StoredMessage] | None,
                  payments: Mapping[str, tuple[datetime, datetime]]) -> dict[str, int]:
    """Judge the three invariants (module docstring) on ``notices`` (:func:`oncebeat.reminders.rows.all_notices`
    rows); ``messages``: the Maildir's (None: not read). Returns ``{"notices": n, "notice_rows": n}``."""
    by_notice: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    for row in notices:
        by_notice[int(row["notice_id"])].append(row)
    once = inv["one-notice-per-customer-day"]
    keys = Counter((rows[0]["customer_id"], rows[0]["business_date"], rows[0]["ladder_version_id"])
                   for rows in by_notice.values())
    once.checked += len(keys)
    for key, n in keys.items():
        if n > 1:
            once.fail(f"customer {key[0]} has {n} notices on {key[1]} (ladder version {key[2]})")
    delivered = Counter(m.message_id for m in messages) if messages is not None else None
    sent = inv["notice-delivered-once"]
    paid = inv["notice-never-lists-paid"]
    listed = 0
    for notice_id, rows in by_notice.items():
        head = rows[0]
        members = [r for r in rows if r["reminder_id"] is not None]
        listed += len(members)
        sent.checked += 1
        state, mid = head["notice_state"], head["notice_message_id"]
        for r in members:
            where = f"notice {notice_id}: {r['number']} stage {r['stage']}"
            if r["state"] == "sent" and (state != "sent" or r["message_id"] != mid):
                sent.fail(f"{where} is sent but its notice is {state} ({r['message_id']} vs {mid})")
            if r["state"] == "in_doubt" and state != "in_doubt":
                sent.fail(f"{where} is in doubt but its notice is {state}")
            if state == "sent" and r["state"] == "pending":
                sent.fail(f"{where} is still pending though its notice was sent")
            window = payments.get(str(r["number"]))
            if head["frozen_at"] is not None and window is not None:
                paid.checked += 1
                if window[1] < head["frozen_at"]:
                    paid.fail(f"{where} is listed, but the invoice was paid by {window[1].isoformat()}, before the "
                              f"notice was frozen at {head['frozen_at'].isoformat()}")
        if state == "sent" and delivered is not None and delivered.get(mid, 0) != 1:
            sent.fail(f"notice {notice_id} is sent but {mid} was delivered {delivered.get(mid, 0)} times")
    return {"notices": len(by_notice), "notice_rows": listed}
