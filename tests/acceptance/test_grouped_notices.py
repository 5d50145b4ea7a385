"""One notice per customer (issue 24 item 1, DESIGN G9): ``group = "customer"``.

Both backends, the real clock, worker and SMTP sink (aiosmtpd) on simulated time; the sent message is parsed back
with the ``email`` package.
"""

from __future__ import annotations

import email
import email.policy
from collections.abc import Iterator
from datetime import date, timedelta
from email.message import EmailMessage
from pathlib import Path

import pytest
from reminder_harness import FIRST_FIRE, Harness, invoice, maildir_sink

from oncebeat import telemetry
from oncebeat.crashpoints import SimulatedCrash, crashpoints
from oncebeat.mail import Mailer
from oncebeat.provenance import current_source
from oncebeat.reminders.model import Customer, Payment
from oncebeat.reminders.policy import Policy
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock

D0 = date(2026, 3, 2)  # the first scan's business date (08:00 America/Chicago)
DAY = timedelta(days=1)
BEA = Customer(email="bea@example.com", name="Bea Roth", locale="de_DE", tz="Europe/Berlin")


def _harness(store: Store, tmp_path: Path, policy: Policy) -> Harness:
    return Harness(store=store, sink=maildir_sink(tmp_path), clock=SimulatedClock(FIRST_FIRE - timedelta(hours=1)),
                   policy=policy)


@pytest.fixture
def grouped(store: Store, tmp_path: Path) -> Iterator[Harness]:
    h = _harness(store, tmp_path, Policy(stages=(1, 30), group="customer"))
    try:
        yield h
    finally:
        h.close()
        h.sink.stop()


def _three(h: Harness) -> None:
    h.add_invoices(invoice("INV-1", D0 - DAY, amount=10_000), invoice("INV-2", D0 - DAY, amount=25_050),
                   invoice("INV-3", D0 - DAY, amount=999, currency="EUR"))


def _parsed(h: Harness) -> list[EmailMessage]:
    folder = h.sink.maildir / "new"
    files = sorted(folder.iterdir()) if folder.exists() else []
    return [email.message_from_bytes(f.read_bytes(), policy=email.policy.default) for f in files]  # type: ignore


def _notices(h: Harness) -> list[dict]:
    return h.store.read("notices_all")


def test_three_invoices_of_one_customer_go_out_in_one_email_listing_each_once(grouped: Harness) -> None:
    h = grouped
    _three(h)
    h.tick_to(FIRST_FIRE)
    finished: list[dict] = []

    def count(_event: str, data: dict) -> None:
        finished.append(dict(data))

    telemetry.attach("reminder.finished", count)
    try:
        h.new_worker().drain()
    finally:
        telemetry.detach("reminder.finished", count)
    assert finished == [{"stage": 1, "state": "sent"}] * 3  # /metrics counts each row the notice decided
    (msg,) = _parsed(h)
    assert msg.get_content_type() == "multipart/alternative"
    parts = [p.get_content_type() for p in msg.iter_parts()]
    assert parts == ["text/plain", "text/html"]
    text = msg.get_body(("plain",)).get_content()
    html = msg.get_body(("html",)).get_content()
    assert msg["Subject"] == "3 invoices awaiting payment"
    for number, amount in (("INV-1", "$100.00"), ("INV-2", "$250.50"), ("INV-3", "€9.99")):
        assert text.count(number) == 1 and html.count(f"<strong>{number}</strong>") == 1
        assert amount in text.replace("\u00a0", " ")
    assert "1 day past due" in text
    rows = h.reminders()
    assert {r["state"] for r in rows} == {"sent"} and len(rows) == 3
    (notice_id,) = {r["notice_id"] for r in rows}
    assert {r["message_id"] for r in rows} == {msg["Message-ID"]}
    notices = _notices(h)
    assert {(n["notice_id"], n["notice_state"], n["notice_message_id"]) for n in notices} == {
        (notice_id, "sent", msg["Message-ID"])}
    (effect,) = h.store.read("list_effects", state=None)
    assert (effect["key"], effect["state"]) == (f"notice:{notice_id}", "done")


def test_the_notice_is_in_the_customer_language(grouped: Harness) -> None:
    h = grouped
    h.add_invoices(invoice("R-1", D0 - DAY, email=BEA.email, currency="EUR"),
                   invoice("R-2", D0 - DAY, email=BEA.email, currency="EUR"), customers=(BEA,))
    h.tick_to(FIRST_FIRE)
    h.new_worker().drain()
    (msg,) = _parsed(h)
    assert msg["Subject"] == "2 Rechnungen warten auf Zahlung"
    text = msg.get_body(("plain",)).get_content()
    assert "Guten Tag Bea Roth" in text and "folgenden Rechnungen" in text and "Mahnstufe" in text


