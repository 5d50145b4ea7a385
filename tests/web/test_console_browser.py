# ruff: noqa: F401, F811  (the browser fixtures of test_browser are imported and used as test arguments)
"""The operators' console in a real browser (Chromium via Playwright) against a real ``oncebeat web`` server (issue
26 item 5): the live regions take new numbers without a reload until paused (remembered), under the strict CSP
(a violation is a console error, which fails the test); bulk delete with its confirmation; the doctor card's age
and background refresh; an anonymous browser gets nothing.

Set ``ONCEBEAT_SCREENSHOTS=docs/img`` to save ``dashboard-live-queues.png``, ``dashboard-jobs-delete.png`` and
``dashboard-overview-doctor.png`` (docs/dashboard.md).
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from datetime import timedelta

import pytest
from test_browser import VIEWER_TOKEN, Live, _log_in, _shot, browser, console_errors, live, page

from oncebeat import processes
from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.store import open_store
from oncebeat.timebase import SystemClock

pytestmark = pytest.mark.slow
REFRESH_WAIT_MS = 30_000  # the regions refresh every 10 s


def _enqueue(live: Live, queue: str, n: int) -> list[int]:
    with open_store(live.db_url) as store:
        clock = SystemClock()
        q = Queue(store, clock=clock, source=current_source("api"))
        ids = [q.enqueue("reminders.scan", queue=queue, run_at=clock.now() - timedelta(minutes=3)) for _ in range(n)]
    return [i for i in ids if i is not None]


def _discarded(live: Live, queue: str, n: int) -> list[int]:
    with open_store(live.db_url) as store:
        clock = SystemClock()
        q = Queue(store, clock=clock, source=current_source("api"))
        wid = processes.register(store, role="worker", source=current_source("worker"), clock=clock)
        out = []
        for _ in range(n):
            q.enqueue("reminders.scan", queue=queue, max_attempts=1)
            [job] = q.claim(wid, queues=[queue])
            q.fail(job, wid, f"boom {job.id}", permanent=True)
            out.append(job.id)
    return out


def test_live_regions_take_new_numbers_without_a_reload_until_paused(live: Live, page: object) -> None:
    pg = page
    _log_in(pg, live, VIEWER_TOKEN)  # a viewer may pause: a preference
    pg.goto(live.url + "/queues")  # type: ignore[attr-defined]
    assert pg.locator("#q-live-q").count() == 0  # type: ignore[attr-defined]
    pg.evaluate("window.loadedOnce = true")  # type: ignore[attr-defined]  # gone if the page reloads
    _enqueue(live, "live-q", 3)
    row = pg.locator("#q-live-q")  # type: ignore[attr-defined]
    row.wait_for(timeout=REFRESH_WAIT_MS)  # the queues region fetched again, the new queue in it
    assert row.locator("td.num").first.inner_text() == "3"
    assert pg.evaluate("window.loadedOnce") is True  # type: ignore[attr-defined]  # no reload
    _shot(pg, "live-queues")

    pg.click("button.live.on")  # type: ignore[attr-defined]  # pause
    assert "live refresh paused" in pg.inner_text("p.flash")  # type: ignore[attr-defined]
    assert pg.locator("[hx-get]").count() == 0  # type: ignore[attr-defined]
    pg.evaluate("window.loadedOnce = true")  # type: ignore[attr-defined]
    _enqueue(live, "live-q", 2)
    pg.wait_for_timeout(13_000)  # type: ignore[attr-defined]  # more than one period: nothing fetched
    assert row.locator("td.num").first.inner_text() == "3"
    pg.goto(live.url + "/jobs")  # type: ignore[attr-defined]  # remembered on every page
    assert pg.inner_text("button.live") == "live · off"  # type: ignore[attr-defined]
    pg.click("button.live")  # type: ignore[attr-defined]  # resume
    assert pg.locator("#live-counts[hx-get]").count() == 1  # type: ignore[attr-defined]


def test_an_anonymous_browser_gets_no_part_and_an_expired_session_goes_to_the_login(
        live: Live, page: object, console_errors: list[str]) -> None:
    pg = page
    _enqueue(live, "secret-q", 1)
    pg.goto(live.url + "/queues?part=queues")  # type: ignore[attr-defined]
    assert "/login?next=" in pg.url and "secret-q" not in pg.content()  # type: ignore[attr-defined]
    request = urllib.request.Request(live.url + "/queues?part=queues", headers={"HX-Request": "true"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 401 and refused.value.headers["HX-Redirect"] == "/login?next=%2Fqueues"
    assert b"secret-q" not in refused.value.read()
    # A session that ends while a page is open: the next refresh takes the browser to the login page.
    _log_in(pg, live)
    pg.goto(live.url + "/queues")  # type: ignore[attr-defined]
    pg.context.clear_cookies()  # type: ignore[attr-defined]
    pg.wait_for_url("**/login?next=%2Fqueues", timeout=REFRESH_WAIT_MS)  # type: ignore[attr-defined]
    # The browser logs the refused refresh (401) as a failed load; that one is expected, nothing else.
    console_errors[:] = [e for e in console_errors if "status of 401" not in e]


def test_bulk_delete_of_the_ticked_dead_jobs_after_the_confirmation(live: Live, page: object) -> None:
    pg = page
    dead = _discarded(live, "delete-q", 3)
    _log_in(pg, live)
    pg.goto(live.url + "/jobs?state=discarded&queue=delete-q")  # type: ignore[attr-defined]
    for job_id in dead[:2]:
        pg.check(f"input[name=id][value='{job_id}']")  # type: ignore[attr-defined]
    pg.click("button:has-text('Delete selected')")  # type: ignore[attr-defined]
    assert pg.inner_text("h1") == "Delete 2 jobs?"  # type: ignore[attr-defined]
    text = pg.inner_text("main")  # type: ignore[attr-defined]
    assert "never a running job" in text and "2 of 2 would be deleted now" in text
    _shot(pg, "jobs-delete")
    pg.click("button:has-text('Yes, delete 2 jobs')")  # type: ignore[attr-defined]
    assert pg.inner_text("p.flash") == "deleted 2 of 2 jobs"  # type: ignore[attr-defined]
    assert pg.locator("input[name=id]").count() == 1  # type: ignore[attr-defined]  # the third is left
    with open_store(live.db_url) as store:
        q = Queue(store, clock=SystemClock(), source=current_source("api"))
        assert [q.get(i) is None for i in dead] == [True, True, False]


def test_the_doctor_card_says_its_age_and_refreshes_in_the_background(live: Live, page: object) -> None:
    pg = page
    _log_in(pg, live)
    pg.goto(live.url + "/")  # type: ignore[attr-defined]
    card = pg.locator("#live-doctor")  # type: ignore[attr-defined]
    assert "its first run starts in the background" in card.inner_text()
    deadline = time.monotonic() + 120
    while "result" not in card.inner_text():  # the card's refresh started the run; a later one shows it
        assert time.monotonic() < deadline, card.inner_text()
        pg.wait_for_timeout(1000)  # type: ignore[attr-defined]
    assert "ago" in card.inner_text() and "errors / warnings / info" in card.inner_text()
    _shot(pg, "overview-doctor")
