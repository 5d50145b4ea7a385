"""Deterministic simulation with fault injection, the naive baseline, and the invariant checker.

``simulate(SimConfig(...))`` runs the real engine on simulated time (see
:mod:`.runner`); ``check(store, ...)`` judges any database and Maildir (see
:mod:`.checker`); :data:`FAULTS` names the faults and their default rates.
"""

from __future__ import annotations

from .checker import INVARIANTS, CheckReport, check, payments_from_db
from .faults import FAULTS, parse_faults
from .runner import SimConfig, SimReport, simulate

__all__ = ["simulate", "SimConfig", "SimReport", "check", "CheckReport", "payments_from_db", "INVARIANTS",
           "FAULTS", "parse_faults"]
