"""At most one unfinished run per occurrence (issue 21 item 5), on both backends.

Make-up runs used to stack: `occurrences rerun O` three times queued three jobs, and "Retry now" on the
cancelled original after a re-run ran it a second time (jobs 43 and 44 both ran occurrence 6), so a task served
one business period twice. Each job now records the occurrence it serves (``run_of``: a re-run's is the first
occurrence of its chain) and the partial unique index ``jobs_one_run_per_occurrence`` admits one unfinished job
per occurrence, whatever asks (re-run, retry, copy) and however many ask at once. These tests drive the real
verbs from separate connections at once, and migrate a database that already holds stacked runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from oncebeat.app import App
from oncebeat.clock import ClockProcess
from oncebeat.errors import RunUnfinished
from oncebeat.provenance import current_source
from oncebeat.queue import UNFINISHED_STATES, Queue, copy_job, rerun_in_doubt
from oncebeat.schedule_admin import rerun_occurrence
from oncebeat.store import Store, open_store
from oncebeat.store.sqlfiles import registered_lines
from oncebeat.timebase import SimulatedClock, SystemClock

KEY = "report"
ENGINE = next(line for line in registered_lines() if line.name == "engine")
THREADS = 8


def at(hour: int, minute: int = 0, *, day: int = 1) -> datetime:
    return datetime(2026, 3, day, hour, minute, tzinfo=UTC)


def make_app() -> App:
    app = App()
    app.task(name="work")(lambda ctx: None)
    app.schedule(KEY, "0 23 * * *", tz="UTC", task="work")
    return app


def fired_occurrence(store: Store, sim_clock: SimulatedClock, *, day: int = 1) -> dict[str, Any]:
    """Fire the schedule's instant of ``day`` (23:00 UTC) with a clock; return that ledger row (its job waits)."""
    clock = ClockProcess(make_app(), store, clock=sim_clock)
    if sim_clock.now() < at(22, 59, day=day):
        sim_clock.set(at(22, 59, day=day))
    clock.start()
    sim_clock.set(at(23, 0, day=day))
    clock.tick()
    sim_clock.advance(60)  # an operator acts after the fire (a re-run at the very instant would be that instant)
    [row] = [r for r in store.read("list_occurrences", schedule_key=KEY) if r["fire_at"] == at(23, day=day)]
    assert row["job_id"] is not None
    [job] = [j for j in store.read("list_jobs", state=None, task=None, limit=1000) if j["id"] == row["job_id"]]
    assert job["run_of"] == row["id"], "the clock's run serves its occurrence"
    return row


def runs_of(store: Store, occurrence_id: int) -> list[dict[str, Any]]:
    """The unfinished jobs serving occurrence ``occurrence_id`` (its own or a make-up run's)."""
    return [j for j in store.read("list_jobs", state=None, task=None, limit=1000)
            if j["run_of"] == occurrence_id and j["state"] in UNFINISHED_STATES]


def discard(queue: Queue, job_id: int) -> None:
    [job] = queue.claim(7, queues=["default"])
    assert job.id == job_id
    assert queue.fail(job, 7, "SMTP down", permanent=True) == "discarded"


def at_once(db_url: str, calls: list[Callable[[Store], Any]]) -> tuple[list[Any], list[BaseException]]:
    """Run each call in its own thread on its own store (own connections), released together by a barrier."""
    stores = [open_store(db_url) for _ in calls]
    barrier = threading.Barrier(len(calls))
    results: list[Any] = []
    errors: list[BaseException] = []

    def run(call: Callable[[Store], Any], s: Store) -> None:
        try:
            barrier.wait(timeout=20)
            results.append(call(s))
        except BaseException as exc:  # noqa: BLE001 - every outcome is asserted by the caller
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(c, s)) for c, s in zip(calls, stores, strict=True)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    finally:
        for s in stores:
            s.close()
    return results, errors


def rerun(occurrence_id: int) -> Callable[[Store], Any]:
    return lambda s: rerun_occurrence(s, occurrence_id, source=current_source("cli"), clock=SystemClock())


def retry(job_id: int) -> Callable[[Store], Any]:
    return lambda s: Queue(s, clock=SystemClock(), source=current_source("manual")).retry(job_id)


