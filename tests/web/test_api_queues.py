# ruff: noqa: F811  (fixtures imported from the helpers are redefined as test arguments, as pytest intends)
"""The HTTP API's queues (issue 26 item 5): GET /api/v1/queues gives the Queues page's numbers (depth, latency,
throughput, pause, limit); pause, resume and limit are keyed writes (a retry applied once), audited with the
token's name, and a bad limit is named by its JSON pointer. On both backends through the real application."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from api_helpers import READ, api_app, write_headers  # noqa: F401  (fixtures)
from starlette.testclient import TestClient
from web_helpers import runtime  # noqa: F401  (fixtures)

from oncebeat import audit
from oncebeat.pauses import paused_queues
from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.queue_limits import queue_limits
from oncebeat.reminders.runtime import Runtime

H = write_headers


def _queue(client: TestClient, name: str) -> dict[str, object]:
    answer = client.get("/api/v1/queues", headers=READ)
    assert answer.status_code == 200, answer.text
    [row] = [q for q in answer.json()["queues"] if q["queue"] == name]
    return row  # type: ignore[no-any-return]


def test_queues_are_read_with_depth_latency_throughput_pause_and_limit(
        runtime: Runtime, api_app: Callable[..., TestClient]) -> None:
    now = runtime.clock.now()
    q = Queue(runtime.store, clock=runtime.clock, source=current_source("api"))
    for minutes in (30, 5):
        q.enqueue("reminders.scan", queue="mail", run_at=now - timedelta(minutes=minutes))
    q.enqueue("reminders.scan", queue="mail", run_at=now + timedelta(hours=1))
    client = api_app()
    row = _queue(client, "mail")
    assert (row["available"], row["scheduled"], row["running"], row["held"]) == (2, 1, 0, 0)
    assert isinstance(row["latency_seconds"], float) and 30 * 60 <= row["latency_seconds"] < 31 * 60
    assert (row["paused"], row["paused_at"], row["limit"], row["throughput_window_seconds"]) == (False, None, None,
                                                                                                 3600)
    assert row["completed"] == row["discarded"] == row["cancelled"] == 0
    assert client.get("/api/v1/queues?state=x", headers=READ).status_code == 400


def test_pause_resume_and_limit_are_keyed_audited_writes(runtime: Runtime,
                                                         api_app: Callable[..., TestClient]) -> None:
    Queue(runtime.store, clock=runtime.clock, source=current_source("api")).enqueue("reminders.scan", queue="mail")
    client = api_app()
    key = H()
    paused = client.post("/api/v1/queues/mail/pause", headers=key)
    assert paused.status_code == 200 and paused.json() == {"queue": "mail", "state": "paused", "changed": True}
    again = client.post("/api/v1/queues/mail/pause", headers=key)  # a retry: answered as the first time
    assert again.json()["changed"] is True and again.headers["idempotent-replayed"] == "true"
    assert client.post("/api/v1/queues/mail/pause", headers=H()).json()["changed"] is False
    assert [p["queue"] for p in paused_queues(runtime.store)] == ["mail"]
    row = _queue(client, "mail")
    assert row["paused"] is True and "billing" in str(row["paused_by"])
    [event] = [e for e in audit.events_of(runtime.store, "queue:mail") if e["kind"] == "queue.paused"]
    assert event["source_kind"] == "api" and "billing" in str(event["detail"]["operator"])
    assert client.post("/api/v1/queues/mail/resume", headers=H()).json() == {"queue": "mail", "state": "active",
                                                                            "changed": True}
    assert paused_queues(runtime.store) == []

    limited = client.post("/api/v1/queues/mail/limit", json={"limit": 3}, headers=H())
    assert limited.json() == {"queue": "mail", "limit": 3, "before": None, "changed": True}
    assert int(queue_limits(runtime.store)["mail"]["max_running"]) == 3 and _queue(client, "mail")["limit"] == 3
    lifted = client.post("/api/v1/queues/mail/limit", json={"limit": None}, headers=H())
    assert lifted.json() == {"queue": "mail", "limit": None, "before": 3, "changed": True}
    assert "mail" not in queue_limits(runtime.store)
    kinds = [e["kind"] for e in audit.events_of(runtime.store, "queue:mail")]
    assert {"queue.paused", "queue.resumed", "queue.limited", "queue.unlimited"} <= set(kinds)


def test_a_bad_limit_or_queue_name_is_named_and_nothing_is_applied(runtime: Runtime,
                                                                   api_app: Callable[..., TestClient]) -> None:
    client = api_app()
    for body, pointer in (({"limit": 0}, "/limit"), ({"limit": "3"}, "/limit"), ({"limit": True}, "/limit"),
                          ({}, "/limit"), ({"limit": 3, "max": 4}, "/max"), ([3], "")):
        answer = client.post("/api/v1/queues/mail/limit", json=body, headers=H())
        assert answer.status_code == 422, (body, answer.text)
        assert pointer in [p["pointer"] for p in answer.json()["error"]["problems"]], (body, answer.text)
    assert queue_limits(runtime.store) == {}
    body = client.post("/api/v1/queues/mail/pause", json={"now": True}, headers=H())
    assert body.status_code == 422 and "takes no body" in body.text
    long = client.post("/api/v1/queues/" + "x" * 300 + "/pause", headers=H())
    assert long.status_code == 422 and "at most 200" in long.text
    assert paused_queues(runtime.store) == []
    assert client.post("/api/v1/queues/mail/pause", headers=READ).status_code == 403  # read scope
