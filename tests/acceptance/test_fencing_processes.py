"""Issue 9 item 5 with real processes: fencing of a worker frozen past its lease, and of one whose heartbeat is cut.

The workers are ``procs/fenced_worker.py`` (the real :class:`~oncebeat.worker.Worker`); job bodies write
``start``/``end`` lines and their effects append to an outbox file, which survive a frozen or killed process.
A worker is frozen with SIGSTOP outside any database transaction (a process frozen inside one holds its locks:
on SQLite every writer waits, on PostgreSQL the rescue skips the locked rows — a property of the databases,
not of fencing), so the test retries the freeze until it lands between transactions.
"""

from __future__ import annotations

import collections
import itertools
import os
import secrets
import signal
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import pytest
from test_processes import Proc, job, queue, spawn, wait_for  # noqa: F401 - spawn is a fixture

from oncebeat.store import Store

pytestmark = pytest.mark.slow

LEASE = 2.0
JOBS = 40
BATCH = 20  # ten rounds of two slots: a batch lasts about 3 s


def tagged(db_url: str) -> tuple[str, str]:
    """``db_url`` with a PostgreSQL ``application_name`` of its own (to see that process's sessions), and the tag."""
    tag = f"fence_{secrets.token_hex(4)}"
    if not db_url.startswith("postgres"):
        return db_url, tag
    parts = urlsplit(db_url)
    query = urlencode([*parse_qsl(parts.query), ("application_name", tag)])
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment)), tag


