"""Deterministic simulation with fault injection, the naive baseline, and the invariant checker.

``simulate(SimConfig(...))`` runs the real engine on simulated time (see
:mod:`.runner`); ``check(store, ...)`` judges any database and Maildir (see
:mod:`.checker`); :data:`FAULTS` names the faults and their default rates.

Importing this package imports none of its modules: each name is looked up in its module on first use (PEP 562),
so ``oncebeat check`` (the checker, through :mod:`.standalone`) does not import the runner's mail sink and
processes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

if TYPE_CHECKING:
    from .checker import INVARIANTS, CheckReport, check, payments_from_db
    from .faults import FAULTS, parse_faults
    from .runner import SimConfig, SimReport, simulate

#: The module of each public name.
_HOMES = {"INVARIANTS": "checker", "CheckReport": "checker", "check": "checker", "payments_from_db": "checker",
          "FAULTS": "faults", "parse_faults": "faults", "SimConfig": "runner", "SimReport": "runner",
          "simulate": "runner"}

__all__ = ["simulate", "SimConfig", "SimReport", "check", "CheckReport", "payments_from_db", "INVARIANTS",
           "FAULTS", "parse_faults"]


__getattr__, __dir__ = lazy_exports(__name__, _HOMES, globals())
