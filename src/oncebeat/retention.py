"""Retention: delete the engine's history that no guarantee needs any more (``oncebeat prune``).

Jobs, occurrences, effects, audit events and process rows grow with every run. :func:`prune` deletes those older
than a cutoff, keeping every row a guarantee still reads (README, "Retention"):

- **jobs**: only finished ones (``completed``, ``discarded``, ``cancelled``) that finished before the cutoff; a job
  with an effect still being sent or in doubt stays as that effect's evidence, and the run of an occurrence the
  ledger keeps stays with it. A job retried by an operator while
  the prune runs is re-checked at delete time and stays.
- **occurrences**: the ledger is what makes a fire unique (G1) and what the business-period guard reads, so an
  occurrence goes only when it is older than the cutoff *and* than :data:`OCCURRENCE_FLOOR` (a month and a day,
  the longest business period) *and* than the longest catch-up window of any schedule plus a day; the newest
  occurrence of each schedule (the clock's cursor) and any with an unfinished run always stay.
- **effects**: only ``done`` or ``failed`` ones finished before the cutoff, and never a key under a prefix an app
  protects with :func:`protect_effects` (the reminder app keeps ``reminder:`` keys as long as their reminders
  exist, so a re-run never sends a delivered reminder again). ``started`` and ``in_doubt`` effects stay until
  resolved. After its key is pruned an effect is forgotten: a later job with the same key runs it again, so the
  cutoff is also how long effect keys are remembered (like an idempotency key's retention).
- **events** (the audit trail): those recorded before the cutoff; the pruning itself is recorded as an
  ``audit.pruned`` event, which the doctor quotes as where its history begins.
- **processes**: rows of processes that stopped (or stopped heartbeating) before the cutoff, unless a job is
  still leased to one or one of its effects is unresolved.

An operator deletes chosen jobs by the same rules (:func:`deletable_jobs`, :func:`delete_jobs`; the dashboard's
bulk delete and ``oncebeat jobs delete``, through :func:`oncebeat.job_admin.bulk_action`).

Deletes run in batches (:data:`DEFAULT_BATCH` rows per transaction, walking each table's primary key once), so
pruning a million jobs never holds a lock workers wait on for more than one short transaction. ``apply=False``
(the CLI's default) walks the same windows and counts what would go, deleting nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from . import audit
from .provenance import Source, current_source
from .store import Store, Tx
from .timebase import SystemClock, require_aware

__all__ = ["DEFAULT_BATCH", "MIN_OLDER_THAN", "OCCURRENCE_FLOOR", "PRUNE_TASK", "PruneReport", "TableReport",
           "deletable_jobs", "delete_jobs", "protect_effects", "protected_effects", "prune"]

#: Rows per batch (one short transaction each).
DEFAULT_BATCH = 2000
#: The shortest ``older_than`` accepted: a day. Shorter would forget effect keys and evidence an operator
#: investigating yesterday's incident still needs.
MIN_OLDER_THAN = timedelta(days=1)
#: Occurrences younger than this always stay: the business-period guard looks back over one period, a month at
#: most (oncebeat.schedules.Schedule.business_period), plus a day for the zone offsets.
OCCURRENCE_FLOOR = timedelta(days=32)
#: The engine task a retention schedule runs (registered by :meth:`oncebeat.app.App.retention`).
PRUNE_TASK = "oncebeat.prune"

# Occurrences first: a job of an occurrence the ledger keeps stays with it.
_TABLES = ("occurrences", "jobs", "effects", "events", "processes")

_lock = threading.Lock()
_protected: dict[str, str] = {}


def protect_effects(prefix: str, reason: str) -> None:
    """Keep every effect whose key starts with ``prefix`` out of :func:`prune` (idempotent).

    An app calls this when it is imported, for the effect keys its own rows still answer for; ``reason`` is
    shown by ``oncebeat prune``. Raises ValueError for an empty prefix (it would protect every key).
    """
    if not prefix:
        raise ValueError("protect_effects: the prefix must not be empty")
    with _lock:
        _protected[prefix] = reason


def protected_effects() -> dict[str, str]:
    """The protected effect-key prefixes and why each is kept."""
    with _lock:
        return dict(_protected)


@dataclass(slots=True)
class TableReport:
    """One table's part of a prune: ``examined`` rows read, ``pruned`` deleted (or, in a dry run, deletable)."""

    table: str
    examined: int = 0
    pruned: int = 0


