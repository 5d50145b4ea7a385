"""Overdue-invoice reminders end to end on both backends, through a real aiosmtpd server."""

from __future__ import annotations

import email
import email.policy
import multiprocessing
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path

import pytest

from oncebeat.crashpoints import SimulatedCrash, crashpoints
from oncebeat.reminders.model import Customer
from oncebeat.store import Store, open_store

from reminder_harness import FIRST_FIRE, Harness, invoice, maildir_sink


@pytest.fixture
def harness(store: Store, tmp_path: Path) -> Iterator[Harness]:
    sink = maildir_sink(tmp_path)
    clock_start = FIRST_FIRE - timedelta(hours=1)
    from oncebeat.timebase import SimulatedClock

    h = Harness(store=store, sink=sink, clock=SimulatedClock(clock_start))
    yield h
    h.close()
    sink.stop()


def test_scan_run_twice_creates_each_reminder_once(harness: Harness) -> None:
    harness.add_invoices(invoice("INV-1", date(2026, 3, 1)), invoice("INV-2", date(2026, 2, 20)))
    harness.tick_to(FIRST_FIRE)
    occ = harness.store.read("list_occurrences", schedule_key="reminders")[0]
    from oncebeat.provenance import current_source

    first = harness.service.scan(occurrence_id=occ["id"], business_date=occ["business_date"],
                                 source=current_source("cli"))
    second = harness.service.scan(occurrence_id=occ["id"], business_date=occ["business_date"],
                                  source=current_source("cli"))
    assert (first.pending, second.pending, second.skipped) == (2, 0, 0)
    harness.new_worker().drain()
    rows = harness.reminders()
    # collapse = "next" (the default): INV-2, 10 days past due at its first scan, gets its first notice
    assert sorted((r["number"], r["stage"], r["state"]) for r in rows) == [("INV-1", 1, "sent"), ("INV-2", 1, "sent")]
    assert len(harness.messages()) == 2


def test_leftover_trigger_next_to_the_clock_sends_nothing_twice(harness: Harness) -> None:
    harness.add_invoices(invoice("INV-1", date(2026, 3, 1)))
    harness.tick_to(FIRST_FIRE)
    harness.clock.advance(60)
    harness.clk.trigger("reminders", kind="cli")  # an old cron entry calling `oncebeat trigger`
    harness.new_worker().drain()
    assert [r["state"] for r in harness.reminders()] == ["sent"]
    assert len(harness.messages()) == 1


def _scan_in_process(url: str, business_date: str, occurrence_id: int, barrier: object, out: object) -> None:
    from oncebeat.provenance import current_source
    from oncebeat.reminders.policy import Policy
    from oncebeat.reminders.service import ReminderService
    from oncebeat.timebase import SystemClock

    store = open_store(url)
    service = ReminderService(store, Policy(), clock=SystemClock())
    barrier.wait()
    result = service.scan(occurrence_id=occurrence_id, business_date=date.fromisoformat(business_date),
                          source=current_source("cli"))
    store.close()
    out.put(result.pending)  # type: ignore[attr-defined]


def test_scan_from_two_processes_at_once_creates_one_reminder_per_invoice_and_stage(harness: Harness,
                                                                                      db_url: str) -> None:
    invoices = [invoice(f"INV-{n}", date(2026, 1, 1) + timedelta(days=n % 60)) for n in range(300)]
    harness.add_invoices(*invoices)
    harness.tick_to(FIRST_FIRE)
    occ = harness.store.read("list_occurrences", schedule_key="reminders")[0]
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_scan_in_process, args=(db_url, occ["business_date"].isoformat(), occ["id"], barrier, out))
             for _ in range(2)]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    rows = harness.reminders()
    pairs = [(r["number"], r["stage"]) for r in rows]
    assert len(pairs) == len(set(pairs))
    assert sum(results) == sum(1 for r in rows if r["state"] == "pending") == 300
    jobs = harness.store.read("list_jobs", state=None, task="reminders.send", limit=10_000)
    assert len(jobs) == 300


def test_invoice_paid_between_scan_and_send_is_skipped_and_not_sent(harness: Harness) -> None:
    harness.add_invoices(invoice("INV-9", date(2026, 3, 1)))
    harness.tick_to(FIRST_FIRE)
    worker = harness.new_worker()
    worker.drain(max_batches=1)  # the scan only: the send job it created is claimed by the next batch
    from oncebeat.reminders.model import Payment

    harness.service.apply_payments([Payment(number="INV-9", paid_on=date(2026, 3, 2))])
    worker.drain()
    (row,) = harness.reminders()
    assert (row["state"], row["reason"]) == ("skipped", "invoice paid on 2026-03-02")
    assert harness.messages() == []


