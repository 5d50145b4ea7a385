"""The doctor names the cause of every duplicate, loss and risk, with evidence and a fix, on both backends.

Each scenario is produced with the real engine on a :class:`SimulatedClock`
(clocks, workers, crash points, the reminder service and a real SMTP sink);
then :func:`run_doctor` must name that cause with the right evidence. Hosts
and pids are given explicitly (``Source``) so the evidence can be checked.
"""

from __future__ import annotations

import json
import mailbox
import re
import shutil
import threading
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

from oncebeat.app import App
from oncebeat.clock import ClockProcess, Fire, fire_occurrence
from oncebeat.doctor import (
    SCHEMA,
    DoctorReport,
    Finding,
    check_codes,
    explain,
    explain_kinds,
    prune_audit,
    registry,
    run_doctor,
)
from oncebeat.errors import Discard, OncebeatError
from oncebeat.crashpoints import SimulatedCrash, crashpoints
from oncebeat.mail import Mailer, MailSink
from oncebeat.provenance import Source
from oncebeat.queue import Queue
from oncebeat.reminders.doctor import check_undelivered
from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.policy import Policy
from oncebeat.reminders.service import ReminderService
from oncebeat.reminders.tasks import build_app
from oncebeat.store import Store, open_store
from oncebeat.store.sqlfiles import ENGINE
from oncebeat.timebase import SimulatedClock, SystemClock
from oncebeat.worker import Worker, register_process

CHICAGO = "America/Chicago"
LEASE = 30.0


def at(hour: int, minute: int = 0, *, day: int = 1, month: int = 3) -> datetime:
    return datetime(2026, month, day, hour, minute, tzinfo=UTC)


def src(kind: str, host: str, pid: int, name: str, version: str = "0.1.0") -> Source:
    return Source(kind=kind, host=host, pid=pid, name=name, version=version)


def simple_app(*keys: str, expression: str = "0 * * * *", tz: str = CHICAGO, **options: Any) -> App:
    app = App()

    @app.task()
    def work(ctx: Any, **args: Any) -> None:
        pass

    for key in keys or ("hourly",):
        app.schedule(key, expression, tz=tz, task="work", **options)
    return app


def doctor(store: Store, clock: SimulatedClock | SystemClock, **options: Any) -> DoctorReport:
    return run_doctor(store, now=clock.now(), **options)


def evidence(finding: Finding, kind: str) -> list[dict[str, Any]]:
    return [e for e in finding.to_json()["evidence"] if e["kind"] == kind]


def assert_in_order(text: str, parts: list[str]) -> None:
    missing = [p for p in parts if p not in text]
    assert missing == [], f"missing {missing} in:\n{text}"
    positions = [text.index(p) for p in parts]
    assert positions == sorted(positions), text


def tick_every(clock: SimulatedClock, until: datetime, step: float, *clocks: ClockProcess) -> list[Fire]:
    fires: list[Fire] = []
    while clock.now() < until:
        clock.advance(step)
        for c in clocks:
            fires.extend(c.tick())
    return fires


class Billing:
    """The reminder application on one store: a clock, workers, and a real SMTP sink writing a Maildir."""

    def __init__(self, store: Store, clock: SimulatedClock, maildir: Path) -> None:
        self.store = store
        self.clock = clock
        self.maildir = maildir
        self.sink = MailSink(maildir).start()
        self.mailer = Mailer(self.sink.url)
        self.service = ReminderService(store, Policy(), clock=clock, mailer=self.mailer)
        self.app = build_app(self.service)
        self.clk = ClockProcess(self.app, store, clock=clock, source=src("clock", "clock-host", 501, "clock.1"))
        self.clk.start()

    def worker(self, name: str = "worker.1", pid: int = 601) -> Worker:
        return Worker(self.app, self.store, clock=self.clock, lease_seconds=LEASE,
                      source=src("worker", f"{name}-host", pid, name))

    def add_invoice(self, number: str, due_on: date) -> None:
        self.service.upsert([Customer(email="ana@example.com", name="Ana Lima")],
                            [Invoice(number=number, customer_email="ana@example.com", currency="USD",
                                     amount_due=12_345, issued_on=due_on - timedelta(days=30), due_on=due_on)])

    def first_fire(self) -> datetime:
        """Tick to the first 08:00 Chicago after now and run the scan job (not the sends)."""
        nxt = self.app.schedules["reminders"].schedule().next_after(self.clock.now())
        self.clock.set(nxt)
        self.clk.tick()
        return nxt

    def close(self) -> None:
        self.mailer.close()
        self.sink.stop()


@pytest.fixture
def billing(store: Store, sim_clock: SimulatedClock, tmp_path: Path) -> Iterator[Billing]:
    b = Billing(store, sim_clock, tmp_path / "maildir")
    yield b
    b.close()


# --- multiple-clocks ------------------------------------------------------------------------------------


def test_two_clocks_alive_together_are_named_with_the_duplicate_fires_the_ledger_rejected(
        store: Store, sim_clock: SimulatedClock) -> None:
    app = simple_app()
    first = ClockProcess(app, store, clock=sim_clock, source=src("clock", "dyno-a", 101, "clock.1"))
    second = ClockProcess(app, store, clock=sim_clock, source=src("clock", "dyno-b", 202, "clock.2"))
    first.start()
    second.start()
    tick_every(sim_clock, at(15), 3600, first, second)
    # The second clock read the ledger before the first committed 14:00, as a losing process does.
    definition = app.schedules["hourly"]
    with store.transaction() as tx:
        lost = fire_occurrence(tx, queue=second.queue, definition=definition, schedule=definition.schedule(),
                               instant=at(14), outcome="enqueued", source=second.source, now=sim_clock.now(),
                               process_id=second.process_id)
    assert not lost.inserted

    report = doctor(store, sim_clock)
    [finding] = report.by_code("multiple-clocks")
    assert finding.severity == "warning"
    assert "2 clock processes were alive at the same time" in finding.summary
    assert "rejected 1 duplicate fire" in finding.summary
    assert {(p["host"], p["pid"], p["name"]) for p in evidence(finding, "process")} == {
        ("dyno-a", 101, "clock.1"), ("dyno-b", 202, "clock.2")}
    [dup] = evidence(finding, "event")
    assert dup["event"] == "occurrence.duplicate_rejected"
    assert (dup["process_id"], dup["source"]["host"], dup["source"]["pid"]) == (second.process_id, "dyno-b", 202)
    assert dup["detail"]["fire_at"] == at(14).isoformat()
    assert "08:00:00 CST = 14:00:00 UTC" in dup["text"], "the fire instant in local time and UTC"
    assert "one instance" in finding.fix


def heartbeat(store: Store, clock: ClockProcess, at_: datetime) -> None:
    """What ``ClockProcess.run`` does every 5 s."""
    with store.transaction() as tx:
        tx.run("heartbeat_process", id=clock.process_id, now=at_)