@dataclass(slots=True)
class PruneReport:
    """What :func:`prune` did (``applied``) or would do (a dry run).

    Attributes:
        before: the cutoff (UTC); ``occurrences_before`` the later bound occurrences used (the guard's floor).
        tables: per table, in the order pruned.
        kept: why rows older than the cutoff were kept, one line per rule (for the CLI).
    """

    applied: bool
    now: datetime
    before: datetime
    occurrences_before: datetime
    tables: list[TableReport] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(t.pruned for t in self.tables)

    def as_dict(self) -> dict[str, Any]:
        return {"applied": self.applied, "now": self.now.isoformat(), "before": self.before.isoformat(),
                "occurrences_before": self.occurrences_before.isoformat(),
                "tables": {t.table: {"examined": t.examined, "pruned": t.pruned} for t in self.tables},
                "total": self.total, "kept": list(self.kept)}


Progress = Callable[[TableReport], None]


def prune(store: Store, older_than: timedelta, *, apply: bool = False, now: datetime | None = None,
          batch: int = DEFAULT_BATCH, tables: tuple[str, ...] | None = None, source: Source | None = None,
          on_progress: Progress | None = None) -> PruneReport:
    """Delete (``apply=True``) or count (a dry run) the engine history older than ``older_than`` before ``now``.

    Args:
        older_than: age before ``now`` from which rows may go; at least :data:`MIN_OLDER_THAN`.
        now: the current instant (aware); default the system clock.
        batch: rows examined per transaction (1–100,000).
        tables: a subset of ``occurrences, jobs, effects, events, processes`` (default all, in that order).
        source: provenance recorded on the ``audit.pruned`` event (default this process as ``cli``).
        on_progress: called after each batch with the table's running totals.
    Returns:
        A :class:`PruneReport`; with ``apply`` an ``audit.pruned`` event records it (in the last transaction).
    Raises:
        ValueError: ``older_than`` below a day, ``batch`` out of range, or an unknown table.
    """
    if older_than < MIN_OLDER_THAN:
        raise ValueError(f"older_than must be at least {MIN_OLDER_THAN.days} day (got {older_than})")
    if not 1 <= batch <= 100_000:
        raise ValueError(f"batch must be between 1 and 100000 (got {batch})")
    tables = _TABLES if tables is None else tables
    unknown = [t for t in tables if t not in _TABLES]
    if unknown:
        raise ValueError(f"unknown table {unknown[0]!r}: choose from {', '.join(_TABLES)}")
    tables = tuple(t for t in _TABLES if t in tables)  # always in the order the rules need
    now = require_aware(now, "now") if now is not None else SystemClock().now()
    before = now - older_than
    occ_before = _occurrences_before(store, before, now)
    keep = protected_effects()
    report = PruneReport(applied=apply, now=now, before=before, occurrences_before=occ_before)
    report.kept = [
        "unfinished jobs, finished ones with an effect being sent or in doubt, and the run of every occurrence kept",
        f"occurrences after {occ_before.isoformat()} (the business-period guard and the longest catch-up window), "
        "each schedule's newest one, and any with an unfinished run",
        "effects being sent or in doubt (until resolved)",
        *(f"effects with keys {prefix}*: {why}" for prefix, why in sorted(keep.items())),
        "processes still holding a job or an unresolved effect, or the source of an occurrence kept",
    ]
    for table in tables:
        part = TableReport(table)
        report.tables.append(part)
        cutoff = occ_before if table == "occurrences" else before
        _prune_table(store, part, cutoff=cutoff, occ_before=occ_before, keep=sorted(keep), apply=apply,
                     batch=batch, on_progress=on_progress)
    if apply:
        with store.transaction() as tx:
            audit.record(tx, now=now, kind="audit.pruned", subject="audit:events",
                         source=source or current_source("cli"),
                         detail={"before": before.isoformat(), "deleted": _deleted(report, "events"),
                                 "occurrences_before": occ_before.isoformat(),
                                 "tables": {t.table: t.pruned for t in report.tables}})
    return report


def _occurrences_before(store: Store, before: datetime, now: datetime) -> datetime:
    """The occurrences' cutoff: the later-kept of ``before``, :data:`OCCURRENCE_FLOOR` and the catch-up window."""
    floor_row = store.read("retention_floor")
    window = timedelta(seconds=float(floor_row[0]["catchup_window"])) if floor_row else timedelta(0)
    return min(before, now - OCCURRENCE_FLOOR, now - window - timedelta(days=1))


