# ruff: noqa: F811  (fixtures imported from web_helpers are redefined as test arguments, as pytest intends)
"""Live refresh (issue 26 item 5): each page's numbers are live regions that htmx fetches again from the same URL
with ``?part=NAME``, rendered alone by the server, until the operator pauses it (a cookie, any role); an anonymous
request for a part gets what a page gets (the login redirect, or 401 + HX-Redirect for htmx); the doctor card's
refresh starts a background doctor run when its report is stale, one at a time. On both backends."""

from __future__ import annotations

import html
import re
import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from starlette.testclient import TestClient
from web_helpers import csrf_of, dashboard_client, runtime  # noqa: F401  (fixtures)

from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.reminders.runtime import Runtime
from oncebeat.web import doctor as web_doctor

#: page → its live parts (each a ``live_<part>`` block) and a text each part's answer must hold; every page has
#: the banners (the outage banner).
PARTS = {"/": {"stats": "effects in doubt", "doctor": "doctor", "finished": "Finished in the last hour",
               "per_queue": "<table>", "processes": "last heartbeat"},
         "/queues": {"queues": "latency", "busy": "lease until"},
         "/tasks": {"tasks": "failure rate"},
         "/jobs?state=available": {"counts": "available"}}


def _hx_gets(page: str) -> list[str]:
    return [html.unescape(u) for u in re.findall(r'hx-get="([^"]+)"', page)]


def test_each_live_region_is_served_alone_and_refreshed_every_few_seconds(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    client = dashboard_client()
    for url, own in PARTS.items():
        parts = {**own, "banners": ""}
        page = client.get(url).text
        base = url.split("?")[0]
        gets = _hx_gets(page)
        for part, text in parts.items():
            [wanted] = [g for g in gets if g.endswith(f"part={part}")]
            assert wanted.startswith(base + "?"), wanted
            answer = client.get(wanted)
            assert answer.status_code == 200, (wanted, answer.text)
            assert "<html" not in answer.text and "<header" not in answer.text, wanted  # the region alone
            assert text in answer.text, (wanted, answer.text[:300])
        assert page.count('hx-trigger="every 10s"') == len(parts), url
    # The jobs filter is kept in the region's URL, so the counts highlight the state the list shows.
    assert "/jobs?state=available&part=counts" in _hx_gets(client.get("/jobs?state=available").text)
    missing = client.get("/queues?part=bogus")
    assert missing.status_code == 404 and "busy, queues" in html.unescape(missing.text)


def test_the_numbers_of_a_region_are_the_current_ones(runtime: Runtime,
                                                      dashboard_client: Callable[..., TestClient]) -> None:
    client = dashboard_client()
    before = client.get("/jobs?part=counts").text
    assert "<b>0</b> available" in before
    q = Queue(runtime.store, clock=runtime.clock, source=current_source("api"))
    for _ in range(3):
        q.enqueue("reminders.scan", queue="mail", run_at=runtime.clock.now() - timedelta(minutes=1))
    assert "<b>3</b> available" in client.get("/jobs?part=counts").text
    assert 'id="q-mail"' in client.get("/queues?part=queues").text


def test_the_pause_is_the_operators_choice_and_is_remembered(runtime: Runtime,
                                                             dashboard_client: Callable[..., TestClient]) -> None:
    viewer = dashboard_client()  # a preference: any role may pause
    page = viewer.get("/queues").text
    assert '<meta name="htmx-config"' in page and '"allowEval": false' in page
    assert '"includeIndicatorStyles": false' in page and 'src="/static/vendor/htmx.min.js"' in page
    assert "hx-on" not in page and "live · on" in page
    answer = viewer.post("/live", data={"csrf": csrf_of(page), "live": "off", "next": "/queues"})
    assert answer.status_code == 303 and answer.headers["location"] == "/queues"
    assert "oncebeat_live=off" in answer.headers["set-cookie"] and "HttpOnly" in answer.headers["set-cookie"]
    paused = viewer.get("/queues").text
    assert "hx-get" not in paused and "live · off" in paused and "live refresh paused" in paused
    assert "hx-get" not in viewer.get("/").text  # remembered on every page
    assert viewer.get("/queues?part=queues").status_code == 200  # a part still answers (an open tab's last fetch)
    viewer.post("/live", data={"csrf": csrf_of(paused), "live": "on", "next": "https://evil.example/"})
    assert 'hx-trigger="every 10s"' in viewer.get("/queues").text
    assert viewer.post("/live", data={"csrf": "forged", "live": "off"}).status_code == 403
    # A POST's answer has no live region (a refresh would fetch a GET of the same path, not the POST's page).
    admin = dashboard_client(role="admin")
    confirm = admin.post("/jobs/bulk", data={"csrf": csrf_of(admin.get("/jobs").text), "do": "retry:matching",
                                             "state": "available"})
    assert "hx-get" not in confirm.text


def test_an_anonymous_request_for_a_part_gets_nothing(runtime: Runtime,
                                                      dashboard_client: Callable[..., TestClient]) -> None:
    Queue(runtime.store, clock=runtime.clock, source=current_source("api")).enqueue("reminders.scan",
                                                                                   queue="secret-queue")
    nobody = dashboard_client(role=None)
    plain = nobody.get("/queues?part=queues")
    assert plain.status_code == 303 and plain.headers["location"].startswith("/login?next=")
    htmx = nobody.get("/queues?part=queues&x=1", headers={"HX-Request": "true"})
    assert htmx.status_code == 401 and htmx.headers["hx-redirect"] == "/login?next=%2Fqueues%3Fx%3D1"
    for answer in (plain, htmx):
        assert "secret-queue" not in answer.text
    assert "htmx" not in nobody.get("/login").text  # no script before a login


def test_the_doctor_card_says_its_age_and_its_refresh_runs_in_the_background(
        runtime: Runtime, dashboard_client: Callable[..., TestClient], monkeypatch: pytest.MonkeyPatch) -> None:
    client = dashboard_client()
    app = client.app
    runs = web_doctor.doctor_runs(app.state.dashboard, start=False)  # type: ignore[attr-defined]
    assert "its first run starts in the background" in client.get("/").text
    assert runs.thread is None  # a page load never starts the doctor
    first = client.get("/?part=doctor").text
    assert "running since" in first or "result" in first
    thread = runs.thread
    assert thread is not None
    deadline = time.monotonic() + 120
    while runs.report is None:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    thread.join(60)
    card = client.get("/?part=doctor").text
    assert re.search(r"result \d+ s ago", card) and "doctor: errors / warnings / info" in card, card
    assert runs.thread is thread  # fresh: no new run
    monkeypatch.setattr(web_doctor, "REFRESH_SECONDS", -1.0)  # every report is stale now
    for _ in range(5):  # many refreshes at once: one run
        client.get("/?part=doctor")
    assert runs.thread is not thread
    second = runs.thread
    assert second is not None
    second.join(60)
    assert runs.report is not None and runs.error is None
