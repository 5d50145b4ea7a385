"""Jobs: filter by state, task, queue and creation time (keyset pages, newest first), with the Retries
(``retryable``) and Dead (``discarded``) views; each job's attempts with their errors, its provenance, effects and
audit events; actions retry and cancel, on one job or many, and delete (finished jobs only, by ``oncebeat prune``'s
rules) on many: the jobs ticked, or every job the filter matches, after a confirmation page that names the count
(:mod:`oncebeat.job_admin`). The counts per state are a live region (``/jobs?part=counts``), each stopping at
:data:`COUNT_CAP` ("10,000+"), so the page reads a bounded number of rows beside millions of jobs."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from .. import audit
from ..effects import EffectLedger
from ..errors import OncebeatError
from ..job_admin import BULK_MAX, BULK_VERBS, DELETABLE_STATES, JobFilter, bulk_action, deletable, matching_jobs
from ..provenance import current_source
from ..queue import JOB_STATES, Queue, other_unfinished_run
from .app import action_form, dashboard, parse_id, redirect_with, render, route
from .schedules import operator_source, parse_instant

__all__ = ["routes"]

PAGE = 50
#: The counts per state stop here: the page shows "10,000+" beyond it (Queue.counts_capped, a bounded read).
COUNT_CAP = 10_000
FILTER_FIELDS = ("state", "task", "queue", "since", "until")
#: Views as Sidekiq has them: a title and what the state means, for /jobs?state=…
VIEWS = {"retryable": ("Retries", "jobs that failed and run again after their backoff (each attempt's error "
                                  "below); retry runs them now, cancel withdraws them"),
         "discarded": ("Dead", "jobs that failed for good (attempts used up, or a permanent error); retry puts "
                               "them back with one more attempt")}


def _queue(request: Request) -> Queue:
    rt = dashboard(request).runtime
    return Queue(rt.store, clock=rt.clock, source=operator_source())


def _filter(values: Mapping[str, str]) -> JobFilter:
    """The job filter of a query string or form (each field optional); OncebeatError names a bad field."""
    return JobFilter(state=values.get("state") or None, task=values.get("task") or None,
                     queue=values.get("queue") or None, since=parse_instant(values.get("since"), "UTC", "since"),
                     until=parse_instant(values.get("until"), "UTC", "until"))


def _counts(queue: Queue) -> dict[str, str]:
    """The jobs per state as the page shows them: the number, or "10,000+" beyond the cap (a bounded read)."""
    return {state: f"{COUNT_CAP:,}+" if c["capped"] else str(c["n"])
            for state, c in queue.counts_capped(COUNT_CAP).items()}


def jobs_page(request: Request) -> Response:
    q = request.query_params
    f = _filter(q)
    queue = _queue(request)
    if q.get("part") == "counts":  # the live region of the counts per state: no list to read
        return render(request, "jobs.html", {"counts": _counts(queue), "states": JOB_STATES,
                                             "q": {"state": f.state}})
    rows = queue.list_jobs(state=f.state, task=f.task, queue=f.queue, since=f.since, until=f.until,
                                     before_id=parse_id(q.get("before"), "before"), limit=PAGE + 1)
    more = len(rows) > PAGE
    rows = rows[:PAGE]
    keep = {k: v for k, v in q.items() if k in FILTER_FIELDS and v}
    title, about = VIEWS.get(f.state or "", ("Jobs", None))
    return render(request, "jobs.html", {"title": title, "about": about, "jobs": rows, "states": JOB_STATES,
                                         "q": keep, "views": VIEWS, "bulk_max": BULK_MAX, "counts": _counts(queue),
                                         "next_before": rows[-1]["id"] if more else None})


def _ids(values: list[str]) -> list[int]:
    ids = [parse_id(v, "job id") for v in values]
    return [i for i in ids if i is not None]


async def bulk_confirm(request: Request) -> Response:
    """The confirmation page of a bulk action: which jobs, how many; its form posts them to ``/jobs/bulk/run``."""
    form = await action_form(request)
    verb, _, scope = form.get("do", "").partition(":")
    if verb not in BULK_VERBS or scope not in ("selected", "matching"):
        raise OncebeatError("choose Retry, Cancel or Delete, for the jobs ticked or for all jobs matching the filter")
    f = _filter(form)
    if scope == "selected":
        ids = _ids((await request.form()).getlist("id"))  # type: ignore[arg-type]
        if not ids:
            raise OncebeatError(f"{verb}: no job ticked; tick the jobs, or use “{verb} all matching”")
    else:
        ids = await run_in_threadpool(matching_jobs, _queue(request), f)
        if not ids:
            raise OncebeatError(f"{verb}: no job matches the filter")
    if len(ids) > BULK_MAX:
        raise OncebeatError(f"{verb}: {len(ids)} jobs named, at most {BULK_MAX} per action; narrow the filter")
    q = _queue(request)
    shown = [j for j in (await run_in_threadpool(lambda: [q.get(i) for i in ids[:PAGE]])) if j is not None]
    # A delete says how many of them it would delete now (finished, no effect in flight, not a kept occurrence's run).
    removable = len(await run_in_threadpool(deletable, q, ids)) if verb == "delete" else None
    back = {k: form[k] for k in FILTER_FIELDS if form.get(k)}
    return render(request, "jobs_confirm.html", {"title": f"{verb.capitalize()} {len(ids)} jobs?", "verb": verb,
                                                 "ids": ids, "shown": shown, "back": back, "scope": scope,
                                                 "removable": removable, "deletable_states": DELETABLE_STATES})


async def bulk_run(request: Request) -> Response:
    form = await action_form(request)
    verb = form.get("verb", "")
    ids = _ids([v for v in form.get("ids", "").split(",") if v])
    count = form.get("count", "")
    if not count.isdigit() or int(count) != len(ids):
        raise OncebeatError(f"the confirmation names {count[:12]!r} jobs but carries {len(ids)}; start again from "
                            "the jobs list")
    outcome = await run_in_threadpool(bulk_action, _queue(request), verb, ids)
    back = {k: form[k] for k in FILTER_FIELDS if form.get(k)}
    return redirect_with(request, outcome.describe(), "/jobs" + (f"?{urlencode(back)}" if back else ""))


def job_page(request: Request) -> Response:
    rt = dashboard(request).runtime
    job_id = int(request.path_params["id"])
    job = _queue(request).get(job_id)
    if job is None:
        raise HTTPException(404, f"no job {job_id} (it may have been pruned)")
    effects = EffectLedger(rt.store, clock=rt.clock, source=current_source("api")).of_job(job_id)
    # Another unfinished run of the job's occurrence (a re-run, a retried copy): no "Retry now" beside it.
    busy = other_unfinished_run(rt.store, job_id) if job.occurrence_id is not None else None
    return render(request, "job.html", {"title": f"Job {job_id}", "job": job, "effects": effects, "busy": busy,
                                        "events": audit.events_of(rt.store, f"job:{job_id}")})


async def retry(request: Request) -> Response:
    await action_form(request)
    job_id = int(request.path_params["id"])
    ok = await run_in_threadpool(_queue(request).retry, job_id)
    return redirect_with(request, f"job {job_id}: " + ("put back in the queue, runs now" if ok else
                                                       "not retried (running or completed)"), f"/jobs/{job_id}")


async def cancel(request: Request) -> Response:
    await action_form(request)
    job_id = int(request.path_params["id"])
    ok = await run_in_threadpool(_queue(request).cancel, job_id)
    return redirect_with(request, f"job {job_id}: " + ("cancelled" if ok else "not cancellable (running or finished)"),
                         f"/jobs/{job_id}")


routes = [
    route("/jobs", jobs_page),
    route("/jobs/bulk", bulk_confirm, methods=["POST"]),
    route("/jobs/bulk/run", bulk_run, methods=["POST"]),
    route("/jobs/{id:id}", job_page),
    route("/jobs/{id:id}/retry", retry, methods=["POST"]),
    route("/jobs/{id:id}/cancel", cancel, methods=["POST"]),
]
