"""Issue 9 with real processes: a job of many emails, its worker SIGKILLed mid-send, a real SMTP server.

The worker is ``procs/newsletter_worker.py`` (one ``ctx.effect`` per recipient, message frozen at the first
attempt, point of no return before the final ``.`` of DATA); it kills itself with SIGKILL at a crash point
(``ONCEBEAT_CRASH_AT``). The mail server is the real aiosmtpd sink writing a Maildir; the operator's
decision goes through the real ``oncebeat effects resolve`` command.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_processes import PROCS, SRC, Proc, job, queue

from oncebeat.mail import MailSink, read_maildir
from oncebeat.store import open_store

pytestmark = pytest.mark.slow

LEASE = 1.0  # the killed worker's lease: short, so the rescue can start soon after
RECIPIENTS = [f"reader{n}@example.test" for n in range(1, 9)]


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., Proc]]:
    """Start ``procs/<script>`` as a child process (as in test_processes); children still running are killed."""
    children: list[Proc] = []

    def start(script: str, *args: str, env: dict[str, str] | None = None) -> Proc:
        name = f"{script}-{len(children) + 1}"
        child_env = {k: v for k, v in os.environ.items() if k != "ONCEBEAT_CRASH_AT"}
        child_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH")) if p)
        child_env.update(env or {})
        out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
        with out.open("wb") as stdout, err.open("wb") as stderr:
            popen = subprocess.Popen([sys.executable, str(PROCS / script), *args], env=child_env,
                                     stdout=stdout, stderr=stderr)
        children.append(Proc(name, popen, out, err))
        return children[-1]

    yield start
    for proc in children:
        if proc.popen.poll() is None:
            proc.popen.kill()
            proc.popen.wait(timeout=10)


@pytest.fixture
def sink(tmp_path: Path) -> Iterator[MailSink]:
    with MailSink(tmp_path / "maildir") as running:
        yield running


def delivered(sink: MailSink) -> collections.Counter[str]:
    """How many copies of each recipient's message the SMTP server stored (from the Maildir)."""
    return collections.Counter(m.to for m in read_maildir(sink.maildir))


def effect_states(db_url: str) -> dict[str, str]:
    with open_store(db_url) as store:
        return {r["key"].rpartition(":")[2]: r["state"] for r in store.read("list_effects", state=None)}


def run_worker(spawn: Callable[..., Proc], db_url: str, sink: MailSink, *args: str,
               crash_at: str | None = None) -> int:
    env = {"ONCEBEAT_CRASH_AT": crash_at} if crash_at else {}
    worker = spawn("newsletter_worker.py", db_url, sink.url, *args, env=env)
    return worker.wait(timeout=120)


def resolve(db_url: str, key: str, outcome: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([sys.executable, "-m", "oncebeat.cli", "effects", "resolve", key, outcome, "--db", db_url],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_job_of_many_emails_killed_mid_send_loses_none_and_resolving_delivers_the_last_one(
        db_url: str, sink: MailSink, spawn: Callable[..., Proc]) -> None:
    with open_store(db_url) as store:
        store.migrate()
        job_id = queue(store).enqueue("newsletter", {"edition": "march", "recipients": RECIPIENTS})
    assert job_id is not None

    # The 4th email: content sent and its point of no return recorded, then SIGKILL before the final ".".
    code = run_worker(spawn, db_url, sink, "--lease", str(LEASE), crash_at="effect_no_return:4")
    assert code == -signal.SIGKILL
    assert sorted(delivered(sink)) == RECIPIENTS[:3]

    time.sleep(LEASE + 0.5)  # the dead worker's lease runs out
    assert run_worker(spawn, db_url, sink, "--rescue") == 0
    states = effect_states(db_url)
    assert delivered(sink) == {r: 1 for r in RECIPIENTS if r != RECIPIENTS[3]}, "N-1 delivered, each once"
    assert [states[r] for r in RECIPIENTS].count("in_doubt") == 1 and states[RECIPIENTS[3]] == "in_doubt"
    assert set(states) == set(RECIPIENTS), "0 lost: every effect is done or in doubt"
    with open_store(db_url) as store:
        waiting = job(store, job_id)
    assert waiting.state == "in_doubt"
    assert waiting.errors[-1]["keys"] == [f"newsletter:march:{RECIPIENTS[3]}"]

    # The operator finds no copy at the mail server and says so; the job runs again.
    said = resolve(db_url, f"newsletter:march:{RECIPIENTS[3]}", "not_done")
    assert f"job {job_id} will run it again" in said
    assert run_worker(spawn, db_url, sink) == 0
    assert delivered(sink) == {r: 1 for r in RECIPIENTS}, "N delivered, each exactly once"
    assert set(effect_states(db_url).values()) == {"done"}
    with open_store(db_url) as store:
        assert job(store, job_id).state == "completed"


def test_a_worker_killed_after_the_final_dot_leaves_one_key_in_doubt_and_done_records_it(
        db_url: str, sink: MailSink, spawn: Callable[..., Proc]) -> None:
    with open_store(db_url) as store:
        store.migrate()
        job_id = queue(store).enqueue("newsletter", {"edition": "april", "recipients": RECIPIENTS})
    assert job_id is not None

    code = run_worker(spawn, db_url, sink, "--lease", str(LEASE), crash_at="smtp_after_dot:5")
    assert code == -signal.SIGKILL
    time.sleep(LEASE + 0.5)
    assert run_worker(spawn, db_url, sink, "--rescue") == 0
    assert delivered(sink) == {r: 1 for r in RECIPIENTS}, "the 5th reached the server before the kill"
    assert list(effect_states(db_url).values()).count("in_doubt") == 1

    said = resolve(db_url, f"newsletter:april:{RECIPIENTS[4]}", "done")  # the operator found it in the Maildir
    assert f"completed job(s) {job_id}" in said
    assert run_worker(spawn, db_url, sink) == 0
    assert delivered(sink) == {r: 1 for r in RECIPIENTS}, "resolving done sends nothing"
    with open_store(db_url) as store:
        assert job(store, job_id).state == "completed"