def test_smtp_451_twice_then_accepted_delivers_exactly_one_message(harness: Harness) -> None:
    harness.add_invoices(invoice("INV-3", date(2026, 3, 1)))
    harness.sink.faults.fail_next(2, code=451, text="greylisted, try later")
    harness.tick_to(FIRST_FIRE)
    worker = harness.new_worker()
    for _ in range(5):
        worker.drain()
        harness.clock.advance(600)  # past the backoff
    (row,) = harness.reminders()
    assert row["state"] == "sent"
    assert len(harness.messages()) == 1
    job = harness.store.read("list_jobs", state=None, task="reminders.send", limit=5)[0]
    assert job["attempt"] == 3 and len(job["errors"]) == 2 and "451" in job["errors"][0]["error"]


def test_smtp_550_ends_failed_with_the_server_reply_and_no_retry(harness: Harness) -> None:
    harness.add_invoices(invoice("INV-4", date(2026, 3, 1), email="gone@example.com"),
                         customers=(Customer(email="gone@example.com", name="Gone"),))
    harness.sink.faults.reject_recipient("gone@example.com", code=550, text="no such user")
    harness.tick_to(FIRST_FIRE)
    harness.new_worker().drain()
    harness.clock.advance(3600)
    harness.new_worker().drain()
    (row,) = harness.reminders()
    assert row["state"] == "failed" and "550" in row["reason"] and "no such user" in row["reason"]
    job = harness.store.read("list_jobs", state=None, task="reminders.send", limit=5)[0]
    assert job["state"] == "completed" and job["attempt"] == 1
    assert harness.messages() == []


def test_worker_killed_after_smtp_accepted_leaves_reminder_in_doubt_and_never_resends(harness: Harness) -> None:
    harness.add_invoices(invoice("INV-5", date(2026, 3, 1)))
    harness.tick_to(FIRST_FIRE)
    first = harness.new_worker("doomed")
    first.drain(max_batches=1)  # scan
    crashpoints.arm("effect_before_record")
    with pytest.raises(SimulatedCrash):
        first.drain()
    crashpoints.disarm()
    assert len(harness.messages()) == 1  # the server accepted it before the 'process' died
    harness.clock.advance(first.lease_seconds + 1)
    survivor = harness.new_worker("survivor")
    survivor.rescue()
    survivor.drain()
    (row,) = harness.reminders()
    assert row["state"] == "in_doubt" and "died before recording" in row["reason"]
    assert len(harness.messages()) == 1
    (effect,) = harness.store.read("list_effects", state=None)
    assert effect["state"] == "in_doubt"


def test_customer_name_with_crlf_and_html_injects_no_header_and_is_escaped(harness: Harness) -> None:
    evil = 'Eve <b>"x"</b>\r\nBcc: victim@example.com\r\n<script>alert(1)</script>'
    harness.add_invoices(invoice("INV-6", date(2026, 3, 1), email="eve@example.com"),
                         customers=(Customer(email="eve@example.com", name=evil),))
    harness.tick_to(FIRST_FIRE)
    harness.new_worker().drain()
    (stored,) = harness.messages()
    raw = next((harness.sink.maildir / "new").iterdir()).read_bytes()
    msg = email.message_from_bytes(raw)
    assert msg["Bcc"] is None and b"\r\nBcc:" not in raw and b"\nBcc:" not in raw
    html = next(p for p in msg.walk() if p.get_content_type() == "text/html").get_payload(decode=True).decode()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert stored.to.endswith("<eve@example.com>")


