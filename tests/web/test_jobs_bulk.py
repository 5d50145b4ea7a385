# ruff: noqa: F811  (fixtures imported from web_helpers are redefined as test arguments, as pytest intends)
"""Bulk job actions on the dashboard (issue 26 item 5): the Retries and Dead views, retry or cancel the jobs ticked
or every job a filter matches, after a confirmation page that names the count; admin only, CSRF-checked, each
job audited with the operator (oncebeat.job_admin). On both backends."""

from __future__ import annotations

import html
import re
from collections.abc import Callable

import pytest
from starlette.testclient import TestClient
from web_helpers import csrf_of, dashboard_client, runtime  # noqa: F401  (fixtures)

from oncebeat import processes
from oncebeat.errors import OncebeatError
from oncebeat.job_admin import JobFilter, bulk_action, matching_jobs
from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.reminders.runtime import Runtime


def _jobs(runtime: Runtime) -> dict[str, list[int]]:
    """Three dead (discarded) jobs, one retryable, one completed and two available, all of task reminders.scan
    on queue q1."""
    q = Queue(runtime.store, clock=runtime.clock, source=current_source("api"))
    wid = processes.register(runtime.store, role="worker", source=current_source("worker"), clock=runtime.clock)
    out: dict[str, list[int]] = {"discarded": [], "retryable": [], "completed": [], "available": []}
    for kind in ("discarded", "discarded", "discarded", "retryable", "completed"):
        q.enqueue("reminders.scan", queue="q1", max_attempts=3)
        [job] = q.claim(wid, queues=["q1"])
        if kind == "completed":
            q.complete(wid, [job.id])
        else:
            assert q.fail(job, wid, f"boom {job.id}", permanent=kind == "discarded") == kind
        out[kind].append(job.id)
    for _ in range(2):
        out["available"].append(q.enqueue("reminders.scan", queue="q1"))  # type: ignore[arg-type]
    return out


def _state(runtime: Runtime, job_id: int) -> str:
    job = Queue(runtime.store, clock=runtime.clock, source=current_source("api")).get(job_id)
    assert job is not None
    return job.state


def _ids_on(page: str) -> list[int]:
    return [int(i) for i in re.findall(r'name="id" value="(\d+)"', page)]


