"""Database operations of the reminder domain: import, payments, the scan, the send, reports.

The scan (G5) is one set-based ``INSERT … SELECT … ON CONFLICT DO NOTHING``
into ``reminders`` (``UNIQUE(invoice_id, stage)``) plus one set-based insert
of the send jobs, in one transaction, one scan at a time: running it twice,
concurrently, or from a second trigger creates nothing new. Lower stages
superseded by a higher one are recorded in that row (``superseded_stages``).

The send (G4, G6) re-reads the invoice, skips it when no longer open, and
sends inside ``effect("reminder:<id>")`` with a deterministic Message-ID;
every reminder ends ``sent``, ``skipped``, ``failed``, ``in_doubt`` or ``held``: a hold (:mod:`.holds`) covering
the invoice is checked by the scan and again by the send job just before sending, as payment is.

A mail outage is a delay, not a failure: a session-level failure (connection refused or timed out, TLS or
login refused, any 4xx reply) says nothing about the reminder, so its send job is snoozed with backoff
(:class:`~oncebeat.errors.Snooze`: no attempt used up) while ``policy.outage_retry`` (default 24 h) has not
passed since the first refusal (``reminders.deferred_since``); after that it ends ``failed``. A 5xx for the
recipient fails it at once. ``retry_failed`` puts failed reminders back (never a sent or in-doubt one).

Relay limits are delays too: with ``policy.max_per_minute`` each send takes a permit of the relay's rate
limit (:meth:`ReminderService.relay_limit`, counted over every worker by the database) on its open connection,
right before ``MAIL FROM``; none free snoozes the job until one frees (:class:`~oncebeat.errors.RateLimited`,
not counted into ``outage_retry``). A relay refusing one more connection
(:class:`~oncebeat.errors.ConnectionCapped`) shrinks the worker's SMTP pool and snoozes the send briefly.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from email.headerregistry import Address
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .. import audit, telemetry
from ..effects import EffectAttempt, EffectLedger
from ..errors import (
    ConfigError,
    ConnectionCapped,
    Discard,
    EffectInDoubt,
    EffectKeyConflict,
    ImportRejected,
    JobSignal,
    LeaseLost,
    OncebeatError,
    PermanentMailError,
    Snooze,
    TransientMailError,
)
from ..mail import (
    Mailer,
    address_problem,
    make_message_id,
    parse_address,
    sanitize_header_text,
)
from ..mail.compose import compose_message
from ..provenance import Source, current_source
from ..queue import Queue
from ..ratelimit import RateLimit
from ..store import Json, Store, Tx
from ..timebase import Clock
from . import capfence
from .bulk import BulkOptions, import_invoices, import_payments
from .calendar import BusinessCalendar, stage_cutoffs
from .holds import hold_scan_rows, list_holds
from .importing import InvoiceImport, RowProblem
from .ladder_calendars import ladder_calendar
from .ladders import LadderSettings
from .model import (
    Customer,
    Invoice,
    Payment,
    reminder_id_of_key,
    reminder_key,
    superseded_stages,
    with_superseded,
)
from .names import fold_text, matching_customers
from .notices import grouping
from .notices.attachments import AttachmentError
from .notices.digest import composed_facts, message_facts
from .notices.escalation import StageEscalation, escalation_of
from .notices.fees import FEE_HEADER, Fee, fee_for
from .notices.notify import after_sent
from .notices.sending import record_attachments, send_frozen, with_attachments
from .pinning import LadderVersion, open_versions, pin_due, stage_rows, sync_versions, versions_by_id
from .policy import DEFAULT_CONFIG_NAME, Policy, format_duration, load_policy
from .records import mark_paid, write_customers, write_invoices
from .render import RenderedEmail, Renderer
from .reports.receivables import compact_receivable_moves

if TYPE_CHECKING:
    from ..worker import JobContext

__all__ = ["ReminderService", "ScanResult", "SEND_TASK", "SCAN_TASK", "stage_cutoffs"]

log = logging.getLogger("oncebeat.reminders")

SCAN_TASK = "reminders.scan"
SEND_TASK = "reminders.send"
SEND_MAX_ATTEMPTS = 8  # backoff 2 s … ~4 min; then the reminder is recorded failed, never left pending
OUTAGE_FIRST_WAIT = 5.0  # seconds before the first retry of a reminder refused by a mail outage
CAPPED_WAIT = 0.5  # seconds before a send refused one more SMTP connection tries again (over a kept one)
OUTAGE_MAX_WAIT = 900.0  # the longest wait between two tries during an outage (a recovery is seen within 15 min)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def outage_wait(waited: float, left: float) -> float:
    """Seconds until the next try of a reminder that has waited out a mail outage for ``waited`` seconds.

    Half the time waited so far (so tries thin out geometrically, x1.5), at least :data:`OUTAGE_FIRST_WAIT`,
    at most :data:`OUTAGE_MAX_WAIT`, and never past the ``left`` seconds of ``outage_retry``.
    """
    return max(1.0, min(max(OUTAGE_FIRST_WAIT, waited / 2), OUTAGE_MAX_WAIT, left))


@dataclass(frozen=True, kw_only=True, slots=True)
class ScanResult:
    """One scan's outcome: ``pending`` reminders created (``held`` of them recorded held at once), ``skipped``
    lower stages recorded superseded."""

    business_date: date
    pending: int
    skipped: int
    held: int = 0  # reminders created held (a hold covers their invoice on this date): no send job


class ReminderService:
    """Reminder operations on ``store`` under ``policy``; ``mailer`` is needed only to send."""

    def __init__(self, store: Store, policy: Policy, *, clock: Clock, mailer: Mailer | None = None,
                 renderer: Renderer | None = None) -> None:
        self.store = store
        self.policy = policy
        self.clock = clock
        self.mailer = mailer
        self.renderer = renderer or Renderer(policy.templates, company=policy.company,
                                             fallback_locale=policy.fallback_locale)
        sender = parse_address(policy.sender, field="[sender] from")
        self.message_domain = sender.domain or "oncebeat.invalid"
        self._send_at_policies: dict[str, Policy] = {}
        self._ladder_mail: dict[int, tuple[str, str | None, Renderer]] = {}  # versions never change: kept
        # version id -> its settings (stages, calendar, cap, group, escalation…): a version never changes, so each
        # is read once per process (_settings_of) by every reader of a pinned ladder's settings
        self._ladder_settings: dict[int, LadderSettings] = {}
        self._policy_file: Path | None = None  # follow_policy_file: the file re-read when its bytes change
        self._policy_digest: str | None = None

    def use_policy(self, policy: Policy) -> None:
        """Go on under ``policy`` (an edited file picked up by a running process): the next scan records the
        changed ladders as new versions; invoices already pinned keep theirs."""
        self.policy = policy
        self._send_at_policies.clear()

    def follow_policy_file(self, path: Path | None) -> None:
        """Re-read ``path`` (None: ``./oncebeat.toml``), the file this service's policy came from, whenever its
        bytes change (:meth:`current_policy`): a running worker's next scan and the dashboard's ladders and apply
        button use the file as it is on disk, never the one a process read at start. Without it two processes
        reading different files would each record their settings as the ladder's newest version in turn."""
        self._policy_file = Path(path) if path is not None else Path(DEFAULT_CONFIG_NAME)
        self._policy_digest = _file_digest(self._policy_file)

    def current_policy(self) -> Policy:
        """The policy as the followed file says now (:meth:`follow_policy_file`; unchanged bytes: no read of more
        than the file). A changed, valid file is used from here on (:meth:`use_policy`).

        Raises:
            ConfigError: the file changed and is not valid; the service goes on under the settings it had.
        """
        path = self._policy_file
        if path is None:
            return self.policy
        digest = _file_digest(path)
        if digest != self._policy_digest:
            self.use_policy(load_policy(None if path == Path(DEFAULT_CONFIG_NAME) else path))
            self._policy_digest = digest
            log.info("policy file %s changed: re-read (ladders record a new version where they changed)", path,
                     extra={"event": "reminders.policy_reloaded"})
        return self.policy

    def reread_policy(self) -> Policy:
        """:meth:`current_policy` for a scan: a changed file that cannot be used is logged (the doctor's log
        check and the process's output show it) and the scan goes on under the settings it had."""
        try:
            return self.current_policy()
        except ConfigError as exc:
            log.error("the policy file changed but cannot be used (%s); going on under the settings read before: "
                      "fix the file", exc, extra={"event": "reminders.policy_invalid"})
            return self.policy

    # --- import -------------------------------------------------------------------------------
    def apply_import(self, data: InvoiceImport, *, skip_invalid: bool = False, reopen: bool = False,
                     watermark: str | None = "csv") -> dict[str, int]:
        """Upsert customers and invoices by invoice number, all in one transaction.

        A paid invoice stays paid when a row without newer payment information says otherwise (see
        :meth:`upsert`); ``reopen`` lets the rows' statuses win.

        Raises:
            ImportRejected: ``data`` has problems and ``skip_invalid`` is False (nothing applied).
        Returns:
            ``{"customers": n, "invoices": n, "new": n, "updated": n, "kept paid": n, "rejected": n}``.
        """
        if data.problems and not skip_invalid:
            raise ImportRejected(f"{len(data.problems)} problem(s) in {data.source or 'the file'}; nothing imported",
                                 [str(p) for p in data.problems])
        return self.upsert(data.customers, data.invoices, reopen=reopen, watermark=watermark) \
            | {"rejected": len(data.rejected_lines)}

    def import_invoices_csv(self, path: Path, options: BulkOptions) -> dict[str, int]:
        """Stream the invoice CSV at ``path`` into the database in one transaction, in bounded memory
        (:func:`oncebeat.reminders.bulk.import_invoices`: all or nothing, or ``options.skip_invalid``).

        Raises:
            ImportRejected: problems without ``skip_invalid`` (nothing applied), or the file cannot be read.
        """
        return import_invoices(self.store, path, options, now=self.clock.now())

    def import_payments_csv(self, path: Path, options: BulkOptions) -> dict[str, int]:
        """Stream the payments CSV at ``path`` into the database in one transaction, in bounded memory
        (:func:`oncebeat.reminders.bulk.import_payments`): every problem named by file, line and column.

        Raises:
            ImportRejected: problems without ``skip_invalid`` (nothing applied), or the file cannot be read.
        """
        return import_payments(self.store, path, options, now=self.clock.now())

    def upsert(self, customers: Sequence[Customer], invoices: Sequence[Invoice], *,
               reopen: bool = False, tx: Tx | None = None, watermark: str | None = "api",
               payment_source: str | None = None) -> dict[str, int]:
        """Insert or update customers and invoices in one transaction; returns counts.

        Customers merge and statuses move as :mod:`oncebeat.reminders.records` says for every source: a customer
        field that is None is kept; a status moves forward only (open → paid, void, uncollectible; uncollectible
        → paid, void), and a recorded payment is undone only by ``reopen`` or a row saying open with a
        ``status_on`` after the payment (G6). A refused move is counted ``stale`` (``kept paid`` when it left a
        paid invoice paid); the row's other fields (amount, dates, customer) are updated. The rule is checked in
        the SQL on the row as written, so a payment committed concurrently is never overwritten either.

        A new invoice's ``entered_at`` is stamped under the scan lock (``scan_lock``; on SQLite the write lock),
        so a scan that starts after that instant reads the invoices after this commit: ``check`` holds it
        accountable for them, and holds no earlier scan accountable. A scan in flight delays the import.

        ``tx``: write in the caller's transaction (the HTTP API stores its idempotency key in it).
        ``watermark``: the source whose payment-freshness watermark this refreshes (:mod:`.capfence`; ``api``,
        ``stripe``), None: none (the SQL source records its reads in ``source_reads``).
        ``payment_source``: what the written invoices record as the source of their payment data (the last
        writer's; the fence waits on that source's watermark), by default ``watermark`` (``sql NAME`` for the SQL
        source).
        """
        if tx is None:
            with self.store.transaction() as own:
                return self.upsert(customers, invoices, reopen=reopen, tx=own, watermark=watermark,
                                   payment_source=payment_source)
        tx.run("scan_lock")
        now = self.clock.now()
        write_customers(tx, customers)
        done = write_invoices(tx, invoices, reopen=reopen, now=now, source=payment_source or watermark)
        if watermark is not None and invoices:
            capfence.touch_watermark(tx, watermark, now=now, detail=f"{len(invoices)} invoice(s)")
        return {"customers": len(customers), "invoices": len(invoices), "new": done.new, "updated": done.updated,
                "kept paid": done.kept_paid, "stale": done.stale}

    def apply_payments(self, payments: Sequence[Payment], problems: Sequence[RowProblem] = (), *,
                       tx: Tx | None = None, watermark: str | None = "api") -> dict[str, int]:
        """Mark invoices paid (one transaction) under the transition rule (:func:`.records.mark_paid`). Invoices
        already paid or void are counted, not errors.

        Every problem of the file is reported at once: the rows that could not be read (``problems``), the
        payments that name an unknown invoice and those dated before their invoice was issued.

        ``tx``: apply in the caller's transaction (the HTTP API stores its idempotency key in it).

        Raises:
            ImportRejected: any such problem (nothing applied).
        """
        if tx is None:
            with self.store.transaction() as own:
                return self.apply_payments(payments, problems, tx=own, watermark=watermark)
        now = self.clock.now()
        found = [str(p) for p in problems] + [f"invoice {payments[n].number!r}: {text}" if column == "paid_on"
                                              else text for n, column, text in self.unpayable(payments, tx)]
        if found:
            raise ImportRejected(f"{len(found)} problem(s) in the payments file; nothing applied. Import the "
                                 "invoices first or fix the numbers, and check the dates (and --date-format).",
                                 found)
        paid = mark_paid(tx, [(p.number, p.paid_on) for p in payments], now=now)
        if watermark is not None:  # the payment-freshness fence's watermark (capfence)
            capfence.touch_watermark(tx, watermark, now=now, detail=f"{len(payments)} payment(s)")
        return {"payments": len(payments), "marked_paid": paid, "unchanged (already closed)": len(payments) - paid}

    def unpayable(self, payments: Sequence[Payment], tx: Tx) -> list[tuple[int, str, str]]:
        """What is wrong with readable payments against the database, read in ``tx``: ``(index in payments,
        column, sentence)`` for each payment naming an unknown invoice or dated before its invoice was issued."""
        known = {r["number"]: r for r in tx.run("invoice_states", numbers=[p.number for p in payments])} \
            if payments else {}
        found = []
        for n, p in enumerate(payments):
            invoice = known.get(p.number)
            if invoice is None:
                found.append((n, "invoice_number", f"unknown invoice number {p.number!r}"))
            elif p.paid_on < invoice["issued_on"]:
                found.append((n, "paid_on", f"column paid_on: '{p.paid_on.isoformat()}' is before the invoice was "
                                            f"issued ({invoice['issued_on'].isoformat()})"))
        return found

    # --- scan ---------------------------------------------------------------------------------
    def _stage_rows(self, tx: Tx, business_date: date, fire_at: datetime | None,
                    versions: Sequence[LadderVersion]) -> list[dict[str, Any]]:
        """The scan's stage rows of each ladder version: one set for the schedule's date, or one per customer zone
        (send_zone = customer, each ladder's business date from its own send_at)."""
        if self.policy.send_zone != "customer":
            return [row for v in versions
                    for row in stage_rows(v, business_date, None, ladder_calendar(self.policy, v.settings))]
        rows: list[dict[str, Any]] = []
        zones = [r["tz"] for r in tx.run("customer_zones", default_tz=self.policy.tz)]
        for v in versions:
            policy = self._policy_at(v.settings.send_at)
            for zone in zones:
                try:
                    day = policy.business_date(fire_at, zone, business_date) if fire_at else business_date
                except (ZoneInfoNotFoundError, ValueError):
                    # An unknown zone stored for a customer: counted in the schedule's zone, never dropped (G6).
                    log.warning("customer zone %r is not an IANA zone; using %s", zone, self.policy.tz)
                    day = policy.business_date(fire_at, None, business_date) if fire_at else business_date
                rows += stage_rows(v, day, zone, ladder_calendar(self.policy, v.settings))
        return rows

    def _policy_at(self, send_at: str) -> Policy:
        """The policy with a ladder's ``send_at`` (its business dates under send_zone = customer)."""
        if send_at == self.policy.send_at:
            return self.policy
        if send_at not in self._send_at_policies:
            self._send_at_policies[send_at] = replace(self.policy, send_at=send_at)
        return self._send_at_policies[send_at]

    def _local_day(self, business_date: date, fire_at: datetime | None) -> Callable[[str | None], date]:
        """A customer's calendar date at ``fire_at`` (its zone, else the schedule's): when its first stage may
        have come, so an invoice is pinned no later than the scan that creates its first stage."""
        if self.policy.send_zone != "customer" or fire_at is None:
            return lambda _tz: business_date

        def day(tz: str | None) -> date:
            try:
                return fire_at.astimezone(ZoneInfo(tz or self.policy.tz)).date()
            except (ZoneInfoNotFoundError, ValueError):
                return fire_at.astimezone(self.policy.zone).date()
        return day

    def _pin_and_ladders(self, tx: Tx, business_date: date, fire_at: datetime | None,
                         source: Source) -> list[LadderVersion]:
        """Record changed ladder versions, pin the invoices starting dunning, and return the versions to run."""
        now = self.clock.now()
        current = sync_versions(tx, self.policy, now=now, source=source)
        day_of = self._local_day(business_date, fire_at)
        # The latest calendar date any customer can have at fire_at: UTC+14 is at most a day ahead.
        latest = business_date + timedelta(days=1) if self.policy.send_zone == "customer" else business_date
        pin_due(tx, self.policy, current, day_of, latest)
        return open_versions(tx)

    def scan(self, *, occurrence_id: int, business_date: date, source: Source, tx: Tx | None = None,
             fire_at: datetime | None = None) -> ScanResult:
        """Create the newly-due reminders for ``business_date`` and their send jobs (one transaction).

        ``fire_at`` is the occurrence's instant (UTC); with ``send_zone = "customer"`` each customer's business
        date is computed from it (:meth:`Policy.business_date`), and ``business_date`` (the schedule's) only
        names the scan.

        Each invoice follows the ladder version it is pinned to (:mod:`.pinning`): the scan first records changed
        ladders as new versions and pins the invoices whose first stage came to their matching ladder's current
        version (README "Several ladders"). Which stage an invoice gets follows its version's ``collapse``:
        ``next`` (one stage per invoice and run, the lowest unsent one, gaps between stages kept unless the
        version's ``spacing`` is ``nominal``) or ``highest`` (the highest due stage; the lower ones that
        became due at the same time are recorded skipped, superseded, in that row's ``superseded_stages``).
        Either way a scan never creates a stage at or below the highest one an invoice already has, and scans run
        one at a time (``scan_lock``), so a superseded stage is never sent later.

        Returns:
            :class:`ScanResult`: ``pending`` reminders created, ``skipped`` = superseded stages recorded.
        """
        if tx is None:
            self.reread_policy()  # an edited oncebeat.toml: changed ladders are recorded as new versions below
            with self.store.transaction() as own:
                return self.scan(occurrence_id=occurrence_id, business_date=business_date, source=source, tx=own,
                                 fire_at=fire_at)
        now = self.clock.now()
        tx.run("scan_lock")  # one scan at a time: each sees what the one before it recorded
        versions = self._pin_and_ladders(tx, business_date, fire_at, source)
        pending = superseded = 0
        tx.run("scan_probe_plan", on=False)  # the inserts probe reminders by index, never quadratic (the SQL says why)
        for collapse in ("next", "highest"):  # each invoice's stages from its pinned ladder version only
            stages = self._stage_rows(tx, business_date, fire_at,
                                      [v for v in versions if v.settings.collapse == collapse])
            if not stages:
                continue
            max_cutoff = max(s["cutoff"] for s in stages)
            query = "scan_insert_next_reminders" if collapse == "next" else "scan_insert_reminders"
            # One row (PostgreSQL) or one per reminder (SQLite): reminders created, superseded stages recorded.
            rows = tx.run(query, stages=Json(stages), max_cutoff=max_cutoff, default_tz=self.policy.tz,
                          occurrence_id=occurrence_id, now=now)
            pending += sum(int(r["pending"]) for r in rows)
            superseded += sum(int(r["superseded"] or 0) for r in rows)
        tx.run("scan_probe_plan", on=True)
        # A stage a hold covers is recorded held now, before any send job exists for it (G9).
        held, _ = hold_scan_rows(tx, now)
        # Also re-enqueues pending reminders whose send job was discarded (G6: nothing left pending).
        Queue(self.store, clock=self.clock, source=source).enqueue_select(
            tx, "pending_send_jobs", task=SEND_TASK, queue="default", max_attempts=SEND_MAX_ATTEMPTS)
        compact_open_totals(tx)  # the aging's summary rows, folded once a day (reminders 0022)
        compact_receivable_moves(tx)  # DSO's and CEI's, the same (reminders 0023)
        result = ScanResult(business_date=business_date, pending=pending, skipped=superseded, held=held)
        log.info("scan for %s: %d reminders to send, %d superseded, %d held", business_date,
                 result.pending - result.held, result.skipped, result.held,
                 extra={"event": "reminders.scan", "occurrence_id": occurrence_id})
        return result

    # --- send ---------------------------------------------------------------------------------
    def send(self, ctx: JobContext, reminder_id: int) -> str:
        """The send task's body; returns the reminder's final state. ``ctx`` is a JobContext."""
        rows = self.store.read("get_reminder_for_send", id=reminder_id)
        if not rows:
            raise Discard(f"reminder {reminder_id} does not exist")
        if rows[0]["state"] in ("pending", "deferred") and grouping.groups(self, rows[0]):  # group = "customer":
            joined = grouping.join_notice(self, reminder_id, rows[0])  # its notice's job sends it (notices.grouping)
            if joined is not None:
                return joined
        try:
            state = self._send(ctx, reminder_id, rows[0])
            if rows[0]["state"] in ("pending", "deferred"):  # this send decided it (not an earlier one)
                telemetry.emit("reminder.finished", {"stage": rows[0]["stage"], "state": state})
            return state
        except (JobSignal, LeaseLost):  # Retry, Snooze, Discard steer the job; LeaseLost: this attempt no longer
            # owns the job. None is a failure of this attempt: record nothing here
            raise
        except Exception as exc:
            # Never leave a reminder pending when its job gives up (G6): the last attempt records it failed.
            if ctx.job.attempt >= ctx.job.max_attempts:
                return self._finish(reminder_id, "failed", f"gave up after {ctx.job.attempt} attempts: "
                                    f"{type(exc).__name__}: {exc}")
            raise

    def _send(self, ctx: JobContext, reminder_id: int, r: dict[str, Any]) -> str:
        if r["state"] == "deferred":  # deferred by the cap (not final): decided again now, as a pending one
            capfence.wake(self.store, clock=self.clock, reminder_id=reminder_id)
            r = {**r, "state": "pending"}
        if r["state"] != "pending":
            return str(r["state"])  # already decided by an earlier job: nothing to do
        key = reminder_key(reminder_id)
        # If an earlier attempt started the delivery, the ledger decides (sent, in doubt or busy), whatever
        # happened to the invoice since: calling it skipped could hide an email that went out. The ledger's state
        # of the key was read with the row (get_reminder_for_send); the claim decides in the end.
        untried = r["effect_state"] in (None, "failed")
        if r["status"] != "open" and untried:
            reason = f"invoice {r['status']}" + (f" on {r['paid_on'].isoformat()}" if r["paid_on"] else "")
            return self._finish(reminder_id, "skipped", reason)
        if r["covering_hold_id"] is not None and untried:  # held before any attempt reached the server
            hold = self.store.read("covering_hold", invoice_id=r["invoice_id"], business_date=r["business_date"])
            if hold:
                return self._hold(reminder_id, hold[0])
        problem = address_problem(r["email"])
        if problem is not None:  # no attempt can ever deliver it: failed at once, not retried for hours (G6)
            return self._finish(reminder_id, "failed", f"undeliverable address {r['email']!r}: {problem}")
        wait = self._window_wait(r)
        if wait > 0 and untried:  # no attempt reached the server: it may wait
            calendar = self._calendar_of(r.get("ladder_version_id"))
            raise Snooze(f"outside the send window ({calendar.describe() if calendar else ''})"
                         f"; it opens in {format_duration(wait)}", delay=wait)
        if untried:  # before any attempt reached the server (issue 23 4-5):
            # stale payment data, or a Stripe payment processing: wait (Snooze), the reason on the row
            capfence.check_fence(self.store, self.policy, clock=self.clock, reminder_id=reminder_id,
                                  invoice_id=r["invoice_id"])
            capfence.processing_wait(self.store, clock=self.clock, reminder_id=reminder_id,
                                     since=r["payment_processing_since"])
            capfence.claim_place(self.store, self.policy, clock=self.clock, reminder_id=reminder_id, r=r,
                                 ladder=self._settings_of(r.get("ladder_version_id")))
        rendered, message_id = self._render(r)
        sender, reply_to, _ = self._ladder_mail_of(r.get("ladder_version_id"))
        esc, fee = self._escalation_and_fee(r)  # CC, BCC and the late fee of this stage (notices.escalation)
        bcc = esc.bcc if esc else ()
        # The RFC 5322 bytes directly (the email package's EmailMessage cost ~1 ms of CPU per reminder), and
        # their envelope from the same parsed addresses (the mailer need not parse the header block back), and the
        # header facts the proof of notice keeps (mail.compose: not parsed back either).
        composed = compose_message(sender=sender, to=_mailbox(r["name"], r["email"]),
                                   subject=rendered.subject, text=rendered.text, html=rendered.html,
                                   message_id=message_id, reply_to=reply_to, date=self.clock.now(),
                                   headers={"X-Oncebeat-Invoice": r["number"], "X-Oncebeat-Stage": str(r["stage"]),
                                            "X-Oncebeat-Reminder": str(reminder_id)}
                                   | ({FEE_HEADER: fee.header()} if fee else {}),
                                   cc=esc.cc if esc else (), bcc=bcc)
        data, envelope = composed.data, composed.envelope
        try:  # the invoice PDF / statement, built once: a retry sends the message as first frozen (notices.sending)
            data = with_attachments(self.store, self.clock, self.policy.attachments, r, key=key, data=data,
                                    message_id=message_id, stages=self._escalations_of(r.get("ladder_version_id"))[0],
                                    company=self.policy.company,
                                    fallback_locale=self.policy.fallback_locale)
        except AttachmentError as exc:  # never send a reminder without the file it promises: failed, visibly
            return self._finish(reminder_id, "failed", str(exc))
        mailer = self.mailer
        if mailer is None:
            raise Discard("no SMTP_URL configured for this worker")
        relay = self.relay_limit()

        def deliver(attempt: EffectAttempt) -> dict[str, Any]:
            # attempt.frozen: the message as rendered at the key's first attempt; a retry or an approved
            # resend sends exactly those bytes, whatever happened to the invoice since (G4, outbox).
            assert attempt.frozen is not None
            if attempt.taken_over:  # an earlier attempt failed or died before its point of no return: still due?
                now_rows = self.store.read("get_reminder_for_send", id=reminder_id)
                if now_rows and now_rows[0]["status"] != "open":
                    raise _InvoiceClosed(now_rows[0])  # recorded failed: nothing was sent
                held = self.store.read("covering_hold", invoice_id=r["invoice_id"], business_date=r["business_date"])
                if held:
                    raise _Held(held[0])  # placed since the first attempt: nothing was sent
            record_attachments(self.store, reminder_id=reminder_id, frozen=attempt.frozen, now=self.clock.now())
            reply = send_frozen(ctx, mailer, attempt, data=data, envelope=envelope, bcc=bcc, relay=relay)
            # The sent bytes' SHA-256 and headers stay in the result (the ledger drops the bytes once done): the
            # proof of notice names exactly what went out (notices.evidence). A key longer than the others: jsonb
            # sorts keys by length, so the doctor's 200-character glimpse of a result still shows the Message-ID.
            # The builder's own header facts when these are its bytes (no attachment, no earlier frozen copy).
            return {"message_id": message_id, "reply": reply,
                    "message_facts": composed_facts(composed) if attempt.frozen == composed.data
                    else message_facts(attempt.frozen)}

        recorded: list[bool] = []

        def mark_sent(tx: Tx, result: Any) -> None:  # commits with the effect's done: one transaction per email
            self._finish(reminder_id, "sent", None, message_id=message_id, sent_at=self.clock.now(), tx=tx,
                         sent_row=r, facts=result.get("message_facts"), source=ctx.source)
            recorded.append(True)

        try:
            done = ctx.effect(key, deliver, payload={"invoice": r["number"], "stage": r["stage"], "to": r["email"]},
                       freeze=lambda: data, marks_point_of_no_return=True,
                       resource=mailer.reserved(), skip=False, on_done=mark_sent)
        except EffectInDoubt as exc:
            return self._finish(reminder_id, "in_doubt", str(exc), message_id=message_id)
        except _InvoiceClosed as closed:
            return self._finish(reminder_id, "skipped", closed.reason)
        except _Held as held_by:
            return self._hold(reminder_id, held_by.hold)
        except EffectKeyConflict as exc:  # e.g. the address changed after an attempt claimed the key
            return self._finish(reminder_id, "failed", str(exc))
        except PermanentMailError as exc:
            return self._finish(reminder_id, "failed", f"SMTP rejected: {exc}")
        except ConnectionCapped as exc:  # the relay refused one more connection: the pool shrank; not an outage
            raise Snooze(f"waiting for a free SMTP connection: {exc}", delay=CAPPED_WAIT) from exc
        except TransientMailError as exc:  # connect, TLS, auth or a 4xx: a mail outage, not this reminder's fault
            return self._wait_out_outage(reminder_id, exc)
        if recorded:
            return "sent"
        # Done by an earlier attempt or by a reconcile: its own transaction records the reminder (if still pending).
        return self._finish(reminder_id, "sent", None, message_id=message_id, sent_at=self.clock.now(), sent_row=r,
                            facts=done.get("message_facts") if isinstance(done, dict) else None, source=ctx.source)

    def _window_wait(self, r: dict[str, Any]) -> float:
        """Seconds until reminder row ``r`` may leave under ``[calendar] send_window`` (0: now): read in the
        customer's zone with ``send_zone = "customer"`` (an unknown one: the schedule's), else the schedule's. A
        catch-up after downtime or a retry after an outage thus never mails anyone at night or on a holiday."""
        calendar = self._calendar_of(r.get("ladder_version_id"))
        if calendar is None or calendar.send_window is None:
            return 0.0
        zone = self.policy.zone
        if self.policy.send_zone == "customer" and r.get("tz"):
            try:
                zone = ZoneInfo(r["tz"])
            except (ZoneInfoNotFoundError, ValueError):
                pass
        return calendar.window_wait(self.clock.now().astimezone(zone))

    def relay_limit(self) -> RateLimit | None:
        """The relay's rate limit from ``[delivery] max_per_minute`` (per ``rate_window``), keyed by the relay's
        host and port (``smtp:HOST:PORT``) so every worker sending to it shares one count; None: no limit."""
        if self.policy.max_per_minute is None or self.mailer is None:
            return None
        url = self.mailer.url
        return RateLimit(key=f"smtp:{url.host}:{url.port}", limit=self.policy.max_per_minute,
                         per_seconds=self.policy.rate_window)

    def _wait_out_outage(self, reminder_id: int, exc: TransientMailError) -> str:
        """Snooze the send (no attempt used up) until ``policy.outage_retry`` has passed since the first refusal;
        then record the reminder ``failed``. Returns the final state, or raises :class:`Snooze`."""
        now = self.clock.now()
        with self.store.transaction() as tx:
            row = tx.one("defer_reminder", id=reminder_id, reason=f"mail outage: {exc}"[:2000], now=now)
        if row is None:  # decided meanwhile by another job
            return str(self.store.read("get_reminder_for_send", id=reminder_id)[0]["state"])
        waited = (now - row["deferred_since"]).total_seconds()
        left = self.policy.outage_retry - waited
        if left <= 0:
            return self._finish(reminder_id, "failed", f"gave up after {format_duration(waited)} of mail outage "
                                f"(outage_retry {format_duration(self.policy.outage_retry)}): {exc}")
        log.warning("reminder %s: mail outage for %s, next try in %.0f s: %s", reminder_id, format_duration(waited),
                    outage_wait(waited, left), exc, extra={"event": "reminders.outage", "reminder_id": reminder_id})
        raise Snooze(f"mail outage (since {row['deferred_since'].isoformat()}): {exc}", delay=outage_wait(waited, left))

    def retry_failed(self, *, since: date | None = None, source: Source) -> list[int]:
        """An operator's retry: failed reminders become ``pending`` with a send job again (one transaction).

        ``since``: only reminders failed on or after that date (from its start in the policy's zone). A reminder
        whose email may have gone out (its effect ``done``, ``in_doubt`` or being sent) is never put back, nor a
        sent or in-doubt reminder. Audited ``reminders.retried`` (count, since, ids). Returns the ids put back.
        """
        now = self.clock.now()
        start = datetime.combine(since, time(0), tzinfo=self.policy.zone).astimezone(UTC) if since else EPOCH
        with self.store.transaction() as tx:
            ids = [int(r["id"]) for r in tx.run("retry_failed_reminders", since=start, now=now,
                                                  reason="retried by operator after failing")]
            if ids:  # the send job of every pending reminder without one, as a scan enqueues them
                Queue(self.store, clock=self.clock, source=source).enqueue_select(
                    tx, "pending_send_jobs", task=SEND_TASK, queue="default", max_attempts=SEND_MAX_ATTEMPTS)
            audit.record(tx, now=now, kind="reminders.retried", subject="reminders", source=source,
                         detail={"count": len(ids), "since": since.isoformat() if since else None, "ids": ids[:1000]})
        return ids

    def _hold(self, reminder_id: int, hold: dict[str, Any]) -> str:
        """Record pending reminder ``reminder_id`` held by ``hold`` (a :func:`covering_hold` row); final (G9)."""
        with self.store.transaction() as tx:
            tx.run("hold_reminder", id=reminder_id, hold_id=hold["id"], reason=hold["reason_text"],
                   now=self.clock.now())
        log.info("reminder %s %s", reminder_id, hold["reason_text"],
                 extra={"event": "reminders.held", "reminder_id": reminder_id, "hold_id": hold["id"]})
        return "held"

    def _finish(self, reminder_id: int, state: str, reason: str | None, *, message_id: str | None = None,
                sent_at: datetime | None = None, tx: Tx | None = None, from_state: str = "pending",
                sent_row: dict[str, Any] | None = None, facts: dict[str, Any] | None = None,
                source: Source | None = None) -> str:
        """Move reminder ``reminder_id`` from ``from_state`` to ``state`` (in ``tx``, else its own transaction).

        Moved to ``sent``, with ``sent_row`` (its ``get_reminder_for_send`` row) given: its late fee and the final
        stage's internal notice are recorded in the same transaction (:func:`.notices.notify.after_sent`);
        ``facts``: the sent message's facts (the fee it showed), None when no copy of it is left; ``source``: who
        caused it (the internal notice's job records it, G8).
        """
        if tx is None:
            with self.store.transaction() as own:
                return self._finish(reminder_id, state, reason, message_id=message_id, sent_at=sent_at, tx=own,
                                    from_state=from_state, sent_row=sent_row, facts=facts, source=source)
        moved = tx.run("finish_reminder", id=reminder_id, state=state, reason=reason, message_id=message_id,
                       sent_at=sent_at, now=self.clock.now(), from_state=from_state)
        if moved and state == "sent" and sent_row is not None:  # G9: the fee with the stage's final record
            self._after_sent(tx, sent_row, facts=facts, source=source)
        return state

    def _after_sent(self, tx: Tx, row: dict[str, Any], *, facts: dict[str, Any] | None,
                    source: Source | None) -> None:
        """In ``tx``, which just moved reminder ``row`` to ``sent``: its late fee and, at its ladder's final stage,
        the internal notice (:func:`.notices.notify.after_sent`). The single send and a grouped notice (for each
        row it lists, :mod:`.notices.grouping`) both come here. ``row``: ``id``, ``stage``, ``amount_due``,
        ``currency``, ``ladder_version_id``; ``facts``: the sent message's (None: no copy of it is left)."""
        self._settings_of(row.get("ladder_version_id"), tx)  # read in tx (then cached) before the reads below
        stages, _ = self._escalations_of(row.get("ladder_version_id"))
        notify = self.policy.notify_final
        after_sent(tx, r=row, escalation=self._escalation_and_fee(row)[0], facts=facts, final_stage=stages[-1],
                   notify_to=notify, now=self.clock.now(),
                   queue=Queue(self.store, clock=self.clock, source=source or current_source("worker"))
                   if notify else None)
    def _settings_of(self, version_id: int | None, tx: Tx | None = None) -> LadderSettings | None:
        """The settings of ladder version ``version_id`` (kept: versions never change); None for None. ``tx``: read
        in that open transaction (SQLite refuses a second one on the thread that holds it)."""
        if version_id is None:
            return None
        if version_id not in self._ladder_settings:
            found = versions_by_id(tx if tx is not None else self.store, [version_id]).get(int(version_id))
            if found is None:
                raise OncebeatError(f"ladder version {version_id} is not recorded")
            self._ladder_settings[version_id] = found.settings
        return self._ladder_settings[version_id]

    def _calendar_of(self, version_id: int | None) -> BusinessCalendar | None:
        """The business calendar of an invoice pinned to ``version_id`` (:func:`.ladder_calendars.ladder_calendar`)."""
        return ladder_calendar(self.policy, self._settings_of(version_id))

    def _escalations_of(self, version_id: int | None) -> tuple[tuple[int, ...], tuple[StageEscalation, ...]]:
        """(stages, escalation per stage) of ladder version ``version_id``; None: the policy file's."""
        settings = self._settings_of(version_id)
        if settings is None:
            return self.policy.stages, self.policy.escalation
        return settings.stages, settings.escalation

    def _escalation_and_fee(self, r: dict[str, Any]) -> tuple[StageEscalation | None, Fee | None]:
        """The escalation of reminder row ``r``'s stage in its pinned ladder version and the fee it gives now."""
        esc = escalation_of(self._escalations_of(r.get("ladder_version_id"))[1], int(r["stage"]))
        fee = fee_for(esc.fee if esc else None, amount_due=int(r["amount_due"]), currency=r["currency"])
        return esc, fee

    def resolve_effect(self, key: str, outcome: str, *, source: Source) -> str:
        """An operator's decision on an in-doubt effect; for ``reminder:<id>`` keys the reminder follows, for
        ``notice:<id>`` keys the grouped notice and every row it lists (:func:`.notices.grouping.resolve_notice`).

        ``done``: the email went out — the reminder becomes ``sent``. ``not_done``: it did not — the
        reminder becomes ``pending`` again and a send job is enqueued (the ledger lets that one attempt run).
        Returns a sentence saying what changed.

        Raises:
            OncebeatError: the key is unknown or not in doubt.
            ValueError: ``outcome`` is neither ``done`` nor ``not_done``.
        """
        if grouping.notice_id_of_key(key) is not None:  # a grouped notice: it and every row it lists follow
            return grouping.resolve_notice(self, key, outcome, source=source)
        ledger = EffectLedger(self.store, clock=self.clock, source=source)
        queue = Queue(self.store, clock=self.clock, source=source)
        result = None
        if outcome == "done" and reminder_id_of_key(key) is not None:
            # Its frozen bytes are dropped once done: their facts stay in the result (as a delivery records them).
            before = ledger.get(key)
            if before is not None and before["state"] == "in_doubt" and before.get("frozen") is not None:
                result = {"message_facts": message_facts(bytes(before["frozen"]))}
        with self.store.transaction() as tx:
            resolution = ledger.resolve(key, outcome, result, tx=tx)
            if resolution is None:
                raise OncebeatError(f"effect {key!r} is unknown or not in doubt; `oncebeat effects list "
                                    "--state in_doubt` lists the keys that need a decision")
            reminder_id = reminder_id_of_key(key)
            if reminder_id is None:
                return resolution.sentence()
            rows = tx.run("get_reminder_for_send", id=reminder_id)
            if not rows or rows[0]["state"] != "in_doubt":
                return f"{key}: resolved {outcome} (reminder {reminder_id} was not in doubt)"
            r = rows[0]
            if outcome == "done":
                message_id = make_message_id(f"reminder:{r['number']}:{r['stage']}", self.message_domain)
                self._finish(reminder_id, "sent", "resolved by operator: it was delivered", message_id=message_id,
                             sent_at=self.clock.now(), tx=tx, from_state="in_doubt", sent_row=r,
                             facts=result["message_facts"] if result else None, source=source)
                return f"{key}: resolved done; reminder {reminder_id} ({r['number']} stage {r['stage']}) is sent"
            self._finish(reminder_id, "pending", "resolved by operator: not delivered; sending again", tx=tx,
                         from_state="in_doubt")
            queue.enqueue(SEND_TASK, {"reminder_id": reminder_id}, tx=tx, max_attempts=SEND_MAX_ATTEMPTS,
                          unique_key=reminder_key(reminder_id))
            return (f"{key}: resolved not_done; reminder {reminder_id} ({r['number']} stage {r['stage']}) "
                    "will be sent again")

    def _render(self, r: dict[str, Any]) -> tuple[RenderedEmail, str]:
        """The email of reminder row ``r`` (as read by ``get_reminder_for_send``) and its Message-ID."""
        days = (r["business_date"] - r["due_on"]).days
        _, _, renderer = self._ladder_mail_of(r.get("ladder_version_id"))
        rendered = renderer.render(invoice_number=r["number"], customer_name=r["name"],
                                        customer_locale=r["locale"], currency=r["currency"],
                                        amount_due=r["amount_due"], due_on=r["due_on"], issued_on=r["issued_on"],
                                        stage=r["stage"], days_past_due=days, payment_url=r.get("payment_url"),
                                        promise_missed=r.get("resumed_promise_until") if r.get("resumed_reason")
                                        == "promise" and r.get("resumed_released_at") is None else None,
                                        late_fee=fee.amount if (fee := self._escalation_and_fee(r)[1]) else 0)
        return rendered, make_message_id(f"reminder:{r['number']}:{r['stage']}", self.message_domain)

    def _ladder_mail_of(self, version_id: int | None) -> tuple[str, str | None, Renderer]:
        """(From, Reply-To, renderer) of a reminder created under ladder version ``version_id``; None (a reminder
        from before ladders were recorded): the policy file's."""
        if version_id is None:
            return self.policy.sender, self.policy.reply_to, self.renderer
        if version_id not in self._ladder_mail:
            st = self._settings_of(version_id)
            assert st is not None
            own = str(self.policy.templates) if self.policy.templates is not None else None
            renderer = self.renderer if (st.templates, st.company) == (own, self.policy.company) else Renderer(
                Path(st.templates) if st.templates else None, company=st.company,
                fallback_locale=self.policy.fallback_locale)
            self._ladder_mail[version_id] = (st.sender, st.reply_to, renderer)
        return self._ladder_mail[version_id]

    # --- reads for operators (dashboard) ----------------------------------------------------------
    def render_reminder(self, reminder_id: int) -> tuple[dict[str, Any], RenderedEmail, str]:
        """Reminder ``reminder_id`` rendered as the send job renders it (nothing is sent or written).

        Returns ``(reminder row with invoice and customer fields, RenderedEmail, Message-ID)``.
        Raises:
            OncebeatError: no such reminder.
        """
        rows = self.store.read("get_reminder_for_send", id=reminder_id)
        if not rows:
            raise OncebeatError(f"no reminder {reminder_id}")
        rendered, message_id = self._render(rows[0])
        return rows[0], rendered, message_id

    def find_invoices(self, query: str, *, limit: int = 50) -> list[dict[str, Any]]:
        """Invoices whose number is ``query``, or (when it holds an ``@``) of the customer with that email
        (compared lower-cased, as imports store it); newest first, at most ``limit``."""
        query = query.strip()
        if "@" in query:
            return self.store.read("invoices_of_email", email=query.lower(), limit=limit)
        return self.store.read("invoice_by_number", number=query)

    def sent_since(self, since: datetime, *, limit: int = 200) -> list[dict[str, Any]]:
        """Reminders sent at or after ``since`` (aware), newest first, at most ``limit``: ``id, stage, sent_at``
        (aware UTC), ``message_id``, ``notice_id`` (the grouped notice it went out in, else None), the invoice's
        ``number, currency, amount_due`` (minor units) and the customer's ``name, email``."""
        return self.store.read("reminders_sent_since", since=since, limit=limit)

    def search_invoices(self, query: str, *, limit: int = 50, customers: int = 20) -> list[dict[str, Any]]:
        """The dashboard's search: :meth:`find_invoices`, else (no ``@``, no such number) the invoices of customers
        whose name holds ``query`` compared without case and accents ("muller" and "MULLER" find "Müller";
        "mueller" does not: folding is Unicode's, not a transliteration); newest first, at most ``limit``
        invoices of at most ``customers`` customers (which ones, when more match, is not specified). Reads the
        stored folds (:mod:`oncebeat.reminders.names`: an index on PostgreSQL with pg_trgm), plus the names not
        folded yet."""
        found = self.find_invoices(query, limit=limit)
        needle = fold_text(query.strip())
        if found or "@" in query or not needle:
            return found
        ids = matching_customers(self.store, needle, limit=customers)
        return self.store.read("invoices_of_customers", ids=Json(ids), limit=limit) if ids else []

    def invoice_story(self, number: str) -> dict[str, Any] | None:
        """Invoice ``number`` with its customer and its reminders (stage order), each with its effect's ledger
        row (``effect``: state, detail, result, holder) when one was claimed, and ``moved``: why the business
        calendar moved it past its nominal date (:meth:`BusinessCalendar.late_reason`), else None. None when no
        such invoice.

        A stage recorded superseded in a higher stage's row is listed as a ``skipped`` reminder of its own
        (:func:`~oncebeat.reminders.model.with_superseded`: ``superseded_by`` = that row's id, no effect).

        ``notice``: the grouped notice a stage went out in (``group = "customer"``; its ``id, state, message_id,
        business_date, sent_at`` and ``rows``, every row it listed: :func:`.notices.grouping.notices_of_invoice`),
        else None; such a stage's ``effect`` is the notice's (``notice:<id>``)."""
        rows = self.store.read("invoice_by_number", number=number)
        if not rows:
            return None
        ledger = EffectLedger(self.store, clock=self.clock, source=current_source("api"))
        reminders = sorted(with_superseded(self.store.read("reminders_of_invoice", invoice_id=rows[0]["id"])),
                           key=lambda r: r["stage"])
        calendar = self._calendar_of(rows[0].get("ladder_version_id"))  # its pinned ladder's, else the policy's
        for r in reminders:
            r["effect"] = ledger.get(reminder_key(r["id"])) if r["superseded_by"] is None else None
            # why the business calendar moved it past its nominal date (computed, not stored: no new column)
            r["moved"] = calendar.late_reason(rows[0]["due_on"], r["stage"], r["business_date"]) \
                if calendar is not None and r["superseded_by"] is None else None
        notices = grouping.notices_of_invoice(self, int(rows[0]["id"]))  # group = "customer": the notice each
        for r in reminders:  # grouped row went out in, with the other invoices it listed
            r["notice"] = notices.get(int(r["notice_id"])) \
                if r.get("notice_id") is not None and r["superseded_by"] is None else None
            if r["notice"] is not None:  # its email is the notice's effect, not a reminder:<id> of its own
                r["effect"] = ledger.get(grouping.notice_key(r["notice"]["id"]))
        return {"invoice": rows[0], "reminders": reminders}

    def reminders_page(self, *, number: str | None = None, email: str | None = None, state: str | None = None,
                       after_id: int = 0, limit: int = 100) -> list[dict[str, Any]]:
        """Reminders oldest first after id ``after_id`` (a keyset page of at most ``limit``), optionally of invoice
        ``number``, of the customer with ``email`` (compared lower-cased) and in ``state``. Each row: the
        reminder's fields, ``number`` and ``email`` of its invoice, ``superseded_stages`` (the lower stages it
        records skipped, a list)."""
        rows = self.store.read("reminders_page", number=number, email=email.lower() if email else None, state=state,
                               after_id=after_id, limit=limit)
        return [r | {"superseded_stages": superseded_stages(r)} for r in rows]

    # --- reports ------------------------------------------------------------------------------
    def preview(self, business_date: date) -> list[dict[str, Any]]:
        """What a scan on ``business_date`` would create (nothing written): one row per invoice and its stage.

        With ``send_zone = "customer"`` the date is each customer's own local date ("what goes out on that
        day at each customer's send time").

        Each row also says ``held``: the text the scan would record for a stage a hold covers on that date
        ("held: dispute (hold 4)"; it is created held, not sent), else None; and ``moved``: why the calendar moved
        the stage to this date ("nominal 2026-12-25 (Christmas Day (US)), sent on the next business day"), else
        None. On a non-business date nothing goes out: no rows (:meth:`BusinessCalendar.why_not` says why).
        """
        out: list[dict[str, Any]] = []
        seen: dict[int, LadderSettings] = {}
        try:
            with self.store.transaction() as tx:
                # What the scan would pin and record first (versions, pins): done here and rolled back below.
                tx.run("scan_lock")
                versions = self._pin_and_ladders(tx, business_date, None, current_source("cli"))
                seen |= {v.id: v.settings for v in versions}  # recorded in this transaction, maybe rolled back
                for collapse in ("next", "highest"):
                    chosen = [v for v in versions if v.settings.collapse == collapse]
                    if self.policy.send_zone == "customer":
                        zones = [r["tz"] for r in tx.run("customer_zones", default_tz=self.policy.tz)]
                        stages = [row for v in chosen for z in zones for row in
                                  stage_rows(v, business_date, z, ladder_calendar(self.policy, v.settings))]
                    else:
                        stages = [row for v in chosen for row in
                                  stage_rows(v, business_date, None, ladder_calendar(self.policy, v.settings))]
                    if stages:
                        query = "preview_next_due" if collapse == "next" else "preview_due"
                        out += tx.run(query, stages=Json(stages), default_tz=self.policy.tz,
                                      max_cutoff=max(s["cutoff"] for s in stages))
                raise _Preview
        except _Preview:
            pass
        holds = list_holds(self.store, active_on=business_date) if out else []
        for r in out:
            hold = next((h for h in holds if h.invoice == r["number"] or h.customer == r["email"]), None)
            r["held"] = None if hold is None else "held: " + (
                f"promise to pay until {hold.promise_until}" if hold.reason == "promise" else hold.reason) + \
                f" (hold {hold.id})"
            lv = r.pop("lv", None)  # the pinned (or would-be: rolled back) version's calendar
            calendar = ladder_calendar(self.policy, seen[lv] if lv in seen else self._settings_of(lv))
            r["moved"] = calendar.late_reason(r["due_on"], r["stage"], business_date) if calendar else None
        return sorted(out, key=lambda r: (r["due_on"], r["number"]))

    def aging(self, as_of: date) -> list[dict[str, Any]]:
        """Open amounts (minor units) and counts per currency and days-past-due bucket on ``as_of``."""
        return self.store.read("aging", as_of=as_of)

    def reminder_count_rows(self) -> list[dict[str, Any]]:
        """Reminders per stage and state: ``[{"stage", "state", "n"}]``; a stage recorded superseded in a higher
        stage's row counts as ``skipped``."""
        return self.store.read("reminder_counts")

    def reminder_count_rows_capped(self, cap: int = 10_000) -> list[dict[str, Any]]:
        """Reminders per stage and state as :meth:`reminder_count_rows`, each counted up to ``cap + 1``:
        ``[{"stage", "state", "n", "capped"}]``, ``capped`` True when there are more than ``cap`` (``n`` is then a
        lower bound). Reads a bounded number of index entries whatever the book (the Reminders page). Raises
        ValueError when ``cap`` < 1."""
        if cap < 1:
            raise ValueError(f"cap must be at least 1, not {cap}")
        rows = self.store.read("reminder_counts_capped", cap=cap + 1)
        # the superseded stages were read from at most cap + 1 rows: every figure they add is a lower bound then
        superseded_capped = any(r["state"] == "superseded_rows" and int(r["n"]) > cap for r in rows)
        out: dict[tuple[int, str], dict[str, Any]] = {}
        for r in rows:
            if r["state"] == "superseded_rows":
                continue
            state = "skipped" if r["state"] == "superseded" else str(r["state"])
            cell = out.setdefault((int(r["stage"]), state),
                                  {"stage": int(r["stage"]), "state": state, "n": 0, "capped": False})
            cell["n"] += int(r["n"])
            cell["capped"] = cell["capped"] or int(r["n"]) > cap or (r["state"] == "superseded" and superseded_capped)
        return [out[k] for k in sorted(out)]

    def reminder_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.store.read("reminder_counts"):
            out[r["state"]] = out.get(r["state"], 0) + int(r["n"])
        return out