def test_two_clocks_heartbeating_side_by_side_are_reported_even_when_nothing_was_rejected(
        store: Store, sim_clock: SimulatedClock) -> None:
    app = simple_app()
    first = ClockProcess(app, store, clock=sim_clock, source=src("clock", "dyno-a", 101, "clock.1"))
    second = ClockProcess(app, store, clock=sim_clock, source=src("clock", "dyno-b", 202, "clock.2"))
    first.start()
    sim_clock.advance(30)
    second.start()
    for _ in range(60):
        sim_clock.advance(5)
        for c in (first, second):
            c.tick()
            heartbeat(store, c, sim_clock.now())

    [finding] = doctor(store, sim_clock).by_code("multiple-clocks")
    assert "rejected 0 duplicate fires" in finding.summary
    [overlap] = evidence(finding, "note")
    assert (overlap["start"]["utc"], overlap["end"]["utc"]) == ("2026-03-01T12:00:30Z", "2026-03-01T12:05:30Z")


def test_clock_replaced_after_a_crash_or_during_a_deploy_is_not_two_clocks(store: Store,
                                                                           sim_clock: SimulatedClock) -> None:
    app = simple_app()
    crashed = ClockProcess(app, store, clock=sim_clock, source=src("clock", "dyno-a", 101, "clock.1"))
    crashed.start()
    sim_clock.advance(20)
    heartbeat(store, crashed, sim_clock.now())  # then SIGKILL: no stop recorded
    sim_clock.advance(10)
    replacement = ClockProcess(app, store, clock=sim_clock, source=src("clock", "dyno-a", 102, "clock.1"))
    replacement.start()
    sim_clock.advance(20)
    heartbeat(store, replacement, sim_clock.now())
    deployed = ClockProcess(app, store, clock=sim_clock, source=src("clock", "dyno-a", 103, "clock.1"))
    deployed.start()  # preboot: the new release starts, the old one stops 10 s later
    sim_clock.advance(10)
    heartbeat(store, deployed, sim_clock.now())
    replacement.request_stop()
    with store.transaction() as tx:
        tx.run("stop_process", id=replacement.process_id, now=sim_clock.now())

    assert doctor(store, sim_clock).by_code("multiple-clocks") == []


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)])
def test_clock_that_really_loses_the_race_is_counted_by_the_doctor(db_url: str, store: Store,
                                                                   sim_clock: SimulatedClock) -> None:
    app = simple_app()
    winner_store, loser_store = open_store(db_url), open_store(db_url)
    try:
        winner = ClockProcess(app, winner_store, clock=sim_clock, source=src("clock", "dyno-a", 1, "clock.1"))
        loser = ClockProcess(app, loser_store, clock=sim_clock, source=src("clock", "dyno-b", 2, "clock.2"))
        winner.start()
        loser.start()
        sim_clock.set(at(13))
        done: list[Fire] = []

        def winner_commits_first(query: str) -> None:
            if query == "insert_occurrence" and not done:
                t = threading.Thread(target=lambda: done.extend(winner.tick()))
                t.start()
                t.join(timeout=30)

        loser_store.before_statement = winner_commits_first
        assert [f.inserted for f in loser.tick()] == [False]
    finally:
        winner_store.close()
        loser_store.close()
    [finding] = doctor(store, sim_clock).by_code("multiple-clocks")
    [dup] = evidence(finding, "event")
    assert dup["source"]["host"] == "dyno-b" and dup["detail"]["fire_at"] == at(13).isoformat()


# --- clock-restart --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("policy", "severity", "decision"), [
    ("latest", "info", "5 occurrence(s) missed during downtime, policy latest: 4 coalesced, 1 enqueued"),
    ("none", "warning", "5 occurrence(s) missed during downtime, policy none: 5 missed"),
])
def test_clock_restarted_after_downtime_is_reported_with_what_its_catch_up_policy_did(
        store: Store, sim_clock: SimulatedClock, policy: str, severity: str, decision: str) -> None:
    app = simple_app(catchup=policy)
    ClockProcess(app, store, clock=sim_clock, source=src("clock", "dyno-a", 101, "clock.1")).start()
    sim_clock.set(at(17, 30))  # down from 12:00 to 17:30 UTC: 13:00 … 17:00 missed
    restarted = ClockProcess(app, store, clock=sim_clock, source=src("clock", "dyno-b", 202, "clock.2"))
    restarted.start()

    report = doctor(store, sim_clock)
    [finding] = report.by_code("clock-restart")
    assert finding.severity == severity
    assert decision in finding.summary
    assert "5 h 30 min after the previous clock (process 1) was last seen" in finding.summary
    assert finding.subject == f"process:{restarted.process_id}"
    [catchup] = evidence(finding, "event")
    assert catchup["event"] == "clock.catchup" and catchup["detail"]["at_startup"] is True
    assert [p["pid"] for p in evidence(finding, "process")] == [202, 101]
    if policy == "none":
        assert "oncebeat backfill hourly" in finding.fix
    assert report.by_code("multiple-clocks") == [], "one clock after the other is a restart, not two clocks"


def test_clock_restarted_minutes_after_a_fire_is_reported_as_having_fired_nothing_again(
        store: Store, sim_clock: SimulatedClock) -> None:
    app = simple_app()
    first = ClockProcess(app, store, clock=sim_clock, source=src("clock", "dyno-a", 101, "clock.1"))
    first.start()
    sim_clock.set(at(13))
    assert [f.inserted for f in first.tick()] == [True]
    sim_clock.set(at(13, 2))  # the dyno restarts two minutes after the 13:00 fire
    second = ClockProcess(app, store, clock=sim_clock, source=src("clock", "dyno-a", 102, "clock.1"))
    assert second.start() == []

    [finding] = doctor(store, sim_clock).by_code("clock-restart")
    assert finding.severity == "info"
    [near] = [e for e in evidence(finding, "note") if e.get("schedule") == "hourly"]
    assert "started 2 min after the hourly fire at 2026-03-01 07:00:00 CST = 13:00:00 UTC" in near["text"]
    assert "already recorded (enqueued)" in near["text"] and "by clock clock.1 pid 101 on dyno-a" in near["text"]
    assert "nothing fired again on boot" in near["text"]
    assert len(store.read("list_occurrences", schedule_key="hourly")) == 1


# --- leftover-trigger -----------------------------------------------------------------------------------