def test_eight_concurrent_reruns_queue_one_run_and_the_others_are_told_which(
        db_url: str, store: Store, sim_clock: SimulatedClock) -> None:
    occ = fired_occurrence(store, sim_clock)
    queue = Queue(store, clock=sim_clock, source=current_source("worker"))
    discard(queue, occ["job_id"])

    fires, errors = at_once(db_url, [rerun(occ["id"]) for _ in range(THREADS)])

    assert len(fires) == 1, errors
    [winner] = runs_of(store, occ["id"])
    assert winner["id"] == fires[0].job_id and winner["occurrence_id"] == fires[0].occurrence_id
    assert len(errors) == THREADS - 1 and all(isinstance(e, RunUnfinished) for e in errors), errors
    for e in errors:
        assert isinstance(e, RunUnfinished)
        assert (e.occurrence_id, e.job_id) == (occ["id"], winner["id"])
        assert f"occurrence {occ['id']} already has run {winner['id']} available" in str(e)
    # the refused re-runs left nothing behind: one make-up occurrence, one job
    reruns = [r for r in store.read("list_occurrences", schedule_key=KEY) if r["rerun_of"] == occ["id"]]
    assert [r["id"] for r in reruns] == [fires[0].occurrence_id]


def test_concurrent_reruns_and_retries_of_the_original_start_one_run_each_round(
        db_url: str, store: Store, sim_clock: SimulatedClock) -> None:
    """Half the operators press Re-run on the occurrence, half Retry now on its discarded original job, at once;
    three rounds, each after the previous round's run finished: one run per round, never two."""
    occ = fired_occurrence(store, sim_clock)
    queue = Queue(store, clock=sim_clock, source=current_source("worker"))
    discard(queue, occ["job_id"])
    winners = []
    for _ in range(3):
        calls = [rerun(occ["id"]) if i % 2 else retry(occ["job_id"]) for i in range(THREADS)]
        results, errors = at_once(db_url, calls)
        won = [r for r in results if r is not False]  # a retry that found the original running already: False
        assert len(won) == 1, (results, errors)
        [run] = runs_of(store, occ["id"])
        assert all(isinstance(e, RunUnfinished) and e.job_id == run["id"] for e in errors), errors
        assert len(errors) + len(results) == THREADS
        winners.append(run["id"])
        sim_clock.set(datetime.now(UTC) + timedelta(seconds=1))  # the operators acted in real time
        [claimed] = queue.claim(7, queues=["default"])
        assert claimed.id == run["id"]
        if claimed.id == occ["job_id"]:  # the original ran again: it has to end discarded for the next round
            assert queue.fail(claimed, 7, "still down", permanent=True) == "discarded"
        else:
            queue.complete(7, [claimed.id])
        assert runs_of(store, occ["id"]) == []
    assert len(winners) == 3


def test_retry_now_on_the_cancelled_original_after_a_rerun_is_refused_naming_the_rerun(
        store: Store, sim_clock: SimulatedClock) -> None:
    occ = fired_occurrence(store, sim_clock)
    queue = Queue(store, clock=sim_clock, source=current_source("cli"))
    assert queue.cancel(occ["job_id"]) is True
    fire = rerun_occurrence(store, occ["id"], source=current_source("cli"), clock=sim_clock)
    with pytest.raises(RunUnfinished, match=rf"^occurrence {occ['id']} already has run {fire.job_id} available; "
                                            rf"wait for it or cancel it \(`oncebeat jobs --cancel {fire.job_id}`\), "
                                            rf"then retry job {occ['job_id']}$"):
        queue.retry(occ["job_id"])
    assert queue.get(occ["job_id"]).state == "cancelled"  # type: ignore[union-attr]
    assert [j["id"] for j in runs_of(store, occ["id"])] == [fire.job_id]
    # a second re-run (the stacking of the issue) is refused the same way
    with pytest.raises(RunUnfinished, match=f"already has run {fire.job_id} available"):
        rerun_occurrence(store, occ["id"], source=current_source("cli"), clock=sim_clock)