def deletable_jobs(store: Store, ids: Sequence[int], *, now: datetime, before: datetime | None = None) -> list[int]:
    """Which of ``ids`` an operator may delete now: those :func:`prune` would delete, by the same query.

    A job may go when it is finished (``completed``, ``discarded``, ``cancelled``; never ``running``, whose lease a
    worker holds, nor waiting), finished before ``before`` (default ``now``), none of its effects is being sent or
    in doubt, and it is not the run of an occurrence the ledger keeps (:func:`prune`'s occurrence cutoff), so every
    occurrence left still has its job and the doctor's evidence stays. Returns the ids in the order given.
    """
    cutoffs = _delete_cutoffs(store, now, before)
    with store.transaction() as tx:
        return _deletable(tx, ids, *cutoffs)


def _delete_cutoffs(store: Store, now: datetime, before: datetime | None) -> tuple[datetime, datetime]:
    now = require_aware(now, "now")
    before = min(require_aware(before, "before"), now) if before is not None else now
    return before, _occurrences_before(store, before, now)


def _deletable(tx: Tx, ids: Sequence[int], before: datetime, occ_before: datetime) -> list[int]:
    found: list[int] = []
    for job_id in dict.fromkeys(int(i) for i in ids):  # a window of one id each: one index lookup per job
        rows = tx.run("retention_prunable_jobs", after=job_id - 1, hi=job_id, before=before, occ_before=occ_before)
        found.extend(int(r["id"]) for r in rows)
    return found


def delete_jobs(store: Store, ids: Sequence[int], *, now: datetime, before: datetime | None = None) -> list[int]:
    """Delete the jobs of ``ids`` that :func:`deletable_jobs` allows (checked and deleted in one transaction per
    :data:`DEFAULT_BATCH` ids, the state re-checked by the delete). Returns the ids deleted; the caller records
    the audit event (:func:`oncebeat.job_admin.bulk_action`)."""
    cutoffs = _delete_cutoffs(store, now, before)
    deleted: list[int] = []
    unique = list(dict.fromkeys(int(i) for i in ids))
    for start in range(0, len(unique), DEFAULT_BATCH):
        with store.transaction() as tx:
            allowed = _deletable(tx, unique[start:start + DEFAULT_BATCH], *cutoffs)
            if allowed:
                deleted.extend(int(r["id"]) for r in tx.run("prune_jobs", ids=allowed))
    return deleted


def _deleted(report: PruneReport, table: str) -> int:
    return next((t.pruned for t in report.tables if t.table == table), 0)


def _prune_table(store: Store, part: TableReport, *, cutoff: datetime, occ_before: datetime, keep: list[str],
                 apply: bool, batch: int, on_progress: Progress | None) -> None:
    """Walk ``part.table`` one primary-key window at a time; each window is one transaction."""
    table = part.table
    after: Any = "" if table == "effects" else 0
    # Literal names, one assignment each, so tests/unit/test_query_ownership.py can see which queries run here.
    if table == "jobs":
        window = "retention_jobs_window"
        prunable = "retention_prunable_jobs"
        delete = "prune_jobs"
    elif table == "occurrences":
        window = "retention_occurrences_window"
        prunable = "retention_prunable_occurrences"
        delete = "prune_occurrences"
    elif table == "effects":
        window = "retention_effects_window"
        prunable = "retention_prunable_effects"
        delete = "prune_effects"
    elif table == "events":
        window = "retention_events_window"
        prunable = "retention_prunable_events"
        delete = "prune_retained_events"
    else:
        window = "retention_processes_window"
        prunable = "retention_prunable_processes"
        delete = "prune_processes"
    while True:
        with store.transaction() as tx:
            win = tx.one(window, after=after, batch=batch)
            if win is None or not win["n"]:
                return
            hi = win["hi"]
            params: dict[str, Any] = {"after": after, "hi": hi, "before": cutoff}
            if table == "effects":
                params["keep"] = keep
            if table == "jobs":
                params["occ_before"] = occ_before
            rows = tx.run(prunable, **params)
            ids = [r["key"] if table == "effects" else int(r["id"]) for r in rows]
            if apply and ids:
                ids_param = {"keys": ids} if table == "effects" else {"ids": ids}
                extra = {"before": cutoff} if table == "processes" else {}
                part.pruned += len(tx.run(delete, **ids_param, **extra))
            elif not apply:
                part.pruned += len(ids)
            part.examined += int(win["n"])
        if on_progress is not None:
            on_progress(part)
        after = hi