def test_trigger_from_an_unregistered_cron_host_is_named_as_a_leftover_trigger(store: Store,
                                                                              sim_clock: SimulatedClock) -> None:
    app = simple_app("daily", expression="0 8 * * *")
    clock = ClockProcess(app, store, clock=sim_clock, source=src("clock", "clock-host", 501, "clock.1"))
    clock.start()
    cron = ClockProcess(app, store, clock=sim_clock, source=src("cli", "old-cron-box", 4242, "crontab"))
    for day in (2, 3):
        sim_clock.set(at(14, day=day))  # 08:00 CST: the clock fires
        clock.tick()
        sim_clock.set(at(14, 5, day=day))  # 08:05 CST: the old cron entry runs `oncebeat trigger daily`
        assert cron.trigger("daily", kind="cli").inserted

    report = doctor(store, sim_clock)
    [finding] = report.by_code("leftover-trigger")
    assert finding.severity == "warning"
    assert "schedule daily was fired outside its schedule 2 times by cli crontab on old-cron-box" in finding.summary
    assert "not a registered process" in finding.summary
    assert "looks like a leftover cron entry" in finding.summary
    occs = evidence(finding, "occurrence")
    assert [(o["outcome"], o["source"]["host"], o["source"]["pid"], o["source"]["kind"]) for o in occs] == [
        ("manual", "old-cron-box", 4242, "cli")] * 2
    assert [o["fire_at"]["local"] for o in occs] == ["2026-03-02T08:05:00-06:00", "2026-03-03T08:05:00-06:00"]
    assert [o["fire_at"]["utc"] for o in occs] == ["2026-03-02T14:05:00Z", "2026-03-03T14:05:00Z"]
    assert len(evidence(finding, "job")) == 2, "each manual fire ran a job of its own"
    assert "oncebeat trigger daily" in finding.fix and "old-cron-box" in finding.fix


def test_old_release_still_running_is_named_with_its_version_stale_definitions_and_retired_schedule(
        store: Store, sim_clock: SimulatedClock) -> None:
    old_app, new_app = simple_app("kept", "dropped"), simple_app("kept")
    ClockProcess(old_app, store, clock=sim_clock, source=src("clock", "old-host", 7, "clock.old", "0.0.9")).start()
    sim_clock.advance(60)
    new = ClockProcess(new_app, store, clock=sim_clock, source=src("clock", "new-host", 8, "clock.new"))
    assert new.sync().retired == ["dropped"]
    new.start()
    sim_clock.advance(3600)
    restarted_old = ClockProcess(old_app, store, clock=sim_clock, source=src("clock", "old-host", 9, "clock.old", "0.0.9"))
    restarted_old.start()  # the old release restarted by its supervisor: stale, fires nothing of its own

    findings = doctor(store, sim_clock, definitions=new_app).by_code("leftover-trigger")
    summaries = "\n".join(f.summary for f in findings)
    assert "older version (0.0.9) kept running after v0.1.0 started" in summaries
    assert "a clock with older schedule definitions is running (clock.old pid 9 on old-host, v0.0.9)" in summaries
    assert "retired schedule dropped" in summaries and "still defined by" in summaries
    stale = next(f for f in findings if "older schedule definitions" in f.summary)
    assert evidence(stale, "event")[0]["event"] == "clock.stale_definitions"
    retired = next(f for f in findings if "retired schedule dropped" in f.summary)
    assert retired.severity == "warning"
    assert 9 in {p["pid"] for p in evidence(retired, "process")}
    assert store.read("list_occurrences", schedule_key="dropped") == []


def test_definitions_that_differ_from_the_database_are_reported(store: Store, sim_clock: SimulatedClock) -> None:
    ClockProcess(simple_app("report"), store, clock=sim_clock).start()
    mine = simple_app("report", expression="15 * * * *")
    [finding] = doctor(store, sim_clock, definitions=mine).by_code("leftover-trigger")
    assert "another definition of report (0 * * * * in America/Chicago, version 1)" in finding.summary
    assert "(15 * * * * in America/Chicago)" in finding.summary


# --- retry-side-effect, in-doubt, discarded -------------------------------------------------------------


class Outbox:
    """A task ``remind`` that sends through ``ctx.effect``; ``sent`` is the outside world's view."""

    def __init__(self) -> None:
        self.sent: list[int] = []
        self.app = App()

        @self.app.task(max_attempts=5)
        def remind(ctx: Any, invoice_id: int) -> None:
            ctx.effect(f"mail:{invoice_id}", lambda: self.sent.append(invoice_id), payload={"invoice_id": invoice_id})

    def worker(self, store: Store, clock: SimulatedClock, host: str, pid: int) -> Worker:
        return Worker(self.app, store, clock=clock, lease_seconds=LEASE, source=src("worker", host, pid, host))


def crash_then_rescue(store: Store, clock: SimulatedClock, point: str) -> tuple[Outbox, int]:
    outbox = Outbox()
    job_id = Queue(store, clock=clock, source=src("api", "web-host", 1, "web.1")).enqueue("remind", {"invoice_id": 7},
                                                                                         max_attempts=5)
    assert job_id is not None
    crashpoints.arm(point)
    with pytest.raises(SimulatedCrash):
        outbox.worker(store, clock, "dyno-w1", 31).drain()
    crashpoints.disarm()
    clock.advance(LEASE + 1)
    survivor = outbox.worker(store, clock, "dyno-w2", 32)
    assert survivor.rescue() != []
    survivor.drain()
    return outbox, job_id


def test_worker_killed_inside_an_effect_is_reported_as_rescue_and_in_doubt(
        store: Store, sim_clock: SimulatedClock) -> None:
    outbox, job_id = crash_then_rescue(store, sim_clock, "effect_before_record")
    assert outbox.sent == [7]

    report = doctor(store, sim_clock)
    assert report.exit_code == 1
    [retry] = report.by_code("retry-side-effect")
    assert retry.severity == "warning" and retry.subject == f"job:{job_id}"
    assert "rescued 1 time" in retry.summary and "1 in doubt" in retry.summary
    [rescue] = [e for e in evidence(retry, "event") if e["event"] == "job.rescued"]
    assert "dyno-w1 pid 31 on dyno-w1 stopped heartbeating" in rescue["text"]
    assert [e["state"] for e in evidence(retry, "effect")] == ["in_doubt"]

    [doubt] = report.by_code("in-doubt")
    assert doubt.severity == "error" and doubt.subject == "effect:mail:7"
    [eff] = evidence(doubt, "effect")
    assert (eff["key"], eff["job_id"], eff["attempt"], eff["host"], eff["pid"]) == ("mail:7", job_id, 1, "dyno-w1", 31)
    assert eff["started_at"]["utc"] == "2026-03-01T12:00:00Z"
    assert "oncebeat effects resolve mail:7 done" in doubt.fix and "oncebeat effects resolve mail:7 not_done" in doubt.fix

    assert f"job {job_id} waits in_doubt" in doubt.summary
    [job] = evidence(doubt, "job")
    assert job["state"] == "in_doubt" and job["last_error"]["kind"] == "in_doubt", "waiting, not discarded"
    assert report.by_code("discarded") == []


