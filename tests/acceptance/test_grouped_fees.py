"""Grouped notices with escalation and fees (issue 24 items 1 and 4 together, DESIGN G9): one notice per customer
carries the union of its rows' CC (header) and BCC (envelope only), shows each row's late fee and totals per
currency, and records each fee once — in the transaction recording the notice sent, from the frozen message's
``X-Oncebeat-Fees`` — and enqueues the final stage's internal notice once. Both backends, the real clock, worker
and aiosmtpd sink; every email is parsed back with the ``email`` package."""

from __future__ import annotations

import hashlib
import os
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from test_escalation_fees import Book, delivered

from oncebeat.mail import MailSink, read_maildir
from oncebeat.provenance import current_source
from oncebeat.queue import all_jobs
from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.notices.fees import FEES_HEADER, fees_of_header
from oncebeat.reminders.notices.grouped import render_notice
from oncebeat.reminders.notices.notify import NOTIFY_TASK
from oncebeat.reminders.policy import Policy, policy_from_dict
from oncebeat.reminders.render import Renderer
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock

ANA = "ana@example.com"
OWNER, COLLECTIONS, TEAM = "owner@example.com", "collections@example.com", "team@example.com"


def grouped_escalating() -> Policy:
    return policy_from_dict({
        "reminders": {"stages": [1, 7, 30], "collapse": "highest", "group": "customer", "notify_final": TEAM},
        "stage": {"7": {"cc": [f"Account Owner <{OWNER}>"], "fee": {"fixed": 2500}},
                  "30": {"cc": [OWNER], "bcc": [COLLECTIONS], "fee": {"percent": 1.5, "cap": 5000}}},
    }, "oncebeat.toml")


class GroupedBook(Book):
    def add_for(self, number: str, due_on: date, amount: int, currency: str = "EUR") -> None:
        self.service.upsert([Customer(email=ANA, name="Ana Lima", locale="en_US")],
                            [Invoice(number=number, customer_email=ANA, currency=currency, amount_due=amount,
                                     issued_on=due_on - timedelta(days=30), due_on=due_on)])

    def three(self) -> None:
        today = self.clock.now().date()
        self.add_for("INV-1", today - timedelta(days=40), 100_000)  # stage 30 (final): 1.5 % -> 1500, CC + BCC
        self.add_for("INV-2", today - timedelta(days=8), 40_000)  # stage 7: fixed 2500, CC
        self.add_for("INV-3", today - timedelta(days=2), 9_900, currency="USD")  # stage 1: no escalation

    def notice_key(self) -> str:
        (nid,) = {r["notice_id"] for r in self.store.read("list_reminders")}
        return f"notice:{nid}"


@pytest.fixture
def sink(tmp_path: Path) -> Any:
    s = MailSink(tmp_path / "maildir").start()
    yield s
    s.stop()


def _customer_mails(tmp_path: Path) -> list[Any]:
    return [m for m in delivered(tmp_path / "maildir") if m["To"].addresses[0].addr_spec == ANA]


def _internal_mails(tmp_path: Path) -> list[Any]:
    return [m for m in delivered(tmp_path / "maildir") if m["To"].addresses[0].addr_spec == TEAM]


def _notify_jobs(store: Store) -> list[dict[str, Any]]:
    return all_jobs(store, task=NOTIFY_TASK)


EXPECTED_FEES = [("INV-1", 30, 1500, "EUR", "percent"), ("INV-2", 7, 2500, "EUR", "fixed")]


