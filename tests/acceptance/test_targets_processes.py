"""oncebeat as the exactly-once clock of a team's own workers, with the real programs (issue 25, item 3).

``oncebeat run --app oncebeat.targets:app`` fires the ``[[schedules]]`` of an oncebeat.toml every second and
pushes each occurrence to: a real Sidekiq 6 (Debian's ``ruby-sidekiq``, running
``fixtures/targets/overdue_job.rb`` unchanged), a real Celery worker (``fixtures/targets/celery_tasks.py``),
both on the Redis at 127.0.0.1:6379, and a threaded stdlib HTTP server. The clock is SIGKILLed around a push
(``ONCEBEAT_CRASH_AT``) and started again: every occurrence's job runs once, or its push is in doubt and ran at
most once — never twice.

Redis: each test uses a random database number and queue name and deletes only its own keys.
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import http.server
import json
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from oncebeat.errors import StoreError
from oncebeat.store import open_store
from oncebeat.targets import derived_jid, derived_uuid

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
FIXTURES = ROOT / "tests" / "fixtures" / "targets"
REDIS = "redis://127.0.0.1:6379"


def _redis_up() -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(REDIS, socket_connect_timeout=2).ping())
    except redis.RedisError:
        return False


@pytest.fixture
def redis_db() -> Iterator[tuple[str, str]]:
    """(Redis URL with a random database number, a fresh queue name); our keys are deleted afterwards."""
    import redis

    if not _redis_up():
        if os.environ.get("CI"):
            pytest.fail("Redis at 127.0.0.1:6379 is not reachable")
        pytest.skip("Redis at 127.0.0.1:6379 is not reachable")
    url = f"{REDIS}/{random.randint(1, 15)}"
    queue = f"ob-test-{secrets.token_hex(4)}"
    yield url, queue
    client = redis.Redis.from_url(url)
    client.delete(f"queue:{queue}", queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")
    client.srem("queues", queue)
    client.close()


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test starts; those still running at the end are killed (by pid)."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ONCEBEAT_CRASH_AT"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def _wait_for_line(path: Path, text: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError(f"{path.name} never said {text!r}:\n{path.read_text(errors='replace')[-3000:]}")


def start_sidekiq(children: list[subprocess.Popen[bytes]], tmp_path: Path, url: str, queue: str,
                  job_file: str = "overdue_job.rb") -> Path:
    """A real Sidekiq 6 running the unchanged worker on ``queue``; returns the file its jobs write."""
    sidekiq = shutil.which("sidekiq")
    if sidekiq is None:
        if os.environ.get("CI"):
            pytest.fail("sidekiq is not installed (.ci/run installs Debian's ruby-sidekiq)")
        pytest.skip("sidekiq is not installed (apt-get install ruby ruby-sidekiq)")
    out = tmp_path / "sidekiq-runs.txt"
    log = tmp_path / "sidekiq.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen([sidekiq, "-r", str(FIXTURES / job_file), "-q", queue, "-c", "2",
                                 "-t", "1"], env=_env(REDIS_URL=url, ONCEBEAT_TEST_OUT=str(out), RUBYOPT="-W0"),
                                stdout=sink, stderr=subprocess.STDOUT, cwd=tmp_path)
    children.append(proc)
    _wait_for_line(log, "Booting Sidekiq", proc)
    return out


def start_celery(children: list[subprocess.Popen[bytes]], tmp_path: Path, url: str, queue: str) -> Path:
    """A real Celery worker running the unchanged task on ``queue``; returns the file its runs write."""
    out = tmp_path / "celery-runs.txt"
    log = tmp_path / "celery.log"
    env = _env(CELERY_BROKER_URL=url, ONCEBEAT_TEST_OUT=str(out))
    env["PYTHONPATH"] = os.pathsep.join((str(FIXTURES), env["PYTHONPATH"]))
    with log.open("wb") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "celery", "-A", "celery_tasks", "worker", "-Q", queue,
                                 "--pool", "solo", "--without-gossip", "--without-mingle", "--without-heartbeat",
                                 "-l", "info"], env=env, stdout=sink, stderr=subprocess.STDOUT, cwd=tmp_path)
    children.append(proc)
    _wait_for_line(log, "ready.", proc)
    return out


def _toml(value: Any) -> str:
    if isinstance(value, dict):  # an inline table; JSON writes scalars and arrays as TOML does
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)


def write_config(tmp_path: Path, target: str, **options: Any) -> Path:
    lines = ["[[schedules]]", 'key = "overdue-reminders"', 'cron = "every 1s"', 'tz = "America/Chicago"',
             f"target = {json.dumps(target)}"]
    lines += [f"{k} = {_toml(v)}" for k, v in options.items()]
    path = tmp_path / "oncebeat.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def run_clock(children: list[subprocess.Popen[bytes]], tmp_path: Path, db_url: str, config: Path, *,
              done: int | None, crash_at: str | None = None, settled: str | None = None, **env: str) -> int:
    """``oncebeat run --app oncebeat.targets:app`` (clock + worker); SIGTERM once the ledger holds ``done``
    completed pushes and the push ``settled`` (a key) is no longer ``started`` (None: wait for it to die at
    ``crash_at``). Returns its exit status (-9 when it killed itself)."""
    extra = {"ONCEBEAT_CONFIG": str(config), **env}
    if crash_at:
        extra["ONCEBEAT_CRASH_AT"] = crash_at
    n = len(children)
    with (tmp_path / f"oncebeat-{n}.log").open("wb") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "oncebeat.cli", "run", "--app", "oncebeat.targets:app",
                                 "--db", db_url, "-c", "1", "--lease", "2", "--rescue-interval", "0.5",
                                 "--grace", "5"], env=_env(**extra), stdout=sink, stderr=subprocess.STDOUT,
                                cwd=tmp_path)
    children.append(proc)
    if done is None:
        return proc.wait(timeout=60)
    deadline = time.monotonic() + 60  # a loaded machine starts slowly; the clock fires every second meanwhile
    while time.monotonic() < deadline and proc.poll() is None:
        rows = pushes(db_url, missing_ok=True)
        if sum(r["state"] == "done" for r in rows.values()) >= done and (
                settled is None or rows.get(settled, {}).get("state") not in (None, "started")):
            break
        time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=30)


def pushes(db_url: str, *, missing_ok: bool = False) -> dict[str, dict[str, Any]]:
    """The push effects in the ledger, by key, oldest first (``missing_ok``: {} before oncebeat created it)."""
    if missing_ok and db_url.startswith("sqlite:///") and not Path(db_url.removeprefix("sqlite:///")).exists():
        return {}
    try:
        with open_store(db_url, create=False) as store:
            rows = store.read("list_effects", state=None)
    except StoreError:
        if missing_ok:
            return {}
        raise
    return {r["key"]: r for r in rows if r["key"].startswith("push:")}


def runs(path: Path) -> collections.Counter[str]:
    """How many times the worker ran each job id (first column of its output file)."""
    if not path.exists():
        return collections.Counter()
    return collections.Counter(line.split("\t")[0] for line in path.read_text().splitlines() if line)


def settle(path: Path, expected: int, timeout: float = 20.0) -> collections.Counter[str]:
    """Wait until the worker ran at least ``expected`` jobs, then a moment more (a late duplicate would show)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and sum(runs(path).values()) < expected:
        time.sleep(0.2)
    time.sleep(1.5)
    return runs(path)