def test_a_reused_effect_key_with_another_payload_is_reported_with_both_hashes(
        store: Store, sim_clock: SimulatedClock) -> None:
    app = App()

    @app.task()
    def bill(ctx: Any, amounts: list[int]) -> None:
        for n, amount in enumerate(amounts):
            ctx.effect(f"invoice-mail:{n}", lambda: None, payload={"amount": amount})

    q = Queue(store, clock=sim_clock, source=src("api", "web-host", 1, "web.1"))
    q.enqueue("bill", {"amounts": [10, 20]})
    Worker(app, store, clock=sim_clock, lease_seconds=LEASE).drain()
    job_id = q.enqueue("bill", {"amounts": [10, 25, 30]})  # key invoice-mail:1 now names another amount
    Worker(app, store, clock=sim_clock, lease_seconds=LEASE).drain()

    report = doctor(store, sim_clock)
    [conflict] = report.by_code("effect-conflict")
    assert conflict.severity == "error" and conflict.subject == "effect:invoice-mail:1"
    assert f"by job {job_id} attempt 1" in conflict.summary and "the job's other effects were" in conflict.summary
    [event] = evidence(conflict, "event")
    assert event["detail"]["first_payload_hash"] != event["detail"]["payload_hash"]
    [discarded] = report.by_code("discarded")
    assert discarded.subject == f"job:{job_id}" and "see effect-conflict" in discarded.fix
    assert store.read("effect_get", key="invoice-mail:2")[0]["state"] == "done", "the later effect still ran"
    assert report.exit_code == 1


def test_retry_after_the_effect_was_recorded_is_reported_as_harmless(store: Store,
                                                                     sim_clock: SimulatedClock) -> None:
    outbox, _ = crash_then_rescue(store, sim_clock, "after_effect_record")
    assert outbox.sent == [7]

    report = doctor(store, sim_clock)
    [retry] = report.by_code("retry-side-effect")
    assert retry.severity == "info"
    assert "1 done once" in retry.summary and "no effect ran twice" in retry.summary
    assert [e["state"] for e in evidence(retry, "effect")] == ["done"]
    assert report.by_code("in-doubt") == [] and report.by_code("discarded") == []
    assert report.exit_code == 0


def test_job_that_gave_up_is_reported_with_its_last_error(store: Store, sim_clock: SimulatedClock) -> None:
    app = App()

    @app.task(max_attempts=3)
    def charge(ctx: Any, customer: int) -> None:
        raise Discard(f"customer {customer} was deleted")

    job_id = Queue(store, clock=sim_clock, source=src("api", "web-host", 1, "web.1")).enqueue("charge", {"customer": 7})
    Worker(app, store, clock=sim_clock, source=src("worker", "w-host", 5, "worker.1")).drain()

    report = doctor(store, sim_clock)
    [finding] = report.by_code("discarded")
    assert finding.severity == "error" and report.exit_code == 1
    assert f"job {job_id} (charge) gave up after 1 attempt" in finding.summary
    assert "customer 7 was deleted" in finding.summary
    [job] = evidence(finding, "job")
    assert job["last_error"]["kind"] == "discard" and job["last_error"]["error"] == "customer 7 was deleted"


# --- reminders: in-doubt with mail evidence, duplicate-delivery, lost ------------------------------------


def test_in_doubt_reminder_with_its_message_in_the_maildir_is_told_to_resolve_done(billing: Billing) -> None:
    billing.add_invoice("INV-5", date(2026, 2, 27))
    billing.first_fire()
    doomed = billing.worker("doomed", 66)
    doomed.drain(max_batches=1)  # the scan
    crashpoints.arm("effect_before_record")
    with pytest.raises(SimulatedCrash):
        doomed.drain()
    crashpoints.disarm()
    billing.clock.advance(LEASE + 1)
    survivor = billing.worker("survivor", 67)
    survivor.rescue()
    survivor.drain()

    report = doctor(billing.store, billing.clock, maildir=billing.maildir)
    [doubt] = report.by_code("in-doubt")
    [reminder] = evidence(doubt, "reminder")
    assert (reminder["invoice"], reminder["stage"], reminder["state"]) == ("INV-5", 1, "in_doubt")
    [mail] = [e for e in evidence(doubt, "note") if "copies" in e]
    assert mail["copies"] == 1 and mail["message_id"] == reminder["message_id"]
    [effect] = evidence(doubt, "effect")
    assert doubt.subject == f"effect:{effect['key']}" and effect["key"].startswith("reminder:")
    assert doubt.fix == f"The Maildir shows it was delivered: run `oncebeat effects resolve {effect['key']} done`."
    assert report.by_code("duplicate-delivery") == []

    for path in (billing.maildir / "new").iterdir():
        path.unlink()  # had the mailbox nothing, the advice turns round
    [doubt] = doctor(billing.store, billing.clock, maildir=billing.maildir).by_code("in-doubt")
    assert "no copy" in doubt.fix and f"oncebeat effects resolve {effect['key']} not_done" in doubt.fix


def test_rescued_send_whose_message_reached_the_maildir_twice_is_an_error(billing: Billing) -> None:
    billing.add_invoice("INV-6", date(2026, 2, 27))
    billing.first_fire()
    doomed = billing.worker("doomed", 66)
    doomed.drain(max_batches=1)  # the scan
    crashpoints.arm("after_effect_record")  # sent and recorded; the job is not completed
    with pytest.raises(SimulatedCrash):
        doomed.drain()
    crashpoints.disarm()
    billing.clock.advance(LEASE + 1)
    survivor = billing.worker("survivor", 67)
    survivor.rescue()
    survivor.drain()
    [only] = list((billing.maildir / "new").iterdir())
    shutil.copy(only, billing.maildir / "new" / ("1" + only.name))

    # the doomed worker's batch also held the scan's report run (reminders.report_run), rescued too: a retry with
    # no effect, reported apart; the send's is the error
    [retry] = [f for f in doctor(billing.store, billing.clock, maildir=billing.maildir).by_code("retry-side-effect")
               if f.severity == "error"]
    assert "1 effect reached the Maildir more than once" in retry.summary
    [effect] = evidence(retry, "effect")
    assert effect["state"] == "done" and "2 copies in the Maildir" in effect["text"]


def test_same_reminder_delivered_twice_is_found_in_the_maildir_with_its_database_story(billing: Billing) -> None:
    billing.add_invoice("INV-9", date(2026, 2, 27))
    billing.first_fire()
    billing.worker().drain()
    [only] = list((billing.maildir / "new").iterdir())
    shutil.copy(only, billing.maildir / "new" / ("1" + only.name))  # the relay delivered it a second time

    report = doctor(billing.store, billing.clock, maildir=billing.maildir)
    [finding] = report.by_code("duplicate-delivery")
    assert finding.severity == "error" and report.exit_code == 1
    assert finding.summary.startswith("invoice INV-9 stage 1 was delivered 2 times to Ana Lima <ana@example.com>")
    assert "one Message-ID" in finding.summary
    messages = evidence(finding, "message")
    assert len({m["maildir_key"] for m in messages}) == 2 and len({m["message_id"] for m in messages}) == 1
    [reminder] = evidence(finding, "reminder")
    assert reminder["state"] == "sent" and reminder["message_id"] == messages[0]["message_id"]
    [effect] = evidence(finding, "effect")
    assert effect["state"] == "done", "the ledger ran it once: the copy came from outside"