def test_a_rerun_while_the_original_runs_is_refused_and_allowed_once_it_finished(
        store: Store, sim_clock: SimulatedClock) -> None:
    occ = fired_occurrence(store, sim_clock)
    queue = Queue(store, clock=sim_clock, source=current_source("worker"))
    [job] = queue.claim(7, queues=["default"])
    with pytest.raises(RunUnfinished, match=rf"^occurrence {occ['id']} already has run {job.id} running; wait for "
                                            r"it to finish, then re-run it$"):
        rerun_occurrence(store, occ["id"], clock=sim_clock)
    queue.complete(7, [job.id])
    first = rerun_occurrence(store, occ["id"], clock=sim_clock)  # finished: a deliberate make-up run is allowed
    assert first.job_id is not None
    [run] = queue.claim(7, queues=["default"])
    assert queue.fail(run, 7, "down", permanent=True) == "discarded"
    # a re-run of the re-run serves the same occurrence: while it is unfinished, neither the original's retry
    # nor another re-run of either occurrence may start
    sim_clock.advance(1)
    second = rerun_occurrence(store, first.occurrence_id, clock=sim_clock)  # type: ignore[arg-type]
    assert [j["id"] for j in runs_of(store, occ["id"])] == [second.job_id]
    for occurrence_id in (occ["id"], first.occurrence_id):
        with pytest.raises(RunUnfinished, match=f"occurrence {occ['id']} already has run {second.job_id}"):
            rerun_occurrence(store, occurrence_id, clock=sim_clock)  # type: ignore[arg-type]
    with pytest.raises(RunUnfinished, match=f"occurrence {occ['id']} already has run {second.job_id} available"):
        queue.retry(first.job_id)  # type: ignore[arg-type]  # the discarded first make-up run


def test_triggered_and_backfilled_runs_serve_their_own_occurrence(store: Store, sim_clock: SimulatedClock) -> None:
    clock = ClockProcess(make_app(), store, clock=sim_clock)
    clock.start()
    sim_clock.set(at(12, day=5))
    fires = [clock.trigger(KEY), *clock.backfill(KEY, at(0, day=2), at(0, day=4))]
    assert [f.outcome for f in fires] == ["manual", "backfilled", "backfilled"]
    jobs = {j["id"]: j for j in store.read("list_jobs", state=None, task=None, limit=100)}
    assert [jobs[f.job_id]["run_of"] for f in fires] == [f.occurrence_id for f in fires]  # type: ignore[index]


def test_the_engines_own_retry_of_a_failed_run_is_the_same_run_and_keeps_working(
        store: Store, sim_clock: SimulatedClock) -> None:
    occ = fired_occurrence(store, sim_clock)
    queue = Queue(store, clock=sim_clock, source=current_source("worker"))
    [job] = queue.claim(7, queues=["default"])
    assert queue.fail(job, 7, "timeout") == "retryable"  # the backoff retry of the same job row
    sim_clock.advance(3600)
    [again] = queue.claim(7, queues=["default"])
    assert (again.id, again.attempt) == (job.id, 2)
    queue.complete(7, [again.id])
    assert queue.get(job.id).state == "completed"  # type: ignore[union-attr]
    # an operator's retry of a retryable job (it is the unfinished run itself) is not refused either
    occ2 = fired_occurrence(store, sim_clock, day=2)
    [job2] = queue.claim(7, queues=["default"])
    assert queue.fail(job2, 7, "timeout") == "retryable"
    assert queue.retry(job2.id) is True and [j["id"] for j in runs_of(store, occ2["id"])] == [job2.id]
    assert occ["id"] != occ2["id"]


def _as_0007_left_it(store: Store) -> None:
    """Take engine migration 0008 off a database whose index was dropped (rows kept): the schema 0007 left."""
    with store.transaction() as tx:
        tx.execute("ALTER TABLE jobs DROP COLUMN run_of")
        tx.execute("DROP TABLE paused_queues")  # engine 0009 comes after 0008
        tx.execute("DELETE FROM schema_migrations WHERE line = 'engine' AND version IN (8, 9)")


