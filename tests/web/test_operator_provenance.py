# ruff: noqa: F811  (fixtures imported from web_helpers are redefined as test arguments, as pytest intends)
"""The dashboard's "Trigger now" and re-run are recorded as an operator's actions through the dashboard, and the
doctor reports them as information, not as leftover triggers (issue 21 item 6); both backends."""

from __future__ import annotations

from collections.abc import Callable

from starlette.testclient import TestClient
from web_helpers import csrf_of, dashboard_client, login, runtime  # noqa: F401  (fixtures)

from oncebeat.clock import ClockProcess
from oncebeat.doctor import run_doctor
from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.reminders.runtime import Runtime

PAGE = "/schedules/reminders"


def _post(client: TestClient, url: str) -> int:
    return client.post(url, data={"csrf": csrf_of(client.get(PAGE).text)}).status_code


def test_trigger_now_and_rerun_on_the_dashboard_are_the_operators_in_the_doctor(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    clock = ClockProcess(runtime.app, runtime.store, clock=runtime.clock, source=current_source("clock"))
    clock.start()  # the deployment's clock (registered)
    client = dashboard_client()
    login(client)
    assert _post(client, PAGE + "/trigger") == 303
    [occurrence] = runtime.store.read("occurrence_timeline", schedule_key="reminders", before=None, limit=10)
    assert (occurrence["outcome"], occurrence["source_kind"], occurrence["source_name"]) == (
        "manual", "manual", "oncebeat web")
    assert Queue(runtime.store, clock=runtime.clock, source=current_source("worker")).cancel(occurrence["job_id"])
    assert _post(client, f"/occurrences/{occurrence['id']}/rerun") == 303

    events = runtime.store.read("doctor_events", since=occurrence["created_at"],
                                kinds=["occurrence.manual", "occurrence.rerun"])
    assert [(e["kind"], e["detail"]["operator"]) for e in events] == [
        ("occurrence.manual", {"via": "dashboard", "user": "operator session", "terminal": None}),
        ("occurrence.rerun", {"via": "dashboard", "user": "operator session", "terminal": None})]

    report = run_doctor(runtime.store, now=runtime.clock.now(), definitions=runtime.app)
    [finding] = report.by_code("leftover-trigger")
    assert finding.severity == "info" and report.counts()["warning"] == 0 and report.exit_code == 0
    assert finding.summary.startswith(f"schedule reminders: triggered it 1 time, re-ran occurrence {occurrence['id']} "
                                      "by an operator through the dashboard (oncebeat web on ")
    assert "user operator session" in finding.summary
    assert "the dashboard's operator token" in finding.fix
