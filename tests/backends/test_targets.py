"""Target schedules in-process, on both backends: Sidekiq's wire format in the real Redis, a second run of an
occurrence pushing nothing, and the HTTP outcomes that are retried, final or in doubt (a real local server)."""

from __future__ import annotations

import http.server
import json
import os
import random
import secrets
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oncebeat import App, Queue, SimulatedClock, Store, Worker, current_source
from oncebeat.queue import copy_job, job_row
from oncebeat.schedule_admin import trigger_schedule
from oncebeat.targets import derived_jid, derived_uuid, schedule

REDIS = "redis://127.0.0.1:6379"


@pytest.fixture
def redis_target() -> Iterator[tuple[str, str]]:
    import redis

    try:
        redis.Redis.from_url(REDIS, socket_connect_timeout=2).ping()
    except redis.RedisError:
        if os.environ.get("CI"):
            pytest.fail("Redis at 127.0.0.1:6379 is not reachable")
        pytest.skip("Redis at 127.0.0.1:6379 is not reachable")
    url, queue = f"{REDIS}/{random.randint(1, 15)}", f"ob-test-{secrets.token_hex(4)}"
    yield url, queue
    client = redis.Redis.from_url(url)
    client.delete(f"queue:{queue}", f"ns1:queue:{queue}")
    client.srem("queues", queue)
    client.srem("ns1:queues", queue)
    client.close()


def _run(app: App, store: Store, clock: SimulatedClock, key: str) -> dict[str, Any]:
    fire = trigger_schedule(store, app, key, clock=clock)
    Worker(app, store, clock=clock).drain()
    job = job_row(store, fire.job_id or 0)
    assert job is not None
    return job


def test_sidekiq_job_is_pushed_in_sidekiqs_own_format_and_a_second_run_pushes_nothing(
        store: Store, sim_clock: SimulatedClock, redis_target: tuple[str, str]) -> None:
    import redis

    url, queue = redis_target
    app = App()
    schedule(app, "overdue", "0 8 * * *", tz="America/Chicago", target="sidekiq:OverdueReminderJob", redis=url,
             queue=queue, args=[1, "b2b"])
    job = _run(app, store, sim_clock, "overdue")
    assert job["state"] == "completed", job["errors"]
    client = redis.Redis.from_url(url, decode_responses=True)
    [raw] = client.lrange(f"queue:{queue}", 0, -1)
    pushed = json.loads(raw)
    [effect] = [e for e in store.read("list_effects", state=None) if e["key"].startswith("push:overdue:")]
    assert pushed["class"] == "OverdueReminderJob" and pushed["args"] == [1, "b2b"] and pushed["queue"] == queue
    assert pushed["jid"] == derived_jid(effect["key"]) and len(pushed["jid"]) == 24 and pushed["retry"] is True
    assert isinstance(pushed["created_at"], float) and pushed["enqueued_at"] == pushed["created_at"]
    assert pushed["oncebeat"]["schedule"] == "overdue" and pushed["oncebeat"]["tz"] == "America/Chicago"
    assert queue in client.smembers("queues")
    assert effect["state"] == "done" and effect["result"]["jid"] == pushed["jid"]

    # a second run of the same occurrence (a copy of its job, as a retry or rescue would be) pushes nothing
    with store.transaction() as tx:
        copy = copy_job(tx, job["id"], now=sim_clock.now(), source=current_source("cli"))
    Worker(app, store, clock=sim_clock).drain()
    assert job_row(store, copy or 0)["state"] == "completed"  # type: ignore[index]
    assert client.llen(f"queue:{queue}") == 1
    client.close()


def test_sidekiq_under_redis_namespace_prefixes_both_keys(store: Store, sim_clock: SimulatedClock,
                                                          redis_target: tuple[str, str]) -> None:
    import redis

    url, queue = redis_target
    app = App()
    schedule(app, "ns", "0 8 * * *", tz="UTC", target="sidekiq:Billing::OverdueJob", redis=url, queue=queue,
             namespace="ns1")
    assert _run(app, store, sim_clock, "ns")["state"] == "completed"
    client = redis.Redis.from_url(url, decode_responses=True)
    assert client.llen(f"ns1:queue:{queue}") == 1 and queue in client.smembers("ns1:queues")
    assert client.llen(f"queue:{queue}") == 0
    client.close()


def test_unreachable_redis_is_retried_not_in_doubt(store: Store, sim_clock: SimulatedClock) -> None:
    app = App()
    schedule(app, "down", "0 8 * * *", tz="UTC", target="sidekiq:OverdueReminderJob",
             redis=f"redis://127.0.0.1:{_free_port()}/0")
    job = _run(app, store, sim_clock, "down")
    assert job["state"] == "retryable"
    assert "Redis not reached" in job["errors"][-1]["error"]
    [effect] = store.read("list_effects", state=None)
    assert effect["state"] == "failed"  # nothing left: a later attempt pushes


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Reply(http.server.BaseHTTPRequestHandler):
    status = 200
    seen: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).seen.append({"key": self.headers["Idempotency-Key"], "body": json.loads(body)})
        data = b'{"error": "unknown ladder"}'
        self.send_response(type(self).status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type[_Reply]]]:
    handler = type("Reply", (_Reply,), {"seen": [], "status": 200})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/hook", handler
    srv.shutdown()
    srv.server_close()


