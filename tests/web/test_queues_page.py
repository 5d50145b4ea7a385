# ruff: noqa: F811  (fixtures imported from web_helpers are redefined as test arguments, as pytest intends)
"""The queues page (issue 26 item 5): depth, scheduled, running, held, latency and throughput per queue, the
admin's pause and resume (the engine's queue pause, audited with the operator), and Busy: what each worker runs
now, from the running jobs and their processes' heartbeats. On both backends (the ``db_url`` fixture)."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from datetime import timedelta

from starlette.testclient import TestClient
from web_helpers import csrf_of, dashboard_client, login, runtime  # noqa: F401  (fixtures)

from oncebeat import processes
from oncebeat.pauses import paused_queues
from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.reminders.runtime import Runtime
from oncebeat.worker import Worker


def _row(page: str, queue: str) -> str:
    match = re.search(rf'<tr id="q-{re.escape(queue)}">(.*?)</tr>', page, re.S)
    assert match, f"no row for queue {queue}"
    return match.group(1)


def _numbers(row: str) -> list[str]:
    return [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r'<td class="num">(.*?)</td>', row,
                                                                                   re.S)]


def test_each_queue_shows_depth_scheduled_running_latency_and_throughput(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    now = runtime.clock.now()
    q = Queue(runtime.store, clock=runtime.clock, source=current_source("api"))
    for minutes in (30, 5):
        q.enqueue("reminders.scan", queue="mail", run_at=now - timedelta(minutes=minutes))
    q.enqueue("reminders.scan", queue="mail", run_at=now + timedelta(hours=2))
    done = q.enqueue("reminders.scan", queue="bulk")
    wid = processes.register(runtime.store, role="worker", source=current_source("worker"), clock=runtime.clock)
    [job] = q.claim(wid, queues=["bulk"])
    q.complete(wid, [job.id])
    assert job.id == done
    running = q.enqueue("reminders.scan", queue="bulk")
    [busy] = q.claim(wid, queues=["bulk"])
    assert busy.id == running

    page = dashboard_client().get("/queues")
    assert page.status_code == 200
    text = page.text
    # available, scheduled, running, held, latency, completed/h, failed/h
    mail = _numbers(_row(text, "mail"))
    assert mail[:4] == ["2", "1", "0", "0"], mail
    assert mail[4] in ("30 min", "31 min"), mail  # the oldest available job's age, in words
    assert _numbers(_row(text, "bulk")) == ["0", "0", "1", "0", "–", "1", "0"]
    assert _numbers(_row(text, "default"))[:4] == ["0", "0", "0", "0"]  # the app's task queue, even when empty
    assert '<a href="/queues" aria-current="page">Queues</a>' in text
    # Busy: the running job, its task, attempt and the worker holding it (alive: it just registered).
    busy_table = text.split("<h2>Busy</h2>", 1)[1]
    assert f'<a href="/jobs/{running}">{running}</a></td><td>reminders.scan</td><td>bulk</td>' in busy_table
    assert "1/" in busy_table and f'<span class="badge ok" title="alive">{wid}</span>' in busy_table
    assert f"/jobs/{done}\"" not in busy_table  # a finished job is not busy
    # A viewer sees the page but its buttons are disabled.
    assert re.search(r'action="/queues/mail/pause".*?<button type="submit" class="secondary" disabled', text, re.S)


def test_an_admin_pauses_and_resumes_a_queue_and_the_audit_names_the_operator(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    q = Queue(runtime.store, clock=runtime.clock, source=current_source("api"))
    for _ in range(3):
        q.enqueue("reminders.scan", queue="mail")
    viewer = dashboard_client()
    csrf = csrf_of(viewer.get("/queues").text)
    refused = viewer.post("/queues/mail/pause", data={"csrf": csrf})
    assert refused.status_code == 403 and "you are logged in as viewer" in refused.text
    assert paused_queues(runtime.store) == []

    admin = dashboard_client(role="admin")
    assert admin.post("/queues/mail/pause", data={"csrf": "forged"}).status_code == 403  # CSRF checked
    assert paused_queues(runtime.store) == []
    answer = admin.post("/queues/mail/pause", data={"csrf": csrf_of(admin.get("/queues").text)})
    assert answer.status_code == 303 and answer.headers["location"] == "/queues"
    [paused] = paused_queues(runtime.store)
    assert paused["queue"] == "mail" and paused["source_name"] == "oncebeat web"
    [event] = runtime.store.read("events_of_subject", subject="queue:mail", limit=1)
    assert event["kind"] == "queue.paused" and event["detail"]["held"] == 3
    assert event["detail"]["operator"]["via"] == "dashboard"
    page = admin.get("/queues").text
    assert "queue mail: paused" in html.unescape(page)  # the flash message
    row = _row(page, "mail")
    assert '<span class="badge paused">paused</span>' in row and "by dashboard, user operator session" in row
    assert _numbers(row)[:4] == ["3", "0", "0", "3"]  # 3 available, all 3 held by the pause
    assert 'action="/queues/mail/resume"' in row
    # Workers take nothing from it while paused.
    assert Worker(runtime.app, runtime.store, clock=runtime.clock, queues=("mail",)).drain(max_batches=1) == 0
    again = admin.post("/queues/mail/pause", data={"csrf": csrf_of(page)})
    assert again.status_code == 303
    assert "no change (already paused)" in html.unescape(admin.get("/queues").text)

    assert admin.post("/queues/mail/resume", data={"csrf": csrf_of(page)}).status_code == 303
    assert paused_queues(runtime.store) == []
    [event] = runtime.store.read("events_of_subject", subject="queue:mail", limit=1)
    assert event["kind"] == "queue.resumed" and event["detail"]["released"] == 3
    row = _row(admin.get("/queues").text, "mail")
    assert '<span class="badge active">active</span>' in row and _numbers(row)[3] == "0"


def test_a_bad_queue_name_is_refused_with_the_reason(runtime: Runtime,
                                                     dashboard_client: Callable[..., TestClient]) -> None:
    admin = dashboard_client(role="admin")
    csrf = csrf_of(admin.get("/queues").text)
    answer = admin.post("/queues/" + "x" * 300 + "/pause", data={"csrf": csrf})
    assert answer.status_code == 400 and "at most 200" in answer.text
    answer = admin.post("/queues/%20mail/pause", data={"csrf": csrf})
    assert answer.status_code == 400 and "spaces at its ends" in answer.text
    assert paused_queues(runtime.store) == []

def test_an_admin_sets_and_lifts_a_queue_limit_and_a_viewer_cannot(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    from oncebeat.queue_limits import queue_limits

    Queue(runtime.store, clock=runtime.clock, source=current_source("api")).enqueue("reminders.scan", queue="mail")
    viewer = dashboard_client()
    page = viewer.get("/queues").text
    assert re.search(r'action="/queues/mail/limit".*?name="max_running"[^>]*disabled', _row(page, "mail"), re.S)
    refused = viewer.post("/queues/mail/limit", data={"csrf": csrf_of(page), "max_running": "2"})
    assert refused.status_code == 403 and queue_limits(runtime.store) == {}

    admin = dashboard_client(role="admin")
    csrf = csrf_of(admin.get("/queues").text)
    assert admin.post("/queues/mail/limit", data={"csrf": "forged", "max_running": "2"}).status_code == 403
    for bad in ("0", "two", "-1", "1000000"):
        answer = admin.post("/queues/mail/limit", data={"csrf": csrf, "max_running": bad})
        assert answer.status_code == 303
        assert "is not a limit" in html.unescape(admin.get("/queues").text), bad
    assert queue_limits(runtime.store) == {}
    assert admin.post("/queues/mail/limit", data={"csrf": csrf, "max_running": "2"}).status_code == 303
    page = admin.get("/queues").text
    assert "at most 2 job(s) running at once over every worker (was no limit)" in html.unescape(page)
    assert 'value="2"' in _row(page, "mail")
    assert queue_limits(runtime.store)["mail"]["max_running"] == 2
    [event] = runtime.store.read("events_of_subject", subject="queue:mail", limit=1)
    assert event["kind"] == "queue.limited" and event["detail"]["operator"]["via"] == "dashboard"
    assert admin.post("/queues/mail/limit", data={"csrf": csrf, "max_running": ""}).status_code == 303
    assert "no limit any more (it was 2 at once)" in html.unescape(admin.get("/queues").text)
    assert queue_limits(runtime.store) == {}