# ----------------------------------------------------------------------------------------------------- Sidekiq


def test_sidekiq_runs_each_occurrence_once_with_its_derived_jid(db_url: str, redis_db: tuple[str, str],
                                                                  tmp_path: Path,
                                                                  children: list[subprocess.Popen[bytes]]) -> None:
    url, queue = redis_db
    out = start_sidekiq(children, tmp_path, url, queue)
    config = write_config(tmp_path, "sidekiq:OverdueReminderJob", redis="$TEST_REDIS_URL", queue=queue,
                          args=["overdue", 7])
    assert run_clock(children, tmp_path, db_url, config, done=3, TEST_REDIS_URL=url) == 0
    done = {k: r for k, r in pushes(db_url).items() if r["state"] == "done"}
    assert len(done) >= 2, pushes(db_url)
    ran = settle(out, len(done))
    assert ran == collections.Counter({derived_jid(k): 1 for k in done})
    for key, row in done.items():
        assert row["result"]["jid"] == derived_jid(key) and row["result"]["queue"] == queue
    first = out.read_text().splitlines()[0].split("\t")
    assert json.loads(first[1]) == ["overdue", 7]  # the worker got the configured arguments, unchanged


def test_an_unchanged_active_job_runs_once_per_occurrence_through_the_sidekiq_adapter(
        db_url: str, redis_db: tuple[str, str], tmp_path: Path, children: list[subprocess.Popen[bytes]]) -> None:
    url, queue = redis_db
    out = start_sidekiq(children, tmp_path, url, queue, job_file="overdue_active_job.rb")
    config = write_config(tmp_path, "sidekiq:OverdueNoticeJob", redis="$TEST_REDIS_URL", queue=queue,
                          activejob=True, args=[7, {"ladder": "b2b"}])
    assert run_clock(children, tmp_path, db_url, config, done=3, TEST_REDIS_URL=url) == 0
    done = [k for k, r in pushes(db_url).items() if r["state"] == "done"]
    ran = settle(out, len(done))
    assert ran == collections.Counter({derived_uuid(k): 1 for k in done})  # Active Job's job_id, once each
    lines = [line.split("\t") for line in out.read_text().splitlines()]
    by_job = {job_id: (provider, json.loads(args)) for job_id, provider, args in lines}
    for key in done:
        provider, args = by_job[derived_uuid(key)]
        assert provider == derived_jid(key) and args == [7, {"ladder": "b2b"}]


