# ruff: noqa: F811  (fixtures imported from web_helpers are redefined as test arguments, as pytest intends)
"""Run-time schedule management from the dashboard (issue 12 items 4 and 5): the schedule page's forms change
the definition (expression, zone, DST options, catch-up, overlap policy), retire the schedule and re-run a failed
occurrence, each through oncebeat.schedule_admin, behind the operator token and the CSRF check."""

from __future__ import annotations

import html
import re
from collections.abc import Callable

from starlette.testclient import TestClient
from web_helpers import csrf_of, dashboard_client, login, runtime  # noqa: F401  (fixtures)

from oncebeat.clock import ClockProcess
from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.reminders.runtime import Runtime

PAGE = "/schedules/reminders"


def _form(client: TestClient, url: str, **data: str) -> tuple[int, str]:
    response = client.post(url, data={"csrf": csrf_of(client.get(PAGE).text), **data})
    return response.status_code, response.text


def _definition(**changes: str) -> dict[str, str]:
    base = {"expression": "0 8 * * *", "tz": "America/Chicago", "dst_gap": "shift", "dst_fold": "first",
            "catchup": "latest", "catchup_window": "86400", "overlap": "allow"}
    return {**base, **changes}


def test_the_set_form_changes_expression_and_overlap_and_the_pages_show_it(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    ClockProcess(runtime.app, runtime.store, clock=runtime.clock).sync()
    client = dashboard_client()
    page = client.get(PAGE).text
    assert 'action="/schedules/reminders/set"' in page and "<option selected>allow</option>" in page
    assert _form(client, PAGE + "/set", **_definition(overlap="skip"))[0] == 403  # a viewer: refused
    [row] = runtime.store.read("get_schedule", key="reminders")
    assert (row["overlap"], row["origin"]) == ("allow", "code")

    login(client)
    status, _ = _form(client, PAGE + "/set", **_definition(expression="30 9 * * 1-5", overlap="skip"))
    assert status == 303
    [row] = runtime.store.read("get_schedule", key="reminders")
    assert (row["expression"], row["overlap"], row["origin"], row["version"]) == ("30 9 * * 1-5", "skip",
                                                                                  "runtime", 2)
    [changed] = runtime.store.read("events_of_subject", subject="schedule:reminders", limit=1)
    assert changed["kind"] == "schedule.changed" and changed["source_name"] == "oncebeat web"
    page = client.get(PAGE).text
    assert "<code>30 9 * * 1-5</code>" in page and '<span class="badge overlap">skip</span>' in page
    assert "run-time edit" in page and "<option selected>skip</option>" in page
    listing = client.get("/schedules").text
    assert re.search(r"<td>skip</td>", listing) and "run-time</span>" in listing
    assert _form(client, PAGE + "/set", **_definition(expression="30 9 * * 1-5", overlap="skip"))[0] == 303
    assert runtime.store.read("get_schedule", key="reminders")[0]["version"] == 2  # the same again: no version


def test_bad_input_in_the_set_form_is_answered_with_the_problem(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    ClockProcess(runtime.app, runtime.store, clock=runtime.clock).sync()
    client = dashboard_client()
    login(client)
    status, text = _form(client, PAGE + "/set", **_definition(overlap="sometimes"))
    assert status == 400 and "overlap must be one of allow, skip, buffer_one" in text
    status, text = _form(client, PAGE + "/set", **_definition(catchup_window="a day"))
    assert status == 400 and "catch-up window" in text and "86400" in text
    status, text = _form(client, PAGE + "/set", **_definition(tz="Europe/Pariss"))
    assert status == 400 and "Europe/Paris" in text and "Traceback" not in text
    assert runtime.store.read("get_schedule", key="reminders")[0]["version"] == 1


def test_an_operator_retires_a_schedule_from_its_page(runtime: Runtime,
                                                      dashboard_client: Callable[..., TestClient]) -> None:
    ClockProcess(runtime.app, runtime.store, clock=runtime.clock).sync()
    client = dashboard_client()
    login(client)
    assert _form(client, PAGE + "/retire")[0] == 303
    assert runtime.store.read("get_schedule", key="reminders")[0]["state"] == "retired"
    page = client.get(PAGE).text
    assert 'class="badge retired"' in page and "/set" not in page and "/trigger" not in page


def test_a_failed_occurrence_is_re_run_from_the_timeline(runtime: Runtime,
                                                         dashboard_client: Callable[..., TestClient]) -> None:
    clock = ClockProcess(runtime.app, runtime.store, clock=runtime.clock, source=current_source("cli"))
    fire = clock.trigger("reminders")
    queue = Queue(runtime.store, clock=runtime.clock, source=current_source("worker"))
    [job] = queue.claim(1, queues=[runtime.app.tasks[runtime.app.schedules["reminders"].task].queue])
    assert job.id == fire.job_id and queue.fail(job, 1, "SMTP down", permanent=True) == "discarded"
    client = dashboard_client()
    rerun_url = f"/occurrences/{fire.occurrence_id}/rerun"
    assert f'action="{rerun_url}"' in client.get(PAGE).text
    assert _form(client, rerun_url)[0] == 403  # a viewer: refused
    login(client)
    assert _form(client, rerun_url)[0] == 303
    rows = runtime.store.read("occurrence_timeline", schedule_key="reminders", before=None, limit=10)
    assert [(r["outcome"], r["rerun_of"], r["job_state"]) for r in rows] == [
        ("manual", fire.occurrence_id, "available"), ("manual", None, "discarded")]
    status, text = _form(client, f"/occurrences/{rows[0]['id']}/rerun")
    assert status == 400 and "already has run" in text and "available" in text  # its own run is unfinished: refused


def test_a_run_held_by_buffer_one_says_so_on_the_job_pages(runtime: Runtime,
                                                           dashboard_client: Callable[..., TestClient]) -> None:
    from oncebeat.schedule_admin import set_schedule

    clock = ClockProcess(runtime.app, runtime.store, clock=runtime.clock, source=current_source("cli"))
    clock.sync()
    set_schedule(runtime.store, "reminders", overlap="buffer_one", clock=runtime.clock)
    first, held, turned_away = (clock.trigger("reminders") for _ in range(3))
    assert first.job_id and held.job_id and turned_away.job_id is None
    client = dashboard_client()
    assert "held by its schedule's overlap policy (buffer_one)" in client.get(f"/jobs/{held.job_id}").text
    assert "held by its schedule" not in client.get(f"/jobs/{first.job_id}").text
    assert "held (overlap)" in client.get("/jobs?state=scheduled").text
    timeline = client.get(PAGE).text
    assert "overlap: previous run still running and one run already waiting" in timeline


def test_rerun_and_retry_now_are_hidden_while_a_run_of_the_occurrence_is_unfinished_and_forged_posts_refused(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    """Issue 21 item 5: after a re-run, neither the occurrence's Re-run nor its original job's Retry now is offered
    (the pages name the unfinished run instead), and a POST made anyway is refused naming it."""
    clock = ClockProcess(runtime.app, runtime.store, clock=runtime.clock, source=current_source("cli"))
    fire = clock.trigger("reminders")
    queue = Queue(runtime.store, clock=runtime.clock, source=current_source("worker"))
    [job] = queue.claim(1, queues=[runtime.app.tasks[runtime.app.schedules["reminders"].task].queue])
    assert job.id == fire.job_id and queue.fail(job, 1, "SMTP down", permanent=True) == "discarded"
    client = dashboard_client()
    login(client)
    rerun_url, retry_url = f"/occurrences/{fire.occurrence_id}/rerun", f"/jobs/{job.id}/retry"
    assert f'action="{rerun_url}"' in client.get(PAGE).text and f'action="{retry_url}"' in client.get(
        f"/jobs/{job.id}").text
    assert _form(client, rerun_url)[0] == 303
    [made_up] = [r for r in runtime.store.read("occurrence_timeline", schedule_key="reminders", before=None, limit=10)
                 if r["rerun_of"] == fire.occurrence_id]
    running = made_up["job_id"]

    page = client.get(PAGE).text
    assert f'action="{rerun_url}"' not in page and 'action="/occurrences/' not in page
    assert f'run <a href="/jobs/{running}">job {running}</a>' in page and "no re-run while it is unfinished" in page
    job_page = client.get(f"/jobs/{job.id}").text
    assert f'action="{retry_url}"' not in job_page
    assert f"Retry hidden: occurrence {fire.occurrence_id} already has run" in job_page
    assert f'<a href="/jobs/{running}">job {running}</a>' in job_page

    for url, then in ((retry_url, f"retry job {job.id}"), (rerun_url, "re-run it")):
        status, text = _form(client, url)
        assert status == 400 and "Traceback" not in text
        assert (f"occurrence {fire.occurrence_id} already has run {running} available; wait for it or cancel it "
                f"(`oncebeat jobs --cancel {running}`), then {then}") in html.unescape(text)
    jobs = runtime.store.read("list_jobs", state=None, task=None, limit=10)
    assert sorted((j["id"], j["state"]) for j in jobs) == [(job.id, "discarded"), (running, "available")]

    assert queue.cancel(running) is True  # the make-up run is withdrawn: the original may run again
    assert f'action="{retry_url}"' in client.get(f"/jobs/{job.id}").text
    assert f'action="{rerun_url}"' in client.get(PAGE).text
    assert _form(client, retry_url)[0] == 303
    assert queue.get(job.id).state == "available"  # type: ignore[union-attr]


def test_a_paused_schedule_page_shows_its_held_runs_and_resume_releases_them(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    """Issue 22 item 2: a run queued before the pause waits; the page says how many and that resume releases."""
    from oncebeat.schedule_admin import trigger_schedule

    ClockProcess(runtime.app, runtime.store, clock=runtime.clock).sync()
    trigger_schedule(runtime.store, runtime.app, "reminders", clock=runtime.clock)  # a run queued, no worker up
    client = dashboard_client()
    login(client)
    assert _form(client, PAGE + "/pause")[0] == 303
    page = client.get(PAGE).text
    assert '<span class="badge paused">1 held</span>' in page and "schedule reminders paused" in page
    assert "held: schedule reminders paused</span>" in client.get("/jobs").text  # the jobs list marks it
    assert _form(client, PAGE + "/resume")[0] == 303
    assert "held runs" not in client.get(PAGE).text
    [resumed] = runtime.store.read("events_of_subject", subject="schedule:reminders", limit=1)
    assert resumed["kind"] == "schedule.resumed" and resumed["detail"]["released_runs"] == 1
