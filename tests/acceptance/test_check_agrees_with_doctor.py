"""`check` and `doctor` count the same lost and duplicate reminders on one database (issue 21 item 4), both backends.

- An invoice that enters oncebeat between two scans (a CSV import through `oncebeat import`, a Stripe webhook)
  and is paid before the next one was never due at either scan: `check` held the earlier scan accountable for
  it and reported it lost (exit 1) while `doctor` found nothing. ``invoices.entered_at`` (reminders migration
  0008) records when the invoice entered; `check` holds a scan accountable only for invoices already there.
- A reminder waiting out a mail outage is delayed, not lost: `check` exits 4 and reports it as delayed.
- A reminder really lost (pending, its send job cancelled) and a message really delivered twice are counted
  once each by both tools; a simulated run with faults, imports and payments between scans gives 0 and 0.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from reminder_harness import Harness, invoice, maildir_sink

from oncebeat.doctor import DoctorReport, run_doctor
from oncebeat.reminders.model import Customer
from oncebeat.reminders.policy import Policy
from oncebeat.reminders.stripe import StripeWebhooks
from oncebeat.simulate import SimConfig, parse_faults, simulate
from oncebeat.simulate.checker import CheckReport
from oncebeat.simulate.standalone import check_deployment
from oncebeat.store import Store, open_store
from oncebeat.timebase import SimulatedClock, SystemClock

SRC = Path(__file__).resolve().parents[2] / "src"
HEAD = "invoice_number,customer_email,customer_name,currency,amount_due,issued_on,due_on\n"


def oncebeat(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-m", "oncebeat.cli", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=600)


def doctor_counts(report: DoctorReport) -> tuple[int, int]:
    """(lost, duplicate copies) as the doctor reports them: the reminders, occurrences or jobs its ``lost``
    findings list (counting the rows a note says were left out), and each duplicate delivery's copies beyond
    the first."""
    lost = 0
    for f in report.by_code("lost"):
        kinds = {e.kind for e in f.evidence}
        kind = "reminder" if "reminder" in kinds else "occurrence" if "occurrence" in kinds else "job"
        lost += sum(1 for e in f.evidence if e.kind == kind) + sum(int(e.data.get("more", 0)) for e in f.evidence
                                                                  if e.kind == "note")
    dups = sum(sum(1 for e in f.evidence if e.kind == "message") - 1 for f in report.by_code("duplicate-delivery"))
    return lost, dups


def check_counts(report: CheckReport) -> tuple[int, int]:
    return report.summary["lost"], report.summary["duplicates"]


@pytest.fixture
def live(store: Store, tmp_path: Path) -> Iterator[Harness]:
    """A harness on the real time (its simulated clock is moved to the wall clock before each scan), so the CLI's
    imports, which stamp the system clock, fall between its scans."""
    sink = maildir_sink(tmp_path)
    h = Harness(store=store, sink=sink, clock=SimulatedClock(SystemClock().now()), policy=Policy())
    yield h
    h.close()
    sink.stop()


def scan_now(h: Harness) -> None:
    """One scan at the current wall-clock instant (a manual fire of the reminder schedule), then its sends."""
    h.clock.set(max(h.clock.now(), SystemClock().now()))
    h.clk.trigger("reminders", kind="cli")
    h.new_worker().drain()


def stripe_event(event_id: str, kind: str, number: str, status: str, due_on: date,
                 paid_at: datetime | None = None) -> dict[str, Any]:
    def unix(d: date) -> int:
        return int(datetime(d.year, d.month, d.day, 18, tzinfo=UTC).timestamp())
    obj = {"object": "invoice", "number": number, "status": status, "customer_email": "wes@example.test",
           "customer_name": "Wes", "currency": "usd", "amount_due": 12345, "created": unix(due_on - timedelta(30)),
           "due_date": unix(due_on), "status_transitions": {"finalized_at": unix(due_on - timedelta(30)),
                                                            "paid_at": int(paid_at.timestamp()) if paid_at else None}}
    return {"id": event_id, "type": kind, "data": {"object": obj}}


def test_invoices_imported_and_paid_between_two_scans_are_not_lost(live: Harness, db_url: str,
                                                                    tmp_path: Path) -> None:
    h = live
    today = SystemClock().now().astimezone(h.policy.zone).date()
    overdue = today - timedelta(days=20)  # stage 1 is due at every scan of today
    h.add_invoices(invoice("INV-1", overdue))
    scan_now(h)  # scan 1: INV-1 only

    # Between scan 1 and scan 2: CSV invoices and payments through `oncebeat import` ...
    issued = overdue - timedelta(days=30)
    (tmp_path / "late.csv").write_text(HEAD + f"INV-CSV,bo@example.test,Bo,USD,10.00,{issued},{overdue}\n"
                                              f"INV-OPEN,bo@example.test,Bo,USD,10.00,{issued},{overdue}\n")
    (tmp_path / "pay.csv").write_text(f"invoice_number,paid_on\nINV-CSV,{today}\n")
    assert oncebeat("import", "late.csv", "--db", db_url, cwd=tmp_path).returncode == 0
    assert oncebeat("import", "--payments", "pay.csv", "--db", db_url, cwd=tmp_path).returncode == 0
    # ... and Stripe webhooks: one invoice finalized then paid, one first heard of when paid.
    hooks = StripeWebhooks(h.store, clock=SystemClock(), secret="whsec_test", tz=h.policy.tz)
    now = SystemClock().now()
    for event in (stripe_event("evt_1", "invoice.finalized", "INV-HOOK", "open", overdue),
                  stripe_event("evt_2", "invoice.paid", "INV-HOOK", "paid", overdue, paid_at=now),
                  stripe_event("evt_3", "invoice.paid", "INV-PAID-ONLY", "paid", overdue, paid_at=now)):
        assert hooks.apply(event).outcome == "applied"
    scan_now(h)  # scan 2: INV-OPEN is due now; the paid ones are not

    invoices = {r["number"]: r for r in h.store.read("list_invoices")}
    assert all(r["entered_at"] is not None for r in invoices.values())
    assert invoices["INV-1"]["entered_at"] < invoices["INV-CSV"]["entered_at"] < invoices["INV-HOOK"]["entered_at"]
    assert {(r["number"], r["stage"], r["state"]) for r in h.reminders()} == {("INV-1", 1, "sent"),
                                                                              ("INV-OPEN", 1, "sent")}

    report = check_deployment(h.store, h.app, h.policy, maildir=h.sink.maildir)
    assert report.passed and report.exit_code == 0, report.to_text()
    assert report.summary["due"] == 2 and check_counts(report) == (0, 0)
    assert doctor_counts(run_doctor(h.store, now=SystemClock().now(), maildir=h.sink.maildir)) == (0, 0)
    cli = oncebeat("check", "--db", db_url, "--maildir", str(h.sink.maildir), "--json", cwd=tmp_path)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert json.loads(cli.stdout)["summary"]["lost"] == 0

    # A scan is still held to what it could see: INV-OPEN's reminder put back to pending with no send job (nothing
    # will send it) is lost for both tools.
    with h.store.transaction() as tx:
        tx.execute("UPDATE reminders SET state = 'pending', sent_at = NULL WHERE stage = 1 AND invoice_id = "
                   "(SELECT id FROM invoices WHERE number = 'INV-OPEN')")
    broken = check_deployment(h.store, h.app, h.policy, maildir=None)
    assert broken.exit_code == 1 and check_counts(broken) == (1, 0), broken.to_text()
    assert "INV-OPEN stage 1: still pending with no unfinished send job" in broken.to_text()
    assert doctor_counts(run_doctor(h.store, now=SystemClock().now())) == (1, 0)


def test_a_reminder_waiting_out_a_mail_outage_is_delayed_not_lost(store: Store, tmp_path: Path) -> None:
    sink = maildir_sink(tmp_path)
    h = Harness(store=store, sink=sink, clock=SimulatedClock(datetime(2026, 3, 2, 13, tzinfo=UTC)))
    try:
        h.add_invoices(invoice("INV-1", date(2026, 3, 1)), invoice("INV-2", date(2026, 2, 1), email="c2@example.test"),
                       customers=(Customer(email="ana@example.com", name="Ana"),
                                  Customer(email="c2@example.test", name="Cy")))
        h.tick_to(datetime(2026, 3, 2, 14, tzinfo=UTC))  # 08:00 in Chicago: the scan
        sink.stop()  # the mail server is down when the sends run
        worker = h.new_worker()
        for _ in range(4):
            worker.drain()
            h.clock.advance(30)
        assert all(r["state"] == "pending" and r["deferred_since"] for r in h.reminders())

        report = check_deployment(h.store, h.app, h.policy, maildir=None)
        assert report.passed and report.exit_code == 4, report.to_text()
        assert (report.summary["delayed"], report.summary["delayed_outage"], report.summary["lost"]) == (2, 2, 0)
        assert "delayed: 2 due reminder(s) not sent yet (2 waiting out a mail outage" in report.to_text()
        assert doctor_counts(run_doctor(h.store, now=h.clock.now())) == (0, 0)

        sink.start()
        for _ in range(40):
            worker.drain()
            h.clock.advance(60)
        assert [r["state"] for r in h.reminders()] == ["sent", "sent"]
        assert check_deployment(h.store, h.app, h.policy, maildir=sink.maildir).exit_code == 0
    finally:
        h.close()
        if sink.running:
            sink.stop()


FAULTS = "late-import=0.25,payment-race=0.2,worker-crash=0.02,smtp-transient=0.05,clock-restart=0.3,db-blip=0.003"


@pytest.mark.slow
def test_check_and_doctor_agree_after_a_simulated_run_with_imports_and_payments_between_scans(
        db_url: str, tmp_path: Path) -> None:
    sim = simulate(SimConfig(days=21, start=date(2026, 3, 2), seed=21, faults=parse_faults(FAULTS), db_url=db_url,
                             workdir=tmp_path / "sim", invoices=120, settle_days=1.5))
    assert sim.passed, sim.to_text()
    maildir = tmp_path / "sim" / "maildir"
    with open_store(db_url) as store:
        invoices = store.read("list_invoices")
        scans = [j for j in store.read("list_jobs", state="completed", task="reminders.scan", limit=10_000)]
        late = [i for i in invoices if i["entered_at"] > min(i["entered_at"] for i in invoices)]
        # paid before any scan could see them open: no scan ran wholly between their import and their payment
        between = [i for i in late if i["status"] == "paid" and not any(
            i["entered_at"] <= j["started_at"] and j["finished_at"] < i["paid_at"] for j in scans)]
        assert len(late) == sim.faults_injected["late-import"] >= 5 and len(between) >= 3
        sim_rt = check_deployment(store, _app_of(store), Policy(), maildir=maildir)
        doctor = run_doctor(store, now=datetime(2026, 4, 1, tzinfo=UTC), maildir=maildir)
        print(f"{len(invoices)} invoices ({len(late)} imported mid-run, {len(between)} of them paid before the "
              f"next scan), {len(scans)} scans, {sim.check.summary['due']} due; check lost/dup "
              f"{check_counts(sim_rt)}, doctor {doctor_counts(doctor)}")
        assert check_counts(sim_rt) == check_counts(sim.check) == doctor_counts(doctor) == (0, 0)
        assert sim_rt.exit_code == 0, sim_rt.to_text()

        # Real damage is counted alike: one reminder's message delivered twice, one reminder lost.
        first = sorted(p for p in (maildir / "new").iterdir())[0]
        shutil.copy(first, maildir / "new" / (first.name + "-copy"))
        with store.transaction() as tx:
            tx.execute("UPDATE reminders SET state = 'pending' WHERE id = (SELECT MAX(id) FROM reminders "
                       "WHERE state = 'sent')")
        damaged = check_deployment(store, _app_of(store), Policy(), maildir=maildir)
        assert check_counts(damaged) == doctor_counts(run_doctor(store, now=datetime(2026, 4, 1, tzinfo=UTC),
                                                                 maildir=maildir)) == (1, 1)


def _app_of(store: Store) -> Any:
    from oncebeat.reminders.service import ReminderService
    from oncebeat.reminders.tasks import build_app

    return build_app(ReminderService(store, Policy(), clock=SystemClock()))


def test_migration_0008_backfills_entered_at_with_the_earliest_instant_the_database_shows(store: Store,
                                                                                          tmp_path: Path) -> None:
    sink = maildir_sink(tmp_path)
    t0 = datetime(2026, 3, 2, 13, tzinfo=UTC)
    h = Harness(store=store, sink=sink, clock=SimulatedClock(t0))
    try:
        h.add_invoices(invoice("INV-R", date(2026, 3, 1)), invoice("INV-P", date(2026, 3, 1)),
                       invoice("INV-O", date(2026, 4, 1)))
        h.tick_to(datetime(2026, 3, 2, 14, tzinfo=UTC))
        h.new_worker().drain()  # INV-R and INV-P get their stage 1 at 14:00
        h.clock.set(datetime(2026, 3, 2, 15, tzinfo=UTC))
        h.service.upsert([], [invoice("INV-R", date(2026, 3, 1))])  # a re-import: updated_at moves, entered_at not
        assert {r["number"]: r["entered_at"] for r in h.store.read("list_invoices")} == dict.fromkeys(
            ("INV-R", "INV-P", "INV-O"), t0)
        with h.store.transaction() as tx:  # as reminders 0007 left it; INV-P paid at 13:30, re-imported at 15:00
            at, later = (("'2026-03-02 13:30:00+00'", "'2026-03-02 15:00:00+00'") if store.backend == "postgres"
                         else ("'2026-03-02T13:30:00.000000Z'", "'2026-03-02T15:00:00.000000Z'"))
            tx.execute(f"UPDATE invoices SET status = 'paid', paid_on = '2026-03-02', paid_at = {at}, "
                       f"updated_at = {later} WHERE number = 'INV-P'")
            tx.execute("ALTER TABLE invoices DROP COLUMN entered_at")
            tx.execute("DELETE FROM schema_migrations WHERE line = 'reminders' AND version = 8")
        assert h.store.migrate() == [("reminders", 8)]
        entered = {r["number"]: r["entered_at"] for r in h.store.read("list_invoices")}
        sent = {r["number"]: r["created_at"] for r in h.reminders()}
        assert entered == {"INV-R": sent["INV-R"],  # its first reminder (before the re-import's updated_at)
                           "INV-P": datetime(2026, 3, 2, 13, 30, tzinfo=UTC),  # paid before its reminder
                           "INV-O": t0}  # no reminder, not paid: its last write
    finally:
        h.close()
        sink.stop()
