"""The reminder application on the engine: two tasks and one schedule.

- ``reminders.scan`` — enqueued by the clock at each occurrence of the policy's
  schedule; its business date is the occurrence's local date in the
  schedule's zone (G7), never the host's date.
- ``reminders.send`` — one job per pending reminder, created by the scan.
- ``reminders.send_notice`` — one job per grouped notice (``group = "customer"``), enqueued by the send jobs of the
  rows it groups (:mod:`.notices.grouping`).
- ``reminders.notify_final`` — the internal notice of a sent final stage (``[reminders] notify_final``,
  :mod:`.notices.notify`), enqueued in the transaction that records that stage sent.
- ``reminders.report_run`` — computes one stored run of the stage-effectiveness report over one snapshot
  (:mod:`.reports.runs`); the scan asks for the default range's run when it has finished, the Reports page and its
  Recompute button when theirs is missing or stale.
- ``reminders.sync`` — with a ``[source]`` whose ``every`` is set: reads the team's own database on that interval
  (:mod:`.syncing`). The scan reads it too, first; a source that cannot be read is logged and recorded in
  ``source_reads`` and the scan goes on with the data it has.
"""

from __future__ import annotations

import logging

from ..app import App
from ..errors import Discard, StoreError
from ..worker import JobContext
from . import metrics as reminder_metrics
from .names import SCAN_BACKFILL, backfill_folded_names
from .notices import grouping
from .notices.grouping import SEND_NOTICE_TASK
from .notices.notify import NOTIFY_MAX_ATTEMPTS, NOTIFY_TASK, send_notification
from .reports import default_range
from .reports.runs import RUN_MAX_ATTEMPTS, RUN_TASK, RunParams, compute_run, newest_run, request_run
from .service import SCAN_TASK, SEND_MAX_ATTEMPTS, SEND_TASK, ReminderService
from .sources.database import SourceConfig, SourceRejected, SourceUnavailable
from .syncing import SYNC_TASK, sync_source

__all__ = ["build_app", "SCHEDULE_KEY"]

log = logging.getLogger(__name__)

SCHEDULE_KEY = "reminders"
SYNC_SCHEDULE_KEY = "reminders.sync"


def _sync_quietly(service: ReminderService, source: SourceConfig) -> None:
    """Read the team's database; a read that fails or is refused is already logged and recorded in
    ``source_reads`` (:func:`.syncing.sync_source`): the caller goes on with the data it has."""
    try:
        sync_source(service, source)
    except (SourceUnavailable, SourceRejected):
        pass


def build_app(service: ReminderService, app: App | None = None) -> App:
    """Register the scan and send tasks and the ``reminders`` schedule from ``service.policy``."""
    app = app or App()
    policy = service.policy
    reminder_metrics.install()

    @app.task(SCAN_TASK, max_attempts=10)
    def scan(ctx: JobContext) -> None:
        occurrence = ctx.occurrence()
        if occurrence is None:
            raise Discard("reminders.scan needs an occurrence; run `oncebeat trigger reminders` "
                          "instead of enqueueing it")
        current = service.reread_policy()  # an edited oncebeat.toml: its [source] too
        if current.source is not None:
            _sync_quietly(service, current.source)
        service.scan(occurrence_id=occurrence["id"], business_date=occurrence["business_date"],
                     source=ctx.source, fire_at=occurrence["fire_at"])
        # Customers whose name has no stored fold yet (a book migrated to 0024, renamed ones): a bounded share
        # per scan, in transactions of their own after the scan's (oncebeat.reminders.names).
        backfill_folded_names(service.store, at_most=SCAN_BACKFILL)
        # The morning's Reports page: the default range's stage-effectiveness run for this business date, asked for
        # after the scan's transaction (a run only reads; the unique key keeps it to one at a time), once per business
        # date: a schedule scanning every 15 minutes would otherwise compute the report 96 times a day (the page asks
        # for a fresher one when it is looked at). Never fails the scan: a scan retried for it would redo its work,
        # and the page asks again when it finds no run.
        first, last = default_range(occurrence["business_date"], None, None)
        params = RunParams(first=first, last=last, as_of=occurrence["business_date"])
        try:
            if newest_run(service.store, params) is None:
                request_run(service.store, params, clock=ctx.clock, source=ctx.source)
        except StoreError:
            log.warning("scan for %s: the stage-effectiveness run was not asked for", occurrence["business_date"],
                        exc_info=True, extra={"event": "reminders.report_run_not_requested"})

    @app.task(SEND_TASK, max_attempts=SEND_MAX_ATTEMPTS)
    def send(ctx: JobContext, reminder_id: int) -> None:
        service.send(ctx, reminder_id)

    @app.task(SEND_NOTICE_TASK, max_attempts=SEND_MAX_ATTEMPTS)
    def send_notice(ctx: JobContext, notice_id: int) -> None:
        grouping.send_notice(service, ctx, notice_id)

    @app.task(RUN_TASK, max_attempts=RUN_MAX_ATTEMPTS)
    def report_run(ctx: JobContext, run_id: int) -> None:
        compute_run(service.store, run_id, clock=ctx.clock)

    @app.task(NOTIFY_TASK, max_attempts=NOTIFY_MAX_ATTEMPTS)
    def notify_final(ctx: JobContext, reminder_id: int, to: str) -> None:  # [reminders] notify_final
        send_notification(ctx, store=service.store, mailer=service.mailer, sender=service.policy.sender,
                          message_domain=service.message_domain, reminder_id=reminder_id, to=to)

    source = policy.source
    if source is not None and source.every is not None:
        @app.task(SYNC_TASK, max_attempts=1)
        def sync(ctx: JobContext) -> None:
            _sync_quietly(service, source)

        app.schedule(SYNC_SCHEDULE_KEY, f"every {int(source.every)}s", tz=policy.tz, task=SYNC_TASK,
                     catchup="none", overlap="skip")
    app.schedule(SCHEDULE_KEY, policy.scan_schedule, tz=policy.tz, task=SCAN_TASK, catchup=policy.catchup,
                 catchup_window=policy.catchup_window, overlap=policy.overlap)
    if policy.retention is not None:
        app.retention(policy.retention, cron=policy.retention_cron, tz=policy.tz)
    return app
