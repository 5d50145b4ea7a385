"""Applying a read of the team's own database, and its freshness watermark (``source_reads``).

:func:`sync_source` reads the ``[source]`` once (:func:`.sources.database.read_source`: one snapshot, every row
checked) and applies a clean read in **one** transaction through the writers every source uses
(:meth:`.service.ReminderService.upsert` and :meth:`~.service.ReminderService.apply_payments`, hence
:mod:`.records`: a field the query does not carry is kept, a paid invoice is never reopened by a stale read,
statuses move only by ``move_invoice_status``), recording an ``ok`` row in ``source_reads`` in that same
transaction. A read with problems applies nothing and records ``rejected``; a source that cannot be read
records ``failed`` with the redacted error. Either way the caller gets the exception.

Who calls it: ``oncebeat sync`` (now), the scan task before each scan (a failed read is logged and recorded and
the scan goes on with the data it has: reminders for invoices it already knows are not held back by a source
that is down; holding them until the data is fresh enough is the freshness fence's job, which reads
:func:`last_good_read`), and the ``reminders.sync`` schedule when ``[source] every`` is set.

Example::

    result = sync_source(service, config)        # {"rows": 120, "invoices": 100, "new": 3, ...}
    last_good_read(store, config.name)["started_at"]   # the watermark: data at least this fresh
"""

from __future__ import annotations

import logging
from typing import Any

from ..errors import ImportRejected
from ..store import Store
from . import capfence
from .service import ReminderService
from .sources.database import SourceConfig, SourceProblem, SourceRejected, SourceUnavailable, read_source

__all__ = ["SYNC_TASK", "last_good_read", "recent_reads", "sync_source"]

log = logging.getLogger("oncebeat.reminders")
SYNC_TASK = "reminders.sync"


def _record(store: Store, config: SourceConfig, started_at: Any, now: Any, rows: int, outcome: str,
            error: str | None) -> None:
    with store.transaction() as tx:
        tx.run("record_source_read", source=config.name, started_at=started_at, read_at=now, rows=rows,
               outcome=outcome, error=None if error is None else error[:2000])


def sync_source(service: ReminderService, config: SourceConfig, *, quiet: bool = False) -> dict[str, int]:
    """Read ``config`` once and apply it (all or nothing), recording the read in ``source_reads``.

    A read that fails or is refused is logged as a warning (``reminders.source_failed``/``_rejected``), at INFO
    with ``quiet`` (``oncebeat sync`` prints the error itself).

    Returns:
        ``{"rows", "customers", "invoices", "new", "updated", "kept paid", "stale", "payments", "marked_paid"}``.
    Raises:
        SourceUnavailable: the source could not be read (recorded ``failed``; nothing applied).
        SourceRejected: problems, each named by query, row key and column (recorded ``rejected``; nothing
            applied), a payment naming an invoice oncebeat does not know among them.
    """
    store, clock = service.store, service.clock
    level = logging.INFO if quiet else logging.WARNING
    started_at = clock.now()
    today = started_at.astimezone(service.policy.zone).date()
    try:
        read = read_source(config, today=today)
    except SourceUnavailable as exc:
        _record(store, config, started_at, clock.now(), 0, "failed", str(exc))
        log.log(level, "source %s not read: %s", config.name, exc, extra={"event": "reminders.source_failed"})
        raise
    except SourceRejected as exc:
        _record(store, config, started_at, clock.now(), exc.rows, "rejected", str(exc))
        log.log(level, "source %s read refused: %s", config.name, exc, extra={"event": "reminders.source_rejected"})
        raise
    try:
        with store.transaction() as tx:
            counts = service.upsert(read.customers, read.invoices, tx=tx, watermark=None,  # source_reads is its own
                                    payment_source=capfence.sql_source(config.name))
            paid = service.apply_payments(read.payments, tx=tx, watermark=None) if read.payments else {"marked_paid": 0}
            tx.run("record_source_read", source=config.name, started_at=started_at, read_at=clock.now(),
                   rows=read.rows, outcome="ok", error=None)
    except ImportRejected as exc:  # payments against the database: an unknown invoice, a date before issue
        problems = [SourceProblem(query="payments", row=None, column=None, message=p) for p in exc.problems]
        rejected = SourceRejected(problems, read.rows)
        _record(store, config, started_at, clock.now(), read.rows, "rejected", str(rejected))
        raise rejected from None
    result = {"rows": read.rows, **counts, "payments": len(read.payments), "marked_paid": paid["marked_paid"]}
    log.info("source %s read: %s", config.name, ", ".join(f"{k} {v}" for k, v in result.items()),
             extra={"event": "reminders.source_read"})
    return result


def last_good_read(store: Store, source: str) -> dict[str, Any] | None:
    """The newest applied read of ``source`` (a :attr:`SourceConfig.name`), or None: ``started_at`` is the
    freshness watermark (the snapshot's start, UTC), ``read_at`` when it was applied, ``rows``."""
    with store.transaction() as tx:
        rows = tx.run("last_good_source_read", source=source)
    return dict(rows[0]) if rows else None


def recent_reads(store: Store, limit: int = 20) -> list[dict[str, Any]]:
    """The newest ``limit`` reads of every source, newest first (``outcome``: ok, rejected, failed)."""
    with store.transaction() as tx:
        return [dict(r) for r in tx.run("recent_source_reads", limit=limit)]
