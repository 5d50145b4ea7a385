"""Exactly-once effects (G4) under crashes at every step of claim → handler → effect → complete.

A crash is simulated with an armed crash point: the worker raises
:class:`SimulatedCrash` and abandons its jobs exactly as ``kill -9`` would.
The next "process" is a new :class:`Worker` object on the same store; it runs
once the dead worker's lease has expired in simulated time and the job has
been rescued.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from oncebeat.app import App
from oncebeat.effects import EffectLedger, Holder, Reconcile
from oncebeat.errors import EffectBusy, EffectInDoubt, EffectKeyConflict
from oncebeat.crashpoints import SimulatedCrash, crashpoints
from oncebeat.provenance import current_source
from oncebeat.queue import Job, Queue
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock
from oncebeat.worker import Worker

LEASE = 30.0


class Reminders:
    """A tiny app: task ``remind`` sends one message per invoice through ``ctx.effect``.

    ``sent`` lists every real send (the outside world's view); ``returned``
    lists what ``ctx.effect`` handed back to the handler.
    """

    def __init__(self, store: Store, clock: SimulatedClock) -> None:
        self.store = store
        self.clock = clock
        self.sent: list[int] = []
        self.returned: list[Any] = []
        self.reconcile: Reconcile | None = None
        self.die_inside_effect = False
        self.app = App()

        @self.app.task(max_attempts=5)
        def remind(ctx: Any, invoice_id: int) -> None:
            result = ctx.effect(f"reminder:{invoice_id}", lambda: self.send(invoice_id),
                                payload={"invoice_id": invoice_id}, reconcile=self.reconcile)
            self.returned.append(result)

    def send(self, invoice_id: int) -> dict[str, Any]:
        if self.die_inside_effect:
            self.die_inside_effect = False
            raise SimulatedCrash("died while connecting to the SMTP server, before anything was sent")
        self.sent.append(invoice_id)
        return {"message_id": f"<reminder-{invoice_id}@oncebeat.test>"}

    def was_sent(self, key: str, payload: Any) -> tuple[str, Any]:
        """A reconcile hook that looks at the evidence (here: the outbox) instead of guessing."""
        if payload["invoice_id"] in self.sent:
            return "done", {"message_id": f"<reminder-{payload['invoice_id']}@oncebeat.test>", "reconciled": True}
        return "not_done", None

    def enqueue(self, invoice_id: int) -> int:
        job_id = self.queue().enqueue("remind", {"invoice_id": invoice_id}, max_attempts=5)
        assert job_id is not None
        return job_id

    def queue(self) -> Queue:
        return Queue(self.store, clock=self.clock, source=current_source("api"))

    def new_process(self) -> Worker:
        """A fresh worker, as a new OS process would be: no memory of the one that died."""
        return Worker(self.app, self.store, clock=self.clock, lease_seconds=LEASE)

    def crash(self, point: str) -> Worker:
        """Run a worker until it dies at ``point``; return the dead worker."""
        crashpoints.arm(point)
        dead = self.new_process()
        with pytest.raises(SimulatedCrash):
            dead.drain()
        return dead

    def restart_after_lease_expiry(self) -> Worker:
        """Let the dead worker's lease run out, then a new process rescues and drains."""
        self.clock.advance(LEASE + 1)
        survivor = self.new_process()
        assert survivor.rescue() != []
        survivor.drain()
        return survivor

    def job(self, job_id: int) -> Job:
        job = self.queue().get(job_id)
        assert job is not None
        return job

    def effect(self, invoice_id: int) -> dict[str, Any]:
        [row] = self.store.read("effect_get", key=f"reminder:{invoice_id}")
        return row


@pytest.fixture
def reminders(store: Store, sim_clock: SimulatedClock) -> Reminders:
    return Reminders(store, sim_clock)


def ledger(store: Store, clock: SimulatedClock) -> EffectLedger:
    return EffectLedger(store, clock=clock, source=current_source("worker"))


# --- the happy path -----------------------------------------------------------------------------


def test_effect_runs_once_and_is_recorded_done(reminders: Reminders) -> None:
    job_id = reminders.enqueue(7)
    reminders.new_process().drain()
    assert reminders.sent == [7]
    assert reminders.returned == [{"message_id": "<reminder-7@oncebeat.test>"}]
    assert reminders.job(job_id).state == "completed"
    effect = reminders.effect(7)
    assert (effect["state"], effect["job_id"], effect["attempt"]) == ("done", job_id, 1)
    assert effect["result"] == {"message_id": "<reminder-7@oncebeat.test>"}


def test_second_job_for_the_same_key_returns_the_recorded_result_without_sending(reminders: Reminders) -> None:
    reminders.enqueue(7)
    reminders.enqueue(7)  # a duplicate trigger
    reminders.new_process().drain()
    assert reminders.sent == [7]
    assert reminders.returned == [{"message_id": "<reminder-7@oncebeat.test>"}] * 2


# --- crashes at each step -----------------------------------------------------------------------


def test_crash_right_after_claim_is_rescued_and_the_effect_runs_once(reminders: Reminders) -> None:
    job_id = reminders.enqueue(7)
    reminders.crash("after_claim")
    assert reminders.sent == []
    assert reminders.job(job_id).state == "running", "a dead worker records nothing"

    reminders.restart_after_lease_expiry()
    job = reminders.job(job_id)
    assert (job.state, job.attempt) == ("completed", 2)
    assert [e["kind"] for e in job.errors] == ["rescue"]
    assert reminders.sent == [7]


def test_crash_in_the_handler_before_the_effect_is_rescued_and_the_effect_runs_once(reminders: Reminders) -> None:
    job_id = reminders.enqueue(7)
    reminders.crash("before_effect")
    assert reminders.sent == []

    reminders.restart_after_lease_expiry()
    assert reminders.job(job_id).state == "completed"
    assert reminders.sent == [7]
    assert reminders.effect(7)["state"] == "done"


def test_crash_after_the_effect_but_before_recording_it_leaves_the_key_in_doubt(
        reminders: Reminders, store: Store, sim_clock: SimulatedClock) -> None:
    job_id = reminders.enqueue(7)
    reminders.crash("effect_before_record")
    assert reminders.sent == [7], "the message left before the process died"
    assert reminders.effect(7)["state"] == "started"

    reminders.restart_after_lease_expiry()
    assert reminders.sent == [7], "an in-doubt effect is never re-run blindly"
    effect = reminders.effect(7)
    assert effect["state"] == "in_doubt"
    assert "died before recording the outcome" in effect["detail"]
    job = reminders.job(job_id)
    assert (job.state, job.attempt) == ("in_doubt", 2), "the job waits for a decision, named keys kept"
    assert [e["kind"] for e in job.errors] == ["rescue", "in_doubt"]
    assert job.errors[-1]["keys"] == ["reminder:7"]
    assert "reminder:7" in job.errors[-1]["error"]
    in_doubt_events = store.read("list_events", subject="effect:reminder:7", kind="effect.in_doubt",
                                 since=sim_clock.now() - timedelta(days=1))
    assert len(in_doubt_events) == 1

    reminders.enqueue(7)  # another trigger later still does not send it
    reminders.new_process().drain()
    assert reminders.sent == [7]
    assert reminders.effect(7)["state"] == "in_doubt"
    with pytest.raises(EffectInDoubt, match="reminder:7"):
        ledger(store, sim_clock).run("reminder:7", lambda: reminders.send(7), payload={"invoice_id": 7},
                                     holder=Holder(job_id=None, attempt=None, process_id=None))
    assert reminders.sent == [7]


def test_death_inside_the_effect_is_in_doubt_because_nobody_can_tell_it_did_not_happen(
        reminders: Reminders) -> None:
    job_id = reminders.enqueue(7)
    reminders.die_inside_effect = True
    with pytest.raises(SimulatedCrash):
        reminders.new_process().drain()

    reminders.restart_after_lease_expiry()
    assert reminders.sent == []
    assert reminders.effect(7)["state"] == "in_doubt"
    assert reminders.job(job_id).state == "in_doubt"


def test_crash_after_recording_the_effect_returns_the_recorded_result_on_retry(reminders: Reminders) -> None:
    job_id = reminders.enqueue(7)
    reminders.crash("after_effect_record")
    assert reminders.effect(7)["state"] == "done"

    reminders.restart_after_lease_expiry()
    assert reminders.sent == [7]
    assert reminders.returned == [{"message_id": "<reminder-7@oncebeat.test>"}]
    assert reminders.job(job_id).state == "completed"


def test_crash_before_completing_is_rescued_and_the_retry_does_not_resend(reminders: Reminders) -> None:
    job_id = reminders.enqueue(7)
    reminders.crash("before_complete")
    assert reminders.sent == [7]
    assert reminders.job(job_id).state == "running"

    reminders.restart_after_lease_expiry()
    job = reminders.job(job_id)
    assert (job.state, job.attempt) == ("completed", 2)
    assert reminders.sent == [7], "the recorded effect is not re-run"
    assert reminders.returned == [{"message_id": "<reminder-7@oncebeat.test>"}] * 2
    assert reminders.effect(7)["attempt"] == 1, "the ledger still names the attempt that did it"


def test_crash_in_the_middle_of_a_batch_loses_nothing_and_repeats_nothing(reminders: Reminders) -> None:
    ids = [reminders.enqueue(n) for n in (1, 2, 3)]
    reminders.crash("mid_batch")
    assert reminders.sent == [1]

    reminders.restart_after_lease_expiry()
    assert sorted(reminders.sent) == [1, 2, 3]
    assert [reminders.job(i).state for i in ids] == ["completed"] * 3


# --- reconcile hook and operator resolution ----------------------------------------------------------


def test_reconcile_hook_that_finds_the_effect_happened_records_it_done(reminders: Reminders,
                                                                       store: Store, sim_clock: SimulatedClock) -> None:
    job_id = reminders.enqueue(7)
    reminders.crash("effect_before_record")
    reminders.reconcile = reminders.was_sent

    reminders.restart_after_lease_expiry()
    assert reminders.sent == [7]
    assert reminders.returned == [{"message_id": "<reminder-7@oncebeat.test>", "reconciled": True}]
    assert reminders.job(job_id).state == "completed"
    effect = reminders.effect(7)
    assert effect["state"] == "done"
    assert effect["detail"] == "reconciled: it had happened"
    [event] = store.read("list_events", subject="effect:reminder:7", kind="effect.reconciled",
                         since=sim_clock.now() - timedelta(days=1))
    assert event["detail"]["outcome"] == "done"


def test_reconcile_hook_that_finds_the_effect_did_not_happen_runs_it_once(reminders: Reminders) -> None:
    job_id = reminders.enqueue(7)
    reminders.die_inside_effect = True
    dead = reminders.new_process()
    with pytest.raises(SimulatedCrash):
        dead.drain()
    assert reminders.sent == []
    reminders.reconcile = reminders.was_sent

    reminders.restart_after_lease_expiry()
    assert reminders.sent == [7]
    assert reminders.job(job_id).state == "completed"
    effect = reminders.effect(7)
    assert (effect["state"], effect["attempt"]) == ("done", 2)


def test_reconcile_hook_without_a_verdict_leaves_the_key_in_doubt(reminders: Reminders) -> None:
    job_id = reminders.enqueue(7)
    reminders.crash("effect_before_record")
    asked: list[str] = []

    def undecided(key: str, payload: Any) -> None:
        asked.append(key)
        return None

    reminders.reconcile = undecided
    reminders.restart_after_lease_expiry()
    assert asked == ["reminder:7"]
    assert reminders.sent == [7]
    assert reminders.effect(7)["state"] == "in_doubt"
    assert reminders.job(job_id).state == "in_doubt"


def test_reconcile_hook_with_an_unknown_verdict_is_refused(reminders: Reminders) -> None:
    job_id = reminders.enqueue(7)
    reminders.crash("effect_before_record")
    reminders.reconcile = lambda key, payload: ("maybe", None)
    reminders.restart_after_lease_expiry()
    job = reminders.job(job_id)
    assert job.state == "retryable"
    assert "reconcile hook returned 'maybe'" in job.errors[-1]["error"]
    assert reminders.effect(7)["state"] == "in_doubt"
    assert reminders.sent == [7]


def test_operator_resolving_in_doubt_as_done_records_it_and_never_resends(
        reminders: Reminders, store: Store, sim_clock: SimulatedClock) -> None:
    job_id = reminders.enqueue(7)
    reminders.crash("effect_before_record")
    reminders.restart_after_lease_expiry()
    effects = ledger(store, sim_clock)

    resolution = effects.resolve("reminder:7", "done", {"message_id": "<reminder-7@oncebeat.test>"})
    assert resolution is not None and resolution.closed_job_ids == (job_id,)
    assert reminders.job(job_id).state == "completed", "its only in-doubt effect was resolved"
    assert effects.resolve("reminder:7", "done") is None, "only an in-doubt key can be resolved"
    effect = reminders.effect(7)
    assert effect["state"] == "done"
    assert effect["detail"] == "resolved by operator: it had happened"

    retry = reminders.enqueue(7)
    reminders.new_process().drain()
    assert reminders.sent == [7]
    assert reminders.returned == [None, {"message_id": "<reminder-7@oncebeat.test>"}], \
        "the run that met it in doubt skipped it (None); the next one gets the recorded result"
    assert reminders.job(retry).state == "completed"


def test_operator_resolving_in_doubt_as_not_done_lets_the_next_attempt_send(
        reminders: Reminders, store: Store, sim_clock: SimulatedClock) -> None:
    job_id = reminders.enqueue(7)
    reminders.crash("effect_before_record")
    reminders.restart_after_lease_expiry()
    reminders.sent.clear()  # the operator checked: the provider never accepted that message

    resolution = ledger(store, sim_clock).resolve("reminder:7", "not_done")
    assert resolution is not None and resolution.rerun_job_id == job_id, "the in-doubt job runs again"
    assert reminders.effect(7)["state"] == "failed"
    assert reminders.job(job_id).state == "available"
    reminders.new_process().drain()
    assert reminders.sent == [7]
    assert reminders.effect(7)["state"] == "done"
    job = reminders.job(job_id)
    assert (job.state, job.attempt) == ("completed", 3)


def test_resolve_refuses_unknown_outcomes_and_unknown_keys(reminders: Reminders, store: Store,
                                                           sim_clock: SimulatedClock) -> None:
    reminders.enqueue(7)
    reminders.crash("effect_before_record")
    reminders.restart_after_lease_expiry()
    effects = ledger(store, sim_clock)
    with pytest.raises(ValueError, match="'done' or 'not_done'"):
        effects.resolve("reminder:7", "perhaps")
    assert reminders.effect(7)["state"] == "in_doubt"
    assert effects.resolve("reminder:404", "done") is None


# --- misuse and contention --------------------------------------------------------------------------


def test_reusing_a_key_with_a_different_payload_is_a_conflict(store: Store, sim_clock: SimulatedClock) -> None:
    effects = ledger(store, sim_clock)
    holder = Holder(job_id=None, attempt=None, process_id=None)
    assert effects.run("receipt:1", lambda: "sent", holder=holder, payload={"order": 1}) == "sent"
    ran: list[str] = []
    with pytest.raises(EffectKeyConflict, match="receipt:1"):
        effects.run("receipt:1", lambda: ran.append("again"), holder=holder, payload={"order": 2})
    assert ran == []
    assert effects.run("receipt:1", lambda: ran.append("again"), holder=holder, payload={"order": 1}) == "sent"
    assert ran == []


def test_a_key_held_by_a_live_attempt_is_busy_for_everyone_else(store: Store, sim_clock: SimulatedClock) -> None:
    q = Queue(store, clock=sim_clock, source=current_source("api"))
    worker = Worker(App(), store, clock=sim_clock, lease_seconds=LEASE)
    wid = worker.register()
    first_id = q.enqueue("charge")
    q.enqueue("charge")
    first, second = q.claim(wid, limit=2)
    effects = ledger(store, sim_clock)
    holder = Holder(job_id=first.id, attempt=first.attempt, process_id=wid)
    intruder = Holder(job_id=second.id, attempt=second.attempt, process_id=wid)
    charges: list[str] = []

    def charge() -> str:
        with pytest.raises(EffectBusy, match=f"job {first_id} attempt 1"):
            effects.run("charge:order-9", lambda: charges.append("intruder"), holder=intruder, payload={"eur": 10})
        charges.append("holder")
        return "ch_1"

    assert effects.run("charge:order-9", charge, holder=holder, payload={"eur": 10}) == "ch_1"
    assert charges == ["holder"]
    assert effects.run("charge:order-9", lambda: charges.append("later"), holder=intruder,
                       payload={"eur": 10}) == "ch_1"
    assert charges == ["holder"]


def test_a_job_that_finds_its_effect_busy_is_retried_after_a_lease(reminders: Reminders, store: Store,
                                                                     sim_clock: SimulatedClock) -> None:
    q = reminders.queue()
    owner = reminders.new_process()
    owner_id = owner.register()
    q.enqueue("manual_send")
    [owner_job] = q.claim(owner_id)
    holder = Holder(job_id=owner_job.id, attempt=owner_job.attempt, process_id=owner_id)
    contender: list[int] = []

    def send_while_another_worker_tries() -> dict[str, Any]:
        contender.append(reminders.enqueue(7))
        reminders.new_process().drain()
        return reminders.send(7)

    ledger(store, sim_clock).run("reminder:7", send_while_another_worker_tries, holder=holder,
                                 payload={"invoice_id": 7})
    job = reminders.job(contender[0])
    assert job.state == "retryable"
    assert job.errors[-1]["kind"] == "busy"
    assert job.run_at == sim_clock.now() + timedelta(seconds=LEASE)

    sim_clock.advance(LEASE)
    reminders.new_process().drain()
    assert reminders.job(contender[0]).state == "completed"
    assert reminders.sent == [7]
    assert reminders.returned == [{"message_id": "<reminder-7@oncebeat.test>"}]


# --- on_done: the caller's record commits with the effect's done -----------------------------------


def test_on_done_commits_the_callers_record_in_the_transaction_that_records_done(
        store: Store, sim_clock: SimulatedClock) -> None:
    with store.transaction() as tx:
        tx.execute("CREATE TABLE receipts (effect_key TEXT PRIMARY KEY, result TEXT)")
    holder = Holder(job_id=None, attempt=None, process_id=None)

    def write_receipt(tx: Any, result: Any) -> None:
        tx.execute("INSERT INTO receipts (effect_key, result) VALUES (%(k)s, %(r)s)" if tx.backend == "postgres"
                   else "INSERT INTO receipts (effect_key, result) VALUES (:k, :r)", {"k": "receipt:1", "r": result})

    crashpoints.arm("after_effect_record")  # dies right after the commit: both rows are there, or neither
    with pytest.raises(SimulatedCrash):
        ledger(store, sim_clock).run("receipt:1", lambda: "sent", holder=holder, on_done=write_receipt)
    with store.transaction() as tx:
        assert tx.execute("SELECT effect_key, result FROM receipts") == [{"effect_key": "receipt:1", "result": "sent"}]
    assert ledger(store, sim_clock).get("receipt:1")["state"] == "done"  # type: ignore[index]


def test_an_on_done_that_fails_rolls_the_record_back_and_the_key_is_never_run_again_blindly(
        store: Store, sim_clock: SimulatedClock) -> None:
    calls: list[int] = []

    def broken(tx: Any, result: Any) -> None:
        raise RuntimeError("bookkeeping failed")

    with pytest.raises(RuntimeError, match="bookkeeping failed"):
        ledger(store, sim_clock).run("receipt:2", lambda: calls.append(1), holder=Holder(job_id=None, attempt=None,
                                                                                           process_id=None),
                                     on_done=broken)
    assert ledger(store, sim_clock).get("receipt:2")["state"] == "started"  # type: ignore[index]
    assert calls == [1]


def test_a_job_context_tells_the_ledger_state_of_a_key(reminders: Reminders) -> None:
    states: list[str | None] = []
    app = App()

    @app.task()
    def look(ctx: Any) -> None:
        states.append(ctx.effect_state("reminder:7"))

    reminders.enqueue(7)
    reminders.new_process().drain()
    Queue(reminders.store, clock=reminders.clock, source=current_source("api"), app=app).enqueue("look")
    Worker(app, reminders.store, clock=reminders.clock).drain()
    assert states == ["done"]
