"""The doctor: reads the audit trail, the ledgers and (optionally) the delivered mail to explain
duplicates, losses and risks, naming the cause, the evidence and the fix.

It only reads the database (and the Maildir): running it is always safe, on a
live system too. Each finding carries a cause code (:data:`CHECKS`), a
severity (``info``, ``warning``, ``error``), evidence (ids, instants in local
time and UTC, hosts and pids) and a fix in one or two sentences.

Checks come from a registry (:mod:`oncebeat.doctor.registry`): the engine's are
registered here; an app adds its own checks, scopes and ``explain`` kinds when it is
imported (see ``docs/doctor.md`` for what each check reads and reports):

- ``multiple-clocks`` — clock processes alive at the same time; duplicate fires the ledger rejected.
- ``clock-restart`` — clock restarts near fire instants and the catch-up policy's decisions.
- ``leftover-trigger`` — manual/cli/api fires (an operator's own, recorded by the CLI or dashboard: info;
  see :mod:`oncebeat.doctor.manual`), unregistered firers, old versions, retired schedules.
- ``retry-side-effect`` — retries and rescues, and what happened to their effects.
- ``in-doubt`` — effects in doubt, oldest first, with how to resolve each.
- ``effect-conflict`` — effect keys reused with another payload.
- ``duplicate-delivery`` — one message delivered twice (Maildir): by Message-ID, or as an app names it.
- ``lost`` — occurrences without a job, expired leases, unclaimed jobs (and an app's own lost work).
- ``timezone`` — process TZ vs schedule zones, two fires on one business date, DST moves past and coming.
- ``clock-skew`` — process clocks ahead of the PostgreSQL server's clock (not checked on SQLite).
- ``discarded`` — jobs that gave up, with their last error.

Example::

    report = run_doctor(store, now=SystemClock().now(), maildir="mail/")
    print(report.to_text())
    sys.exit(report.exit_code)          # 0 clean, 1 if any error

    for line in explain(store, "job", 42):
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
from . import registry
from . import targets as _targets  # noqa: F401 - registers the evidence for pushes to schedule targets
from .checks import Skip
from .explain import explain, explain_kinds, numeric_kind
from .facts import Facts
from .model import SCHEMA, SEVERITIES, CheckRun, DoctorReport, Evidence, Finding
from .registry import CheckPart, check_codes, scopes

__all__ = [
    "run_doctor",
    "explain",
    "prune_audit",
    "DoctorReport",
    "Finding",
    "Evidence",
    "CheckRun",
    "check_codes",
    "scopes",
    "SEVERITIES",
    "SCHEMA",
    "explain_kinds",
    "numeric_kind",
]


def run_doctor(store: Store, *, now: datetime, since: datetime | None = None, schedule: str | None = None,
               maildir: Path | str | None = None, definitions: App | Iterable[ScheduleDef] | None = None,
               **scope: str | None) -> DoctorReport:
    """Run every registered check and return the report.

    Args:
        store: the database to examine (only read).
        now: the current instant (aware); leases, pending ages and coming DST changes are judged against it.
        since: examine history (events, occurrences, discarded jobs, processes, mail) from this instant on;
            current state (in-doubt effects, expired leases, an app's pending work) is always examined.
        schedule: only what belongs to this schedule key.
        maildir: a Maildir holding the delivered mail (evidence from outside the database).
        definitions: the schedules as the deployed code defines them (an :class:`App` or ScheduleDefs),
            compared with the database.
        scope: registered scopes (:func:`scopes`), e.g. an app's ``NAME="value"``: only what belongs to it;
            a None value is ignored.
    Returns:
        A :class:`DoctorReport`; ``exit_code`` is 1 when any finding is an error. Its ``checks`` name each
        registered cause code in run order; a check whose app tables are not in this database is skipped.
    Raises:
        OncebeatError: ``schedule`` or a scope's value does not exist, or a scope is not registered.
    """
    now = require_aware(now, "now")
    since = require_aware(since, "since") if since is not None else None
    given = {k: str(v) for k, v in scope.items() if v is not None}
    facts = Facts(store, now=now, since=since, schedule=schedule, maildir=maildir, definitions=definitions,
                  scopes=given)
    defined = bool(facts.definitions and schedule in facts.definitions)
    if schedule is not None and schedule not in facts.schedules and not defined:
        known = ", ".join(sorted(facts.schedules)) or "none"
        raise OncebeatError(f"doctor --schedule {schedule!r}: no such schedule in the database (known: {known})")
    findings: list[Finding] = []
    runs: dict[str, CheckRun] = {}
    for part in registry.check_parts():
        found, run = _run_part(part, facts)
        findings.extend(found)
        runs[part.code] = _merge(runs.get(part.code), run)
    notes = []
    pruned = [e for e in store.read("doctor_events", since=facts.since, kinds=["audit.pruned"])]
    if pruned:
        last = pruned[-1]
        before = (last.get("detail") or {}).get("before")
        notes.append(f"the audit trail was pruned of events before {before} (on {facts.face.text(last['at'])}); "
                     "older history cannot be examined")
    notes.extend(facts.scope_notes)
    shown = {"since": since, "schedule": schedule, **{name: given.get(name) for name in scopes()},
             "maildir": str(maildir) if maildir is not None else None}
    return DoctorReport(generated_at=facts.now, backend=store.backend, database=store.url, tz=facts.face.default_tz,
                        scope=shown, checks=tuple(runs.values()), findings=DoctorReport.ordered(findings),
                        notes=tuple(notes))


def _run_part(part: CheckPart, facts: Facts) -> tuple[list[Finding], CheckRun]:
    """Run one registered part; a Skip (or an app part whose SQL line is not migrated) gives a skipped run."""
    if part.sql_line is not None and part.sql_line not in facts.lines:
        return [], CheckRun(code=part.code, ran=False, note=f"this database has no {part.sql_line} tables "
                                                            f"({part.part}'s part of the check)")
    try:
        found = part.fn(facts)
    except Skip as skip:
        return skip.findings, CheckRun(code=part.code, ran=False, findings=len(skip.findings), note=str(skip))
    return found, CheckRun(code=part.code, ran=True, findings=len(found))


def _merge(a: CheckRun | None, b: CheckRun) -> CheckRun:
    """One report entry per code: it ran if any part ran; notes of skipped parts are kept when none ran."""
    if a is None:
        return b
    ran = a.ran or b.ran
    note = None if ran else "; ".join(n for n in (a.note, b.note) if n) or None
    return CheckRun(code=a.code, ran=ran, findings=a.findings + b.findings, note=note)


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
        deleted = audit.prune(tx, before=before)
        audit.record(tx, now=now, kind="audit.pruned", subject="audit:events", source=source or current_source("cli"),
                     detail={"before": before.isoformat(), "deleted": deleted})
    return deleted
