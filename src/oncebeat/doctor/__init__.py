"""The doctor: reads the audit trail, the ledgers and (optionally) the delivered mail to explain
duplicates, losses and risks, naming the cause, the evidence and the fix.

It only reads the database (and the Maildir): running it is always safe, on a
live system too. Each finding carries a cause code (:data:`CHECKS`), a
severity (``info``, ``warning``, ``error``), evidence (ids, instants in local
time and UTC, hosts and pids) and a fix in one or two sentences.

Checks (see ``docs/doctor.md`` for what each one reads and reports):

- ``multiple-clocks`` — clock processes alive at the same time; duplicate fires the ledger rejected.
- ``clock-restart`` — clock restarts near fire instants and the catch-up policy's decisions.
- ``leftover-trigger`` — manual/cli/api fires, unregistered firers, old versions, retired schedules.
- ``retry-side-effect`` — retries and rescues, and what happened to their effects.
- ``in-doubt`` — effects in doubt, oldest first, with how to resolve each.
- ``duplicate-delivery`` — the same reminder (invoice, stage) or Message-ID delivered twice (Maildir).
- ``lost`` — pending reminders without a job, occurrences without a job, expired leases, unclaimed jobs.
- ``timezone`` — process TZ vs schedule zones, two fires on one business date, DST moves past and coming.
- ``clock-skew`` — process clocks ahead of the PostgreSQL server's clock (not checked on SQLite).
- ``discarded`` — jobs that gave up, with their last error.

Example::

    report = run_doctor(store, now=SystemClock().now(), maildir="mail/")
    print(report.to_text())
    sys.exit(report.exit_code)          # 0 clean, 1 if any error

    for line in explain(store, "invoice", "INV-1001"):
        print(line)
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path

from .. import audit
from ..app import App, ScheduleDef
from ..errors import OncebeatError
from ..provenance import Source, current_source
from ..store import Store
from ..timebase import SystemClock, require_aware
from .checks import CHECK_FUNCTIONS, Skip
from .explain import EXPLAIN_KINDS, explain
from .facts import Facts
from .model import CHECKS, SCHEMA, SEVERITIES, CheckRun, DoctorReport, Evidence, Finding

__all__ = [
    "run_doctor",
    "explain",
    "prune_audit",
    "DoctorReport",
    "Finding",
    "Evidence",
    "CheckRun",
    "CHECKS",
    "SEVERITIES",
    "SCHEMA",
    "EXPLAIN_KINDS",
]


def run_doctor(store: Store, *, now: datetime, since: datetime | None = None, schedule: str | None = None,
               invoice: str | None = None, maildir: Path | str | None = None,
               definitions: App | Iterable[ScheduleDef] | None = None) -> DoctorReport:
    """Run every check and return the report.

    Args:
        store: the database to examine (only read).
        now: the current instant (aware); leases, pending ages and coming DST changes are judged against it.
        since: examine history (events, occurrences, discarded jobs, processes, mail) from this instant on;
            current state (in-doubt effects, pending reminders, expired leases) is always examined.
        schedule: only what belongs to this schedule key.
        invoice: only what belongs to this invoice number.
        maildir: a Maildir holding the delivered mail (evidence from outside the database).
        definitions: the schedules as the deployed code defines them (an :class:`App` or ScheduleDefs),
            compared with the database.
    Returns:
        A :class:`DoctorReport`; ``exit_code`` is 1 when any finding is an error.
    Raises:
        OncebeatError: ``schedule`` or ``invoice`` does not exist.
    """
    now = require_aware(now, "now")
    since = require_aware(since, "since") if since is not None else None
    facts = Facts(store, now=now, since=since, schedule=schedule, invoice=invoice, maildir=maildir,
                  definitions=definitions)
    defined = bool(facts.definitions and schedule in facts.definitions)
    if schedule is not None and schedule not in facts.schedules and not defined:
        known = ", ".join(sorted(facts.schedules)) or "none"
        raise OncebeatError(f"doctor --schedule {schedule!r}: no such schedule in the database (known: {known})")
    if invoice is not None and facts.invoice_row is None:
        raise OncebeatError(f"doctor --invoice {invoice!r}: no such invoice number in the database")
    findings: list[Finding] = []
    runs: list[CheckRun] = []
    for code in CHECKS:
        try:
            found = CHECK_FUNCTIONS[code](facts)
        except Skip as skip:
            findings.extend(skip.findings)
            runs.append(CheckRun(code=code, ran=False, findings=len(skip.findings), note=str(skip)))
            continue
        findings.extend(found)
        runs.append(CheckRun(code=code, ran=True, findings=len(found)))
    notes = []
    pruned = [e for e in store.read("doctor_events", since=facts.since, kinds=["audit.pruned"])]
    if pruned:
        last = pruned[-1]
        before = (last.get("detail") or {}).get("before")
        notes.append(f"the audit trail was pruned of events before {before} (on {facts.face.text(last['at'])}); "
                     "older history cannot be examined")
    if facts.invoice_arg is not None and not facts.invoice_reminders:
        notes.append(f"invoice {facts.invoice_arg} has no reminders yet")
    scope = {"since": since, "schedule": schedule, "invoice": invoice,
             "maildir": str(maildir) if maildir is not None else None}
    return DoctorReport(generated_at=facts.now, backend=store.backend, database=store.url, tz=facts.face.default_tz,
                        scope=scope, checks=tuple(runs), findings=DoctorReport.ordered(findings), notes=tuple(notes))


def prune_audit(store: Store, older_than_seconds: float, *, now: datetime | None = None,
                source: Source | None = None) -> int:
    """Delete audit events older than ``older_than_seconds``; return how many were deleted.

    Separate from job pruning: the audit trail is the doctor's evidence, so keep it
    at least as long as you may need to explain an incident (weeks, not hours). The
    pruning itself is recorded as an ``audit.pruned`` event, so the doctor can say
    where the history it reads begins.

    Args:
        older_than_seconds: age in seconds (> 0) before ``now`` from which events are deleted.
        now: the current instant (aware); default the system clock.
        source: provenance of the pruning process (default: this process as ``cli``).
    Raises:
        ValueError: ``older_than_seconds`` is not positive.
    """
    if not older_than_seconds > 0:
        raise ValueError("older_than_seconds must be > 0")
    now = require_aware(now, "now") if now is not None else SystemClock().now()
    before = now - timedelta(seconds=older_than_seconds)
    with store.transaction() as tx:
        row = tx.one("doctor_count_events_before", before=before)
        deleted = int(row["n"]) if row else 0
        tx.run("prune_events", before=before)
        audit.record(tx, now=now, kind="audit.pruned", subject="audit:events", source=source or current_source("cli"),
                     detail={"before": before.isoformat(), "deleted": deleted})
    return deleted
