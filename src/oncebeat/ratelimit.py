"""Per-key rate limits, enforced across every worker process by the database.

A :class:`RateLimit` says "at most ``limit`` actions per ``per_seconds`` seconds for ``key``" (a relay, a
recipient domain, a tenant). A process asks for a permit right before the action and releases it when the
action has ended::

    relay = RateLimit(key="smtp:mail.example.com:587", limit=60, per_seconds=60)
    with limiter.permit(relay, job_id=job.id):     # raises RateLimited when none is free
        mailer.send(message)

Inside a handler use ``ctx.rate_limit(relay)`` (the job is snoozed, not failed, when no permit is free), at
the last moment before the point of no return, e.g. inside the effect function: a permit is then never spent
on a job that finds its work already done.

The guarantee: **no window of ``per_seconds`` seconds holds more than ``limit`` actions**, for any window,
not only windows starting on a minute. It is a sliding log (table ``rate_permits``, one row per permit):

- a permit counts against its key while ``until > now - per_seconds``; ``until`` is the latest instant the
  action can have happened — ``taken_at + hold`` while it is in flight (``hold``, 300 s by default, bounds a
  holder that died), the instant it ended once released (an action that ended, failed or not, counts: the
  relay saw it);
- takes of one key run one at a time (the key's ``rate_limits`` row is locked by an upsert on PostgreSQL;
  SQLite's single writer), and a take is granted only while fewer than ``limit`` permits count.

Why that suffices: say ``limit + 1`` actions happened in a window ``[a, a + P)``, and ``m`` is the one whose
permit was taken last, at ``s``. ``s <= `` its action ``< a + P``, so ``s - P < a``. Every other one of them
took its permit before ``s`` and happened at or after ``a``, so its ``until >= a > s - P``: all ``limit`` of
them counted at ``s`` and ``m`` was refused — a contradiction. The instants are those of the caller's clock
(the worker's, or the database's with ``time_source = database``); actions slower than ``hold`` are the only
way around the bound (they are counted again from their end once released).

Changing a key's limit takes effect at the next take (a key names one limit; its row keeps the last one
asked for). Permits that no longer count are deleted by the takes of their key.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .errors import RateLimited, StoreError
from .store import Store
from .timebase import Clock

__all__ = ["RateLimit", "RateLimiter", "HOLD_SECONDS", "MAX_KEY_LENGTH", "usage"]

#: Seconds an unreleased permit counts as possibly happening (a holder that died mid-action frees it after this).
HOLD_SECONDS = 300.0
MAX_KEY_LENGTH = 200
MIN_WAIT = 0.05  # seconds: the shortest snooze of a refused take


@dataclass(frozen=True, kw_only=True, slots=True)
class RateLimit:
    """At most ``limit`` actions per ``per_seconds`` seconds for ``key``, counted over every process.

    Raises:
        ValueError: an empty or over-long key, a limit that is not a whole number >= 1, or a period that is not
            a positive number of seconds.
    """

    key: str
    limit: int
    per_seconds: float

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key.strip() or len(self.key) > MAX_KEY_LENGTH:
            raise ValueError(f"rate limit key must be a non-empty text of at most {MAX_KEY_LENGTH} characters, "
                             f"not {self.key!r}")
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 1:
            raise ValueError(f"rate limit {self.key!r}: limit must be a whole number >= 1, not {self.limit!r}")
        if isinstance(self.per_seconds, bool) or not isinstance(self.per_seconds, (int, float)) \
                or not 0 < self.per_seconds < float("inf"):
            raise ValueError(f"rate limit {self.key!r}: per_seconds must be a positive number of seconds, "
                             f"not {self.per_seconds!r}")

    def describe(self) -> str:
        """E.g. ``smtp:relay:25: 60 per 60 s``."""
        return f"{self.key}: {self.limit} per {self.per_seconds:g} s"


class RateLimiter:
    """Takes and releases permits of :class:`RateLimit` keys in ``store`` (see the module docstring).

    Args:
        hold: seconds an unreleased permit counts as possibly happening (> 0); longer than any action takes.
    """

    def __init__(self, store: Store, *, clock: Clock, hold: float = HOLD_SECONDS) -> None:
        if not hold > 0:
            raise ValueError(f"hold must be a positive number of seconds, not {hold!r}")
        self.store = store
        self.clock = clock
        self.hold = hold

    @contextmanager
    def permit(self, limit: RateLimit, *, job_id: int | None = None) -> Iterator[int]:
        """Take a permit of ``limit`` for the block; release it when the block ends (however it ends).

        Yields:
            The permit's id.
        Raises:
            RateLimited: no permit is free; ``delay`` says when one frees (nothing was taken).
            StoreError: the database could not be asked (nothing was taken; the action must not run).
        """
        permit_id = self.take(limit, job_id=job_id)
        try:
            yield permit_id
        finally:
            self.release(permit_id)

    def take(self, limit: RateLimit, *, job_id: int | None = None) -> int:
        """Take a permit now (counted until :meth:`release`, or ``hold`` seconds); return its id.

        Raises:
            RateLimited: ``limit.limit`` permits count in the last ``limit.per_seconds`` seconds.
        """
        now = self.clock.now()
        horizon = now - timedelta(seconds=limit.per_seconds)
        with self.store.transaction() as tx:
            tx.run("rate_limit_lock", key=limit.key, max_count=limit.limit, per_seconds=float(limit.per_seconds),
                   now=now)
            tx.run("rate_permits_prune", key=limit.key, horizon=horizon)
            found = tx.one("rate_permits_count", key=limit.key, horizon=horizon)
            counted = int(found["n"]) if found is not None else 0
            if counted < limit.limit:
                row = tx.one("rate_permit_insert", key=limit.key, now=now,
                             until=now + timedelta(seconds=self.hold), job_id=job_id)
                assert row is not None
                return int(row["id"])
            # With the limit lowered more may count than it allows: the one that frees the last place over it.
            nth = tx.one("rate_permits_nth_until", key=limit.key, horizon=horizon, skip=counted - limit.limit)
        assert nth is not None
        raise RateLimited(limit.key, limit.limit, float(limit.per_seconds),
                          next_permit_wait(nth["until"], now, limit.per_seconds))

    def release(self, permit_id: int) -> None:
        """The permitted action has ended: from now on the permit counts from this instant, not its ``hold``.

        Never raises: if the database cannot be reached the permit keeps counting until its ``hold`` ends (the
        bound stays safe; only throughput is lost).
        """
        try:
            with self.store.transaction() as tx:
                tx.run("rate_permit_release", id=permit_id, until=self.clock.now())
        except StoreError:
            pass

    def permits(self, key: str) -> list[dict[str, Any]]:
        """The permits of ``key`` still kept (``id``, ``taken_at``, ``until``, ``job_id``), oldest first."""
        return self.store.read("rate_permits_of_key", key=key)


def usage(db: Store, now: datetime) -> list[dict[str, Any]]:
    """Per limited key (every key a limit was ever taken for): ``key``, ``max_count``, ``per_seconds`` and
    ``in_use``, the permits still counting at ``now`` (aware). ``in_use == max_count``: the key is saturated and its
    takers are snoozed until a permit frees."""
    return [{"key": r["key"], "max_count": int(r["max_count"]), "per_seconds": float(r["per_seconds"]),
             "in_use": int(r["in_use"])} for r in db.read("rate_limit_usage", now=now)]


def next_permit_wait(frees_from: datetime, now: datetime, per_seconds: float) -> float:
    """Seconds from ``now`` until a permit whose ``until`` is ``frees_from`` stops counting, plus jitter.

    The jitter (up to a quarter of the period, at most 15 s) spreads the jobs refused together, which would
    otherwise all come back for the one permit that frees first.
    """
    wait = (frees_from - now).total_seconds() + per_seconds
    return max(MIN_WAIT, wait) + random.uniform(0, min(per_seconds / 4, 15.0))