def test_migrating_a_database_that_already_holds_stacked_runs(
        make_db_url: Callable[[], str], sim_clock: SimulatedClock) -> None:
    """Before 0008 a database could hold two unfinished runs of one occurrence. The migration does not fail: of
    each occurrence's unfinished runs it keeps one (a running one, else the oldest), cancels each other one that
    has not started (an error entry and an audit event say why), and leaves a second one already running to
    finish outside the rule (audited). Jobs a task enqueued carrying the occurrence id are no runs: untouched.
    From then on the database refuses a new second run."""
    with open_store(make_db_url()) as store:
        store.migrate()
        queue = Queue(store, clock=sim_clock, source=current_source("cli"))
        a, b, c = (fired_occurrence(store, sim_clock, day=d) for d in (1, 2, 3))  # their runs wait (available)
        with store.transaction() as tx:
            tx.execute("DROP INDEX jobs_one_run_per_occurrence")  # the database as it was: nothing stopped a second

        def stack(occurrence_id: int, original: int) -> int:
            """The fault: cancel the run, re-run the occurrence, then Retry now on the original. The make-up job."""
            assert queue.cancel(original) is True
            sim_clock.advance(1)
            made_up = rerun_occurrence(store, occurrence_id, clock=sim_clock).job_id
            assert made_up is not None and queue.retry(original) is True
            return made_up

        def running(*ids: int) -> None:
            with store.transaction() as tx:
                for i in ids:
                    tx.execute(f"UPDATE jobs SET state = 'running', attempt = 1, worker_id = 8 WHERE id = {i}")

        ma = stack(a["id"], a["job_id"])  # a: two runs waiting
        fan_out = [queue.enqueue("work", {"n": n}, occurrence_id=a["id"]) for n in range(2)]  # no runs of a
        mb = stack(b["id"], b["job_id"])  # b: two runs running
        running(b["job_id"], mb)
        # c: three runs, one of them of a re-run of a re-run, which runs
        assert queue.cancel(c["job_id"]) is True
        sim_clock.advance(1)
        first = rerun_occurrence(store, c["id"], clock=sim_clock)
        m1 = first.job_id
        assert m1 is not None and queue.cancel(m1) is True
        sim_clock.advance(1)
        m2 = rerun_occurrence(store, first.occurrence_id, clock=sim_clock).job_id  # type: ignore[arg-type]
        assert m2 is not None and queue.retry(m1) is True and queue.retry(c["job_id"]) is True
        running(m2)
        state = {j["id"]: j["state"] for j in store.read("list_jobs", state=None, task=None, limit=100)}
        assert [state[i] for i in (a["job_id"], ma, b["job_id"], mb, c["job_id"], m1, m2)] == [
            "available", "available", "running", "running", "available", "available", "running"]
        _as_0007_left_it(store)

        assert store.migrate() == [("engine", 8), ("engine", 9)]  # does not fail on the stacked runs

        jobs = {j["id"]: j for j in store.read("list_jobs", state=None, task=None, limit=100)}

        def seen(*ids: int) -> list[tuple[str, int | None]]:
            return [(jobs[i]["state"], jobs[i]["run_of"]) for i in ids]

        assert seen(a["job_id"], ma) == [("available", a["id"]), ("cancelled", a["id"])]  # the oldest kept
        assert seen(*fan_out) == [("available", None), ("available", None)]  # untouched: no runs
        assert seen(b["job_id"], mb) == [("running", b["id"]), ("running", None)]  # the later one left to finish
        assert seen(m2, c["job_id"], m1) == [("running", c["id"]), ("cancelled", c["id"]), ("cancelled", c["id"])]
        assert "cancelled by engine migration 0008" in jobs[ma]["errors"][-1]["error"]
        assert f"occurrence {a['id']} already had run {a['job_id']} unfinished" in jobs[ma]["errors"][-1]["error"]
        since = datetime(2000, 1, 1, tzinfo=UTC)
        cancelled = store.read("list_events", subject=None, kind="job.cancelled", since=since)
        assert sorted(e["subject"] for e in cancelled if e["source_kind"] == "migration") == sorted(
            f"job:{i}" for i in (ma, c["job_id"], m1))
        [left] = store.read("list_events", subject=None, kind="job.duplicate_run", since=since)
        assert (left["subject"], left["detail"]["kept"]) == (f"job:{mb}", b["job_id"])

        # the rule holds from now on: a retry of a cancelled extra and a re-run are refused naming the kept run
        with pytest.raises(RunUnfinished, match=f"occurrence {a['id']} already has run {a['job_id']} available"):
            queue.retry(ma)
        with pytest.raises(RunUnfinished, match=f"occurrence {c['id']} already has run {m2} running; wait for it"):
            rerun_occurrence(store, c["id"], clock=sim_clock)
        assert queue.enqueue("work", {"n": 3}, occurrence_id=a["id"]) is not None  # a task's own jobs: not limited
        # the extra left running fails; retried later, it counts again (its occurrence's link says whose run it is)
        extra = queue.get(mb)
        assert extra is not None and queue.fail(extra, 8, "down", permanent=True) == "discarded"
        with pytest.raises(RunUnfinished, match=f"occurrence {b['id']} already has run {b['job_id']} running"):
            queue.retry(mb)