def test_one_notice_of_three_invoices_shows_two_fees_carries_cc_and_bcc_and_records_each_fee_once(
        store: Store, sim_clock: SimulatedClock, sink: MailSink, tmp_path: Path) -> None:
    book = GroupedBook(store, sim_clock, grouped_escalating(), sink)
    book.three()
    try:
        book.next_scan()
        sim_clock.advance(60)
        book.drain()
    finally:
        book.close()
    [msg] = _customer_mails(tmp_path)
    assert msg["Subject"] == "3 invoices awaiting payment"
    assert [a.addr_spec for a in msg["Cc"].addresses] == [OWNER]  # the union, repeats dropped
    assert msg["Bcc"] is None and COLLECTIONS not in msg.as_string().replace(f"Delivered-To: {COLLECTIONS}", "")
    [stored] = [m for m in read_maildir(tmp_path / "maildir") if m.headers.get("X-Oncebeat-Notice", "").isdigit()]
    assert set(stored.envelope_to) == {ANA, OWNER, COLLECTIONS}  # BCC delivered, on the envelope only
    text = msg.get_body(("plain",)).get_content().replace("\u00a0", " ")
    html = msg.get_body(("html",)).get_content().replace("\u00a0", " ")
    for shown in ("€15.00", "€1,015.00", "€25.00", "€425.00", "$99.00"):
        assert shown in text and shown in html, (shown, text)
    assert text.count("Late fee:") == 2  # INV-3's stage has no fee
    assert "Total with fees:" in text and "€1,440.00" in text and html.count("Total with fees") == 2  # per currency
    ids = {r["number"]: int(r["id"]) for r in store.read("list_reminders")}
    shown_fees = fees_of_header(msg[FEES_HEADER])
    assert {i: (f.amount, f.currency) for i, f in shown_fees.items()} == {ids["INV-1"]: (1500, "EUR"),
                                                                          ids["INV-2"]: (2500, "EUR")}
    assert sorted(book.fees()) == EXPECTED_FEES
    assert {r["state"] for r in store.read("list_reminders")} == {"sent"}
    # INV-1 is at its ladder's final stage: one internal notice, naming the grouped notice's Message-ID
    assert len(_notify_jobs(store)) == 1
    [note] = _internal_mails(tmp_path)
    assert note["X-Oncebeat-Invoice"] == "INV-1" and note["X-Oncebeat-Notice"].strip() == msg["Message-ID"]
    assert "€15.00 at stage 30" in note.get_content().replace("\u00a0", " ")
    # The proof of notice of a grouped stage names its fee and the notice's headers (Cc, X-Oncebeat-Fees).
    from oncebeat.reminders.notices.evidence import build_evidence  # noqa: PLC0415

    [stage] = [x for x in build_evidence(book.service, "INV-1", database="test").data["stages"] if x["stage"] == 30]
    assert stage["fee"]["amount_minor"] == 1500 and stage["fee"]["basis"] == "percent"
    headers = dict((k, v) for k, v in stage["message"]["headers"])
    assert headers["Cc"] == OWNER and "Bcc" not in headers and f"{ids['INV-1']} 1500 EUR" in headers[FEES_HEADER]


def test_a_451_retry_sends_the_frozen_notice_with_its_bcc_and_records_no_second_fee(
        store: Store, sim_clock: SimulatedClock, sink: MailSink, tmp_path: Path) -> None:
    book = GroupedBook(store, sim_clock, grouped_escalating(), sink)
    book.three()
    sink.faults.fail_next(1, 451, "4.3.0 try later")  # frozen at the first attempt, then refused
    try:
        book.next_scan()
        assert book.fees() == [] and {r["state"] for r in store.read("list_reminders")} == {"pending"}
        # INV-1 grows meanwhile: the retry sends the frozen notice, and the fee recorded is the one it showed
        today = sim_clock.now().date()
        book.service.upsert([], [Invoice(number="INV-1", customer_email=ANA, currency="EUR", amount_due=300_000,
                                         issued_on=today - timedelta(days=70), due_on=today - timedelta(days=40))])
        sim_clock.advance(600)
        book.drain()
        book.next_scan()  # a rerun of the next day's scan: nothing more
        sim_clock.advance(600)
        book.drain()
    finally:
        book.close()
    assert sorted(book.fees()) == EXPECTED_FEES  # 1.5 % of 100000, as the frozen notice said; no second fee
    [msg] = _customer_mails(tmp_path)
    [stored] = [m for m in read_maildir(tmp_path / "maildir") if m.headers.get("X-Oncebeat-Notice", "").isdigit()]
    assert set(stored.envelope_to) == {ANA, OWNER, COLLECTIONS} and "Bcc" not in stored.headers
    assert "€15.00" in msg.get_body(("plain",)).get_content().replace("\u00a0", " ")
    assert len(_notify_jobs(store)) == 1 and len(_internal_mails(tmp_path)) == 1


def test_a_lost_reply_resolved_done_records_the_fees_once_and_the_internal_notice_once(
        store: Store, sim_clock: SimulatedClock, sink: MailSink, tmp_path: Path) -> None:
    book = GroupedBook(store, sim_clock, grouped_escalating(), sink)
    book.three()
    sink.faults.drop_before_reply_next(1)  # the final dot went out, no reply: the notice and its rows in doubt
    try:
        book.next_scan()
        assert {r["state"] for r in store.read("list_reminders")} == {"in_doubt"}
        assert book.fees() == [] and _notify_jobs(store) == []
        key = book.notice_key()
        said = book.service.resolve_effect(key, "done", source=current_source("cli"))
        assert "resolved done" in said
        with pytest.raises(Exception, match="not in doubt"):
            book.service.resolve_effect(key, "done", source=current_source("cli"))
        book.drain()
        book.next_scan()
    finally:
        book.close()
    assert {r["state"] for r in store.read("list_reminders")} == {"sent"}
    assert sorted(book.fees()) == EXPECTED_FEES
    assert _customer_mails(tmp_path) == []  # the sink dropped it before its reply; never resent
    [job] = _notify_jobs(store)
    assert job["source_kind"] == "cli"  # the operator's decision caused the final stage's record (G8)
    assert len(_internal_mails(tmp_path)) == 1


