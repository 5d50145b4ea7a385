"""The doctor's checks: one function per cause code, each returning its findings.

Every check reads through :class:`~oncebeat.doctor.facts.Facts` and explains
what it saw with evidence rows (ids, instants local and UTC, hosts and pids)
and a fix. Severity: ``error`` when something was duplicated, lost, or needs a
person now; ``warning`` for a risk or a leftover that the engine absorbed;
``info`` for what happened as designed but is worth knowing.
"""

from __future__ import annotations

from collections.abc import Callable

from ..facts import Facts
from ..model import Finding
from ..registry import register_check
from .clocks import check_clock_restart, check_multiple_clocks
from .common import (
    LEASE_RESCUE_EXPECTED,
    MAX_EVIDENCE,
    MAX_FINDINGS_PER_CHECK,
    OVERDUE_AFTER,
    RESTART_WINDOW,
    SKEW_TOLERANCE,
    UPCOMING_DST,
    Skip,
    capped,
    plural,
)
from .delivery import (
    check_discarded,
    check_duplicate_delivery,
    check_effect_conflict,
    check_in_doubt,
    check_lost,
    check_retry_side_effect,
)
from .leftovers import check_leftover_trigger
from .timing import check_clock_skew, check_timezone

__all__ = ["Skip", "MAX_EVIDENCE", "MAX_FINDINGS_PER_CHECK", "RESTART_WINDOW", "OVERDUE_AFTER", "SKEW_TOLERANCE",
           "UPCOMING_DST", "LEASE_RESCUE_EXPECTED", "capped", "plural"]


_ENGINE_CHECKS: tuple[tuple[str, Callable[[Facts], list[Finding]], str], ...] = (
    ("multiple-clocks", check_multiple_clocks, "clock processes alive at once; duplicate fires the ledger rejected"),
    ("clock-restart", check_clock_restart, "clock restarts near fire instants and the catch-up decisions"),
    ("leftover-trigger", check_leftover_trigger, "fires and jobs from outside the clock, old versions, retired "
                                                 "schedules"),
    ("retry-side-effect", check_retry_side_effect, "retries and rescues, and what happened to their effects"),
    ("in-doubt", check_in_doubt, "effects in doubt, oldest first, with how to resolve each"),
    ("effect-conflict", check_effect_conflict, "effect keys reused with another payload"),
    ("duplicate-delivery", check_duplicate_delivery, "one message delivered twice (Maildir)"),
    ("lost", check_lost, "occurrences without a job, expired leases, unclaimed jobs"),
    ("timezone", check_timezone, "process TZ against schedule zones, two fires on one date, DST moves"),
    ("clock-skew", check_clock_skew, "process clocks ahead of the PostgreSQL server's"),
    ("discarded", check_discarded, "jobs that gave up, with their last error"),
)
"""The engine's checks as (code, function, title), in run order (orders 10, 20, …; apps place theirs between)."""

for _n, (_code, _fn, _title) in enumerate(_ENGINE_CHECKS, start=1):
    register_check(_code, _fn, title=_title, order=10 * _n)
