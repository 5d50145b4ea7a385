# ruff: noqa: F811  (fixtures imported from web_helpers are redefined as test arguments, as pytest intends)
"""Dashboard pages call the library's verbs: job retry and cancel, the reminder search (a POST: no address
in a URL), escaped customer data, the backfill preview that writes nothing."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, timedelta

import pytest
from starlette.testclient import TestClient
from web_helpers import csrf_of, dashboard_client, login, runtime  # noqa: F401  (fixtures)

from oncebeat.clock import ClockProcess
from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.runtime import Runtime


def _post(client: TestClient, page: str, url: str, **data: str) -> int:
    return client.post(url, data={"csrf": csrf_of(client.get(page).text), **data}).status_code


def test_an_operator_cancels_a_waiting_job_and_retries_it(runtime: Runtime,
                                                          dashboard_client: Callable[..., TestClient]) -> None:
    q = Queue(runtime.store, clock=runtime.clock, source=current_source("api"))
    job_id = q.enqueue("reminders.scan", {}, run_at=runtime.clock.now() + timedelta(hours=1))
    assert job_id is not None
    client = dashboard_client()
    login(client)
    assert _post(client, f"/jobs/{job_id}", f"/jobs/{job_id}/cancel") == 303
    job = q.get(job_id)
    assert job is not None and job.state == "cancelled"
    assert "Retry now" in client.get(f"/jobs/{job_id}").text
    assert _post(client, f"/jobs/{job_id}", f"/jobs/{job_id}/retry") == 303
    job = q.get(job_id)
    assert job is not None and job.state == "available" and job.finished_at is None
    events = [e["kind"] for e in runtime.store.read("events_of_subject", subject=f"job:{job_id}", limit=10)]
    assert events == ["job.retried", "job.cancelled"]
    page = client.get("/jobs?state=available&task=reminders.scan").text
    assert f'href="/jobs/{job_id}"' in page


def test_the_reminder_search_is_a_post_and_customer_data_is_escaped(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    runtime.service.upsert(
        [Customer(email="eve@example.test", name='Eve <script>alert("x")</script>')],
        [Invoice(number="INV-<b>7</b>", customer_email="eve@example.test", currency="EUR", amount_due=12_345,
                 issued_on=date(2026, 1, 1), due_on=date(2026, 1, 31))])
    client = dashboard_client(token=None)  # searching is a read: allowed on a read-only dashboard
    page = client.get("/reminders")
    found = client.post("/reminders/search", data={"csrf": csrf_of(page.text), "q": "EVE@example.test"})
    assert found.status_code == 200
    assert "Eve &lt;script&gt;" in found.text and "<script>" not in found.text
    assert "e…e@example.test" in found.text and "eve@example.test" not in found.text  # the list masks the address
    assert 'href="/reminders/invoices/INV-%3Cb%3E7%3C/b%3E"' in found.text
    invoice = client.get("/reminders/invoices/INV-%3Cb%3E7%3C/b%3E")
    assert invoice.status_code == 200 and "INV-&lt;b&gt;7&lt;/b&gt;" in invoice.text
    assert client.post("/reminders/search", data={"q": "eve@example.test"}).status_code == 403  # no CSRF field


def test_the_backfill_preview_lists_the_instants_and_writes_nothing(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    ClockProcess(runtime.app, runtime.store, clock=runtime.clock).sync()
    end = runtime.clock.now() - timedelta(days=1)
    start = end - timedelta(days=3)
    client = dashboard_client()
    page = client.get("/schedules/reminders", params={"from": start.isoformat(), "until": end.isoformat()})
    assert page.status_code == 200
    assert "would be enqueued as" in page.text and page.text.count("no: would be enqueued") == 3
    assert runtime.store.read("occurrence_timeline", schedule_key="reminders", before=None, limit=10) == []
    login(client)
    assert _post(client, "/schedules/reminders", "/schedules/reminders/backfill", **{
        "from": start.isoformat(), "until": end.isoformat()}) == 303
    rows = runtime.store.read("occurrence_timeline", schedule_key="reminders", before=None, limit=10)
    assert [r["outcome"] for r in rows] == ["backfilled"] * 3


def test_a_bad_filter_is_answered_with_the_problem_not_a_traceback(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    client = dashboard_client()
    response = client.get("/jobs", params={"state": "exploded"})
    assert response.status_code == 400 and "is not a job state" in response.text
    response = client.get("/jobs", params={"since": "yesterday"})
    assert response.status_code == 400 and "since" in response.text and "2026-03-08T08:00" in response.text
    assert client.get("/jobs/999999").status_code == 404


def test_the_doctor_runs_in_the_background_and_its_report_appears(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    import time

    client = dashboard_client()
    assert "its first run starts in the background" in client.get("/").text  # a page load never starts it
    deadline = time.monotonic() + 120
    while "reading the audit trail" in (page := client.get("/doctor").text):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert "No finding" in page or "Fix:" in page
    assert "doctor: errors / warnings / info" in client.get("/").text


def test_the_overview_and_reminders_page_show_a_count_over_the_cap_as_more_than_it(
        runtime: Runtime, dashboard_client: Callable[..., TestClient], monkeypatch: pytest.MonkeyPatch) -> None:
    """Counts stop at a cap (10,000; 2 here) so a page reads a bounded number of rows whatever the backlog
    (docs/benchmarks.md, round 3b); a count that reached it says so ("2+"), one under it is exact."""
    from oncebeat.web import overview, reminders

    monkeypatch.setattr(overview, "COUNT_CAP", 2)
    monkeypatch.setattr(reminders, "COUNT_CAP", 2)
    q = Queue(runtime.store, clock=runtime.clock, source=current_source("api"))
    for i in range(3):
        q.enqueue("noop", {"i": i}, queue="busy")
    q.enqueue("noop", {}, queue="quiet")
    client = dashboard_client(token=None)
    page = client.get("/").text
    assert re.search(r'href="/jobs\?queue=busy">busy</a></td><td class="num">2\+</td>', page)
    assert re.search(r'href="/jobs\?queue=quiet">quiet</a></td><td class="num">1</td>', page)
    assert re.search(r"<b>3\+</b><span>available</span>", page)  # busy's 2+ and quiet's 1: at least 3
    assert client.get("/reminders").status_code == 200