def write_message(maildir: Path, *, message_id: str, invoice: str, stage: int) -> None:
    msg = EmailMessage()
    msg["From"] = "billing@example.com"
    msg["To"] = "bob@example.com"
    msg["Subject"] = f"Invoice {invoice} is overdue"
    msg["Date"] = "Mon, 02 Mar 2026 08:00:05 -0600"
    msg["Message-ID"] = message_id
    msg["X-Oncebeat-Invoice"] = invoice
    msg["X-Oncebeat-Stage"] = str(stage)
    msg.set_content("Please pay.")
    mailbox.Maildir(maildir, create=True).add(msg)


def test_two_different_sends_of_one_stage_are_told_apart_from_a_resend(store: Store, sim_clock: SimulatedClock,
                                                                        tmp_path: Path) -> None:
    maildir = tmp_path / "mail"
    write_message(maildir, message_id="<a@x>", invoice="INV-1", stage=7)
    write_message(maildir, message_id="<b@x>", invoice="INV-1", stage=7)
    write_message(maildir, message_id="<c@x>", invoice="INV-2", stage=7)
    write_message(maildir, message_id="<c@x>", invoice="INV-2", stage=7)
    write_message(maildir, message_id="<d@x>", invoice="INV-3", stage=1)

    findings = doctor(store, sim_clock, maildir=maildir).by_code("duplicate-delivery")
    by_invoice = {f.subject: f for f in findings}
    assert set(by_invoice) == {"invoice:INV-1", "invoice:INV-2"}
    assert "2 different Message-IDs" in by_invoice["invoice:INV-1"].summary
    assert "one Message-ID" in by_invoice["invoice:INV-2"].summary
    assert [m["date"]["utc"] for m in evidence(by_invoice["invoice:INV-1"], "message")] == [
        "2026-03-02T14:00:05Z"] * 2


def test_pending_reminder_whose_send_job_is_gone_is_reported_lost(billing: Billing) -> None:
    billing.add_invoice("INV-3", date(2026, 2, 27))
    billing.first_fire()
    billing.worker().drain(max_batches=1)  # the scan creates the reminder and its send job
    [send] = billing.store.read("list_jobs", state="available", task="reminders.send", limit=10)
    assert Queue(billing.store, clock=billing.clock, source=src("cli", "laptop", 9, "oncebeat jobs")).cancel(send["id"])

    [finding] = doctor(billing.store, billing.clock).by_code("lost")
    assert finding.severity == "error" and finding.subject == "invoice:INV-3"
    assert "1 reminder pending with no unfinished send job" in finding.summary
    [reminder] = evidence(finding, "reminder")
    assert (reminder["invoice"], reminder["stage"], reminder["state"]) == ("INV-3", 1, "pending")
    assert "oncebeat trigger reminders" in finding.fix


def test_the_reminder_apps_checks_are_registered_and_find_a_lost_reminder_by_invoice(billing: Billing) -> None:
    """The doctor's core knows no invoice: the reminder app registers its part of lost, undelivered, the
    invoice scope and explain kind (oncebeat.reminders.doctor), and they run in the doctor's report."""
    parts = {(p.code, p.part): p for p in registry.check_parts()}
    assert parts[("lost", "reminders")].sql_line == "reminders" and ("lost", "engine") in parts
    assert parts[("undelivered", "reminders")].fn is check_undelivered
    assert "invoice" in registry.scopes() and "invoice" in explain_kinds()
    billing.add_invoice("INV-9", date(2026, 2, 27))
    billing.first_fire()
    billing.worker().drain(max_batches=1)
    [send] = billing.store.read("list_jobs", state="available", task="reminders.send", limit=10)
    assert Queue(billing.store, clock=billing.clock, source=src("cli", "laptop", 9, "oncebeat jobs")).cancel(send["id"])

    report = doctor(billing.store, billing.clock, invoice="INV-9")
    [finding] = report.by_code("lost")
    assert finding.subject == "invoice:INV-9" and "1 reminder pending with no unfinished send job" in finding.summary
    assert report.to_json()["scope"]["invoice"] == "INV-9"
    runs = {c.code: c for c in report.checks}
    assert runs["lost"].ran and runs["lost"].findings == 1 and runs["undelivered"].ran
    assert list(runs) == list(check_codes()) and list(runs)[-1] == "undelivered"


def test_an_engine_only_database_skips_the_reminder_apps_part_cleanly(db_url: str, sim_clock: SimulatedClock) -> None:
    """Even with the reminder app imported, a database without its tables gets the engine's checks: the app's
    parts are skipped with a note, and its scope and explain kind say why they cannot run."""
    engine_only = open_store(db_url)
    try:
        engine_only.migrate(lines=(ENGINE,))
        assert engine_only.schema_versions().keys() == {"engine"}
        ClockProcess(simple_app(), engine_only, clock=sim_clock).start()
        sim_clock.advance(3600)
        report = doctor(engine_only, sim_clock)
        runs = {c.code: c for c in report.checks}
        assert runs["lost"].ran, "the engine's part of lost ran"
        assert not runs["undelivered"].ran and "no reminders tables" in str(runs["undelivered"].note)
        assert report.exit_code == 0, report.to_text()
        with pytest.raises(OncebeatError, match="no tables of the 'reminders' SQL line"):
            doctor(engine_only, sim_clock, invoice="INV-1")
        with pytest.raises(OncebeatError, match="no tables of the 'reminders' SQL line"):
            explain(engine_only, "invoice", "INV-1")
        with pytest.raises(OncebeatError, match="no such scope"):
            doctor(engine_only, sim_clock, customer="ana@example.com")
    finally:
        engine_only.close()
        drop_schema = getattr(engine_only, "drop_schema", None)
        if drop_schema is not None:
            drop_schema()


def test_occurrence_recorded_without_its_job_is_reported_lost(store: Store, sim_clock: SimulatedClock) -> None:
    app = simple_app()
    ClockProcess(app, store, clock=sim_clock).start()
    old = src("clock", "legacy-host", 55, "legacy clock", "0.0.1")
    with store.transaction() as tx:  # an old version that wrote the ledger without enqueueing
        tx.one("insert_occurrence", schedule_key="hourly", fire_at=at(13), local_fire_at="2026-03-01T07:00:00-06:00",
               tz=CHICAGO, business_date=date(2026, 3, 1), tzdata_version=None, outcome="enqueued", reason=None,
               now=at(13), **old.params())

    report = doctor(store, sim_clock)
    [finding] = report.by_code("lost")
    assert finding.severity == "error"
    assert "1 occurrence of hourly recorded as enqueued with no job" in finding.summary
    [occ] = evidence(finding, "occurrence")
    assert (occ["job_id"], occ["source"]["host"], occ["fire_at"]["utc"]) == (None, "legacy-host", "2026-03-01T13:00:00Z")
    assert "unregistered process (legacy clock pid 55 on legacy-host" in "\n".join(
        f.summary for f in report.by_code("leftover-trigger"))


