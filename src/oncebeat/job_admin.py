"""An operator's actions on many jobs at once: retry, cancel or delete a selection, or every job a filter matches.

Each job goes through the queue's own verb (:meth:`oncebeat.queue.Queue.retry` / :meth:`~oncebeat.queue.Queue.cancel`)
in its own transaction, so every rule of the one-job action holds per job (a retry that would give an occurrence
a second unfinished run is refused, a running or completed job is left alone) and each job gets its own audit
event (``job.retried`` / ``job.cancelled`` with the operator); one ``jobs.bulk`` event then records the whole
action (verb, how many were asked, done and skipped). A job refused is reported with the reason and the others go
on: a selection may hold jobs that changed state since the operator saw them.

Delete removes finished jobs only, by the rules of ``oncebeat prune`` (:func:`oncebeat.retention.delete_jobs`): a
running (leased) or waiting job is never deleted, nor one whose effect is being sent or in doubt, nor the run of an
occurrence the ledger keeps. The deleted jobs are named in the ``jobs.bulk`` event (they have no page any more).

Example::

    q = Queue(store, clock=SystemClock(), source=current_source("cli", operator=cli_operator()))
    ids = matching_jobs(q, JobFilter(state="discarded", task="reminders.send"))
    print(bulk_action(q, "retry", ids).describe())   # retried 12 of 12 jobs
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from . import audit
from .errors import OncebeatError
from .queue import JOB_STATES, Queue
from .retention import deletable_jobs, delete_jobs

__all__ = ["BULK_MAX", "BULK_VERBS", "DELETABLE_STATES", "BulkOutcome", "JobFilter", "bulk_action", "deletable",
           "matching_jobs"]

BULK_MAX = 1000  # jobs one action may name: a confirmation an operator can still read the count of
BULK_VERBS = ("retry", "cancel", "delete")
#: The states a job may be deleted in (never running, leased or waiting).
DELETABLE_STATES = ("completed", "discarded", "cancelled")
_KEPT = ("kept: an effect of it is being sent or in doubt, or it is the run of an occurrence the ledger keeps "
         "(oncebeat prune's rules)")
_PAGE = 500


@dataclass(frozen=True, kw_only=True, slots=True)
class JobFilter:
    """What :meth:`Queue.list_jobs` filters on; each field optional (None: any). ``since``/``until`` bound
    ``created_at`` (aware)."""

    state: str | None = None
    task: str | None = None
    queue: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def __post_init__(self) -> None:
        if self.state is not None and self.state not in JOB_STATES:
            raise OncebeatError(f"state {self.state!r} is not a job state; use one of {', '.join(JOB_STATES)}")


@dataclass(frozen=True, kw_only=True, slots=True)
class BulkOutcome:
    """What :func:`bulk_action` did: ``done`` the ids acted on, ``skipped`` (id, why) for the others."""

    verb: str
    done: tuple[int, ...]
    skipped: tuple[tuple[int, str], ...]

    def describe(self, *, shown: int = 5) -> str:
        """``retried 10 of 12 jobs; 2 not: job 5 is running, job 7 is completed``."""
        past = {"retry": "retried", "cancel": "cancelled", "delete": "deleted"}[self.verb]
        total = len(self.done) + len(self.skipped)
        text = f"{past} {len(self.done)} of {total} job{'' if total == 1 else 's'}"
        if self.skipped:
            reasons = "; ".join(f"job {i}: {why}" for i, why in self.skipped[:shown])
            more = f"; and {len(self.skipped) - shown} more" if len(self.skipped) > shown else ""
            text += f"; {len(self.skipped)} not: {reasons}{more}"
        return text


def matching_jobs(queue: Queue, flt: JobFilter, *, limit: int = BULK_MAX) -> list[int]:
    """Ids of every job ``flt`` matches, newest first.

    Raises:
        OncebeatError: more than ``limit`` match (the message says how to narrow the filter).
    """
    ids: list[int] = []
    before: int | None = None
    while True:
        rows = queue.list_jobs(state=flt.state, task=flt.task, queue=flt.queue, since=flt.since, until=flt.until,
                               before_id=before, limit=_PAGE)
        ids.extend(int(r["id"]) for r in rows)
        if len(ids) > limit:
            raise OncebeatError(f"more than {limit} jobs match; narrow the filter (state, task, queue, created "
                                "since/until) so that one action names at most that many")
        if len(rows) < _PAGE:
            return ids
        before = ids[-1]


def deletable(queue: Queue, ids: Sequence[int], *, finished_before: datetime | None = None) -> list[int]:
    """Which of ``ids`` a delete would remove now (finished before ``finished_before``, default now): a dry run."""
    return deletable_jobs(queue.store, ids, now=queue.clock.now(), before=finished_before)


def bulk_action(queue: Queue, verb: str, ids: Sequence[int], *,
                finished_before: datetime | None = None) -> BulkOutcome:
    """Retry, cancel or delete each job of ``ids`` (see the module docstring), as ``queue``'s source (the operator).

    ``finished_before`` (delete only): delete only jobs that finished before this instant (``--older-than``).

    Raises:
        OncebeatError: ``verb`` is not one of :data:`BULK_VERBS`, no id is given, or more than :data:`BULK_MAX`.
    """
    if verb not in BULK_VERBS:
        raise OncebeatError(f"{verb!r} is not an action on jobs; use one of {', '.join(BULK_VERBS)}")
    unique = list(dict.fromkeys(int(i) for i in ids))
    if not unique:
        raise OncebeatError(f"{verb}: no job selected; tick the jobs, or use the action on all matching jobs")
    if len(unique) > BULK_MAX:
        raise OncebeatError(f"{verb}: {len(unique)} jobs named, at most {BULK_MAX} per action; narrow the filter")
    done, skipped = (_delete(queue, unique, finished_before) if verb == "delete" else
                     _retry_or_cancel(queue, verb, unique))
    now = queue.clock.now()
    with queue.store.transaction() as tx:
        audit.record(tx, now=now, kind="jobs.bulk", subject="jobs", source=queue.source,
                     detail={"verb": verb, "asked": len(unique), "done": len(done), "skipped": len(skipped),
                             "ids": done[:BULK_MAX]})
    return BulkOutcome(verb=verb, done=tuple(done), skipped=tuple(skipped))


def _delete(queue: Queue, ids: list[int], finished_before: datetime | None) -> tuple[list[int], list[tuple[int, str]]]:
    gone = set(delete_jobs(queue.store, ids, now=queue.clock.now(), before=finished_before))
    skipped = []
    for job_id in (i for i in ids if i not in gone):
        job = queue.get(job_id)
        if job is None:
            why = "no such job (pruned?)"
        elif job.state not in DELETABLE_STATES:
            why = f"it is {job.state} (only completed, discarded or cancelled jobs are deleted)"
        elif finished_before is not None and job.finished_at is not None and job.finished_at >= finished_before:
            why = "it finished after the --older-than cutoff"
        else:
            why = _KEPT
        skipped.append((job_id, why))
    return [i for i in ids if i in gone], skipped


def _retry_or_cancel(queue: Queue, verb: str, ids: list[int]) -> tuple[list[int], list[tuple[int, str]]]:
    done: list[int] = []
    skipped: list[tuple[int, str]] = []
    for job_id in ids:
        try:
            ok = queue.retry(job_id) if verb == "retry" else queue.cancel(job_id)
        except OncebeatError as exc:  # RunUnfinished (a second run of its occurrence), a held unique key
            skipped.append((job_id, str(exc)))
            continue
        if ok:
            done.append(job_id)
            continue
        job = queue.get(job_id)
        skipped.append((job_id, "no such job (pruned?)" if job is None else f"it is {job.state}"))
    return done, skipped