def test_the_retries_and_dead_views(runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    jobs = _jobs(runtime)
    client = dashboard_client()
    dead = client.get("/jobs?state=discarded").text
    assert "<h1>Dead</h1>" in dead and "failed for good" in dead
    assert sorted(_ids_on(dead)) == sorted(jobs["discarded"])
    assert f"boom {jobs['discarded'][0]}" in dead  # the error that killed it
    retries = client.get("/jobs?state=retryable").text
    assert "<h1>Retries</h1>" in retries and _ids_on(retries) == jobs["retryable"]
    assert "<h1>Jobs</h1>" in client.get("/jobs").text
    # A viewer sees the bulk buttons disabled and is refused if it posts anyway.
    assert re.search(r'value="retry:selected" class="secondary" disabled', dead)
    refused = client.post("/jobs/bulk", data={"csrf": csrf_of(dead), "do": "retry:matching", "state": "discarded"})
    assert refused.status_code == 403 and "you are logged in as viewer" in refused.text


def test_retry_the_ticked_jobs_after_a_confirmation_naming_the_count(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    jobs = _jobs(runtime)
    admin = dashboard_client(role="admin")
    page = admin.get("/jobs?state=discarded").text
    a, b, c = jobs["discarded"]
    done = jobs["completed"][0]
    confirm = admin.post("/jobs/bulk", data={"csrf": csrf_of(page), "do": "retry:selected", "state": "discarded",
                                            "id": [str(a), str(b), str(done)]})
    assert confirm.status_code == 200
    assert "<h1>Retry 3 jobs?</h1>" in confirm.text and "Yes, retry 3 jobs" in confirm.text
    assert _state(runtime, a) == "discarded"  # nothing done before the confirmation
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', confirm.text))
    assert fields["count"] == "3" and sorted(map(int, fields["ids"].split(","))) == sorted([a, b, done])
    answer = admin.post("/jobs/bulk/run", data=fields)
    assert answer.status_code == 303 and answer.headers["location"] == "/jobs?state=discarded"
    flash = html.unescape(admin.get("/jobs?state=discarded").text)
    assert f"retried 2 of 3 jobs; 1 not: job {done}: it is completed" in flash
    assert (_state(runtime, a), _state(runtime, b), _state(runtime, c)) == ("available", "available", "discarded")
    for job_id in (a, b):  # each job audited, with the dashboard's operator
        [event] = runtime.store.read("events_of_subject", subject=f"job:{job_id}", limit=1)
        assert event["kind"] == "job.retried" and event["detail"]["operator"]["via"] == "dashboard"
    [bulk] = runtime.store.read("events_of_subject", subject="jobs", limit=1)
    assert bulk["kind"] == "jobs.bulk" and bulk["detail"]["verb"] == "retry"
    assert (bulk["detail"]["asked"], bulk["detail"]["done"], bulk["detail"]["skipped"]) == (3, 2, 1)


def test_cancel_all_matching_the_filter_and_a_forged_count_is_refused(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    jobs = _jobs(runtime)
    admin = dashboard_client(role="admin")
    page = admin.get("/jobs?state=available&queue=q1").text
    confirm = admin.post("/jobs/bulk", data={"csrf": csrf_of(page), "do": "cancel:matching", "state": "available",
                                            "queue": "q1"})
    assert confirm.status_code == 200 and "<h1>Cancel 2 jobs?</h1>" in confirm.text
    assert "Every job the filter matched now" in confirm.text
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', confirm.text))
    forged = admin.post("/jobs/bulk/run", data={**fields, "count": "1"})
    assert forged.status_code == 400 and "names &#39;1&#39; jobs but carries 2" in forged.text
    assert {_state(runtime, i) for i in jobs["available"]} == {"available"}
    assert admin.post("/jobs/bulk/run", data={**fields, "csrf": "forged"}).status_code == 403  # CSRF checked
    assert admin.post("/jobs/bulk/run", data=fields).status_code == 303
    assert {_state(runtime, i) for i in jobs["available"]} == {"cancelled"}
    assert "cancelled 2 of 2 jobs" in html.unescape(admin.get("/jobs").text)
    # Nothing ticked, or nothing matching: the reason, not an empty confirmation.
    nothing = admin.post("/jobs/bulk", data={"csrf": csrf_of(page), "do": "retry:selected"})
    assert nothing.status_code == 400 and "no job ticked" in nothing.text
    none = admin.post("/jobs/bulk", data={"csrf": csrf_of(page), "do": "retry:matching", "task": "no.such"})
    assert none.status_code == 400 and "no job matches the filter" in none.text
    bad = admin.post("/jobs/bulk", data={"csrf": csrf_of(page), "do": "retry:matching", "state": "dead"})
    assert bad.status_code == 400 and "is not a job state" in bad.text


def test_matching_jobs_pages_through_and_refuses_more_than_the_limit(runtime: Runtime) -> None:
    q = Queue(runtime.store, clock=runtime.clock, source=current_source("api"))
    ids = q.enqueue_many([{"task": "reminders.scan", "queue": "big"} for _ in range(1201)])
    assert ids == 1201
    assert len(matching_jobs(q, JobFilter(queue="big"), limit=2000)) == 1201  # three pages of 500
    with pytest.raises(OncebeatError, match="more than 1000 jobs match; narrow the filter"):
        matching_jobs(q, JobFilter(queue="big"))
    with pytest.raises(OncebeatError, match="no job selected"):
        bulk_action(q, "retry", [])
    with pytest.raises(OncebeatError, match="'purge' is not an action on jobs; use one of retry, cancel, delete"):
        bulk_action(q, "purge", [1])