def test_job_running_past_its_lease_is_lost_until_a_worker_rescues_it(store: Store, sim_clock: SimulatedClock) -> None:
    outbox = Outbox()
    Queue(store, clock=sim_clock, source=src("api", "web-host", 1, "web.1")).enqueue("remind", {"invoice_id": 1})
    crashpoints.arm("after_claim")
    with pytest.raises(SimulatedCrash):
        outbox.worker(store, sim_clock, "dyno-w1", 31).drain()
    crashpoints.disarm()

    sim_clock.advance(LEASE + 10)
    [soon] = doctor(store, sim_clock).by_code("lost")
    assert soon.severity == "warning" and "past the lease" in soon.summary
    assert evidence(soon, "process")[0]["host"] == "dyno-w1"
    sim_clock.advance(600)
    [stuck] = doctor(store, sim_clock).by_code("lost")
    assert stuck.severity == "error" and "no worker has rescued them" in stuck.summary


def test_due_jobs_nobody_claims_are_reported(store: Store, sim_clock: SimulatedClock) -> None:
    Queue(store, clock=sim_clock, source=src("api", "web-host", 1, "web.1")).enqueue("anything", queue="mail")
    sim_clock.advance(2 * 3600)
    [finding] = doctor(store, sim_clock).by_code("lost")
    assert finding.severity == "warning" and "queues: mail 1" in finding.summary and "0 workers alive" in finding.summary


# --- timezone -------------------------------------------------------------------------------------------