def test_http_4xx_is_final_and_keeps_the_reply(store: Store, sim_clock: SimulatedClock,
                                               server: tuple[str, type[_Reply]],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    url, handler = server
    handler.status = 422
    monkeypatch.setenv("TEST_HOOK_SECRET", "s3cret-value")
    app = App()
    schedule(app, "hook", "0 8 * * *", tz="UTC", target=f"http:{url}", secret_env="TEST_HOOK_SECRET")
    job = _run(app, store, sim_clock, "hook")
    assert job["state"] == "discarded"
    assert "HTTP 422" in job["errors"][-1]["error"] and "unknown ladder" in job["errors"][-1]["error"]
    assert len(handler.seen) == 1 and handler.seen[0]["key"] == derived_uuid(
        store.read("list_effects", state=None)[0]["key"])


def test_http_without_its_secret_variable_is_discarded_naming_the_variable(store: Store, sim_clock: SimulatedClock,
                                                                           server: tuple[str, type[_Reply]],
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    url, handler = server
    monkeypatch.delenv("TEST_HOOK_SECRET_UNSET", raising=False)
    app = App()
    schedule(app, "hook", "0 8 * * *", tz="UTC", target=f"http:{url}", secret_env="TEST_HOOK_SECRET_UNSET")
    job = _run(app, store, sim_clock, "hook")
    assert job["state"] == "discarded"
    assert "TEST_HOOK_SECRET_UNSET is not set" in job["errors"][-1]["error"]
    assert handler.seen == []


def test_a_push_job_enqueued_by_hand_is_discarded(store: Store, sim_clock: SimulatedClock) -> None:
    app = App()
    schedule(app, "hook", "0 8 * * *", tz="UTC", target="http:http://127.0.0.1:9/x", secret_env="X")
    job_id = Queue(store, clock=sim_clock, source=current_source("api"), app=app).enqueue(
        "oncebeat.push", {"target": "http:http://127.0.0.1:9/x", "secret_env": "X"})
    Worker(app, store, clock=sim_clock).drain()
    job = job_row(store, job_id)
    assert job is not None and job["state"] == "discarded"
    assert "has none" in job["errors"][-1]["error"]


def test_a_broker_password_never_reaches_the_jobs_errors(store: Store, sim_clock: SimulatedClock,
                                                         redis_target: tuple[str, str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Redis at 127.0.0.1 has no user 'billing', so AUTH fails: the job is retried, its error hides the password."""
    url, queue = redis_target
    monkeypatch.setenv("TEST_REDIS_URL", url.replace("redis://", "redis://billing:Pa55-w0rd-xyz@"))
    app = App()
    schedule(app, "auth", "0 8 * * *", tz="UTC", target="sidekiq:OverdueReminderJob", redis="$TEST_REDIS_URL",
             queue=queue)
    job = _run(app, store, sim_clock, "auth")
    assert job["state"] == "retryable"
    text = json.dumps(job["errors"]) + json.dumps(store.read("list_effects", state=None), default=str)
    assert "Redis not reached" in text and "Pa55-w0rd-xyz" not in text


def test_the_cli_lists_a_target_schedule_with_its_target(db_url: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from oncebeat.cli import cli

    config = tmp_path / "oncebeat.toml"
    config.write_text('[[schedules]]\nkey = "overdue"\ncron = "0 8 * * *"\ntz = "America/Chicago"\n'
                      'target = "sidekiq:OverdueReminderJob"\nredis = "$REDIS_URL"\n')
    monkeypatch.setenv("ONCEBEAT_CONFIG", str(config))
    runner = CliRunner()
    assert runner.invoke(cli, ["migrate", "--db", db_url, "--app", "oncebeat.targets:app"]).exit_code == 0
    result = runner.invoke(cli, ["schedules", "--db", db_url, "--app", "oncebeat.targets:app"])
    assert result.exit_code == 0, result.output
    assert "overdue: 0 8 * * * in America/Chicago -> oncebeat.push to sidekiq:OverdueReminderJob" in result.output


def test_unreachable_celery_broker_is_retried_not_in_doubt(store: Store, sim_clock: SimulatedClock) -> None:
    app = App()
    schedule(app, "down", "0 8 * * *", tz="UTC", target="celery:billing.tasks.x",
             broker=f"redis://127.0.0.1:{_free_port()}/0")
    job = _run(app, store, sim_clock, "down")
    assert job["state"] == "retryable"
    assert "broker not reached" in job["errors"][-1]["error"]
    [effect] = store.read("list_effects", state=None)
    assert effect["state"] == "failed"