def test_duplicate_scans_and_a_leftover_trigger_make_one_notice(grouped: Harness) -> None:
    h = grouped
    _three(h)
    h.tick_to(FIRST_FIRE)
    occ = h.store.read("list_occurrences", schedule_key="reminders")[0]
    for _ in range(2):
        h.service.scan(occurrence_id=occ["id"], business_date=occ["business_date"], source=current_source("cli"))
    h.clock.advance(60)
    h.clk.trigger("reminders", kind="cli")
    h.new_worker().drain()
    assert len(h.messages()) == 1
    assert len({n["notice_id"] for n in _notices(h)}) == 1


def test_an_invoice_paid_between_grouping_and_sending_is_left_out(grouped: Harness) -> None:
    h = grouped
    _three(h)
    h.tick_to(FIRST_FIRE)
    worker = h.new_worker()
    worker.drain(max_batches=1)  # the scan: three rows, one customer
    h.service.apply_payments([Payment(number="INV-2", paid_on=D0)])
    worker.drain()
    (msg,) = _parsed(h)
    text = msg.get_body(("plain",)).get_content()
    assert "INV-1" in text and "INV-3" in text and "INV-2" not in text
    assert msg["Subject"] == "2 invoices awaiting payment"
    states = {r["number"]: (r["state"], r["notice_id"]) for r in h.reminders()}
    assert states["INV-2"] == ("skipped", None)
    assert states["INV-1"][0] == states["INV-3"][0] == "sent"


def test_a_crash_after_the_final_dot_leaves_the_notice_and_all_its_rows_in_doubt(grouped: Harness) -> None:
    h = grouped
    _three(h)
    h.tick_to(FIRST_FIRE)
    doomed = h.new_worker("doomed")
    doomed.drain(max_batches=1)  # the scan
    crashpoints.arm("smtp_after_dot")
    with pytest.raises(SimulatedCrash):
        doomed.drain()
    crashpoints.disarm()
    h.mailer.close()  # the dead process's connection goes with it
    h.mailer = h.service.mailer = Mailer(h.sink.url)
    h.clock.advance(doomed.lease_seconds + 1)
    survivor = h.new_worker("survivor")
    assert survivor.rescue() != []
    survivor.drain()
    assert len(h.messages()) == 1  # delivered once, never resent blindly
    rows = h.reminders()
    assert [r["state"] for r in rows] == ["in_doubt"] * 3
    (notice,) = {(n["notice_id"], n["notice_state"]) for n in _notices(h)}
    assert notice[1] == "in_doubt"
    (effect,) = h.store.read("list_effects", state="in_doubt")
    assert effect["key"] == f"notice:{notice[0]}"
    said = h.service.resolve_effect(effect["key"], "done", source=current_source("cli"))
    assert "resolved done" in said
    assert [r["state"] for r in h.reminders()] == ["sent"] * 3
    assert {n["notice_state"] for n in _notices(h)} == {"sent"}


def test_resolving_a_lost_reply_not_done_sends_the_same_frozen_notice_once_more(grouped: Harness) -> None:
    h = grouped
    _three(h)
    h.sink.faults.drop_before_reply_next(1)
    h.tick_to(FIRST_FIRE)
    h.new_worker().drain()
    assert [r["state"] for r in h.reminders()] == ["in_doubt"] * 3
    (effect,) = h.store.read("list_effects", state="in_doubt")
    frozen = bytes(effect["frozen"])
    h.clock.advance(3600)  # a later Date: a re-rendering would differ
    said = h.service.resolve_effect(effect["key"], "not_done", source=current_source("cli"))
    assert "will be sent again" in said
    h.new_worker().drain()
    (msg,) = _parsed(h)
    first = email.message_from_bytes(frozen, policy=email.policy.default)
    assert msg["Date"] == first["Date"] and msg["Message-ID"] == first["Message-ID"]  # the frozen copy, not redone
    assert msg.get_body(("plain",)).get_content().splitlines() == first.get_body(("plain",)).get_content().splitlines()
    assert [r["state"] for r in h.reminders()] == ["sent"] * 3