@pytest.mark.parametrize(("crash_at", "crashed_state"), [("target_ready", "done"),
                                                         ("effect_before_record", "in_doubt")])
def test_sidekiq_kill9_around_the_push_never_runs_a_job_twice(db_url: str, redis_db: tuple[str, str],
                                                              tmp_path: Path,
                                                              children: list[subprocess.Popen[bytes]],
                                                              crash_at: str, crashed_state: str) -> None:
    url, queue = redis_db
    out = start_sidekiq(children, tmp_path, url, queue)
    config = write_config(tmp_path, "sidekiq:OverdueReminderJob", redis="$TEST_REDIS_URL", queue=queue)
    assert run_clock(children, tmp_path, db_url, config, done=None, crash_at=crash_at,
                     TEST_REDIS_URL=url) == -signal.SIGKILL
    crashed = next(iter(pushes(db_url)))
    # restarted: the dead attempt's lease ends, its job is rescued; the clock goes on firing
    assert run_clock(children, tmp_path, db_url, config, done=3, settled=crashed, TEST_REDIS_URL=url) == 0
    rows = pushes(db_url)
    assert rows[crashed]["state"] == crashed_state, rows[crashed]
    done = [k for k, r in rows.items() if r["state"] == "done"]
    ran = settle(out, len(done) + (crashed_state == "in_doubt"))
    assert ran[derived_jid(crashed)] == 1  # pushed before the kill (in doubt) or by the retry (done): once
    assert max(ran.values()) == 1, ran
    assert set(ran) == {derived_jid(k) for k in rows if rows[k]["state"] in ("done", "in_doubt")}
    if crashed_state == "in_doubt":
        listing = subprocess.run([sys.executable, "-m", "oncebeat.cli", "effects", "list", "--db", db_url],
                                 env=_env(), capture_output=True, text=True, timeout=60)
        assert crashed in listing.stdout, listing.stdout + listing.stderr
        doctor = subprocess.run([sys.executable, "-m", "oncebeat.cli", "doctor", "--db", db_url, "--app",
                                 "oncebeat.targets:app"], env=_env(ONCEBEAT_CONFIG=str(config)),
                                capture_output=True, text=True, timeout=120)
        assert f"effect {crashed} is in doubt" in doctor.stdout, doctor.stdout + doctor.stderr
        assert f"jid {derived_jid(crashed)}" in doctor.stdout and "Sidekiq Web" in doctor.stdout


