# ruff: noqa: F811  (fixtures imported from web_helpers are redefined as test arguments, as pytest intends)
"""Small readability fixes of issue 26 item 5: no microseconds on any page, durations in words (the catch-up
window reads and is written as 24h, not 86400), and a paused schedule's next fires say it is paused rather than
"none (retired)". On both backends."""

from __future__ import annotations

import re
from collections.abc import Callable

from starlette.testclient import TestClient
from web_helpers import csrf_of, dashboard_client, runtime  # noqa: F401  (fixtures)

from oncebeat import processes
from oncebeat.clock import ClockProcess
from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.reminders.runtime import Runtime
from oncebeat.schedule_admin import trigger_schedule

PAGE = "/schedules/reminders"
FRACTION = re.compile(r"\d{2}:\d{2}:\d{2}[.,]\d+")


def test_no_page_shows_microseconds(runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    ClockProcess(runtime.app, runtime.store, clock=runtime.clock).sync()
    fire = trigger_schedule(runtime.store, runtime.app, "reminders", clock=runtime.clock)  # fires at now: µs
    assert fire.job_id is not None
    q = Queue(runtime.store, clock=runtime.clock, source=current_source("worker"))
    wid = processes.register(runtime.store, role="worker", source=current_source("worker"), clock=runtime.clock)
    [job] = q.claim(wid, queues=["default"])
    q.fail(job, wid, "relay said no", delay=60)  # an attempt's error, stamped with microseconds in the row
    client = dashboard_client()
    for path in ("/", PAGE, "/schedules", "/jobs", f"/jobs/{job.id}", "/queues", "/effects", "/reminders"):
        page = client.get(path).text
        assert not FRACTION.search(page), (path, FRACTION.search(page))
    assert "relay said no" in client.get(f"/jobs/{job.id}").text


def test_the_catch_up_window_reads_and_is_written_in_words(runtime: Runtime,
                                                             dashboard_client: Callable[..., TestClient]) -> None:
    ClockProcess(runtime.app, runtime.store, clock=runtime.clock).sync()
    admin = dashboard_client(role="admin")
    page = admin.get(PAGE).text
    assert 'name="catchup_window" value="24h"' in page and "within 24 h" in page
    form = {"csrf": csrf_of(page), "expression": "0 8 * * *", "tz": "America/Chicago", "dst_gap": "shift",
            "dst_fold": "first", "catchup": "latest", "overlap": "allow"}
    assert admin.post(PAGE + "/set", data={**form, "catchup_window": "1h30m"}).status_code == 303
    assert float(runtime.store.read("get_schedule", key="reminders")[0]["catchup_window"]) == 5400.0
    assert 'name="catchup_window" value="90m"' in admin.get(PAGE).text
    bad = admin.post(PAGE + "/set", data={**form, "catchup_window": "a day"})
    assert bad.status_code == 400 and "write it as 24h, 90m, 1h30m, 2d" in bad.text


def test_a_paused_schedule_says_paused_not_retired(runtime: Runtime,
                                                   dashboard_client: Callable[..., TestClient]) -> None:
    ClockProcess(runtime.app, runtime.store, clock=runtime.clock).sync()
    admin = dashboard_client(role="admin")
    assert admin.post(PAGE + "/pause", data={"csrf": csrf_of(admin.get(PAGE).text)}).status_code == 303
    page = admin.get(PAGE).text
    assert "none while paused: nothing fires until it is resumed" in page and "none (retired)" not in page
    assert "paused: nothing fires until resumed" in admin.get("/schedules").text
