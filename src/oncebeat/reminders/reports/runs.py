"""Stored runs of the stage-effectiveness report: computed by a job over one snapshot, kept with the instant they
are exact for (Stripe's Reporting API model: a *report run* is computed asynchronously, stored, and shown with the
time its data are from; docs/reports.md, "Stored runs").

Why: stage effectiveness anti-joins every sent reminder with its invoice (0.7-0.9 s at a million invoices, 6-14 s
at ten million), so the Reports page cannot compute it live on a large book. Keeping its counts incrementally was
tried twice and not merged (docs/benchmarks.md, rounds 3d and 3e): a trigger on the send path halved the send rate,
and a fold by the scan was exact only under a clock margin. A run needs neither: it is the live report
(:func:`.effectiveness.stage_counts`, the same SQL and rows) read inside one snapshot, so it is exact for that
snapshot's instant, and nothing on the send path changes.

- :func:`request_run` records a run ``queued`` and enqueues its job (task :data:`RUN_TASK`) in one transaction.
  The job's unique key is the parameter set's (:attr:`RunParams.key`): while one run of a parameter set is queued or
  running, another request enqueues nothing (the queue's partial unique index decides, not a read before the write).
- :func:`compute_run` (the job's body) marks it ``running``, reads in :meth:`Store.snapshot` (PostgreSQL
  ``REPEATABLE READ READ ONLY``; SQLite one read transaction) whose first statement gives the snapshot's instant on
  the database clock, then stores the rows ``done`` (or the error, ``failed``) and prunes older runs.
- :func:`newest_run` is what the page shows, always with ``snapshot_at``; :func:`stage_effectiveness_within`
  is the page's live attempt under a statement timeout.

Example::

    params = RunParams(first=Month(2026, 1), last=Month(2026, 12), as_of=date(2026, 12, 3), currency=None)
    request_run(store, params, clock=clock, source=source)      # a worker runs compute_run
    run = newest_run(store, params)                             # None until one is done
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from ...errors import QueryTimedOut
from ...provenance import Source
from ...queue import UNFINISHED_STATES, Queue, job_row
from ...store import Json, Store
from ...timebase import Clock
from .effectiveness import StageRow, stage_counts, stage_rows
from .months import Month

__all__ = ["KEEP", "REFRESH_AFTER", "RUN_MAX_ATTEMPTS", "RUN_TASK", "RunParams", "StageReport", "StoredRun",
           "compute_run", "newest_run", "request_run", "run_pending", "stage_effectiveness_within", "stage_report"]

log = logging.getLogger(__name__)

#: The engine task that computes one run (registered by :func:`oncebeat.reminders.tasks.build_app`).
RUN_TASK = "reminders.report_run"
#: Attempts of a run's job: a run that fails (a dropped connection) is tried again, then left ``failed``.
RUN_MAX_ATTEMPTS = 3
#: Done runs kept per parameter set (the newest); older ones are deleted when a run finishes.
KEEP = 3
#: Finished runs of any parameter set created longer ago than this are deleted when a run finishes (yesterday's
#: ``as_of`` is another parameter set: without this, one set a day would stay forever).
FORGET_AFTER = timedelta(days=31)
#: A page that falls back to a stored run finished longer ago than this (app clock) asks for a new one. The scan
#: asks for the default range's run each business day; this keeps a page looked at all day from going stale.
REFRESH_AFTER = timedelta(minutes=10)


@dataclass(frozen=True, kw_only=True, slots=True)
class RunParams:
    """The parameters of a stage-effectiveness run, as :func:`.effectiveness.stage_effectiveness` takes them."""

    first: Month
    last: Month
    as_of: date
    currency: str | None = None

    @property
    def key(self) -> str:
        """``stages:<first>:<last>:<as_of>:<currency or *>``: one per parameter set (runs, the job's unique key)."""
        return f"stages:{self.first}:{self.last}:{self.as_of.isoformat()}:{self.currency or '*'}"


@dataclass(frozen=True, kw_only=True, slots=True)
class StoredRun:
    """A done run: ``rows`` exact for the database as it was at ``snapshot_at`` (UTC, the database clock);
    ``created_at``/``started_at``/``finished_at`` are when it was asked for, begun and stored (UTC, the app's
    clock)."""

    id: int
    params: RunParams
    snapshot_at: datetime
    created_at: datetime
    started_at: datetime
    finished_at: datetime
    rows: list[StageRow]

    @property
    def compute_ms(self) -> float:
        """How long its job took to compute and store it, in milliseconds (what a live read would take too)."""
        return (self.finished_at - self.started_at).total_seconds() * 1000


def _params_of(row: dict[str, Any]) -> RunParams:
    return RunParams(first=Month.parse(row["first_month"], "from"), last=Month.parse(row["last_month"], "to"),
                     as_of=row["as_of"], currency=row["currency"])


def _instant(value: Any) -> datetime:
    """The snapshot instant as the backend gives it: an aware datetime (PostgreSQL) or ISO text ending in Z."""
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


def stage_effectiveness_within(store: Store, params: RunParams, *, budget_ms: int | None
                               ) -> list[StageRow] | None:
    """The live report if it finishes within ``budget_ms`` (PostgreSQL ``statement_timeout``, in one read-only
    snapshot), else None. ``budget_ms`` None: no limit; SQLite has none (always live: its books are small).

    Raises:
        StoreError: any failure but the timeout.
    """
    try:
        with store.snapshot(timeout_ms=budget_ms) as tx:
            return stage_rows(stage_counts(tx, first=params.first, last=params.last, as_of=params.as_of,
                                           currency=params.currency))
    except QueryTimedOut:
        return None


def request_run(store: Store, params: RunParams, *, clock: Clock, source: Source) -> int | None:
    """Record a run of ``params`` ``queued`` and enqueue its job, in one transaction; returns the run's id, or None
    when a run of the same parameters is already queued or running (its job holds the unique key: nothing is
    written).

    Raises:
        StoreError: the database failed (nothing written).
    """
    class _Held(Exception):
        pass

    try:
        with store.transaction() as tx:
            row = tx.one("report_run_insert", report="stages", params_key=params.key, first_month=str(params.first),
                         last_month=str(params.last), as_of=params.as_of, currency=params.currency, now=clock.now())
            assert row is not None
            run_id = int(row["id"])
            job_id = Queue(store, clock=clock, source=source).enqueue(
                RUN_TASK, {"run_id": run_id}, tx=tx, unique_key=f"report_run:{params.key}",
                max_attempts=RUN_MAX_ATTEMPTS)
            if job_id is None:
                raise _Held  # rolls back the row: the run already asked for will answer
            tx.run("report_run_set_job", id=run_id, job_id=job_id)
    except _Held:
        return None
    return run_id


def compute_run(store: Store, run_id: int, *, clock: Clock) -> StoredRun | None:
    """Compute run ``run_id`` (the job's body): running, the report read in one snapshot, stored done; older runs
    pruned (:data:`KEEP`, :data:`FORGET_AFTER`). None when the run no longer exists (pruned).

    Raises:
        StoreError: the read or the write failed; the run is recorded ``failed`` with the error first (when the
            database still takes it) and the job's retry computes it again.
    """
    row = store.run_idempotent("report_run_start", id=run_id, now=clock.now())
    if not row:
        return None
    params = _params_of(row[0])
    try:
        with store.snapshot() as tx:
            # First statement: takes the snapshot (PostgreSQL REPEATABLE READ; SQLite's first read) and its instant.
            at = tx.one("report_run_snapshot_instant")
            assert at is not None
            counts = stage_counts(tx, first=params.first, last=params.last, as_of=params.as_of,
                                  currency=params.currency)
        snapshot_at = _instant(at["at"])
        now = clock.now()
        with store.transaction() as tx:
            tx.run("report_run_done", id=run_id, snapshot_at=snapshot_at, result=Json(counts), now=now)
            tx.run("report_runs_prune", params_key=params.key, id=run_id, keep=KEEP)
            tx.run("report_runs_prune_old", before=now - FORGET_AFTER)
    except Exception as exc:
        try:
            store.run_idempotent("report_run_failed", id=run_id, error=f"{type(exc).__name__}: {exc}"[:2000],
                                 now=clock.now())
        except Exception:  # the database is gone too: the job's retry records what happens next
            log.warning("report run %d: could not record its failure", run_id, exc_info=True)
        raise
    log.info("report run %d (%s) done: snapshot at %s", run_id, params.key, snapshot_at.isoformat(),
             extra={"event": "reminders.report_run", "run_id": run_id})
    return StoredRun(id=run_id, params=params, snapshot_at=snapshot_at, created_at=row[0]["created_at"],
                     started_at=row[0]["started_at"], finished_at=now, rows=stage_rows(counts))


def newest_run(store: Store, params: RunParams) -> StoredRun | None:
    """The newest done run of ``params`` (one indexed row), or None when none is done yet."""
    rows = store.read("report_run_newest_done", params_key=params.key)
    if not rows:
        return None
    r = rows[0]
    return StoredRun(id=int(r["id"]), params=params, snapshot_at=_instant(r["snapshot_at"]),
                     created_at=r["created_at"], started_at=r["started_at"], finished_at=r["finished_at"],
                     rows=stage_rows(r["result"]))


def run_pending(store: Store, params: RunParams) -> bool:
    """Whether a run of ``params`` newer than the newest done one is queued or running: its row says so **and**
    its job is unfinished. A row whose job ended without finishing it (cancelled by an operator, discarded by a
    worker that did not know the task) is not pending, so the page asks for a new run instead of waiting forever.
    """
    rows = store.read("report_run_newest", params_key=params.key)
    if not rows or rows[0]["state"] not in ("queued", "running") or rows[0]["job_id"] is None:
        return False
    job = job_row(store, int(rows[0]["job_id"]))
    return job is not None and job["state"] in UNFINISHED_STATES


@dataclass(frozen=True, kw_only=True, slots=True)
class StageReport:
    """What the Reports page shows for stage effectiveness: ``live`` rows (exact now), or the newest stored
    ``run`` (exact at its ``snapshot_at``), or neither (none done yet); ``pending``: a newer run is queued or
    running (possibly asked for by this call: ``requested``)."""

    live: list[StageRow] | None = None
    run: StoredRun | None = None
    pending: bool = False
    requested: bool = False


def stage_report(store: Store, params: RunParams, *, budget_ms: int | None, clock: Clock, source: Source
                 ) -> StageReport:
    """The live report under ``budget_ms`` (see :func:`stage_effectiveness_within`), else the newest stored run;
    when there is none, or the newest finished more than :data:`REFRESH_AFTER` ago, and no run is queued or
    running, a run is asked for (:func:`request_run`: at most one unfinished per parameter set).

    The live attempt is skipped (PostgreSQL) when ``budget_ms`` is 0, or when the newest run of the same
    parameters took longer than ``budget_ms`` to compute: on that book the live read would only run into the
    timeout, adding the whole budget to the page. A run that computes within the budget brings the live read back.
    SQLite is always live (no statement timeout; its books are small).

    Raises:
        StoreError: the database failed (not the live attempt's timeout).
    """
    if store.backend == "sqlite":
        live = stage_effectiveness_within(store, params, budget_ms=budget_ms)
        assert live is not None  # no timeout on SQLite
        return StageReport(live=live)
    run = newest_run(store, params)
    if budget_ms != 0 and (run is None or budget_ms is None or run.compute_ms <= budget_ms):
        live = stage_effectiveness_within(store, params, budget_ms=budget_ms)
        if live is not None:
            return StageReport(live=live)
    pending = run_pending(store, params)
    requested = False
    if not pending and (run is None or clock.now() - run.finished_at > REFRESH_AFTER):
        requested = request_run(store, params, clock=clock, source=source) is not None
        pending = True  # asked for now, or another request's run holds the key
    return StageReport(run=run, pending=pending, requested=requested)
