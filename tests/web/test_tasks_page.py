# ruff: noqa: F811  (fixtures imported from web_helpers are redefined as test arguments, as pytest intends)
"""The tasks page (issue 26 item 5): per task, over the last hour or day, jobs finished, failure rate, retries and
run time percentiles (exact, nearest rank) with a chart per task, on both backends. The jobs are claimed and
finished through the real queue under a simulated clock placed in the last hour, so each run time is known."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from datetime import timedelta

from starlette.testclient import TestClient
from web_helpers import dashboard_client, runtime  # noqa: F401  (fixtures)

from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.reminders.runtime import Runtime
from oncebeat.timebase import SimulatedClock
from oncebeat.web.tasks import run_time


def _cells(page: str, task: str) -> list[str]:
    row = re.search(rf'<tr id="t-{re.escape(task)}">(.*?)</tr>', page, re.S)
    assert row, f"no row for task {task}"
    return [html.unescape(re.sub(r"<[^>]+>", "", c)).strip()
            for c in re.findall(r'<td class="num">(.*?)</td>', row.group(1), re.S)]


def test_each_task_shows_throughput_failure_rate_retries_and_exact_percentiles(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    sim = SimulatedClock(runtime.clock.now() - timedelta(minutes=40))
    q = Queue(runtime.store, clock=sim, source=current_source("api"))
    # ten "render" jobs that run 1 s, 2 s, … 10 s: nearest rank p50 = 5 s (5 of 10 at or below), p95 = p99 = 10 s
    for seconds in range(1, 11):
        q.enqueue("render", queue="t")
        [job] = q.claim(1, queues=["t"], limit=1)
        sim.advance(seconds)
        q.complete(1, [job.id])
    # two "push" jobs: one completes on its second attempt (one retry), one is discarded after two attempts
    for outcome in ("completes", "discarded"):
        q.enqueue("push", queue="t", max_attempts=2)
        [job] = q.claim(1, queues=["t"], limit=1)
        q.fail(job, 1, "relay said 451", delay=0)
        [job] = q.claim(1, queues=["t"], limit=1)
        sim.advance(0.25)
        if outcome == "completes":
            q.complete(1, [job.id])
        else:
            q.fail(job, 1, "relay said 451 again")
    # a job finished two hours ago: outside the hour, inside the day
    old = SimulatedClock(runtime.clock.now() - timedelta(hours=2))
    q_old = Queue(runtime.store, clock=old, source=current_source("api"))
    q_old.enqueue("render", queue="t")
    [job] = q_old.claim(1, queues=["t"], limit=1)
    old.advance(100)
    q_old.complete(1, [job.id])

    client = dashboard_client()
    page = client.get("/tasks").text
    assert '<a href="/tasks" aria-current="page">Tasks</a>' in page
    # completed, discarded, failure rate, retries, jobs/min, p50, p95, p99, max
    assert _cells(page, "render") == ["10", "0", "0.0 %", "0", "0.167", "5 s", "10 s", "10 s", "10 s"]
    assert _cells(page, "push") == ["1", "1", "50.0 %", "2", "0.0333", "250 ms", "250 ms", "250 ms", "250 ms"]
    assert page.count('<svg class="chart"') == 2
    day = client.get("/tasks?window=day").text
    render_day = _cells(day, "render")
    assert render_day[0] == "11" and render_day[5:] == ["6 s", "1 min 40 s", "1 min 40 s", "1 min 40 s"]  # 6th of 11 is 6 s
    assert "<strong>day</strong>" in day
    # an unknown window falls back to the hour; the app's idle tasks are named
    other = client.get("/tasks?window=<script>").text
    assert "<script>" not in other and "<strong>hour</strong>" in other
    assert "reminders.scan" in other.split("No job finished in the last hour:", 1)[1]


def test_the_page_needs_a_login(runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    anonymous = dashboard_client(role=None).get("/tasks")
    assert anonymous.status_code in (302, 303, 401) and "render" not in anonymous.text


def test_run_times_read_as_an_operator_reads_them() -> None:
    assert [run_time(v) for v in (None, 0.0004, 0.012, 0.25, 1.5, 59.9, 200, 7300)] == [
        "–", "0.40 ms", "12 ms", "250 ms", "1.5 s", "59.9 s", "3 min 20 s", "2 h 1 min"]
