"""The done records of concurrent effects written together (issue 27, target 1), both backends.

Threads of one process stand for a worker's slots: each runs one effect through the same
:class:`~oncebeat.effects.EffectLedger`. The first record is held inside its write (its ``on_done`` waits), so
the next ones queue behind it and the following write carries them together; the test then decides what
happens to that write (a key taken over by another attempt, an ``on_done`` that fails, a crash). The
real-process version (``kill -9`` of a worker mid-batch) is tests/acceptance/test_done_batch_processes.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from oncebeat import telemetry
from oncebeat.app import App
from oncebeat.crashpoints import SimulatedCrash, crashpoints
from oncebeat.effects import EffectLedger, Holder
from oncebeat.errors import EffectInDoubt, LeaseLost
from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock
from oncebeat.worker import Worker

WAIT = 20.0  # seconds a step may take at most (a stuck test fails instead of hanging)


@pytest.fixture
def batches() -> Iterator[list[list[str]]]:
    """The keys of each write of done records (``effect.batch``), in order."""
    seen: list[list[str]] = []

    def record(event: str, data: Mapping[str, Any]) -> None:
        seen.append(sorted(data["keys"]))

    telemetry.attach("effect.batch", record)
    yield seen
    telemetry.detach("effect.batch", record)


@pytest.fixture(autouse=True)
def _disarm() -> Iterator[None]:
    yield
    crashpoints.disarm()


def _until(what: str, ok: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not ok():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.002)


class Slots:
    """Runs effects in threads of this process, each through ``ledger``; keeps each one's outcome."""

    def __init__(self, ledger: EffectLedger) -> None:
        self.ledger = ledger
        self.outcome: dict[str, Any] = {}
        self.threads: list[threading.Thread] = []

    def start(self, key: str, holder: Holder, fn: Callable[[], Any],
              on_done: Callable[[Any, Any], None] | None = None) -> None:
        def body() -> None:
            try:
                self.outcome[key] = self.ledger.run(key, fn, holder=holder, payload={"key": key}, on_done=on_done)
            except BaseException as exc:  # noqa: BLE001 - kept for the test to look at
                self.outcome[key] = exc

        thread = threading.Thread(target=body, name=f"slot-{key}", daemon=True)
        self.threads.append(thread)
        thread.start()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(WAIT)
            assert not thread.is_alive(), f"{thread.name} is stuck"


class HeldWrite:
    """An ``on_done`` that holds the write it runs in until :meth:`release` (records behind it queue up)."""

    def __init__(self) -> None:
        self.inside = threading.Event()
        self.go = threading.Event()

    def __call__(self, tx: Any, result: Any) -> None:
        self.inside.set()
        assert self.go.wait(WAIT)

    def release(self) -> None:
        self.go.set()


