"""Jobs: filter by state, task, queue and creation time (keyset pages, newest first); each job's attempts
with their errors, its provenance, effects and audit events; actions retry and cancel."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from .. import audit
from ..effects import EffectLedger
from ..errors import OncebeatError
from ..provenance import current_source
from ..queue import JOB_STATES, Queue, other_unfinished_run
from .app import action_form, dashboard, parse_id, redirect_with, render, route
from .schedules import operator_source, parse_instant

__all__ = ["routes"]

PAGE = 50


def _queue(request: Request) -> Queue:
    rt = dashboard(request).runtime
    return Queue(rt.store, clock=rt.clock, source=operator_source())


def jobs_page(request: Request) -> Response:
    q = request.query_params
    state = q.get("state") or None
    if state is not None and state not in JOB_STATES:
        raise OncebeatError(f"state {state!r} is not a job state; use one of {', '.join(JOB_STATES)}")
    rows = _queue(request).list_jobs(state=state, task=q.get("task") or None, queue=q.get("queue") or None,
                                     since=parse_instant(q.get("since"), "UTC", "since"),
                                     until=parse_instant(q.get("until"), "UTC", "until"),
                                     before_id=parse_id(q.get("before"), "before"), limit=PAGE + 1)
    more = len(rows) > PAGE
    rows = rows[:PAGE]
    keep = {k: v for k, v in q.items() if k != "before" and v}
    return render(request, "jobs.html", {"title": "Jobs", "jobs": rows, "states": JOB_STATES, "q": keep,
                                         "next_before": rows[-1]["id"] if more else None})


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
    route("/jobs/{id:id}", job_page),
    route("/jobs/{id:id}/retry", retry, methods=["POST"]),
    route("/jobs/{id:id}/cancel", cancel, methods=["POST"]),
]
