"""The dashboard in a real browser (Debian's Chromium driven by Playwright) against a real ``oncebeat web``
server on a real database of each backend, filled by a week of real engine activity.

Set ``ONCEBEAT_SCREENSHOTS=docs/img`` to also save a screenshot of each page (docs/dashboard.md).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from dashboard_seed import Seeded, seed
from web_helpers import serve_web

from oncebeat.reminders.policy import write_default_config
from oncebeat.store import open_store

playwright_sync = pytest.importorskip("playwright.sync_api")

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TOKEN = "browser-test-token"
VIEWER_TOKEN = "browser-viewer-token"
pytestmark = pytest.mark.slow


@dataclass
class Live:
    url: str
    db_url: str
    seeded: Seeded


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def live(db_url: str, tmp_path: Path) -> Iterator[Live]:
    """A real ``oncebeat web`` process (actions enabled by a token) on a seeded database."""
    seeded = seed(db_url, tmp_path)
    config = tmp_path / "oncebeat.toml"
    write_default_config(config)
    with serve_web(db_url, config, tmp_path, ONCEBEAT_WEB_TOKEN=TOKEN, ONCEBEAT_WEB_VIEWER_TOKEN=VIEWER_TOKEN) as url:
        yield Live(url=url, db_url=db_url, seeded=seeded)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        message = f"{CHROMIUM} is missing: apt-get install -y chromium"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + " (.ci/run installs it)")
        pytest.skip(message)
    with playwright_sync.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def console_errors() -> list[str]:
    """Errors the browser console reported during the test (a CSP violation is one)."""
    return []


@pytest.fixture
def page(browser: object, console_errors: list[str]) -> Iterator[object]:
    """A fresh browser context (no cookies) and page; fails the test on any console error it did not expect."""
    context = browser.new_context(viewport={"width": 1360, "height": 900})  # type: ignore[attr-defined]
    pg = context.new_page()
    errors = console_errors
    pg.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    yield pg
    context.close()
    assert errors == [], f"the browser console reported errors: {errors}"


def _shot(pg: object, name: str) -> None:
    folder = os.environ.get("ONCEBEAT_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(Path(folder) / f"dashboard-{name}.png"), full_page=True)  # type: ignore[attr-defined]


def _log_in(pg: object, live: Live, token: str = TOKEN) -> None:
    pg.goto(live.url + "/login")  # type: ignore[attr-defined]
    pg.fill("input[name=token]", token)  # type: ignore[attr-defined]
    pg.click("form.card button[type=submit]")  # type: ignore[attr-defined]
    assert "logged in" in pg.inner_text("p.flash")  # type: ignore[attr-defined]


def test_every_page_opens_in_a_real_browser(live: Live, page: object) -> None:
    pg = page
    pg.goto(live.url + "/reminders/invoices/" + live.seeded.invoice_number)  # type: ignore[attr-defined]
    assert pg.url.startswith(live.url + "/login?next=")  # type: ignore[attr-defined]  # no session: log in first
    assert live.seeded.customer_email not in pg.content()  # type: ignore[attr-defined]
    _log_in(pg, live, VIEWER_TOKEN)  # every page is readable by the read-only role
    visits = [("/doctor", "Doctor", "doctor"), ("/", "Overview", "overview"), ("/schedules", "Schedules", "schedules"),
              ("/schedules/reminders", "Schedule reminders", "schedule"), ("/jobs", "Jobs", "jobs"),
              ("/effects", "Effects", "effects"), ("/reminders", "Reminders", "reminders"), ("/tasks", "Tasks", "tasks")]
    for path, heading, name in visits:
        response = pg.goto(live.url + path)  # type: ignore[attr-defined]
        assert response.status == 200, path
        deadline = time.monotonic() + 120
        while path == "/doctor" and "reading the audit trail" in pg.inner_text("main"):  # type: ignore[attr-defined]
            assert time.monotonic() < deadline, "the doctor's background run did not finish"
            time.sleep(0.5)
            pg.reload()  # type: ignore[attr-defined]
        assert pg.inner_text("h1").startswith(heading), path  # type: ignore[attr-defined]
        _shot(pg, name)
    pg.goto(live.url + "/jobs")  # type: ignore[attr-defined]
    pg.click("table a[href^='/jobs/']")  # type: ignore[attr-defined]
    assert pg.inner_text("h1").startswith("Job ")  # type: ignore[attr-defined]
    _shot(pg, "job")
    pg.click("text=explain this job")  # type: ignore[attr-defined]
    assert pg.inner_text("h1").startswith("Explain job")  # type: ignore[attr-defined]
    _shot(pg, "explain")
    # Search by customer email: a POST, so the address never appears in the URL.
    pg.goto(live.url + "/reminders")  # type: ignore[attr-defined]
    pg.fill("input[name=q]", live.seeded.customer_email)  # type: ignore[attr-defined]
    pg.click("form.filters button")  # type: ignore[attr-defined]
    assert "@" not in pg.url and "example.test" not in pg.url  # type: ignore[attr-defined]
    pg.click(f"text={live.seeded.invoice_number}")  # type: ignore[attr-defined]
    assert pg.inner_text("h1").startswith(f"Invoice {live.seeded.invoice_number}")  # type: ignore[attr-defined]
    assert "in_doubt" in pg.inner_text("main")  # type: ignore[attr-defined]
    _shot(pg, "invoice")


def _schedule_state(live: Live) -> str:
    with open_store(live.db_url) as store:
        return str(store.read("get_schedule", key="reminders")[0]["state"])


def test_an_operator_pauses_and_resumes_a_schedule(live: Live, page: object) -> None:
    pg = page
    _log_in(pg, live)
    pg.goto(live.url + "/schedules/reminders")  # type: ignore[attr-defined]
    pg.click("button:has-text('Pause')")  # type: ignore[attr-defined]
    assert pg.inner_text("p.flash") == "reminders: paused"  # type: ignore[attr-defined]
    assert _schedule_state(live) == "paused"
    pg.click("button:has-text('Resume')")  # type: ignore[attr-defined]
    assert pg.inner_text("p.flash") == "reminders: resumed"  # type: ignore[attr-defined]
    assert _schedule_state(live) == "active"


def test_an_operator_changes_a_schedules_expression_and_overlap_policy(live: Live, page: object) -> None:
    pg = page
    _log_in(pg, live)
    pg.goto(live.url + "/schedules/reminders")  # type: ignore[attr-defined]
    form = pg.locator("#set-form")  # type: ignore[attr-defined]
    form.locator("input[name=expression]").fill("30 9 * * 1-5")
    form.locator("select[name=overlap]").select_option("skip")
    form.locator("button:has-text('Save')").click()
    assert "reminders: version" in pg.inner_text("p.flash")  # type: ignore[attr-defined]
    definition = pg.inner_text("dl.kv")  # type: ignore[attr-defined]
    assert "30 9 * * 1-5" in definition and "skip" in definition and "run-time edit" in definition
    assert form.locator("select[name=overlap]").input_value() == "skip"
    with open_store(live.db_url) as store:
        [row] = store.read("get_schedule", key="reminders")
    assert (row["expression"], row["overlap"], row["origin"]) == ("30 9 * * 1-5", "skip", "runtime")
    _shot(pg, "schedule-edit")


def test_an_operator_resolves_an_in_doubt_effect(live: Live, page: object) -> None:
    pg = page
    _log_in(pg, live)
    pg.goto(live.url + "/effects")  # type: ignore[attr-defined]
    card = pg.locator("div.card", has_text=live.seeded.in_doubt_key)  # type: ignore[attr-defined]
    card.locator("button:has-text('It happened (done)')").click()
    assert "resolved done" in pg.inner_text("p.flash")  # type: ignore[attr-defined]
    assert pg.locator("div.card", has_text=live.seeded.in_doubt_key).count() == 0  # type: ignore[attr-defined]
    with open_store(live.db_url) as store:
        (effect,) = [e for e in store.read("list_effects", state=None) if e["key"] == live.seeded.in_doubt_key]
        reminder_id = int(live.seeded.in_doubt_key.split(":")[1])
        (reminder,) = [r for r in store.read("list_reminders") if r["id"] == reminder_id]
    assert effect["state"] == "done" and reminder["state"] == "sent"


def test_a_viewer_reads_but_cannot_act(live: Live, page: object) -> None:
    pg = page
    _log_in(pg, live, VIEWER_TOKEN)
    pg.goto(live.url + "/schedules/reminders")  # type: ignore[attr-defined]
    assert pg.is_disabled("button:has-text('Pause')")  # type: ignore[attr-defined]
    assert pg.inner_text("header .who .badge") == "viewer"  # type: ignore[attr-defined]
    # The button is disabled; a forged POST with the viewer's cookies and a valid CSRF field is refused too.
    csrf = pg.input_value("form[action$='/pause'] input[name=csrf]")  # type: ignore[attr-defined]
    refused = pg.request.post(live.url + "/schedules/reminders/pause", form={"csrf": csrf})  # type: ignore[attr-defined]
    assert refused.status == 403 and "you are logged in as viewer" in refused.text()
    assert _schedule_state(live) == "active"


def test_an_operator_pauses_and_resumes_a_queue_and_sees_what_workers_run(live: Live, page: object) -> None:
    from datetime import timedelta

    from oncebeat import processes
    from oncebeat.provenance import current_source
    from oncebeat.queue import Queue
    from oncebeat.timebase import SystemClock

    clock = SystemClock()
    with open_store(live.db_url) as store:  # a backlog in "mail" and one job a worker is running in "default"
        q = Queue(store, clock=clock, source=current_source("api"))
        for minutes in (42, 12, 3):
            q.enqueue("reminders.send", {"reminder_id": minutes}, queue="mail",
                      run_at=clock.now() - timedelta(minutes=minutes))
        q.enqueue("reminders.send", {"reminder_id": 1}, queue="mail", run_at=clock.now() + timedelta(hours=1))
        wid = processes.register(store, role="worker", source=current_source("worker", name="worker.2"),
                                 clock=clock)
        running = q.enqueue("reminders.scan", queue="default", run_at=clock.now() - timedelta(days=3650))
        claimed = q.claim(wid, queues=["default"], limit=100)
        assert running in [j.id for j in claimed]
    pg = page
    _log_in(pg, live)
    pg.click("nav a:has-text('Queues')")  # type: ignore[attr-defined]
    assert pg.inner_text("h1") == "Queues"  # type: ignore[attr-defined]
    mail = pg.locator("tr#q-mail")  # type: ignore[attr-defined]
    assert mail.locator("td").nth(2).inner_text() == "3"  # available
    assert mail.locator("td").nth(3).inner_text() == "1"  # scheduled
    assert mail.locator("td").nth(7).inner_text() in ("42 min", "43 min")  # latency in words
    mail.locator("button:has-text('Pause')").click()
    assert pg.inner_text("p.flash").startswith("queue mail: paused")  # type: ignore[attr-defined]
    with open_store(live.db_url) as store:
        [event] = store.read("events_of_subject", subject="queue:mail", limit=1)
    assert event["kind"] == "queue.paused" and event["detail"]["operator"]["via"] == "dashboard"
    mail = pg.locator("tr#q-mail")  # type: ignore[attr-defined]
    assert "paused" in mail.inner_text() and mail.locator("td").nth(6).inner_text() == "4"  # held: due and later
    mail.locator("input[name=max_running]").fill("2")  # at most 2 at once, over every worker
    mail.locator("button:has-text('Set')").click()
    assert pg.inner_text("p.flash").startswith("queue mail: at most 2 job(s) running at once")  # type: ignore[attr-defined]
    assert pg.locator("tr#q-mail input[name=max_running]").input_value() == "2"  # type: ignore[attr-defined]
    busy = pg.inner_text("text=Busy >> xpath=..")  # type: ignore[attr-defined]
    assert f"{running}\treminders.scan\tdefault" in busy and "worker.2" in busy
    _shot(pg, "queues")
    pg.locator("tr#q-mail button:has-text('Resume')").click()  # type: ignore[attr-defined]
    assert pg.inner_text("p.flash").startswith("queue mail: resumed")  # type: ignore[attr-defined]
    assert "active" in pg.locator("tr#q-mail").inner_text()  # type: ignore[attr-defined]


def test_an_operator_retries_dead_jobs_after_a_confirmation(live: Live, page: object) -> None:
    from oncebeat import processes
    from oncebeat.provenance import current_source
    from oncebeat.queue import Queue
    from oncebeat.timebase import SystemClock

    clock = SystemClock()
    with open_store(live.db_url) as store:  # three dead jobs in a queue of their own
        q = Queue(store, clock=clock, source=current_source("api"))
        wid = processes.register(store, role="worker", source=current_source("worker"), clock=clock)
        dead = []
        for _ in range(3):
            q.enqueue("reminders.scan", queue="bulk-test")
            [job] = q.claim(wid, queues=["bulk-test"])
            assert q.fail(job, wid, "relay said no", permanent=True) == "discarded"
            dead.append(job.id)
    pg = page
    _log_in(pg, live)
    pg.goto(live.url + "/jobs")  # type: ignore[attr-defined]
    pg.click("nav.tabs a:has-text('Dead')")  # type: ignore[attr-defined]
    assert pg.inner_text("h1") == "Dead"  # type: ignore[attr-defined]
    pg.fill("input[name=queue]", "bulk-test")  # type: ignore[attr-defined]
    pg.click("form.filters button")  # type: ignore[attr-defined]
    for job_id in dead[:2]:
        pg.check(f"input[name=id][value='{job_id}']")  # type: ignore[attr-defined]
    _shot(pg, "jobs-dead")
    pg.click("button:has-text('Retry selected')")  # type: ignore[attr-defined]
    assert pg.inner_text("h1") == "Retry 2 jobs?"  # type: ignore[attr-defined]
    _shot(pg, "jobs-confirm")
    pg.click("button:has-text('Yes, retry 2 jobs')")  # type: ignore[attr-defined]
    assert pg.inner_text("p.flash") == "retried 2 of 2 jobs"  # type: ignore[attr-defined]
    assert "bulk-test" in pg.url  # type: ignore[attr-defined]  # back to the filtered list
    with open_store(live.db_url) as store:
        q = Queue(store, clock=clock, source=current_source("api"))
        assert [q.get(i).state for i in dead] == ["available", "available", "discarded"]  # type: ignore[union-attr]