def test_the_cap_counts_one_grouped_notice_once(store: Store, tmp_path: Path) -> None:
    h = _harness(store, tmp_path, Policy(stages=(1, 3), group="customer", max_notices_per_week=2))
    try:
        h.add_invoices(invoice("A-1", D0 - DAY), invoice("A-2", D0 - DAY), invoice("A-3", D0 - DAY))
        worker = h.new_worker()
        h.tick_to(FIRST_FIRE)
        worker.drain()
        assert len(h.messages()) == 1  # three invoices, one notice, one place of two
        h.add_invoices(invoice("A-4", D0))
        for n in (1, 2):  # 03-03: A-4 stage 1 (a second notice); 03-04: A-1..3 stage 3 (a third: capped)
            h.tick_to(FIRST_FIRE + n * DAY)
            worker.drain()
        assert len(h.messages()) == 2
        states = {(r["number"], r["stage"]): r["state"] for r in h.reminders()}
        assert states[("A-4", 1)] == "sent"
        assert {states[(f"A-{i}", 3)] for i in (1, 2, 3)} == {"deferred"}
        assert "at most 2 per 7 days" in next(r["reason"] for r in h.reminders() if r["state"] == "deferred")
    finally:
        h.close()
        h.sink.stop()


def test_a_frozen_notice_gone_stale_before_reaching_the_server_is_not_sent_and_the_rest_go_alone(
        grouped: Harness) -> None:
    h = grouped
    _three(h)
    h.sink.faults.fail_next(1, code=451, text="4.7.1 greylisted, try again later")  # frozen, then refused
    h.tick_to(FIRST_FIRE)
    worker = h.new_worker()
    worker.drain()
    assert h.messages() == [] and {r["state"] for r in h.reminders()} == {"pending"}
    h.service.apply_payments([Payment(number="INV-2", paid_on=D0)])  # after the freeze, before any delivery
    h.clock.advance(60)
    worker.drain()
    subjects = sorted(m.subject for m in h.messages())
    assert len(subjects) == 2 and all("INV-2" not in s for s in subjects)  # never the stale frozen notice
    assert {r["number"]: r["state"] for r in h.reminders()} == {"INV-1": "sent", "INV-2": "skipped",
                                                                 "INV-3": "sent"}
    assert {n["notice_state"] for n in _notices(h)} == {"skipped"}


def test_the_proof_of_notice_of_a_grouped_stage_names_its_notice_and_the_bytes_sent(grouped: Harness) -> None:
    import hashlib

    from oncebeat.reminders.notices.evidence import build_evidence, summary_lines

    h = grouped
    _three(h)
    h.tick_to(FIRST_FIRE)
    h.new_worker().drain()
    (raw,) = [f.read_bytes() for f in (h.sink.maildir / "new").iterdir()]
    record = build_evidence(h.service, "INV-2", database="test")
    (stage,) = record.data["stages"]
    notice = stage["notice"]
    assert [(x["invoice"], x["stage"], x["state"]) for x in notice["listed"]] == [
        ("INV-1", 1, "sent"), ("INV-2", 1, "sent"), ("INV-3", 1, "sent")]
    assert stage["provenance"]["effect"]["key"] == f"notice:{notice['id']}"
    assert stage["message_id"] == notice["message_id"]
    while raw.startswith((b"Return-Path:", b"Delivered-To:")):  # the sink's trace lines; the Maildir stores LF
        raw = raw.split(b"\n", 1)[1]
    received = raw.replace(b"\n", b"\r\n")  # the bytes the server received
    assert (stage["message"]["sha256"], stage["message"]["size"]) == (hashlib.sha256(received).hexdigest(),
                                                                     len(received))
    assert any(f"in grouped notice {notice['id']} (sent), one email listing INV-1 stage 1, INV-2 stage 1" in line
               for line in summary_lines(record))


def test_a_broken_up_notice_leaves_no_files_on_its_rows_and_each_row_sent_alone_records_what_it_carried(
        store: Store, tmp_path: Path) -> None:
    # The first attempt records the notice's files on every row it lists, then the server refuses it (451); the
    # retry finds INV-2 paid and breaks the notice up. What the customer got is two messages of their own: each
    # row's recorded files must be those (the invoice page and the proof of notice show them), never the files of
    # the notice that was not sent, and the skipped row records none. The simulator's attachments-as-frozen caught
    # it (seed 11, grouped fees, PostgreSQL).
    import hashlib

    from oncebeat.reminders.notices.attachments import AttachmentPolicy
    from oncebeat.reminders.notices.sending import attachment_digests

    h = _harness(store, tmp_path, Policy(stages=(1, 30), group="customer",
                                         attachments=AttachmentPolicy(statement="always")))
    try:
        _three(h)
        h.sink.faults.fail_next(1, code=451, text="4.7.1 greylisted, try again later")  # frozen, then refused
        h.tick_to(FIRST_FIRE)
        worker = h.new_worker()
        worker.drain()
        assert h.messages() == []
        h.service.apply_payments([Payment(number="INV-2", paid_on=D0)])
        h.clock.advance(60)
        worker.drain()
        received = {str(m["X-Oncebeat-Invoice"]): [hashlib.sha256(p.get_content()).hexdigest()
                                                  for p in m.iter_attachments()] for m in _parsed(h)}
        assert sorted(received) == ["INV-1", "INV-3"] and all(received.values())
        ids = {r["number"]: int(r["id"]) for r in h.reminders()}
        digests = attachment_digests(h.store)
        assert {n: digests.get(ids[n], []) for n in ("INV-1", "INV-2", "INV-3")} == {
            "INV-1": received["INV-1"], "INV-2": [], "INV-3": received["INV-3"]}
    finally:
        h.close()
        h.sink.stop()


