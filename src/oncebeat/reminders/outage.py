"""A mail outage as operators see it: how many reminders wait it out, since when the server refuses, what it
last answered and when the next try is.

A reminder whose send met a session-level refusal (connection refused or timed out, TLS or login refused, any
4xx) stays ``pending`` with ``deferred_since`` set (the first refusal, :mod:`oncebeat.reminders.service`): a
delay, not a failure. The dashboard's banner and the ``/metrics`` gauges read the same facts from here.

Example::

    o = mail_outage(store)
    if o is not None:
        print(o.describe())   # mail outage: the server refuses since 2026-03-08 14:02Z; 57 reminders waiting, …
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from ..store import Store, Tx

__all__ = ["MailOutage", "mail_outage", "waiting_on_outage"]


@dataclass(frozen=True, kw_only=True, slots=True)
class MailOutage:
    """Reminders waiting out a mail outage.

    Attributes:
        waiting: pending reminders whose sends the mail server refused (at least 1).
        since: the oldest such refusal still waited out (aware UTC): since when the server refuses.
        last_refusal_at: the newest refusal (aware UTC); ``last_reason`` what the server said then.
        next_try_at: when the first of their send jobs runs again (aware UTC); None when none is queued (a worker
            holds it now, or it was cancelled).
    """

    waiting: int
    since: datetime
    last_refusal_at: datetime
    last_reason: str
    next_try_at: datetime | None

    def describe(self) -> str:
        """One line for a terminal or a log: since when, how many, the next try (UTC)."""
        def at(t: datetime) -> str:
            return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M") + "Z"

        nxt = f", next try {at(self.next_try_at)}" if self.next_try_at else ""
        return (f"mail outage: the server refuses since {at(self.since)}; {self.waiting} reminder"
                f"{'' if self.waiting == 1 else 's'} waiting{nxt}")


def waiting_on_outage(db: Store | Tx) -> tuple[int, datetime | None]:
    """How many pending reminders wait out a mail outage, and the oldest refusal among them (aware UTC; None
    when none waits). Two reads of the partial index ``reminders_unfinished``."""
    waiting = db.read("reminders_waiting_on_outage")
    oldest = db.read("oldest_outage_refusal")
    return (int(waiting[0]["n"]) if waiting else 0), (oldest[0]["deferred_since"] if oldest else None)


def mail_outage(db: Store | Tx) -> MailOutage | None:
    """The mail outage reminders wait out now (see :class:`MailOutage`), or None when no reminder waits one out."""
    n, since = waiting_on_outage(db)
    if n == 0 or since is None:
        return None
    latest = db.read("latest_outage_refusal")
    nxt = db.read("outage_next_try")
    reason = str(latest[0]["reason"] or "") if latest else ""
    return MailOutage(waiting=n, since=since, last_refusal_at=latest[0]["updated_at"] if latest else since,
                      last_reason=reason.removeprefix("mail outage: "), next_try_at=nxt[0]["run_at"] if nxt else None)
