# ruff: noqa: F811  (fixtures imported from web_helpers are redefined as test arguments, as pytest intends)
"""The operator picks the zone every page shows instants in (issue 26 item 5): UTC by default, or the schedule's
zone, for any role, kept in a cookie; whole seconds either way; the redirect stays on this site."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from datetime import timedelta

from starlette.testclient import TestClient
from web_helpers import csrf_of, dashboard_client, runtime  # noqa: F401  (fixtures)

from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.reminders.runtime import Runtime
from oncebeat.timebase import SimulatedClock


def test_a_viewer_switches_between_utc_and_the_schedules_zone(runtime: Runtime,
                                                               dashboard_client: Callable[..., TestClient]) -> None:
    # a job created at 2026-07-01 13:00:00.123456 UTC: 08:00:00 CDT in America/Chicago (the default schedule zone)
    sim = SimulatedClock(runtime.clock.now().replace(year=2026, month=7, day=1, hour=13, minute=0, second=0,
                                                     microsecond=123456))
    job = Queue(runtime.store, clock=sim, source=current_source("api")).enqueue("reminders.scan",
                                                                              run_at=sim.now() + timedelta(hours=1))
    viewer = dashboard_client()
    page = viewer.get(f"/jobs/{job}").text
    assert "2026-07-01 14:00:00Z" in page and ".123456" not in page
    assert "Times are shown in UTC" in page and "show them in America/Chicago" in page
    answer = viewer.post("/zone", data={"csrf": csrf_of(page), "zone": "schedule", "next": f"/jobs/{job}"})
    assert answer.status_code == 303 and answer.headers["location"] == f"/jobs/{job}"
    page = viewer.get(f"/jobs/{job}").text
    assert "2026-07-01 09:00:00 CDT" in page and "2026-07-01 14:00:00Z" not in page
    assert "Times are shown in America/Chicago (the schedule's zone)" in html.unescape(page)
    assert "times are now shown in America/Chicago" in html.unescape(page)
    back = viewer.post("/zone", data={"csrf": csrf_of(page), "zone": "utc", "next": "/"})
    assert back.status_code == 303
    assert "2026-07-01 14:00:00Z" in viewer.get(f"/jobs/{job}").text


def test_the_zone_form_checks_csrf_and_never_redirects_off_site(runtime: Runtime,
                                                                dashboard_client: Callable[..., TestClient]) -> None:
    viewer = dashboard_client()
    csrf = csrf_of(viewer.get("/").text)
    assert viewer.post("/zone", data={"csrf": "forged", "zone": "schedule"}).status_code == 403
    for target in ("//evil.example/x", "https://evil.example/", "javascript:alert(1)"):
        answer = viewer.post("/zone", data={"csrf": csrf, "zone": "schedule", "next": target})
        assert answer.status_code == 303 and answer.headers["location"] == "/", target
    odd = viewer.post("/zone", data={"csrf": csrf, "zone": "<script>", "next": "/"})
    assert odd.status_code == 303 and re.search(r"oncebeat_zone=utc", odd.headers["set-cookie"])
    anonymous = dashboard_client(role=None)
    refused = anonymous.post("/zone", data={"csrf": csrf, "zone": "schedule"})
    assert refused.status_code in (302, 303, 401, 403) and "oncebeat_zone" not in refused.headers.get("set-cookie", "")