def _message_with_a_file(name: str) -> bytes:
    msg = EmailMessage()
    msg["Subject"] = "notice"
    msg.set_content("see the file")
    msg.add_attachment(b"%PDF-1.7 " + name.encode(), maintype="application", subtype="pdf", filename=name)
    return msg.as_bytes().replace(b"\n", b"\r\n")


def _frozen_then_refused(h: Harness) -> int:
    """INV-1..3 listed by one notice, frozen, refused by the server (451): its rows pending, the notice's id."""
    _three(h)
    h.sink.faults.fail_next(1, code=451, text="4.7.1 greylisted, try again later")
    h.tick_to(FIRST_FIRE)
    h.new_worker().drain()
    (notice,) = {int(r["notice_id"]) for r in h.store.read("notices_all")}
    assert {r["state"] for r in h.reminders()} == {"pending"}
    return notice


def test_a_stalled_attempt_records_no_files_on_rows_its_notice_no_longer_lists(grouped: Harness) -> None:
    # An attempt that stalled before recording its frozen notice's files, while a later attempt broke the notice
    # up, must not record them afterwards: the row goes out alone and its files are those of its own message
    # (record_reminder_attachment keeps the first files recorded at a position).
    from oncebeat.reminders.notices.sending import attachment_digests, record_attachments

    h = grouped
    notice = _frozen_then_refused(h)
    rid = int(h.reminders()[0]["id"])
    frozen = _message_with_a_file("notice.pdf")
    assert record_attachments(h.store, reminder_id=rid, frozen=frozen, now=h.clock.now(), notice_id=notice) == 1
    with h.store.transaction() as tx:  # what the break-up does: release the pending rows, forget their files
        for row in tx.run("notice_release_pending", notice_id=notice):
            tx.run("forget_reminder_attachments", reminder_id=int(row["id"]))
    assert record_attachments(h.store, reminder_id=rid, frozen=frozen, now=h.clock.now(), notice_id=notice) == 0
    assert attachment_digests(h.store).get(rid, []) == []
    own = _message_with_a_file("own.pdf")  # the row's own message, sent alone, records its files
    assert record_attachments(h.store, reminder_id=rid, frozen=own, now=h.clock.now()) == 1
    assert len(attachment_digests(h.store)[rid]) == 1


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgres"])
def test_a_stalled_attempt_recording_files_while_the_notice_is_broken_up_waits_and_records_nothing(
        grouped: Harness) -> None:
    # PostgreSQL runs the two at once: the stalled attempt's recording starts while the break-up's transaction
    # (rows released, files forgotten) is open. It must wait for it and then see the row no longer listed; without
    # the row lock it waited only on the unique index and recorded the never-sent notice's file afterwards.
    import threading
    import time

    from oncebeat.reminders.notices.sending import attachment_digests, record_attachments

    h = grouped
    notice = _frozen_then_refused(h)
    rid = int(h.reminders()[0]["id"])
    frozen = _message_with_a_file("notice.pdf")
    record_attachments(h.store, reminder_id=rid, frozen=frozen, now=h.clock.now(), notice_id=notice)
    recorded: list[int] = []
    stalled = threading.Thread(target=lambda: recorded.append(record_attachments(
        h.store, reminder_id=rid, frozen=frozen, now=h.clock.now(), notice_id=notice)))
    with h.store.transaction() as tx:
        breaker = int(tx.execute("SELECT pg_backend_pid() AS pid", ())[0]["pid"])
        for row in tx.run("notice_release_pending", notice_id=notice):
            tx.run("forget_reminder_attachments", reminder_id=int(row["id"]))
        stalled.start()
        deadline = time.monotonic() + 30
        while True:  # until the recording waits on the break-up's locks
            with h.store.transaction() as probe:
                if probe.execute("SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
                                 (breaker,)):
                    break
            assert time.monotonic() < deadline and stalled.is_alive(), recorded
            time.sleep(0.01)
    stalled.join(30)
    assert recorded == [0]
    assert attachment_digests(h.store).get(rid, []) == []