def test_jobs_a_run_enqueues_carrying_its_occurrence_are_not_runs_of_it(
        store: Store, sim_clock: SimulatedClock) -> None:
    """A task fans out: the reminder scan enqueues one send job per reminder, each carrying the scan's occurrence
    id. Those are not runs of the occurrence: none is refused, none blocks or is blocked by a re-run."""
    occ = fired_occurrence(store, sim_clock)
    queue = Queue(store, clock=sim_clock, source=current_source("worker"))
    [scan] = queue.claim(7, queues=["default"])
    sends = [queue.enqueue("work", {"n": n}, occurrence_id=occ["id"], queue="mail") for n in range(3)]
    assert queue.enqueue_many([{"task": "work", "args": {"n": n}, "occurrence_id": occ["id"], "queue": "mail"}
                               for n in (3, 4)]) == 2
    assert None not in sends and len(store.read("list_jobs", state="available", task=None, limit=100)) == 5
    with pytest.raises(RunUnfinished, match=f"already has run {scan.id} running"):  # the run, not a send job
        rerun_occurrence(store, occ["id"], clock=sim_clock)
    queue.complete(7, [scan.id])
    [send] = queue.claim(8, queues=["mail"], limit=1)
    assert queue.fail(send, 8, "bounced", permanent=True) == "discarded"
    assert queue.retry(send.id) is True  # a send job's retry is no second run of the occurrence
    fire = rerun_occurrence(store, occ["id"], clock=sim_clock)  # the scan finished: its sends may still wait
    assert fire.job_id is not None and [j["id"] for j in runs_of(store, occ["id"])] == [fire.job_id]


def test_an_in_doubt_run_is_not_run_again_nor_copied_beside_a_make_up_run(
        store: Store, sim_clock: SimulatedClock) -> None:
    """Resolving an effect `not_done` runs its job again (``rerun_in_doubt``) or a copy of it (``copy_job``): both
    are a second run of the occurrence while a make-up run is unfinished, so neither happens then."""
    occ = fired_occurrence(store, sim_clock)
    queue = Queue(store, clock=sim_clock, source=current_source("worker"))
    [job] = queue.claim(7, queues=["default"])
    assert queue.hold_in_doubt(job, 7, ["mail:1"]) == "in_doubt"
    made_up = rerun_occurrence(store, occ["id"], clock=sim_clock)  # an in-doubt job is not unfinished
    entry = {"kind": "resolved", "error": "resolved not_done"}
    with store.transaction() as tx:
        assert rerun_in_doubt(tx, job.id, now=sim_clock.now(), entry=entry) is False
        assert copy_job(tx, job.id, now=sim_clock.now(), source=current_source("cli")) is None
    assert [j["id"] for j in runs_of(store, occ["id"])] == [made_up.job_id]
    [run] = queue.claim(7, queues=["default"])
    queue.complete(7, [run.id])
    with store.transaction() as tx:  # the make-up run finished: the in-doubt one may run again
        assert rerun_in_doubt(tx, job.id, now=sim_clock.now(), entry=entry) is True
    assert [j["id"] for j in runs_of(store, occ["id"])] == [job.id]
    with store.transaction() as tx:
        assert copy_job(tx, made_up.job_id, now=sim_clock.now(), source=current_source("cli")) is None  # type: ignore[arg-type]
