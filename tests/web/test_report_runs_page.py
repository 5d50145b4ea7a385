# ruff: noqa: F811  (fixtures imported from web_helpers are redefined as test arguments, as pytest intends)
"""The Reports page's stage effectiveness when the live query does not fit its budget (ONCEBEAT_REPORTS_LIVE_MS;
0 forces it on PostgreSQL): the newest stored run with its as-of line, never an unlabelled number; with none yet a
"being computed" note and exactly one run queued however many loads; a worker computes it; the Recompute button is
an action (session + CSRF). SQLite stays live at any budget."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from starlette.testclient import TestClient
from web_helpers import csrf_of, dashboard_client, runtime  # noqa: F401  (fixtures)

from oncebeat.queue import Queue
from oncebeat.reminders.reports import Month
from oncebeat.reminders.reports.runs import RUN_TASK, RunParams, newest_run
from oncebeat.reminders.runtime import Runtime
from oncebeat.timebase import SimulatedClock
from oncebeat.web.schedules import operator_source
from oncebeat.worker import Worker
from reports_book import seed

PAGE = "/reports?from=2026-01&to=2026-04"
PARAMS = RunParams(first=Month(2026, 1), last=Month(2026, 4), as_of=datetime(2026, 4, 10).date())
NUMBER = "40.0%"  # stage 1 reminded, paid within 3 days: 2 of 5 (tests/web/test_reports_page.py)


def _on_as_of(runtime: Runtime) -> None:
    seed(runtime.service, runtime.store)
    runtime.clock = SimulatedClock(datetime(2026, 4, 10, 15, tzinfo=UTC))  # 10:00 in Chicago: as of 2026-04-10


def _runs_queued(runtime: Runtime) -> list[dict[str, object]]:
    return Queue(runtime.store, clock=runtime.clock, source=operator_source()).list_jobs(task=RUN_TASK)


def _stages_section(html: str) -> str:
    return html[html.index("<h2>Stage effectiveness</h2>"):html.index("<h2>Promises to pay")]


def test_without_budget_the_page_notes_a_run_queues_it_once_and_shows_it_with_its_instant(
        runtime: Runtime, dashboard_client: Callable[..., TestClient], monkeypatch: pytest.MonkeyPatch) -> None:
    if runtime.store.backend != "postgres":
        pytest.skip("SQLite's page is always live (test_sqlite_stays_live_at_any_budget)")
    _on_as_of(runtime)
    monkeypatch.setenv("ONCEBEAT_REPORTS_LIVE_MS", "0")
    client = dashboard_client()
    first = _stages_section(client.get(PAGE).text)
    assert "being computed — reload in a minute" in first and NUMBER not in first and "<table" not in first
    second = _stages_section(client.get(PAGE).text)
    assert "being computed — reload in a minute" in second
    assert len(_runs_queued(runtime)) == 1  # two loads, one run
    Worker(runtime.app, runtime.store, clock=runtime.clock).drain()
    run = newest_run(runtime.store, PARAMS)
    assert run is not None
    section = _stages_section(client.get(PAGE).text)
    assert NUMBER in section
    line = re.search(r'<p class="stage-as-of"><strong>Stage effectiveness as of (\d{4}-\d\d-\d\d \d\d:\d\d) '
                     r'(C[SD]T) \(([^)]*)\)</strong>', section)
    assert line, section
    assert line.group(1) == f"{run.snapshot_at.astimezone(runtime.policy.zone):%Y-%m-%d %H:%M}"
    # Fresh: no new run asked for by this load, no "being computed" claim.
    assert len(_runs_queued(runtime)) == 1 and "a newer run is being computed" not in section
    # Every number of the section comes after the as-of line: none is shown unlabelled.
    assert section.index("stage-as-of") < section.index("<table")


def test_a_stale_run_is_shown_labelled_while_a_newer_one_is_computed(
        runtime: Runtime, dashboard_client: Callable[..., TestClient], monkeypatch: pytest.MonkeyPatch) -> None:
    if runtime.store.backend != "postgres":
        pytest.skip("SQLite's page is always live")
    _on_as_of(runtime)
    monkeypatch.setenv("ONCEBEAT_REPORTS_LIVE_MS", "0")
    client = dashboard_client()
    client.get(PAGE)
    Worker(runtime.app, runtime.store, clock=runtime.clock).drain()
    assert isinstance(runtime.clock, SimulatedClock)
    runtime.clock.advance(3600)  # an hour later: older than REFRESH_AFTER
    section = _stages_section(client.get(PAGE).text)
    assert "Stage effectiveness as of" in section and "a newer run is being computed" in section and NUMBER in section
    assert [j["state"] for j in _runs_queued(runtime)].count("available") == 1
    client.get(PAGE)
    assert [j["state"] for j in _runs_queued(runtime)].count("available") == 1  # still one


def test_the_live_report_is_shown_as_before_when_it_fits_the_budget(
        runtime: Runtime, dashboard_client: Callable[..., TestClient], monkeypatch: pytest.MonkeyPatch) -> None:
    _on_as_of(runtime)
    monkeypatch.setenv("ONCEBEAT_REPORTS_LIVE_MS", "5000")
    section = _stages_section(dashboard_client().get(PAGE).text)
    assert NUMBER in section and "as of" not in section and "Recompute" not in section
    assert _runs_queued(runtime) == []


def test_sqlite_stays_live_at_any_budget(runtime: Runtime, dashboard_client: Callable[..., TestClient],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    if runtime.store.backend != "sqlite":
        pytest.skip("the PostgreSQL page honours the budget")
    _on_as_of(runtime)
    monkeypatch.setenv("ONCEBEAT_REPORTS_LIVE_MS", "0")
    section = _stages_section(dashboard_client().get(PAGE).text)
    assert NUMBER in section and "Stage effectiveness as of" not in section and _runs_queued(runtime) == []


def test_recompute_needs_a_session_and_the_csrf_field(
        runtime: Runtime, dashboard_client: Callable[..., TestClient], monkeypatch: pytest.MonkeyPatch) -> None:
    _on_as_of(runtime)
    monkeypatch.setenv("ONCEBEAT_REPORTS_LIVE_MS", "0")
    anonymous = dashboard_client(role=None)
    page = anonymous.get(PAGE)
    assert page.status_code in (302, 303) and page.headers["location"].startswith("/login")
    refused = anonymous.post("/reports/stages/recompute", data={"from": "2026-01", "to": "2026-04"})
    assert refused.status_code in (302, 303, 401, 403)
    admin = dashboard_client(role="admin")
    html = admin.get(PAGE).text
    before = len(_runs_queued(runtime))
    no_csrf = admin.post("/reports/stages/recompute", data={"from": "2026-01", "to": "2026-04"})
    assert no_csrf.status_code == 403 and len(_runs_queued(runtime)) == before
    viewer = dashboard_client()
    viewer_html = viewer.get(PAGE).text
    as_viewer = viewer.post("/reports/stages/recompute", data={"csrf": csrf_of(viewer_html), "from": "2026-01",
                                                               "to": "2026-04"})
    assert as_viewer.status_code == 403 and len(_runs_queued(runtime)) == before
    Worker(runtime.app, runtime.store, clock=runtime.clock).drain()  # whatever the page queued is done
    done = admin.post("/reports/stages/recompute", data={"csrf": csrf_of(html), "from": "2026-01", "to": "2026-04"})
    assert done.status_code == 303 and done.headers["location"] == "/reports?from=2026-01&to=2026-04"
    assert len([j for j in _runs_queued(runtime) if j["state"] == "available"]) == 1
    again = admin.post("/reports/stages/recompute", data={"csrf": csrf_of(html), "from": "2026-01", "to": "2026-04"})
    assert again.status_code == 303 and len([j for j in _runs_queued(runtime) if j["state"] == "available"]) == 1


def test_a_run_slower_than_the_budget_spares_the_page_its_live_read(
        runtime: Runtime, dashboard_client: Callable[..., TestClient], monkeypatch: pytest.MonkeyPatch) -> None:
    if runtime.store.backend != "postgres":
        pytest.skip("SQLite's page is always live")
    _on_as_of(runtime)
    monkeypatch.setenv("ONCEBEAT_REPORTS_LIVE_MS", "250")
    client = dashboard_client()
    live = _stages_section(client.get(PAGE).text)
    assert NUMBER in live and "as of" not in live  # no run yet: the small book's live read fits the budget
    monkeypatch.setenv("ONCEBEAT_REPORTS_LIVE_MS", "0")
    client.get(PAGE)
    Worker(runtime.app, runtime.store, clock=runtime.clock).drain()
    monkeypatch.setenv("ONCEBEAT_REPORTS_LIVE_MS", "250")
    # The run took no time on the simulated clock: within the budget, so the page reads live again.
    assert "Stage effectiveness as of" not in _stages_section(client.get(PAGE).text)
    with runtime.store.transaction() as tx:  # as a run on a big book: 2 s to compute
        tx.execute("UPDATE report_runs SET started_at = finished_at - INTERVAL '2 seconds'")
    section = _stages_section(client.get(PAGE).text)
    assert "Stage effectiveness as of" in section and NUMBER in section


def test_a_malformed_budget_is_named_with_its_fix_not_taken_as_the_default(
        runtime: Runtime, dashboard_client: Callable[..., TestClient], monkeypatch: pytest.MonkeyPatch) -> None:
    _on_as_of(runtime)
    monkeypatch.setenv("ONCEBEAT_REPORTS_LIVE_MS", "250ms")
    page = dashboard_client().get(PAGE)
    assert page.status_code == 400, page.status_code
    assert "ONCEBEAT_REPORTS_LIVE_MS='250ms' is not a whole number of milliseconds" in page.text.replace("&#39;", "'")
    assert "Traceback" not in page.text