@pytest.mark.parametrize(("locale", "late_fee", "totals"), [
    ("en_US", "Late fee", "Total with fees"), ("de_DE", "Mahngebühr", "Gesamtbetrag mit Gebühren"),
    ("fr_FR", "Frais de retard", "Total avec les frais"), ("es_ES", "Recargo por demora", "Total con los recargos"),
])
def test_the_fees_of_a_notice_are_shown_in_every_shipped_language(locale: str, late_fee: str, totals: str) -> None:
    from oncebeat.reminders.notices.fees import Fee  # noqa: PLC0415

    rows = [{"id": 1, "number": "INV-1", "stage": 30, "currency": "EUR", "amount_due": 100_000,
             "due_on": date(2026, 1, 1)},
            {"id": 2, "number": "INV-2", "stage": 1, "currency": "EUR", "amount_due": 5_000,
             "due_on": date(2026, 1, 30)}]
    fee = Fee(amount=1500, currency="EUR", basis="percent", rule="1.5 %")
    got = render_notice(Renderer(None, company="Acme"), customer_name="Ana", customer_locale=locale,
                        business_date=date(2026, 2, 1), rows=rows, fees={1: fee})
    for part in (got.text, got.html):
        assert part.count(late_fee) >= 1 and totals in part, (locale, part)
    assert "A late fee has been added" not in got.text or locale == "en_US"
    plain = render_notice(Renderer(None, company="Acme"), customer_name="Ana", customer_locale=locale,
                          business_date=date(2026, 2, 1), rows=rows)
    assert late_fee not in plain.text and totals not in plain.text and late_fee not in plain.html



def _with_files(tmp_path: Path, **attachments: Any) -> tuple[Policy, Path]:
    pdfs = tmp_path / "pdfs"
    pdfs.mkdir(exist_ok=True)
    for number in ("INV-1", "INV-2", "INV-3"):
        (pdfs / f"{number}.pdf").write_bytes(b"%PDF-1.4\n% " + number.encode() + b"\n" + os.urandom(2000)
                                             + b"\n%%EOF\n")
    data = {"reminders": {"stages": [1, 7, 30], "collapse": "highest", "group": "customer"},
            "stage": {"30": {"fee": {"percent": 1.5}}},
            "attachments": {"invoice_pdf": True, "pdf_dir": str(pdfs), "statement": "final", **attachments}}
    return policy_from_dict(data, "oncebeat.toml"), pdfs


def test_a_notice_carries_each_listed_invoice_pdf_and_one_statement_frozen_once(
        store: Store, sim_clock: SimulatedClock, sink: MailSink, tmp_path: Path) -> None:
    policy, pdfs = _with_files(tmp_path)
    book = GroupedBook(store, sim_clock, policy, sink)
    book.three()
    sink.faults.fail_next(1, 451, "4.3.0 try later")  # frozen with its files, then refused
    try:
        book.next_scan()
        (pdfs / "INV-2.pdf").write_bytes(b"%PDF-1.4 replaced after the first attempt\n%%EOF\n")  # never re-read
        sim_clock.advance(600)
        book.drain()
    finally:
        book.close()
    [msg] = _customer_mails(tmp_path)
    files = [(p.get_filename(), p.get_content()) for p in msg.iter_attachments()]
    assert [name for name, _ in files][:3] == ["INV-1.pdf", "INV-2.pdf", "INV-3.pdf"]
    assert len(files) == 4 and files[3][0].startswith("statement-")  # ONE statement for the notice (INV-1 is final)
    assert b"replaced" not in files[1][1] and all(data.startswith(b"%PDF-") for _, data in files)
    from oncebeat.reminders.notices.sending import attachment_digests  # noqa: PLC0415

    digests = attachment_digests(store)
    rows = store.read("list_reminders")
    assert {r["state"] for r in rows} == {"sent"}
    sent = [hashlib.sha256(data).hexdigest() for _, data in files]
    assert all(digests[int(r["id"])] == sent for r in rows)  # each row keeps the files its notice carried
    assert [f[0] for f in book.fees()] == ["INV-1"]  # fees and files together


def test_a_notice_whose_files_pass_the_size_limit_fails_naming_the_invoice_and_sends_nothing(
        store: Store, sim_clock: SimulatedClock, sink: MailSink, tmp_path: Path) -> None:
    policy, _ = _with_files(tmp_path, max_attachment_bytes=5000)  # two PDFs of ~2 kB fit, the third does not
    book = GroupedBook(store, sim_clock, policy, sink)
    book.three()
    try:
        book.next_scan()
    finally:
        book.close()
    assert _customer_mails(tmp_path) == []
    rows = store.read("list_reminders")
    assert {r["state"] for r in rows} == {"failed"} and book.fees() == []
    reason = rows[0]["reason"]
    assert "INV-3" in reason and "max_attachment_bytes" in reason, reason
