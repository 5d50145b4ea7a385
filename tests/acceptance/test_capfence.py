"""The per-customer cap and the payment-freshness fence (issue 23 items 4 and 5).

Both backends, the real clock, worker and SMTP sink (aiosmtpd) on simulated time; the invariant checker judges
each run (its cap invariants included). The race test runs two workers on two threads against one database.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from reminder_harness import FIRST_FIRE, Harness, invoice, maildir_sink

from oncebeat import telemetry
from oncebeat.doctor import run_doctor
from oncebeat.doctor.explain import explain
from oncebeat.errors import Snooze
from oncebeat.reminders.bulk import BulkOptions
from oncebeat.reminders.capfence import claim_place, fence_status
from oncebeat.reminders.model import Customer, Payment
from oncebeat.reminders.policy import Policy
from oncebeat.reminders.stripe import StripeWebhooks
from oncebeat.simulate.standalone import check_deployment
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock

DAY = timedelta(days=1)
D0 = date(2026, 3, 2)  # the first scan (08:00 America/Chicago)


def _harness(store: Store, tmp_path: Path, policy: Policy) -> Harness:
    return Harness(store=store, sink=maildir_sink(tmp_path), clock=SimulatedClock(FIRST_FIRE - timedelta(hours=1)),
                   policy=policy)


@pytest.fixture
def capped(store: Store, tmp_path: Path) -> Iterator[Harness]:
    h = _harness(store, tmp_path, Policy(stages=(1, 30), max_notices_per_week=1))
    try:
        yield h
    finally:
        h.close()
        h.sink.stop()


def _fire(day: date) -> datetime:
    """08:00 America/Chicago on ``day`` in UTC (CST until 2026-03-08, CDT after)."""
    return datetime(day.year, day.month, day.day, 14 if day < date(2026, 3, 8) else 13, 0, tzinfo=UTC)


def _run_days(h: Harness, first: date, last: date) -> None:
    worker = h.new_worker()
    day = first
    while day <= last:
        h.tick_to(_fire(day) + timedelta(minutes=1))
        worker.drain()
        h.clock.set(_fire(day) + timedelta(hours=3))  # a snoozed send due later that day runs too
        worker.drain()
        day += DAY


def _sent_days(h: Harness) -> dict[tuple[str, int], date]:
    """(invoice, stage) -> the Chicago date its reminder went out."""
    return {(r["number"], int(r["stage"])): r["sent_at"].astimezone(h.policy.zone).date()
            for r in h.reminders() if r["state"] == "sent"}


def _checked(h: Harness) -> dict:
    report = check_deployment(h.store, h.app, h.policy, maildir=h.sink.maildir)
    assert report.passed, report.to_text()
    return report.summary


def test_a_cap_of_one_sends_one_notice_a_week_and_defers_the_rest_in_order(capped: Harness) -> None:
    h = capped
    h.add_invoices(*(invoice(f"INV-{n}", D0 - DAY) for n in (1, 2, 3)))  # stage 1 of all three due 03-02
    _run_days(h, D0, D0)
    rows = {r["number"]: r for r in h.reminders()}
    assert rows["INV-1"]["state"] == "sent"
    for n in ("INV-2", "INV-3"):  # recorded deferred with the reason, not final, same (invoice, stage) row
        assert rows[n]["state"] == "deferred"
        assert rows[n]["reason"] == ("cap: 1 notice to this customer since 2026-02-24 (at most 1 per 7 days); "
                                     "next allowed 2026-03-09")
        assert rows[n]["capped_at"] is not None
    assert len(h.messages()) == 1
    (note,) = [f for f in run_doctor(h.store, now=h.clock.now()).findings if f.code == "waiting"]
    assert note.severity == "info" and note.summary.startswith("2 reminders deferred by the per-customer cap")
    _run_days(h, D0 + DAY, D0 + 15 * DAY)
    assert _sent_days(h) == {("INV-1", 1): D0, ("INV-2", 1): D0 + 7 * DAY, ("INV-3", 1): D0 + 14 * DAY}
    assert len(h.messages()) == 3  # nothing lost, nothing twice
    rows = {r["number"]: r for r in h.reminders()}
    assert rows["INV-3"]["capped_at"] is not None and rows["INV-3"]["reason"] is None  # deferred, then sent
    story = "\n".join(explain(h.store, "invoice", "INV-3"))  # oncebeat doctor --explain invoice INV-3
    assert "stage 1 deferred: cap: 1 notice to this customer since " in story, story
    summary = _checked(h)
    assert summary["cap_deferred"] == 2 and summary["max_notices_in_7_days"] == 1


def test_a_later_stage_never_goes_before_an_earlier_deferred_one(store: Store, tmp_path: Path) -> None:
    h = _harness(store, tmp_path, Policy(stages=(1, 7), max_notices_per_week=1))
    try:
        h.add_invoices(invoice("INV-A", D0 - DAY), invoice("INV-B", D0 - DAY))
        _run_days(h, D0, D0 + 6 * DAY)
        by_pair = {(r["number"], int(r["stage"])): r for r in h.reminders()}
        assert by_pair[("INV-B", 1)]["state"] == "deferred"
        assert ("INV-B", 7) not in by_pair  # not even created while its stage 1 is deferred
        assert by_pair[("INV-A", 7)]["state"] == "deferred"  # due 03-08, the cap is full until 03-09
        _run_days(h, D0 + 7 * DAY, D0 + 30 * DAY)
        sent = _sent_days(h)
        assert sent[("INV-A", 1)] == D0
        assert sent[("INV-B", 1)] == D0 + 7 * DAY  # waited longest: goes first
        assert sent[("INV-A", 7)] == D0 + 14 * DAY
        assert sent[("INV-B", 7)] == D0 + 21 * DAY
        days = sorted(sent.values())
        assert all(b - a >= 7 * DAY for a, b in zip(days, days[1:], strict=False))
        _checked(h)
    finally:
        h.close()
        h.sink.stop()


def test_a_paid_invoice_deferred_by_the_cap_is_skipped_not_sent(capped: Harness) -> None:
    h = capped
    h.add_invoices(invoice("INV-1", D0 - DAY), invoice("INV-2", D0 - DAY))
    _run_days(h, D0, D0)
    h.service.apply_payments([Payment(number="INV-2", paid_on=D0 + DAY)])
    _run_days(h, D0 + DAY, D0 + 8 * DAY)
    rows = {r["number"]: r for r in h.reminders()}
    assert (rows["INV-2"]["state"], rows["INV-2"]["reason"]) == ("skipped", "invoice paid on 2026-03-03")
    assert len(h.messages()) == 1
    _checked(h)


def test_two_workers_racing_for_one_customer_never_both_pass_a_cap_of_one(capped: Harness) -> None:
    h = capped
    h.add_invoices(*(invoice(f"INV-{n}", D0 - DAY) for n in (1, 2, 3)))
    h.tick_to(_fire(D0) + timedelta(minutes=1))
    scan_worker = h.new_worker("scanner")
    assert scan_worker.run_batch() == 1  # the scan alone: three send jobs wait
    workers = [h.new_worker(f"racer {n}") for n in (1, 2)]
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def race(w: object) -> None:
        try:
            start.wait()
            w.drain()  # type: ignore[attr-defined]
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=race, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    states = sorted(r["state"] for r in h.reminders())
    assert states == ["deferred", "deferred", "sent"]
    assert len(h.messages()) == 1
    (note,) = [f for f in run_doctor(h.store, now=h.clock.now()).findings if f.code == "waiting"]
    assert note.severity == "info" and note.summary.startswith("2 reminders deferred by the per-customer cap")
    _run_days(h, D0 + DAY, D0 + 15 * DAY)
    assert sorted(_sent_days(h).values()) == [D0, D0 + 7 * DAY, D0 + 14 * DAY]
    _checked(h)


def test_a_claim_between_another_claims_count_and_its_write_waits_for_it(capped: Harness) -> None:
    """The claim itself, with no worker around it. B counts the places taken (none) and is stopped right there
    (the ``reminder.cap_counted`` seam) while A, which waited longer, claims. Without the lock per customer A
    would claim and commit meanwhile, and B, resuming with its stale count of 0 and no longer behind A, would
    claim too: two notices under a cap of 1. With it, A waits until B has decided (deferred), then claims."""
    h = capped
    h.add_invoices(invoice("INV-A", D0 - DAY), invoice("INV-B", D0 - DAY))
    h.tick_to(_fire(D0) + timedelta(minutes=1))
    h.new_worker().run_batch()  # the scan: two pending reminders, their send jobs not run
    a, b = sorted((h.store.read("get_reminder_for_send", id=r["id"])[0] for r in h.store.read("list_reminders")),
                  key=lambda r: r["number"])
    b_counted, a_done = threading.Event(), threading.Event()
    outcome: dict[str, str] = {}

    def pause_b(event: str, data: object) -> None:
        if isinstance(data, dict) and data["reminder_id"] == b["id"]:
            b_counted.set()
            a_done.wait(3)  # with the lock A cannot finish meanwhile: B goes on after 3 s

    def claim(r: dict) -> None:
        try:
            claim_place(h.store, h.policy, clock=h.clock, reminder_id=r["id"], r=r)
            outcome[r["number"]] = "claimed"
        except Snooze:
            outcome[r["number"]] = "deferred"
        finally:
            if r is a:
                a_done.set()

    telemetry.attach("reminder.cap_counted", pause_b)
    try:
        tb = threading.Thread(target=claim, args=(b,))
        tb.start()
        assert b_counted.wait(10)
        ta = threading.Thread(target=claim, args=(a,))
        ta.start()
        tb.join(30)
        ta.join(30)
    finally:
        telemetry.detach("reminder.cap_counted", pause_b)
    assert outcome == {"INV-A": "claimed", "INV-B": "deferred"}


def test_a_send_waits_while_payment_data_is_stale_and_goes_once_it_is_fresh(store: Store, tmp_path: Path) -> None:
    h = _harness(store, tmp_path, Policy(max_payment_staleness="6h"))
    try:
        h.add_invoices(invoice("INV-1", D0 + DAY))  # the last import: two days before stage 1's scan
        _run_days(h, D0, D0 + 2 * DAY)
        (r,) = h.reminders()
        assert r["state"] == "pending" and h.messages() == []
        # last checked 3 h after the scan of 03-04: the import was at 13:00 UTC on 03-02
        assert r["reason"] == ("waiting: payment data from API import last refreshed 52h ago; reminders of its "
                               "invoices wait until it is fresher than 6h")
        fresh = fence_status(h.store, h.policy, clock=h.clock)
        assert fresh.stale and fresh.source == "api"
        report = run_doctor(h.store, now=h.clock.now())
        waiting = [f for f in report.findings if f.code == "waiting"]
        assert waiting and "wait until it is fresher than 6h" in waiting[0].summary
        assert not [f for f in report.findings if f.code == "lost"]  # waiting on purpose, not lost
        # A payments CSV arrives (nothing in it for INV-1): the CSV is fresh, but INV-1's data comes from the API.
        csv = tmp_path / "payments.csv"
        csv.write_text("invoice_number,paid_on\n", encoding="utf-8")
        h.clock.set(_fire(D0 + 2 * DAY) + timedelta(hours=4))
        h.service.import_payments_csv(csv, BulkOptions())
        assert fence_status(h.store, h.policy, clock=h.clock).source == "csv"
        h.clock.set(_fire(D0 + 2 * DAY) + timedelta(hours=4, minutes=30))
        h.new_worker().drain()
        assert h.reminders()[0]["state"] == "pending" and h.messages() == []
        # The API posts payments (none for INV-1): INV-1's source is fresh again, the reminder goes out.
        h.service.apply_payments([])
        assert fence_status(h.store, h.policy, clock=h.clock).source == "api"
        h.clock.set(_fire(D0 + 2 * DAY) + timedelta(hours=5))
        h.new_worker().drain()
        (r,) = h.reminders()
        assert (r["state"], r["reason"]) == ("sent", None)
        assert len(h.messages()) == 1
        _checked(h)
    finally:
        h.close()
        h.sink.stop()


def test_a_stripe_payment_processing_holds_the_reminder_until_it_fails(store: Store, tmp_path: Path) -> None:
    h = _harness(store, tmp_path, Policy())
    try:
        h.add_invoices(invoice("INV-1", D0 - DAY))
        hooks = StripeWebhooks(h.store, clock=h.clock, secret="whsec_test", tz=h.policy.tz)  # apply(): verified

        def event(n: int, kind: str) -> None:
            out = hooks.apply({"id": f"evt_{n}", "type": kind, "data": {"object": {
                "object": "payment_intent", "id": "pi_1", "metadata": {"invoice_number": "INV-1"}}}})
            assert out.outcome == "applied", out

        event(1, "payment_intent.processing")
        _run_days(h, D0, D0)
        (r,) = h.reminders()
        assert r["state"] == "pending" and r["reason"].startswith("waiting: a payment of this invoice is processing")
        assert h.messages() == []
        event(2, "payment_intent.payment_failed")
        h.clock.set(_fire(D0) + timedelta(hours=4, minutes=1))  # its next check: an hour after the last
        h.new_worker().drain()
        (r,) = h.reminders()
        assert r["state"] == "sent" and len(h.messages()) == 1
        assert fence_status(h.store, h.policy, clock=h.clock).source == "stripe"  # webhooks are its watermark
        _checked(h)
    finally:
        h.close()
        h.sink.stop()


@pytest.mark.parametrize(("key", "value", "words"), [
    ("max_notices_per_week", 0, "must be from 1 to 100"),
    ("max_notices_per_week", "2", "must be a whole number"),
    ("max_payment_staleness", "10s", "must be from 1m to 31d"),
    ("max_payment_staleness", "soon", "is not a duration"),
    ("max_payment_staleness", 6, 'is a bare number, read as 6 seconds: it must be from 1m to 31d. Write the duration '
                                 'with its unit in quotes, e.g. "6h" for 6 hours'),
])
def test_bad_cap_and_fence_settings_are_refused_naming_the_key(key: str, value: object, words: str) -> None:
    from oncebeat.errors import ConfigError
    from oncebeat.reminders.policy import policy_from_dict

    with pytest.raises(ConfigError) as caught:
        policy_from_dict({"reminders": {key: value}}, "oncebeat.toml")
    text = str(caught.value)
    assert f"[reminders] {key}" in text and words in text, text


def test_the_settings_are_read_from_the_reminders_table() -> None:
    from oncebeat.reminders.policy import policy_from_dict

    p = policy_from_dict({"reminders": {"max_notices_per_week": 2, "max_payment_staleness": "6h"}})
    assert (p.max_notices_per_week, p.max_payment_staleness) == (2, 21600.0)
    assert (Policy().max_notices_per_week, Policy().max_payment_staleness) == (None, None)


def test_customers_in_their_own_zone_count_their_own_days(store: Store, tmp_path: Path) -> None:
    """send_zone = customer: the cap's days are the customer's, and a deferred send wakes at send_at there."""
    h = _harness(store, tmp_path, Policy(stages=(1, 30), send_zone="customer", send_at="09:00",
                                         max_notices_per_week=1))
    try:
        tokyo = Customer(email="ken@example.jp", name="Ken", locale="ja_JP", tz="Asia/Tokyo")
        h.add_invoices(invoice("T-1", D0, email=tokyo.email), invoice("T-2", D0, email=tokyo.email),
                       customers=(tokyo,))
        worker = h.new_worker()
        at = datetime(2026, 3, 3, 0, 0, tzinfo=UTC)  # 09:00 Tokyo on 03-03: stage 1 due there
        while at <= datetime(2026, 3, 11, 0, 0, tzinfo=UTC):
            h.tick_to(at + timedelta(minutes=1))
            worker.drain()
            at += DAY
        sent = {r["number"]: r["sent_at"] for r in h.reminders() if r["state"] == "sent"}
        tokyo_days = {n: s.astimezone(ZoneInfo("Asia/Tokyo")) for n, s in sent.items()}
        assert tokyo_days["T-1"].date() == date(2026, 3, 3)
        assert tokyo_days["T-2"].date() == date(2026, 3, 10) and tokyo_days["T-2"].hour == 9
        _checked(h)
    finally:
        h.close()
        h.sink.stop()


def test_the_scan_enqueues_send_jobs_in_the_caps_order_whatever_the_rows_physical_order(db_url: str,
                                                                                      tmp_path: Path) -> None:
    # The claim follows job ids, so the order the scan enqueues sends in is the order a worker tries them in; the
    # cap lets the oldest business date, then the lowest stage, go first, and a deferred row's reason depends on
    # which was tried first. Reminder ids here run against that order, and an update moves a row to the end of
    # the table on PostgreSQL (the physical order CI once saw: INV-2's send tried before INV-1's).
    from oncebeat.provenance import current_source
    from oncebeat.queue import Queue
    from oncebeat.reminders.model import Invoice
    from oncebeat.reminders.policy import write_default_config
    from oncebeat.reminders.runtime import load_runtime
    from oncebeat.reminders.service import SEND_TASK

    write_default_config(tmp_path / "oncebeat.toml")
    runtime = load_runtime(database_url=db_url, config=tmp_path / "oncebeat.toml")
    try:
        store = runtime.store
        runtime.service.upsert([Customer(email="ann@example.test", name="Ann")], [
            Invoice(number=f"O-{n}", customer_email="ann@example.test", currency="EUR", amount_due=100,
                    issued_on=date(2026, 1, 1), due_on=date(2026, 2, 1), status="open") for n in (1, 2, 3)])
        now = datetime(2026, 3, 3, 14, tzinfo=UTC)
        sql = ("INSERT INTO reminders (invoice_id, stage, state, business_date, created_at, updated_at) "
               "SELECT id, ?, 'pending', ?, ?, ? FROM invoices WHERE number = ?")
        sql = sql.replace("?", "%s") if store.backend == "postgres" else sql
        with store.transaction() as tx:
            for number, stage, day in (("O-1", 1, date(2026, 3, 3)), ("O-2", 7, date(2026, 3, 2)),
                                       ("O-3", 1, date(2026, 3, 2))):
                tx.execute(sql, (stage, day, now, now, number))
            tx.execute("UPDATE reminders SET updated_at = updated_at WHERE stage = 1", ())  # new row versions
            Queue(store, clock=SimulatedClock(now), source=current_source("worker")).enqueue_select(
                tx, "pending_send_jobs", task=SEND_TASK, queue="default")
        with store.transaction() as tx:
            jobs = tx.execute("SELECT args FROM jobs WHERE task = 'reminders.send' ORDER BY id", ())
            rows = {int(r["id"]): (r["number"], int(r["stage"])) for r in tx.execute(
                "SELECT r.id, i.number, r.stage FROM reminders r JOIN invoices i ON i.id = r.invoice_id", ())}
        args = [a if isinstance(a, dict) else json.loads(a) for a in (j["args"] for j in jobs)]
        got = [rows[int(a["reminder_id"])] for a in args]
        assert got == [("O-3", 1), ("O-2", 7), ("O-1", 1)]
    finally:
        runtime.close()