def _two_behind_a_held_write(slots: Slots, first: Holder, second: tuple[str, Holder, Callable[[], Any]],
                             third: tuple[str, Holder, Callable[[], Any]],
                             on_done: Callable[[Any, Any], None] | None = None) -> HeldWrite:
    """Start the second and third effects (their functions wait), then the first, whose write is held; then let
    the other two return, so both queue behind the held write. Every database write of the test is done before
    the held write begins (SQLite has one writer). Returns the held write, not released yet."""
    gates = {second[0]: threading.Event(), third[0]: threading.Event()}
    entered = {second[0]: threading.Event(), third[0]: threading.Event()}

    def gated(key: str, fn: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            result = fn()
            entered[key].set()
            assert gates[key].wait(WAIT)
            return result
        return run

    for key, holder, fn in (second, third):
        slots.start(key, holder, gated(key, fn), on_done)
    for event in entered.values():
        assert event.wait(WAIT)
    held = HeldWrite()
    slots.start("first", first, lambda: "first", held)
    assert held.inside.wait(WAIT)
    for gate in gates.values():
        gate.set()
    _until("two records waiting behind the held write", lambda: len(slots.ledger._done._waiting) == 2)
    return held


def _no_job() -> Holder:
    return Holder(job_id=None, attempt=None, process_id=None)


def _ledger(store: Store, clock: SimulatedClock) -> EffectLedger:
    return EffectLedger(store, clock=clock, source=current_source("worker"))


def test_done_records_that_wait_behind_a_write_are_written_together_in_one_transaction(
        store: Store, sim_clock: SimulatedClock, batches: list[list[str]]) -> None:
    ledger = _ledger(store, sim_clock)
    slots = Slots(ledger)
    recorded: list[str] = []
    held = _two_behind_a_held_write(slots, _no_job(), ("a", _no_job(), lambda: "a"), ("b", _no_job(), lambda: "b"),
                                    on_done=lambda tx, result: recorded.append(result))
    held.release()
    slots.join()
    assert slots.outcome == {"first": "first", "a": "a", "b": "b"}
    assert batches == [["first"], ["a", "b"]], "the two that waited went in one write"
    assert sorted(recorded) == ["a", "b"]
    assert {k: ledger.get(k)["state"] for k in ("first", "a", "b")} == dict.fromkeys(("first", "a", "b"), "done")


def test_alone_a_done_record_is_written_at_once_by_its_own_thread(store: Store, sim_clock: SimulatedClock,
                                                                  batches: list[list[str]]) -> None:
    ledger = _ledger(store, sim_clock)
    writers: list[str] = []
    ledger.run("solo", lambda: 1, holder=_no_job(),
               on_done=lambda tx, result: writers.append(threading.current_thread().name))
    assert batches == [["solo"]] and writers == [threading.current_thread().name]


def test_a_key_taken_over_by_another_attempt_is_refused_in_the_batch_and_the_others_are_recorded(
        store: Store, sim_clock: SimulatedClock, batches: list[list[str]]) -> None:
    app = App()
    q = Queue(store, clock=sim_clock, source=current_source("api"))
    old_wid = Worker(app, store, clock=sim_clock).register()
    new_wid = Worker(app, store, clock=sim_clock).register()
    j1, j2, j3 = (q.enqueue("step", {"n": n}) for n in (1, 2, 3))
    claimed = {j.id: j for j in q.claim(old_wid, limit=1, lease_seconds=1000)}  # j1
    claimed |= {j.id: j for j in q.claim(old_wid, limit=1, lease_seconds=10)}  # j2: its lease runs out first
    claimed |= {j.id: j for j in q.claim(old_wid, limit=1, lease_seconds=1000)}  # j3
    holders = {job_id: Holder(job_id=job_id, attempt=claimed[job_id].attempt, process_id=old_wid)
               for job_id in (j1, j2, j3)}
    ledger = _ledger(store, sim_clock)
    slots = Slots(ledger)
    recorded: list[str] = []
    sent: list[str] = []
    newcomer: list[BaseException] = []

    def deliver_then_lose_the_lease() -> str:
        sent.append("two")  # the effect happened; then, before its record, the job moves to another worker
        sim_clock.advance(11)
        assert [r["id"] for r in q.rescue()] == [j2]
        [again] = q.claim(new_wid, limit=1, lease_seconds=1000)
        try:  # the new attempt finds the old holder dead past its point of no return: in doubt, not resent
            ledger.run("two", lambda: sent.append("two again"), payload={"key": "two"},
                       holder=Holder(job_id=j2, attempt=again.attempt, process_id=new_wid))
        except EffectInDoubt as exc:
            newcomer.append(exc)
        return "two"

    held = _two_behind_a_held_write(slots, holders[j1], ("two", holders[j2], deliver_then_lose_the_lease),
                                    ("three", holders[j3], lambda: (sent.append("three"), "three")[1]),
                                    on_done=lambda tx, result: recorded.append(result))
    held.release()
    slots.join()
    assert batches == [["first"], ["three", "two"]]
    assert isinstance(slots.outcome["two"], LeaseLost), slots.outcome
    assert "done record was refused" in str(slots.outcome["two"])
    assert slots.outcome["first"] == "first" and slots.outcome["three"] == "three"
    assert recorded == ["three"], "the refused record's own record did not run; the other one committed"
    assert sorted(sent) == ["three", "two"] and len(newcomer) == 1, "nothing sent twice"
    assert {k: ledger.get(k)["state"] for k in ("first", "two", "three")} == \
        {"first": "done", "two": "in_doubt", "three": "done"}


def test_an_on_done_that_fails_in_a_batch_fails_only_its_own_record(store: Store, sim_clock: SimulatedClock,
                                                                     batches: list[list[str]]) -> None:
    ledger = _ledger(store, sim_clock)
    slots = Slots(ledger)
    recorded: list[str] = []

    def bookkeeping(tx: Any, result: Any) -> None:
        if result == "bad":
            raise RuntimeError("bookkeeping failed")
        recorded.append(result)

    held = _two_behind_a_held_write(slots, _no_job(), ("bad", _no_job(), lambda: "bad"),
                                    ("good", _no_job(), lambda: "good"), on_done=bookkeeping)
    held.release()
    slots.join()
    assert isinstance(slots.outcome["bad"], RuntimeError) and slots.outcome["good"] == "good"
    assert batches == [["first"], ["bad", "good"]], "one write, rolled back, then each record alone within it"
    # "good" ran once more in the rolled-back write when it came before "bad" in it; committed alone either way
    assert recorded in (["good"], ["good", "good"])
    assert {k: ledger.get(k)["state"] for k in ("bad", "good")} == {"bad": "started", "good": "done"}
    with pytest.raises(EffectInDoubt):  # the failed record's effect happened: never run again blindly
        ledger.run("bad", lambda: "again", holder=_no_job(), payload={"key": "bad"})


def test_a_crash_while_a_batch_is_written_leaves_every_key_of_it_in_doubt_and_none_is_sent_again(
        store: Store, sim_clock: SimulatedClock, batches: list[list[str]]) -> None:
    ledger = _ledger(store, sim_clock)
    slots = Slots(ledger)
    crashpoints.arm("done_batch", after=2)  # the second write: the two records that waited
    held = _two_behind_a_held_write(slots, _no_job(), ("x", _no_job(), lambda: "x"), ("y", _no_job(), lambda: "y"))
    held.release()
    slots.join()
    assert slots.outcome["first"] == "first"
    assert isinstance(slots.outcome["x"], SimulatedCrash) and isinstance(slots.outcome["y"], SimulatedCrash)
    assert batches == [["first"]], "the crash point (the first subscriber) ended the second write before it began"
    assert {k: ledger.get(k)["state"] for k in ("x", "y")} == {"x": "started", "y": "started"}
    again: list[str] = []
    for key in ("x", "y"):
        with pytest.raises(EffectInDoubt):
            ledger.run(key, lambda key=key: again.append(key), holder=_no_job(), payload={"key": key})
    assert again == [] and {k: ledger.get(k)["state"] for k in ("x", "y")} == {"x": "in_doubt", "y": "in_doubt"}