def test_process_tz_different_from_the_schedule_zone_is_reported(store: Store, sim_clock: SimulatedClock,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    app = simple_app("daily", expression="0 8 * * *")
    ClockProcess(app, store, clock=sim_clock, source=src("clock", "clock-host", 501, "clock.1")).start()
    Worker(app, store, clock=sim_clock, source=src("worker", "worker-host", 601, "worker.1")).register()

    [finding] = doctor(store, sim_clock).by_code("timezone")
    assert finding.severity == "warning"
    assert "2 processes run with TZ=UTC while schedules are in other zones (daily in America/Chicago)" in finding.summary
    assert {(p["host"], p["pid"], p["tz_env"]) for p in evidence(finding, "process")} == {
        ("clock-host", 501, "UTC"), ("worker-host", 601, "UTC")}
    assert "ctx.business_date()" in finding.fix


def test_zone_moved_west_after_the_days_fire_is_coalesced_so_no_second_fire_is_reported(
        store: Store, sim_clock: SimulatedClock) -> None:
    clock = ClockProcess(simple_app("daily", expression="0 8 * * *", tz="America/New_York"), store, clock=sim_clock)
    clock.start()
    sim_clock.set(at(13, day=2))  # 08:00 EST
    assert [f.inserted for f in clock.tick()] == [True]
    sim_clock.set(at(14, day=2))
    west = ClockProcess(simple_app("daily", expression="0 8 * * *", tz="America/Los_Angeles"), store, clock=sim_clock)
    west.start()
    sim_clock.set(at(16, day=2))  # 08:00 PST, the same local date
    assert [(f.inserted, f.outcome, f.reason) for f in west.tick()] == [(True, "coalesced", "period already served")]
    assert [f for f in doctor(store, sim_clock).by_code("timezone") if "business date" in f.summary] == []


def test_second_fire_on_one_business_date_from_an_older_version_is_reported(store: Store,
                                                                             sim_clock: SimulatedClock) -> None:
    east = simple_app("daily", expression="0 8 * * *", tz="America/New_York")
    clock = ClockProcess(east, store, clock=sim_clock)
    clock.start()
    sim_clock.set(at(13, day=2))  # 08:00 EST
    assert [f.inserted for f in clock.tick()] == [True]
    sim_clock.set(at(14, day=2))
    west_app = simple_app("daily", expression="0 8 * * *", tz="America/Los_Angeles")
    west = ClockProcess(west_app, store, clock=sim_clock)
    west.start()
    sim_clock.set(at(16, day=2))  # 08:00 PST, the same local date, fired by a version without the period rule
    definition = west_app.schedules["daily"]
    with store.transaction() as tx:
        fired = fire_occurrence(tx, queue=west.queue, definition=definition, schedule=definition.schedule(),
                                instant=at(16, day=2), outcome="enqueued", source=west.source, now=sim_clock.now())
    assert fired.inserted

    [finding] = [f for f in doctor(store, sim_clock).by_code("timezone") if "business date" in f.summary]
    assert finding.severity == "warning"
    assert "daily schedule daily fired 2 times for business date 2026-03-02 (after the schedule changed" in finding.summary
    assert [o["fire_at"]["utc"] for o in evidence(finding, "occurrence")] == ["2026-03-02T13:00:00Z", "2026-03-02T16:00:00Z"]
    assert [o["tz"] for o in evidence(finding, "occurrence")] == ["America/New_York", "America/Los_Angeles"]
    assert evidence(finding, "event")[0]["event"] == "schedule.changed"


def test_fire_moved_by_the_spring_forward_gap_is_explained_with_its_rule(store: Store,
                                                                          sim_clock: SimulatedClock) -> None:
    app = simple_app("nightly", expression="30 2 * * *")
    clock = ClockProcess(app, store, clock=sim_clock)
    clock.start()
    tick_every(sim_clock, at(12, day=9), 3600, clock)

    [finding] = [f for f in doctor(store, sim_clock).by_code("timezone") if "gap" in f.summary]
    assert finding.severity == "info"
    assert "nightly (30 2 * * * in America/Chicago) around the gap of 2026-03-08" in finding.summary
    assert "R2 (dst_gap=shift)" in finding.summary
    [occ] = evidence(finding, "occurrence")
    assert (occ["fire_at"]["local"], occ["fire_at"]["utc"]) == ("2026-03-08T03:00:00-05:00", "2026-03-08T08:00:00Z")
    assert "wall time 02:30 -> 03:00:00 CDT" in occ["text"]
    [tr] = evidence(finding, "transition")
    assert (tr["type"], tr["offset_before"], tr["offset_after"]) == ("gap", -6 * 3600, -5 * 3600)


@pytest.mark.parametrize(("gap", "rule"), [("shift", "R2 (dst_gap=shift): runs once, at the first instant after the gap"),
                                           ("skip", "dst_gap=skip: the run that falls in the gap is dropped")])
def test_coming_dst_change_says_what_the_schedules_policy_will_do(store: Store, sim_clock: SimulatedClock,
                                                                   gap: str, rule: str) -> None:
    app = simple_app("nightly", expression="30 2 * * *", dst_gap=gap)
    app.schedule("morning", "0 8 * * *", tz=CHICAGO, task="work")
    ClockProcess(app, store, clock=sim_clock).start()

    [finding] = doctor(store, sim_clock).by_code("timezone")
    assert finding.subject == "schedule:nightly", "08:00 is not in the gap: morning is unaffected"
    assert finding.summary.startswith("in 6 d 20 h (2026-03-08) America/Chicago has a gap; nightly (30 2 * * *)")
    assert rule in finding.summary
    [planned] = evidence(finding, "note")
    assert planned["wall"] == "2026-03-08T02:30"
    assert [i["utc"] for i in planned["instants"]] == (["2026-03-08T08:00:00Z"] if gap == "shift" else [])


# --- clock-skew -----------------------------------------------------------------------------------------


def test_process_clock_ahead_of_the_server_is_reported_on_postgres_and_not_checked_on_sqlite(
        store: Store, backend: str) -> None:
    real = SystemClock()
    register_process(store, role="worker", source=src("worker", "fast-host", 77, "worker.9"),
                     clock=SimulatedClock(real.now() + timedelta(minutes=10)))

    report = doctor(store, real)
    [finding] = report.by_code("clock-skew")
    [run] = [c for c in report.checks if c.code == "clock-skew"]
    if backend == "postgres":
        assert run.ran and finding.severity == "error"
        assert "the clock of worker.9 pid 77 on fast-host runs at least" in finding.summary
        measured = evidence(finding, "measurement")
        assert {m["what"] for m in measured} == {"heartbeat_ahead_of_server", "events_ahead_of_server"}
        assert all(590 <= m["seconds"] <= 601 for m in measured)
        assert "NTP" in finding.fix
    else:
        assert not run.ran and finding.severity == "info" and "SQLite has no server clock" in finding.summary
        assert report.exit_code == 0


# --- a clean run, the JSON shape, scope ------------------------------------------------------------------


def test_clean_reminder_run_gives_no_finding_above_info(store: Store, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TZ", raising=False)
    real_now = SystemClock().now()
    clock = SimulatedClock(real_now - timedelta(days=3))  # history in the past of the server's clock
    b = Billing(store, clock, tmp_path / "maildir")
    try:
        b.add_invoice("INV-1", (real_now - timedelta(days=10)).date())
        b.add_invoice("INV-2", (real_now - timedelta(days=5)).date())
        worker = b.worker()
        for _ in range(2):
            b.first_fire()
            worker.drain()
        report = run_doctor(store, now=real_now, maildir=b.maildir)
    finally:
        b.close()
    assert len(list((b.maildir / "new").iterdir())) == 2, "INV-1 stage 7 and INV-2 stage 1, once each"
    assert [f for f in report.findings if f.severity != "info"] == [], report.to_text()
    assert report.exit_code == 0
    assert {c.code for c in report.checks if c.ran} >= set(check_codes()) - {"clock-skew"}


def test_json_report_has_the_documented_shape(store: Store, sim_clock: SimulatedClock) -> None:
    crash_then_rescue(store, sim_clock, "effect_before_record")
    data = doctor(store, sim_clock, since=at(11)).to_json()
    json.dumps(data)  # serialisable as is
    assert set(data) == {"schema", "generated_at", "database", "tz", "scope", "exit_code", "counts", "checks",
                         "notes", "findings"}
    assert data["schema"] == SCHEMA == "oncebeat.doctor/1"
    assert data["generated_at"] == {"utc": "2026-03-01T12:00:31Z", "local": "2026-03-01T12:00:31+00:00", "tz": "UTC"}
    assert set(data["database"]) == {"backend", "url"} and data["exit_code"] == 1
    assert data["scope"] == {"since": "2026-03-01T11:00:00+00:00", "schedule": None, "invoice": None, "maildir": None}
    assert set(data["counts"]) == {"error", "warning", "info"}
    assert [c["code"] for c in data["checks"]] == list(check_codes())
    assert all(set(c) == {"code", "ran", "findings", "note"} for c in data["checks"])
    for f in data["findings"]:
        assert set(f) == {"code", "severity", "summary", "fix", "subject", "evidence"}
        assert f["code"] in check_codes() and f["severity"] in ("info", "warning", "error")
        for e in f["evidence"]:
            assert isinstance(e["kind"], str) and isinstance(e["text"], str)
    severities = [f["severity"] for f in data["findings"]]
    assert severities == sorted(severities, key=["error", "warning", "info"].index), "errors first"
    effect = next(e for f in data["findings"] for e in f["evidence"] if e["kind"] == "effect")
    assert set(effect) == {"kind", "text", "key", "state", "job_id", "attempt", "process_id", "host", "pid",
                           "started_at", "finished_at", "detail"}
    assert set(effect["started_at"]) == {"utc", "local", "tz"}
    docs = (Path(__file__).parents[2] / "docs" / "doctor.md").read_text(encoding="utf-8")
    for name in [*data, *check_codes(), "measurement", "transition", "last_seen_at", "maildir_key"]:
        assert f"`{name}`" in docs, f"docs/doctor.md does not document {name}"


def test_text_report_shows_each_finding_with_its_evidence_and_fix(store: Store, sim_clock: SimulatedClock) -> None:
    crash_then_rescue(store, sim_clock, "effect_before_record")
    text = doctor(store, sim_clock).to_text()
    assert re.search(r"^ERROR +in-doubt: effect mail:7 is in doubt since", text, re.MULTILINE)
    assert "  fix: Check whether it happened" in text
    assert "  - effect mail:7 in_doubt: job 1 attempt 1 (worker dyno-w1 pid 31 on dyno-w1)" in text


def test_scope_to_one_schedule_or_invoice_keeps_only_what_belongs_to_it(billing: Billing) -> None:
    billing.add_invoice("INV-7", date(2026, 2, 27))
    billing.first_fire()
    billing.clock.advance(300)
    billing.clk.trigger("reminders", kind="cli")
    billing.worker().drain()
    everything = doctor(billing.store, billing.clock)
    assert everything.by_code("leftover-trigger")
    assert doctor(billing.store, billing.clock, invoice="INV-7").by_code("leftover-trigger")
    with pytest.raises(OncebeatError, match="no such invoice"):
        doctor(billing.store, billing.clock, invoice="INV-404")
    with pytest.raises(OncebeatError, match="no such schedule"):
        doctor(billing.store, billing.clock, schedule="nope")
    later = doctor(billing.store, billing.clock, since=billing.clock.now() + timedelta(seconds=1))
    assert later.by_code("leftover-trigger") == [], "history before --since is not examined"


# --- explain and retention ------------------------------------------------------------------------------


def test_explain_tells_a_rescued_jobs_story_in_order(store: Store, sim_clock: SimulatedClock) -> None:
    _, job_id = crash_then_rescue(store, sim_clock, "effect_before_record")
    lines = explain(store, "job", job_id)
    assert lines[0] == f"job {job_id} (remind) in queue default: in_doubt, attempt 2/5, args {{\"invoice_id\": 7}}"
    story = "\n".join(lines)
    order = ["enqueued by api web.1 pid 1 on web-host", "effect mail:7 started by job 1 attempt 1",
             ("rescued by rescue dyno-w2 pid 32 on dyno-w2 (v0.1.0): worker 1 (dyno-w1 pid 31 on dyno-w1) stopped "
              "heartbeating during attempt 1; now available"),
             "claimed for attempt 2 by worker 2 (dyno-w2 pid 32 on dyno-w2)",
             "effect mail:7 marked in doubt by worker dyno-w2 pid 32",
             "attempt 2 failed (in_doubt)", "waits in doubt after attempt 2 (its other effects ran): resolve mail:7"]
    assert_in_order(story, order)
    assert "oncebeat effects resolve mail:7 done|not_done" in story
    assert "2026-03-01 12:00:00 UTC  enqueued by api" in story


def test_explain_shows_a_job_given_back_at_shutdown_without_using_an_attempt(store: Store,
                                                                            sim_clock: SimulatedClock) -> None:
    queue = Queue(store, clock=sim_clock, source=src("worker", "w-host", 5, "worker.1"))
    job_id = queue.enqueue("slow", {})
    assert job_id is not None
    worker_id = register_process(store, role="worker", source=queue.source, clock=sim_clock)
    [job] = queue.claim(worker_id)
    sim_clock.advance(20)  # SIGTERM; the grace period runs out
    assert queue.return_jobs(worker_id, [job.id]) == [job_id]
    story = "\n".join(explain(store, "job", job_id))
    assert "12:00:20 UTC  given back to the queue at shutdown by worker worker.1 pid 5 on w-host" in story
    assert story.startswith(f"job {job_id} (slow) in queue default: available, attempt 0/20")


def test_explain_says_when_a_retry_runs_and_an_operators_retry_runs_now(store: Store,
                                                                        sim_clock: SimulatedClock) -> None:
    """An operator's retry has no backoff: the story said "retry scheduled in None s"."""
    queue = Queue(store, clock=sim_clock, source=src("worker", "w-host", 5, "worker.1"))
    job_id = queue.enqueue("flaky", {}, max_attempts=3)
    assert job_id is not None
    worker_id = register_process(store, role="worker", source=queue.source, clock=sim_clock)
    [job] = queue.claim(worker_id)
    assert queue.fail(job, worker_id, "boom", permanent=True) == "discarded"
    assert queue.retry(job_id)
    [job] = queue.claim(worker_id)
    assert queue.fail(job, worker_id, "boom again", delay=90) == "retryable"
    story = "\n".join(explain(store, "job", job_id))
    assert "None" not in story, story
    assert_in_order(story, ["put back to run now (by", "retry scheduled in 2 min (by"])


def test_explain_tells_an_occurrences_story_with_the_rejected_duplicate(store: Store,
                                                                        sim_clock: SimulatedClock) -> None:
    app = simple_app()
    clock = ClockProcess(app, store, clock=sim_clock, source=src("clock", "dyno-a", 101, "clock.1"))
    clock.start()
    sim_clock.set(at(13))
    [fire] = clock.tick()
    definition = app.schedules["hourly"]
    with store.transaction() as tx:
        fire_occurrence(tx, queue=clock.queue, definition=definition, schedule=definition.schedule(), instant=at(13),
                        outcome="enqueued", source=src("clock", "dyno-b", 202, "clock.2"), now=at(13, 1))
    lines = explain(store, "occurrence", fire.occurrence_id or 0)
    assert lines[0].startswith(f"occurrence {fire.occurrence_id} of schedule hourly: fire instant "
                               "2026-03-01 07:00:00 CST = 13:00:00 UTC, business date 2026-03-01, outcome enqueued, job")
    story = "\n".join(lines)
    assert "recorded enqueued by clock clock.1 pid 101 on dyno-a" in story
    assert ("2026-03-01 07:01:00 CST = 13:01:00 UTC  clock clock.2 pid 202 on dyno-b (v0.1.0) tried to record it "
            "again (enqueued): rejected by the ledger, no job enqueued") in story
    assert f"job {fire.job_id}: enqueued by clock clock.1" in story
    with pytest.raises(OncebeatError, match="no occurrence 999"):
        explain(store, "occurrence", 999)


def test_explain_tells_an_invoices_story_from_scan_to_sent(billing: Billing) -> None:
    billing.add_invoice("INV-2", date(2026, 2, 27))
    fire = billing.first_fire()
    billing.worker().drain()
    lines = explain(billing.store, "invoice", "INV-2")
    assert lines[0].startswith("invoice INV-2: 12345 minor units of USD due 2026-02-27, issued 2026-01-28, status open")
    story = "\n".join(lines)
    order = [("reminder 1 stage 1 created (pending) for business date 2026-03-01 by the scan of occurrence 1 "
              "(reminders at 2026-03-01 08:00:00 CST = 14:00:00 UTC, enqueued by clock clock.1 pid 501 on clock-host "
              "(v0.1.0))"),
             "send job 2: enqueued by worker worker.1 pid 601", "send job 2: effect reminder:1 started",
             "send job 2: effect reminder:1 done", "reminder 1 stage 1 sent, Message-ID <", "send job 2: completed"]
    assert_in_order(story, order)
    assert fire == at(14)
    with pytest.raises(OncebeatError):
        explain(billing.store, "invoice", "INV-404")
    with pytest.raises(OncebeatError, match="kind must be one of"):
        explain(billing.store, "effect", "x")


def test_prune_audit_deletes_old_events_only_and_says_so_to_the_doctor(store: Store,
                                                                       sim_clock: SimulatedClock) -> None:
    app = simple_app()
    ClockProcess(app, store, clock=sim_clock).start()  # process.started and schedule.added at 12:00
    sim_clock.advance(3 * 86400)
    Worker(app, store, clock=sim_clock).register()  # process.started at +3 d

    deleted = prune_audit(store, 86400, now=sim_clock.now())
    assert deleted == 2
    kinds = [e["kind"] for e in store.read("list_events", subject=None, kind=None, since=at(0))]
    assert kinds == ["process.started", "audit.pruned"]
    with pytest.raises(ValueError):
        prune_audit(store, 0, now=sim_clock.now())
    [note] = doctor(store, sim_clock).notes
    assert "pruned of events before 2026-03-03T12:00:00+00:00" in note