# ------------------------------------------------------------------------------------------------------ Celery


def test_celery_worker_runs_each_occurrence_once_with_its_derived_task_id(
        db_url: str, redis_db: tuple[str, str], tmp_path: Path,
        children: list[subprocess.Popen[bytes]]) -> None:
    url, queue = redis_db
    out = start_celery(children, tmp_path, url, queue)
    config = write_config(tmp_path, "celery:billing.tasks.send_overdue_reminders", broker="$TEST_BROKER_URL",
                          queue=queue, args=[30], kwargs={"dry_run": False})
    assert run_clock(children, tmp_path, db_url, config, done=3, TEST_BROKER_URL=url) == 0
    done = {k: r for k, r in pushes(db_url).items() if r["state"] == "done"}
    assert len(done) >= 2, pushes(db_url)
    ran = settle(out, len(done))
    assert ran == collections.Counter({derived_uuid(k): 1 for k in done})
    _, args, kwargs = out.read_text().splitlines()[0].split("\t")
    assert json.loads(args) == [30] and json.loads(kwargs) == {"dry_run": False}


@pytest.mark.parametrize(("crash_at", "crashed_state"), [("target_ready", "done"),
                                                         ("effect_before_record", "in_doubt")])
def test_celery_kill9_around_the_push_never_runs_a_task_twice(db_url: str, redis_db: tuple[str, str],
                                                              tmp_path: Path,
                                                              children: list[subprocess.Popen[bytes]],
                                                              crash_at: str, crashed_state: str) -> None:
    url, queue = redis_db
    out = start_celery(children, tmp_path, url, queue)
    config = write_config(tmp_path, "celery:billing.tasks.send_overdue_reminders", broker="$TEST_BROKER_URL",
                          queue=queue)
    assert run_clock(children, tmp_path, db_url, config, done=None, crash_at=crash_at,
                     TEST_BROKER_URL=url) == -signal.SIGKILL
    crashed = next(iter(pushes(db_url)))
    assert run_clock(children, tmp_path, db_url, config, done=3, settled=crashed, TEST_BROKER_URL=url) == 0
    rows = pushes(db_url)
    assert rows[crashed]["state"] == crashed_state, rows[crashed]
    done = [k for k, r in rows.items() if r["state"] == "done"]
    ran = settle(out, len(done) + (crashed_state == "in_doubt"))
    assert ran[derived_uuid(crashed)] == 1
    assert max(ran.values()) == 1, ran


# -------------------------------------------------------------------------------------------------------- HTTP

SECRET = "whsec-test-4f1c9a"


class Endpoint:
    """A threaded stdlib HTTP server that records each POST; ``script`` picks the reply per Idempotency-Key:
    a status, or ``"drop"`` to close the connection without a reply."""

    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []
        self.script: Callable[[str, int], int | str] = lambda key, n: 200
        self.lock = threading.Lock()
        endpoint = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                key = self.headers["Idempotency-Key"]
                with endpoint.lock:
                    seen = sum(1 for p in endpoint.posts if p["key"] == key)
                    endpoint.posts.append({"key": key, "body": body, "signature": self.headers[
                        "Oncebeat-Signature"], "path": self.path})
                reply = endpoint.script(key, seen + 1)
                if reply == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                data = json.dumps({"accepted": key}).encode()
                self.send_response(int(reply))
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/overdue"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def by_key(self) -> collections.Counter[str]:
        with self.lock:
            return collections.Counter(p["key"] for p in self.posts)


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    server = Endpoint()
    yield server
    server.close()


