"""The effect ledger's edges (issue 9): many effects per job, points of no return, frozen input, key conflicts.

Crashes are simulated with armed crash points (the worker abandons its jobs as ``kill -9`` would); the
next "process" is a new :class:`Worker` that rescues the job once the lease expired in simulated time.
The real-process versions (SIGKILL, real SMTP) are in tests/acceptance/test_effect_edges_processes.py.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from oncebeat.app import App
from oncebeat.effects import EffectAttempt, EffectLedger, Holder
from oncebeat.errors import EffectInDoubt, EffectKeyConflict, EffectOutcomeUnknown
from oncebeat.crashpoints import SimulatedCrash, crashpoints
from oncebeat.provenance import current_source
from oncebeat.queue import Job, Queue
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock
from oncebeat.worker import Worker

LEASE = 30.0


class Newsletter:
    """Task ``newsletter(recipients)`` sends one message per recipient, each in its own ``ctx.effect``.

    ``outbox`` is the outside world: what really left. The effect marks its point of no return right
    before "sending" and gets its input (the message bytes) frozen at the first attempt.
    """

    def __init__(self, store: Store, clock: SimulatedClock) -> None:
        self.store = store
        self.clock = clock
        self.outbox: list[tuple[str, bytes]] = []
        self.edition = "march"
        self.die_before_no_return: str | None = None
        self.taken_over: list[str] = []  # recipients whose attempt took the key over from an earlier one
        self.app = App()

        @self.app.task(max_attempts=5)
        def newsletter(ctx: Any, recipients: list[str], payload_salt: str = "") -> None:
            for rcpt in recipients:
                ctx.effect(f"news:{rcpt}", lambda attempt, rcpt=rcpt: self.send(rcpt, attempt),
                           payload={"to": rcpt, "salt": payload_salt if rcpt == "b@example.test" else ""},
                           freeze=lambda rcpt=rcpt: f"To: {rcpt}\r\n\r\n{self.edition} edition\r\n".encode(),
                           marks_point_of_no_return=True)

    def send(self, rcpt: str, attempt: EffectAttempt) -> dict[str, str]:
        assert attempt.frozen is not None
        if attempt.taken_over:
            self.taken_over.append(rcpt)
        if self.die_before_no_return == rcpt:
            self.die_before_no_return = None
            raise SimulatedCrash("killed before the point of no return")
        attempt.point_of_no_return()
        self.outbox.append((rcpt, attempt.frozen))
        return {"to": rcpt}

    def sent_to(self) -> list[str]:
        return [rcpt for rcpt, _ in self.outbox]

    def queue(self) -> Queue:
        return Queue(self.store, clock=self.clock, source=current_source("api"))

    def enqueue(self, recipients: list[str], **args: Any) -> int:
        job_id = self.queue().enqueue("newsletter", {"recipients": recipients, **args})
        assert job_id is not None
        return job_id

    def worker(self) -> Worker:
        return Worker(self.app, self.store, clock=self.clock, lease_seconds=LEASE)

    def crash(self, point: str, after: int = 1) -> None:
        crashpoints.arm(point, after)
        with pytest.raises(SimulatedCrash):
            self.worker().drain()

    def restart_after_lease_expiry(self) -> None:
        self.clock.advance(LEASE + 1)
        survivor = self.worker()
        assert survivor.rescue() != []
        survivor.drain()

    def job(self, job_id: int) -> Job:
        job = self.queue().get(job_id)
        assert job is not None
        return job

    def states(self, recipients: list[str]) -> list[str]:
        return [self.store.read("effect_get", key=f"news:{r}")[0]["state"] for r in recipients]

    def ledger(self) -> EffectLedger:
        return EffectLedger(self.store, clock=self.clock, source=current_source("cli"))


@pytest.fixture
def news(store: Store, sim_clock: SimulatedClock) -> Newsletter:
    return Newsletter(store, sim_clock)


RECIPIENTS = [f"r{n}@example.test" for n in range(1, 7)]


# --- item 1: one in-doubt effect never stops the job's other effects -------------------------------------


def test_an_in_doubt_effect_is_skipped_and_the_jobs_later_effects_still_run(news: Newsletter) -> None:
    job_id = news.enqueue(RECIPIENTS)
    news.crash("effect_no_return", after=3)  # dies after the 3rd effect's point of no return, before it sent
    assert news.sent_to() == RECIPIENTS[:2]

    news.restart_after_lease_expiry()
    assert news.sent_to() == RECIPIENTS[:2] + RECIPIENTS[3:], "every later effect ran, none twice"
    assert news.states(RECIPIENTS) == ["done", "done", "in_doubt", "done", "done", "done"]
    job = news.job(job_id)
    assert job.state == "in_doubt", "not discarded: the job names what needs a decision"
    assert job.errors[-1]["kind"] == "in_doubt"
    assert job.errors[-1]["keys"] == ["news:r3@example.test"]


def test_resolving_not_done_runs_the_job_again_and_only_the_missing_effect_is_sent(news: Newsletter) -> None:
    job_id = news.enqueue(RECIPIENTS)
    news.crash("effect_no_return", after=3)
    news.restart_after_lease_expiry()
    assert len(news.outbox) == len(RECIPIENTS) - 1

    resolution = news.ledger().resolve("news:r3@example.test", "not_done")
    assert resolution is not None and resolution.rerun_job_id == job_id
    news.worker().drain()
    assert sorted(news.sent_to()) == sorted(RECIPIENTS), "N delivered, each once"
    assert news.states(RECIPIENTS) == ["done"] * len(RECIPIENTS)
    assert news.job(job_id).state == "completed"


def test_resolving_done_completes_the_job_once_its_last_in_doubt_key_is_resolved(news: Newsletter) -> None:
    job_id = news.enqueue(RECIPIENTS)
    news.crash("effect_no_return", after=2)
    news.clock.advance(LEASE + 1)
    crashpoints.arm("effect_no_return", 2)  # the rescuing worker dies too, at its 2nd new effect (r4)
    rescuer = news.worker()
    rescuer.rescue()
    with pytest.raises(SimulatedCrash):
        rescuer.drain()
    news.restart_after_lease_expiry()
    assert news.states(RECIPIENTS) == ["done", "in_doubt", "done", "in_doubt", "done", "done"]
    assert news.job(job_id).errors[-1]["keys"] == ["news:r2@example.test", "news:r4@example.test"]

    first = news.ledger().resolve("news:r2@example.test", "done")
    assert first is not None and first.closed_job_ids == ()
    assert news.job(job_id).state == "in_doubt", "r4 is still in doubt"
    second = news.ledger().resolve("news:r4@example.test", "done")
    assert second is not None and second.closed_job_ids == (job_id,)
    assert news.job(job_id).state == "completed"
    assert len(news.outbox) == len(RECIPIENTS) - 2, "resolving done sends nothing"


def test_resolving_not_done_for_a_key_whose_job_has_finished_enqueues_a_copy_of_that_job(
        news: Newsletter, store: Store, sim_clock: SimulatedClock) -> None:
    # Version 0.1 discarded a job at its first in-doubt key; after the upgrade the operator resolves it.
    job_id = news.enqueue(RECIPIENTS[:2])
    worker = news.worker()
    [job] = news.queue().claim(worker.register())
    holder = Holder(job_id=job.id, attempt=job.attempt, process_id=worker.process_id)

    def lost_reply() -> None:
        raise EffectOutcomeUnknown("connection dropped before the reply")

    with pytest.raises(EffectInDoubt):
        news.ledger().run("news:r1@example.test", lost_reply, holder=holder,
                          payload={"to": "r1@example.test", "salt": ""})
    news.queue().fail(job, worker.process_id or 0, "in doubt", permanent=True, kind="in_doubt")
    assert news.job(job_id).state == "discarded"

    resolution = news.ledger().resolve("news:r1@example.test", "not_done")
    assert resolution is not None and resolution.rerun_job_id not in (None, job_id)
    news.worker().drain()
    assert news.sent_to() == ["r1@example.test", "r2@example.test"]
    assert news.job(resolution.rerun_job_id).state == "completed"


# --- item 2: in doubt only when the effect may really have happened --------------------------------------


def test_a_holder_that_died_before_its_point_of_no_return_is_retried_not_doubted(
        news: Newsletter, store: Store, sim_clock: SimulatedClock) -> None:
    job_id = news.enqueue(RECIPIENTS[:3])
    news.die_before_no_return = "r2@example.test"  # e.g. killed while waiting for the SMTP connection
    with pytest.raises(SimulatedCrash):
        news.worker().drain()
    assert news.states(RECIPIENTS[:2]) == ["done", "started"]

    assert news.taken_over == []  # every first claim created its key
    news.restart_after_lease_expiry()
    assert news.sent_to() == RECIPIENTS[:3]
    assert news.states(RECIPIENTS[:3]) == ["done"] * 3
    assert news.job(job_id).state == "completed"
    assert news.taken_over == ["r2@example.test"]  # the retry knows an attempt came before it
    [event] = store.read("list_events", subject="effect:news:r2@example.test", kind="effect.retried",
                         since=sim_clock.now() - timedelta(days=1))
    assert "died before its point of no return" in event["detail"]["detail"]


def test_without_a_marked_point_of_no_return_a_dead_holder_is_in_doubt(store: Store,
                                                                        sim_clock: SimulatedClock) -> None:
    app = App()
    sent: list[str] = []

    @app.task()
    def charge(ctx: Any) -> None:
        ctx.effect("charge:1", lambda: sent.append("charged"), payload={"eur": 5})

    Queue(store, clock=sim_clock, source=current_source("api")).enqueue("charge")
    crashpoints.arm("effect_before_record")
    with pytest.raises(SimulatedCrash):
        Worker(app, store, clock=sim_clock, lease_seconds=LEASE).drain()
    sim_clock.advance(LEASE + 1)
    survivor = Worker(app, store, clock=sim_clock, lease_seconds=LEASE)
    survivor.rescue()
    survivor.drain()
    assert sent == ["charged"]
    assert store.read("effect_get", key="charge:1")[0]["state"] == "in_doubt", "the conservative default"


# --- item 12: a retry sends the input frozen at the first attempt ----------------------------------------


def test_a_retry_sends_the_bytes_frozen_at_the_first_attempt_not_a_new_rendering(news: Newsletter) -> None:
    news.enqueue(RECIPIENTS[:1])
    news.crash("effect_no_return")
    news.restart_after_lease_expiry()
    assert news.states(RECIPIENTS[:1]) == ["in_doubt"]

    news.edition = "april"  # the data the message is rendered from changed meanwhile
    news.ledger().resolve("news:r1@example.test", "not_done")
    news.worker().drain()
    assert news.outbox == [("r1@example.test", b"To: r1@example.test\r\n\r\nmarch edition\r\n")]
    assert news.store.read("effect_get", key="news:r1@example.test")[0]["frozen"] is None, \
        "a done effect drops its frozen input"


# --- item 14: a reused key with another payload -----------------------------------------------------------


def test_a_reused_key_with_another_payload_fails_that_effect_at_once_and_the_others_still_run(
        news: Newsletter, store: Store, sim_clock: SimulatedClock) -> None:
    news.enqueue(["b@example.test"])
    news.worker().drain()
    job_id = news.enqueue(["a@example.test", "b@example.test", "c@example.test"], payload_salt="v2")
    news.worker().drain()

    assert news.sent_to() == ["b@example.test", "a@example.test", "c@example.test"]
    job = news.job(job_id)
    assert (job.state, job.attempt) == ("discarded", 1), "recorded at once, never retried"
    assert job.errors[-1]["kind"] == "effect_conflict"
    assert "news:b@example.test" in job.errors[-1]["error"]
    [event] = store.read("list_events", subject="effect:news:b@example.test", kind="effect.conflict",
                         since=sim_clock.now() - timedelta(days=1))
    first = store.read("effect_get", key="news:b@example.test")[0]["payload_hash"]
    assert event["detail"]["first_payload_hash"] == first
    assert event["detail"]["payload_hash"] not in ("", first)
    assert event["detail"]["job_id"] == job_id


def test_outside_a_job_a_reused_key_raises_and_is_recorded(store: Store, sim_clock: SimulatedClock) -> None:
    ledger = EffectLedger(store, clock=sim_clock, source=current_source("api"))
    nobody = Holder(job_id=None, attempt=None, process_id=None)
    ledger.run("receipt:9", lambda: "sent", holder=nobody, payload={"order": 9})
    with pytest.raises(EffectKeyConflict) as raised:
        ledger.run("receipt:9", lambda: "again", holder=nobody, payload={"order": 10})
    assert raised.value.first_payload_hash != raised.value.payload_hash
    assert len(store.read("list_events", subject="effect:receipt:9", kind="effect.conflict",
                          since=sim_clock.now() - timedelta(days=1))) == 1