def test_days_past_due_use_the_schedule_zone_not_the_host_date(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    monkeypatch.setenv("TZ", "Asia/Tokyo")  # where it is already 2026-03-02 23:00 at the Chicago fire
    time.tzset()
    try:
        harness.add_invoices(invoice("INV-7", date(2026, 2, 23)))  # 7 days before the Chicago business date
        harness.tick_to(FIRST_FIRE)
        harness.new_worker().drain()
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    (sent,) = [r for r in harness.reminders() if r["state"] == "sent"]
    assert sent["stage"] == 1 and sent["business_date"] == date(2026, 3, 2)  # first contact: the lowest stage
    (msg,) = harness.messages()
    assert "7 days past due" in msg.subject


def test_connection_dropped_before_the_final_reply_is_in_doubt_not_resent(harness: Harness) -> None:
    harness.add_invoices(invoice("INV-8", date(2026, 3, 1)))
    harness.sink.faults.drop_before_reply_next(1)
    harness.tick_to(FIRST_FIRE)
    worker = harness.new_worker()
    worker.drain()
    harness.clock.advance(3600)
    worker.drain()
    (row,) = harness.reminders()
    assert row["state"] == "in_doubt" and "UNKNOWN" in row["reason"]
    (effect,) = harness.store.read("list_effects", state="in_doubt")
    assert effect["key"] == f"reminder:{row['id']}"
    assert harness.messages() == []  # this sink dropped it unstored; a real server might have kept it


def test_reminder_delivered_then_paid_before_the_outcome_was_recorded_counts_as_sent(harness: Harness) -> None:
    harness.add_invoices(invoice("INV-10", date(2026, 3, 1)))
    harness.tick_to(FIRST_FIRE)
    first = harness.new_worker("doomed")
    first.drain(max_batches=1)  # scan
    crashpoints.arm("after_effect_record")  # the email went out and the effect is recorded; the job is not
    with pytest.raises(SimulatedCrash):
        first.drain()
    crashpoints.disarm()
    from oncebeat.reminders.model import Payment

    harness.service.apply_payments([Payment(number="INV-10", paid_on=date(2026, 3, 2))])
    harness.clock.advance(first.lease_seconds + 1)
    survivor = harness.new_worker("survivor")
    survivor.rescue()
    survivor.drain()
    (row,) = harness.reminders()
    assert row["state"] == "sent" and row["message_id"]
    assert len(harness.messages()) == 1


def test_a_reminder_is_sent_in_the_same_commit_as_its_effect_done(harness: Harness) -> None:
    harness.add_invoices(invoice("INV-12", date(2026, 3, 1)))
    harness.tick_to(FIRST_FIRE)
    worker = harness.new_worker("doomed")
    worker.drain(max_batches=1)  # scan
    crashpoints.arm("after_effect_record")  # dies right after the effect's done commit
    with pytest.raises(SimulatedCrash):
        worker.drain()
    (row,) = harness.reminders()
    assert row["state"] == "sent" and row["message_id"] and row["sent_at"]  # no window left between the two


def test_invoice_paid_after_a_delivery_of_unknown_outcome_stays_in_doubt_not_skipped(harness: Harness) -> None:
    harness.add_invoices(invoice("INV-11", date(2026, 3, 1)))
    harness.tick_to(FIRST_FIRE)
    first = harness.new_worker("doomed")
    first.drain(max_batches=1)  # scan
    crashpoints.arm("effect_before_record")
    with pytest.raises(SimulatedCrash):
        first.drain()
    crashpoints.disarm()
    from oncebeat.reminders.model import Payment

    harness.service.apply_payments([Payment(number="INV-11", paid_on=date(2026, 3, 2))])
    harness.clock.advance(first.lease_seconds + 1)
    survivor = harness.new_worker("survivor")
    survivor.rescue()
    survivor.drain()
    (row,) = harness.reminders()
    assert row["state"] == "in_doubt"  # the email may have gone out: "skipped" would hide it
    assert len(harness.messages()) == 1


@pytest.mark.parametrize("outcome", ["done", "not_done"])
def test_operator_resolving_an_in_doubt_reminder_settles_it(harness: Harness, outcome: str) -> None:
    from oncebeat.provenance import current_source

    harness.add_invoices(invoice("INV-12", date(2026, 3, 1)))
    harness.sink.faults.drop_before_reply_next(1)  # delivery outcome unknown: in doubt
    harness.tick_to(FIRST_FIRE)
    harness.new_worker().drain()
    (row,) = harness.reminders()
    assert row["state"] == "in_doubt"
    said = harness.service.resolve_effect(f"reminder:{row['id']}", outcome, source=current_source("cli"))
    assert outcome in said
    harness.new_worker().drain()
    (row,) = harness.reminders()
    if outcome == "done":
        assert row["state"] == "sent" and harness.messages() == []  # the operator saw it in the server's log
    else:
        assert row["state"] == "sent" and len(harness.messages()) == 1  # sent again, exactly once
    from oncebeat.errors import OncebeatError

    with pytest.raises(OncebeatError, match="not in doubt"):
        harness.service.resolve_effect(f"reminder:{row['id']}", outcome, source=current_source("cli"))


# --- issue 9: in doubt only past the point of no return; a resend is the same message --------------------


def _crash_once_then_rescue(harness: Harness, point: str) -> None:
    """The worker dies at ``point`` during the send; a new process (new SMTP connection) rescues the job."""
    from oncebeat.mail import Mailer

    harness.tick_to(FIRST_FIRE)
    doomed = harness.new_worker("doomed")
    doomed.drain(max_batches=1)  # the scan
    crashpoints.arm(point)
    with pytest.raises(SimulatedCrash):
        doomed.drain()
    crashpoints.disarm()
    harness.mailer.close()  # the dead process's connection goes with it
    harness.mailer = harness.service.mailer = Mailer(harness.sink.url)
    harness.clock.advance(doomed.lease_seconds + 1)
    survivor = harness.new_worker("survivor")
    assert survivor.rescue() != []
    survivor.drain()


@pytest.mark.parametrize(("point", "in_doubt"), [("smtp_connect", False), ("smtp_data", False),
                                                 ("smtp_after_dot", True), ("effect_before_record", True)])
def test_only_a_send_killed_after_the_final_dot_is_in_doubt(harness: Harness, point: str, in_doubt: bool) -> None:
    harness.add_invoices(invoice("INV-20", date(2026, 3, 1)))
    _crash_once_then_rescue(harness, point)
    (row,) = harness.reminders()
    (effect,) = harness.store.read("list_effects", state=None)
    assert len(harness.messages()) == 1, "delivered exactly once either way"
    if in_doubt:  # the server had the whole message: it may have accepted it
        assert (row["state"], effect["state"]) == ("in_doubt", "in_doubt")
    else:  # nothing had left: retried automatically, not doubted
        assert (row["state"], effect["state"]) == ("sent", "done")
        [retried] = harness.store.read("list_events", subject=f"effect:{effect['key']}", kind="effect.retried",
                                       since=FIRST_FIRE - timedelta(days=1))
        assert "died before its point of no return" in retried["detail"]["detail"]


def test_a_resend_after_a_lost_reply_and_a_partial_payment_is_byte_identical_to_the_first_copy(
        harness: Harness) -> None:
    from oncebeat.mail import Mailer
    from oncebeat.provenance import current_source

    harness.add_invoices(invoice("INV-21", date(2026, 3, 1), amount=12_345))
    harness.mailer = harness.service.mailer = Mailer(f"{harness.sink.url}?timeout=0.5")
    harness.sink.faults.stall_next(1, seconds=2.0)  # stored, but the 250 comes after the client gave up
    harness.tick_to(FIRST_FIRE)
    harness.new_worker().drain()
    (row,) = harness.reminders()
    assert row["state"] == "in_doubt"
    assert len(harness.messages()) == 1

    harness.clock.advance(3 * 3600)  # a partial payment changes the amount due; a re-render would differ
    harness.add_invoices(invoice("INV-21", date(2026, 3, 1), amount=5_000),
                         customers=(Customer(email="ana@example.com", name="Ana Lima", locale="pt_BR",
                                             tz="America/Sao_Paulo"),))
    said = harness.service.resolve_effect(f"reminder:{row['id']}", "not_done", source=current_source("cli"))
    assert "will be sent again" in said
    harness.new_worker().drain()

    (row,) = harness.reminders()
    assert row["state"] == "sent"
    files = sorted((harness.sink.maildir / "new").iterdir())
    assert len(files) == 2
    first, resend = (f.read_bytes() for f in files)
    assert resend == first, "the resend is the frozen first message, byte for byte"
    parsed = email.message_from_bytes(first, policy=email.policy.default)
    body = parsed.get_body(preferencelist=("plain",))
    # pt has no catalog: a pt_BR customer's email is all in the fallback locale (en_US), amount included
    assert body is not None and "$123.45" in body.get_content(), "the amount as it was at the first attempt"
    (effect,) = harness.store.read("list_effects", state="done")
    assert effect["frozen"] is None, "a done effect drops its frozen bytes"


def test_a_customer_whose_language_has_no_catalog_gets_one_email_in_the_policy_fallback_locale(
        store: Store, tmp_path: Path) -> None:
    """Issue 21, item 7: no English (or French) sentences around Japanese dates, no amount split across lines."""
    from oncebeat.reminders.policy import Policy
    from oncebeat.timebase import SimulatedClock

    sink = maildir_sink(tmp_path)
    h = Harness(store=store, sink=sink, clock=SimulatedClock(FIRST_FIRE - timedelta(hours=1)),
                policy=Policy(fallback_locale="fr_FR"))
    try:
        h.add_invoices(invoice("INV-2026-000042", date(2026, 3, 1), amount=7_220_229, currency="EUR"),
                       customers=(Customer(email="ana@example.com", name="Kenji Sato", locale="ja_JP",
                                           tz="Asia/Tokyo"),))
        h.tick_to(FIRST_FIRE)
        h.new_worker().drain()
        raw = next((sink.maildir / "new").iterdir()).read_bytes()
    finally:
        h.close()
        sink.stop()
    parsed = email.message_from_bytes(raw, policy=email.policy.default)
    assert parsed["Subject"] == "La facture INV-2026-000042 est en retard de 1 jour"
    text = parsed.get_body(preferencelist=("plain",)).get_content()
    html = parsed.get_body(preferencelist=("html",)).get_content()
    assert "Bonjour Kenji Sato," in text and '<html lang="fr">' in html
    for part in (text, html):
        assert "72\u202f202,29\xa0€" in part and "1\xa0mars\xa02026" in part and "年" not in part
    assert sum("72\u202f202,29\xa0€" in line for line in text.splitlines()) == 2  # message and table, each whole