def _valid_signature(post: dict[str, Any]) -> bool:
    fields = dict(part.split("=", 1) for part in post["signature"].split(","))
    expected = hmac.new(SECRET.encode(), f"{fields['t']}.".encode() + post["body"], hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, fields["v1"])


def test_http_endpoint_gets_one_signed_post_per_occurrence(db_url: str, tmp_path: Path, endpoint: Endpoint,
                                                           children: list[subprocess.Popen[bytes]]) -> None:
    endpoint.script = lambda key, n: 503 if n == 1 else 200  # each first POST fails: retried with backoff
    config = write_config(tmp_path, f"http:{endpoint.url}", secret_env="TEST_HOOK_SECRET", args={"ladder": "b2b"})
    assert run_clock(children, tmp_path, db_url, config, done=3, TEST_HOOK_SECRET=SECRET) == 0
    rows = pushes(db_url)
    done = {k: r for k, r in rows.items() if r["state"] == "done"}
    assert len(done) >= 2, rows
    assert endpoint.by_key() == collections.Counter({derived_uuid(k): 2 for k in done})
    assert all(_valid_signature(p) for p in endpoint.posts)
    for key, row in done.items():
        assert row["result"]["status"] == 200 and row["result"]["posts"] == 2
        assert json.loads(row["result"]["body"]) == {"accepted": derived_uuid(key)}  # the response is kept
    body = json.loads(endpoint.posts[0]["body"])
    assert body["schedule"] == "overdue-reminders" and body["args"] == {"ladder": "b2b"}
    assert body["tz"] == "America/Chicago" and body["business_date"] and body["fire_at"].endswith("+00:00")
    assert SECRET not in (tmp_path / "oncebeat-0.log").read_text()


def test_http_lost_reply_is_in_doubt_and_never_posted_again(db_url: str, tmp_path: Path, endpoint: Endpoint,
                                                            children: list[subprocess.Popen[bytes]]) -> None:
    dropped: list[str] = []

    def script(key: str, n: int) -> int | str:
        if not dropped or dropped[0] == key:
            dropped[:1] = [key]
            return "drop"  # the first occurrence's reply is lost
        return 200

    endpoint.script = script
    config = write_config(tmp_path, f"http:{endpoint.url}", secret_env="TEST_HOOK_SECRET")
    assert run_clock(children, tmp_path, db_url, config, done=3, TEST_HOOK_SECRET=SECRET) == 0
    rows = pushes(db_url)
    lost = next(k for k in rows if derived_uuid(k) == dropped[0])
    assert rows[lost]["state"] == "in_doubt"
    assert endpoint.by_key()[dropped[0]] == 1  # never re-posted blindly
    assert all(r["state"] == "done" for k, r in rows.items() if k != lost)


@pytest.mark.parametrize(("crash_at", "crashed_state", "posts"), [("target_ready", "done", 1),
                                                                  ("target_sent", "in_doubt", 1)])
def test_http_kill9_around_the_post_never_posts_twice(db_url: str, tmp_path: Path, endpoint: Endpoint,
                                                      children: list[subprocess.Popen[bytes]], crash_at: str,
                                                      crashed_state: str, posts: int) -> None:
    config = write_config(tmp_path, f"http:{endpoint.url}", secret_env="TEST_HOOK_SECRET")
    assert run_clock(children, tmp_path, db_url, config, done=None, crash_at=crash_at,
                     TEST_HOOK_SECRET=SECRET) == -signal.SIGKILL
    crashed = next(iter(pushes(db_url)))
    assert run_clock(children, tmp_path, db_url, config, done=3, TEST_HOOK_SECRET=SECRET) == 0
    rows = pushes(db_url)
    assert rows[crashed]["state"] == crashed_state, rows[crashed]
    seen = endpoint.by_key()
    assert seen[derived_uuid(crashed)] == posts
    assert max(seen.values()) == 1, seen