def in_transaction(db_url: str, tag: str) -> bool:
    """Whether the process tagged ``tag`` is frozen inside a database transaction."""
    if db_url.startswith("sqlite"):
        conn = sqlite3.connect(urlsplit(db_url).path[1:], timeout=0.3, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
            return False
        except sqlite3.OperationalError:
            return True
        finally:
            conn.close()
    parts = urlsplit(db_url)
    base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    with psycopg.connect(base, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND state <> 'idle'",
                           (tag,)).fetchone()
    return bool(row and row[0])


def stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "T"


def freeze(proc: Proc, db_url: str, tag: str, ready: Callable[[], bool]) -> float:
    """SIGSTOP ``proc`` where ``ready()`` holds, outside a transaction; return the wall time of the freeze."""
    for _ in range(200):
        os.kill(proc.pid, signal.SIGSTOP)
        while not stopped(proc.pid):
            time.sleep(0.005)
        at = time.time()
        time.sleep(0.1)  # let a statement already sent finish on the server
        if not in_transaction(db_url, tag) and ready():
            return at
        os.kill(proc.pid, signal.SIGCONT)
        time.sleep(0.05)
    raise AssertionError(f"could not freeze {proc.name} outside a transaction with work left in its batch\n"
                         + proc.logs())


def lines(path: Path) -> list[dict[str, Any]]:
    """``start``/``end`` lines of bodies.txt as dicts (kind, job, n, attempt, pid, t)."""
    out = []
    for line in path.read_text().splitlines() if path.exists() else []:
        kind, *fields = line.split()
        row: dict[str, Any] = {"kind": kind}
        for f in fields:
            name, _, value = f.partition("=")
            row[name] = float(value) if name == "t" else int(value)
        out.append(row)
    return out


def deliveries(folder: Path) -> collections.Counter[str]:
    path = folder / "outbox.txt"
    return collections.Counter(line.split()[0] for line in path.read_text().splitlines()) if path.exists() else \
        collections.Counter()


def worker_id(store: Store, pid: int) -> int | None:
    ids = [int(p["id"]) for p in store.read("list_processes") if p["pid"] == pid]
    return ids[-1] if ids else None


def jobs_by_state(store: Store) -> list[dict[str, Any]]:
    return [{"id": int(r["id"]), "state": r["state"], "worker_id": r["worker_id"]}
            for r in store.read("list_jobs", state=None, task=None, limit=1000)]


def terminate(*procs: Proc) -> None:
    for p in procs:
        if p.popen.poll() is None:
            p.popen.send_signal(signal.SIGTERM)
    for p in procs:
        assert p.wait(timeout=30) == 0, p.logs()


def test_a_worker_frozen_past_its_lease_starts_none_of_its_lost_jobs_and_reruns_only_those_in_flight(
        db_url: str, store: Store, spawn: Callable[..., Proc], tmp_path: Path) -> None:  # noqa: F811
    q = queue(store)
    for n in range(JOBS):
        q.enqueue("work", {"n": n})
    url_a, tag = tagged(db_url)
    frozen = spawn("fenced_worker.py", url_a, str(tmp_path), "--lease", str(LEASE), "--batch", str(BATCH),
                   name="frozen")
    bodies = tmp_path / "bodies.txt"

    def started_by_frozen() -> set[int]:
        return {r["job"] for r in lines(bodies) if r["kind"] == "start" and r["pid"] == frozen.pid}

    def claimed_not_started() -> set[int]:
        wid = worker_id(store, frozen.pid)
        running = {j["id"] for j in jobs_by_state(store) if j["state"] == "running" and j["worker_id"] == wid}
        return running - started_by_frozen()

    wait_for("the worker to finish a dozen jobs", lambda: sum(r["kind"] == "end" for r in lines(bodies)) >= 12, 60,
             frozen)
    at = freeze(frozen, db_url, tag, lambda: len(claimed_not_started()) >= 2)

    # Frozen: what it had finished more than a second ago is committed; what it had not started is now lost to it.
    states = jobs_by_state(store)
    completed = {j["id"] for j in states if j["state"] == "completed"}
    ended = {r["job"]: r["t"] for r in lines(bodies) if r["kind"] == "end"}
    late = sorted(j for j, t in ended.items() if t < at - 1.5 and j not in completed)
    assert late == [], f"finished before the freeze but not committed within 1.5 s: {late}"
    in_flight = started_by_frozen() - completed
    unstarted = claimed_not_started()
    assert unstarted and completed, "frozen mid-batch, with completions committed before the batch's end"

    rescuer = spawn("fenced_worker.py", db_url, str(tmp_path), "--lease", str(LEASE), name="rescuer")
    wait_for("every job to finish on the rescuer",
             lambda: all(j["state"] in ("completed", "in_doubt") for j in jobs_by_state(store)), 90, rescuer)
    os.kill(frozen.pid, signal.SIGCONT)
    time.sleep(LEASE + 2)  # the thawed worker meets its stale batch
    assert frozen.popen.poll() is None, frozen.logs()
    terminate(frozen, rescuer)

    starts = collections.Counter(r["job"] for r in lines(bodies) if r["kind"] == "start")
    twice = {j for j, c in starts.items() if c > 1}
    print(f"\nfrozen at {len(completed)} completed: {len(in_flight)} in flight, {len(unstarted)} claimed not started;"
          f" bodies started twice: {len(twice)}; deliveries {sum(deliveries(tmp_path).values())}")
    assert twice <= in_flight and max(starts.values()) <= 2, (twice, in_flight)
    assert not {r["job"] for r in lines(bodies) if r["kind"] == "start" and r["pid"] == frozen.pid} & unstarted
    assert "not starting it" in frozen.err.read_text()
    sent = deliveries(tmp_path)
    assert max(sent.values()) == 1, "an effect ran twice"
    final = jobs_by_state(store)
    assert len(final) == JOBS and all(j["state"] in ("completed", "in_doubt") for j in final)
    doubted = {r["key"] for r in store.read("list_effects", state=None) if r["state"] == "in_doubt"}
    assert set(sent) | doubted == {f"work:{n}:0" for n in range(JOBS)}, "every effect happened or is in doubt"
    assert len(doubted) <= len(in_flight)


def test_a_node_whose_heartbeat_is_cut_stops_its_job_before_another_node_runs_it(
        db_url: str, store: Store, spawn: Callable[..., Proc], tmp_path: Path) -> None:  # noqa: F811
    steps = 12
    job_id = queue(store).enqueue("work", {"n": 0, "steps": steps, "pause": 0.25})
    assert job_id is not None
    cut = tmp_path / "heartbeat-cut"
    cut.touch()
    bodies = tmp_path / "bodies.txt"
    node = spawn("fenced_worker.py", db_url, str(tmp_path), "--lease", str(LEASE), "--cut-heartbeat", str(cut),
                 name="cut")
    wait_for("the job to start on the cut node", lambda: any(r["kind"] == "start" for r in lines(bodies)), 30, node)
    healthy = spawn("fenced_worker.py", db_url, str(tmp_path), "--lease", str(LEASE), name="healthy")
    wait_for("the job to complete", lambda: job(store, job_id).state == "completed", 60, node, healthy)
    assert node.popen.poll() is None, "the cut node keeps running"
    terminate(node, healthy)

    runs: dict[tuple[int, int], dict[str, float]] = {}
    for r in lines(bodies):
        runs.setdefault((r["pid"], r["attempt"]), {"pid": r["pid"]})[r["kind"]] = r["t"]
    ordered = sorted(runs.values(), key=lambda run: run["start"])
    t0 = ordered[0]["start"]
    spans = [(round(r["start"] - t0, 2), round(r.get("end", -1) - t0, 2)) for r in ordered]
    print(f"\nattempts (start, end) in s: {spans}")
    assert [run["pid"] for run in ordered] == [node.pid, healthy.pid], "the fenced node claims nothing more"
    assert all("end" in run for run in ordered)
    for earlier, later in itertools.pairwise(ordered):
        assert earlier["end"] <= later["start"], f"two attempts of the job ran at once: {ordered}"
    assert deliveries(tmp_path) == {f"work:0:{i}": 1 for i in range(steps)}
    err = node.err.read_text()
    assert "self-fencing" in err or "heartbeats are failing" in err, node.logs()