class _Preview(Exception):
    """Rolls back the preview's transaction: it pinned and recorded versions only to see what a scan would do."""




def compact_open_totals(tx: Tx) -> None:
    """Fold ``invoice_open_totals`` (reminders 0022: rows of differences the triggers on invoices add) into one row
    per (currency, due date), so the aging reads about as many rows as there are due dates with open invoices plus
    a day's changes. The sums, and so the aging, are the same before and after."""
    last = tx.run("invoice_open_totals_last")
    if not last or last[0]["id"] is None:
        return
    tx.run("invoice_open_totals_fold", upto=int(last[0]["id"]))
    if tx.backend == "sqlite":  # PostgreSQL's fold deleted the rows it summed in the same statement (one snapshot)
        tx.run("invoice_open_totals_drop", upto=int(last[0]["id"]))


def _file_digest(path: Path) -> str | None:
    """SHA-256 of the file's bytes; None when there is no such file (the defaults apply)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


class _Held(Exception):
    """A hold was placed on the invoice after an earlier attempt failed before its point of no return."""

    def __init__(self, hold: dict[str, Any]) -> None:
        self.hold = hold
        super().__init__(hold["reason_text"])


class _InvoiceClosed(Exception):
    """The invoice was paid or voided before a retried send reached its point of no return."""

    def __init__(self, r: dict[str, Any]) -> None:
        self.reason = f"invoice {r['status']}" + (f" on {r['paid_on'].isoformat()}" if r["paid_on"] else "")
        super().__init__(self.reason)


def _mailbox(name: str, email: str) -> Address:
    """The recipient mailbox; the display name is sanitised so it can carry no header."""
    local, _, domain = email.rpartition("@")
    return parse_address(Address(display_name=sanitize_header_text(name), username=local, domain=domain), field="to")


