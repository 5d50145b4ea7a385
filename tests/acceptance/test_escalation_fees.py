"""Escalation and fees, once (issue 24 item 4): CC in the header, BCC on the envelope only, a late fee shown in the
notice and recorded once per (invoice, stage) whatever retries, resends, reruns and retry-failed happen, and one
internal notice per (invoice, final stage). Every email is read back from the real aiosmtpd sink as a mail client
reads it (``email`` package, ``policy=default``). Both backends."""

from __future__ import annotations

import email
import email.policy
import mailbox
from datetime import date, timedelta
from decimal import Decimal
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

from oncebeat.clock import ClockProcess
from oncebeat.effects import EffectLedger
from oncebeat.errors import ConfigError
from oncebeat.mail import Mailer, MailSink, read_maildir
from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.notices.escalation import FeeRule, fee_rule
from oncebeat.reminders.notices.fees import all_fees, fee_for
from oncebeat.reminders.notices.notify import NOTIFY_TASK, notify_key
from oncebeat.reminders.policy import Policy, load_policy, policy_from_dict
from oncebeat.reminders.service import SEND_TASK, ReminderService
from oncebeat.reminders.tasks import build_app
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock
from oncebeat.worker import Worker

# --------------------------------------------------------------------------- arithmetic, no database


@pytest.mark.parametrize(("rule", "amount_due", "fee"), [
    ({"fixed": 2500}, 1, 2500),
    ({"fixed": 2500}, 10_000_000, 2500),
    ({"percent": 1.5}, 123_456, 1852),  # 1851.84 -> 1852
    ({"percent": 1.5}, 100, 2),  # 1.5 -> 2 (half up)
    ({"percent": 1.5}, 99, 1),  # 1.485 -> 1
    ({"percent": 1.5, "cap": 5000}, 123_456, 1852),  # under the cap
    ({"percent": 1.5, "cap": 5000}, 1_000_000, 5000),  # 15000 capped at 5000
    ({"percent": 0.1}, 12_345, 12),  # 12.345 -> 12
    ({"percent": 0.1}, 12_355, 12),  # 12.355 -> 12 (.355 < .5)
    ({"percent": 2.5}, 30, 1),  # 0.75 -> 1
    ({"percent": 2.5}, 19, 0),  # 0.475 -> 0: no fee at all
    ({"percent": 100}, 4321, 4321),
    ({"percent": 0.0001}, 10**12, 1_000_000),
])
def test_a_fee_is_exact_minor_unit_arithmetic_rounded_half_up_and_capped(rule: dict[str, Any], amount_due: int,
                                                                          fee: int) -> None:
    assert fee_rule(rule).amount(amount_due) == fee
    got = fee_for(fee_rule(rule), amount_due=amount_due, currency="EUR")
    assert (got.amount if got else 0) == fee


def test_a_percent_is_the_decimal_as_written_never_a_float() -> None:
    assert fee_rule({"percent": 1.1}).percent == Decimal("1.1")
    assert FeeRule(percent=Decimal("1.1")).amount(5_000_000_000_000_000) == 55_000_000_000_000  # exact, no 0.1 drift
    assert fee_for(fee_rule({"fixed": 300}), amount_due=500, currency="JPY").currency == "JPY"  # type: ignore[union-attr]


# --------------------------------------------------------------------------- the policy refuses bad input


@pytest.mark.parametrize(("data", "names"), [
    ({"stage": {"30": {"cc": ["owner@example.com\r\nBcc: eve@evil.example"]}}}, ["[stage.30] cc[0]", "line break"]),
    ({"stage": {"30": {"bcc": "a@example.com\nX-Evil: 1"}}}, ["[stage.30] bcc", "line break"]),
    ({"stage": {"30": {"cc": ["Owner <owner@example.com>\u2028X: y"]}}}, ["[stage.30] cc[0]", "line break"]),
    ({"stage": {"30": {"cc": ["not-an-address"]}}}, ["[stage.30] cc[0]", "not a valid email address"]),
    ({"stage": {"30": {"cc": ["x@example.com", 7]}}}, ["[stage.30] cc[1]", "must be a string"]),
    ({"reminders": {"notify_final": "team@example.com\r\nBcc: eve@evil.example"}},
     ["[reminders] notify_final", "line break"]),
    ({"reminders": {"notify_final": "team@localhost"}}, ["[reminders] notify_final", "not a valid email address"]),
    ({"stage": {"30": {"fee": {"fixed": 10, "percent": 1}}}}, ["[stage.30] fee", "exactly one of fixed and percent"]),
    ({"stage": {"30": {"fee": {"fixed": 2500, "cap": 10}}}}, ["[stage.30] fee", "cap with a fixed fee"]),
    ({"stage": {"30": {"fee": {"percent": 150}}}}, ["[stage.30] fee", "at most 100"]),
    ({"stage": {"30": {"fee": {"fixed": 12.5}}}}, ["[stage.30] fee", "whole number of minor units"]),
    ({"stage": {"30": {"fee": {"percent": 1, "cap": 0}}}}, ["[stage.30] fee", "cap = 0"]),
    ({"stage": {"31": {"fee": {"fixed": 1}}}}, ["[stage.31]", "stages [1, 7, 14, 30] do not have"]),
    ({"stage": {"thirty": {"fee": {"fixed": 1}}}}, ["[stage.thirty]", "not a stage number"]),
    ({"stage": {"30": {"fees": {"fixed": 1}}}}, ["[stage.30] fees is not a known key"]),
    ({"ladders": [{"name": "big", "match": {"currency": "EUR"}, "stages": [7, 45],
                   "stage": {"45": {"cc": ["a@example.com\r\nX: 1"]}}}]},
     ["[[ladders]][1] (big) stage.45 cc[0]", "line break"]),
    ({"ladders": [{"name": "big", "match": {"currency": "EUR"}, "stages": [7, 45],
                   "stage": {"30": {"fee": {"fixed": 1}}}}]}, ["[[ladders]][1] (big) stage.30", "[7, 45] do not have"]),
])
def test_a_bad_address_or_a_line_break_in_any_new_field_is_refused_at_start_naming_it(
        data: dict[str, Any], names: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        policy_from_dict(data, "oncebeat.toml")
    text = str(info.value)
    assert text.startswith("oncebeat.toml: "), text
    for part in names:
        assert part in text, text


def test_a_policy_file_with_a_crlf_in_a_cc_address_is_refused_with_its_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "oncebeat.toml"
    path.write_text('[reminders]\nstages = [7, 30]\n\n[stage.30]\n'
                    'cc = ["owner@example.com\\r\\nBcc: eve@evil.example"]\n'
                    'fee = { percent = 1.5, cap = 5000 }\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_policy(path)
    assert str(info.value).startswith(f"{path}: line 5: [stage.30] cc[0]") and "line break" in str(info.value)
    path.write_text(path.read_text().replace("\\r\\nBcc: eve@evil.example", ""), encoding="utf-8")
    [esc] = load_policy(path).escalation
    assert esc.cc == ("owner@example.com",) and esc.fee == FeeRule(percent=Decimal("1.5"), cap=5000)


def test_a_ladder_without_stage_tables_takes_the_default_escalation_of_the_stages_it_shares() -> None:
    from oncebeat.reminders.ladders import ladders_of

    pol = policy_from_dict({"reminders": {"stages": [7, 30]},
                            "stage": {"7": {"cc": ["o@example.com"]}, "30": {"fee": {"fixed": 100}}},
                            "ladders": [{"name": "short", "match": {"currency": "JPY"}, "stages": [30, 60]},
                                        {"name": "own", "match": {"currency": "CHF"},
                                         "stage": {"7": {"fee": {"percent": 2}}}}]})
    got = {s.name: [e.to_json() for e in s.escalation] for s, _ in ladders_of(pol)}
    assert got == {"short": [{"stage": 30, "fee": {"fixed": 100}}],
                   "own": [{"stage": 7, "fee": {"percent": "2"}}],
                   "default": [{"stage": 7, "cc": ["o@example.com"]}, {"stage": 30, "fee": {"fixed": 100}}]}


def test_a_ladder_without_escalation_keeps_its_content_hash() -> None:
    from oncebeat.reminders.ladders import ladders_of

    [(plain, _)] = ladders_of(Policy())
    assert "escalation" not in plain.to_json(), "versions recorded before escalation existed stay current"


@pytest.mark.parametrize("hostile", ["Eve\r\nBcc: spy@evil.example <eve@example.com>",
                                     "Eve\nX-Evil: 1 <eve@example.com>",
                                     "=?utf-8?q?Eve=0D=0ABcc:_x?= <eve@example.com>",
                                     "Eve\u2028To: spy@evil.example <eve@example.com>"])
def test_no_header_can_be_injected_through_a_cc_or_bcc_mailbox_as_a_mail_client_reads_it(hostile: str) -> None:
    from oncebeat.mail import build_message_envelope, make_message_id  # noqa: PLC0415

    data, envelope = build_message_envelope(
        sender="Billing <billing@example.com>", to="Zoë <zoe@example.com>", subject="Invoice INV-1 is overdue",
        text="Hello", html="<p>Hello</p>", message_id=make_message_id("reminder:INV-1:30", "example.com"),
        cc=[hostile], bcc=[hostile.replace("eve@", "hidden@")])
    msg = parsed(data)
    assert [a.addr_spec for a in msg["Cc"].addresses] == ["eve@example.com"]
    assert msg["Bcc"] is None and msg["X-Evil"] is None and [a.addr_spec for a in msg["To"].addresses] == [
        "zoe@example.com"]
    assert b"hidden@" not in data  # the BCC mailbox is in no header and no body
    assert set(msg.keys()) == {"From", "To", "Cc", "Subject", "Date", "Message-ID", "MIME-Version", "Content-Type"}
    assert envelope.recipients == ("zoe@example.com", "eve@example.com", "hidden@example.com")
    assert msg.get_content_type() == "multipart/alternative"


# --------------------------------------------------------------------------- sending, both backends

OWNER, COLLECTIONS, TEAM = "owner@example.com", "collections@example.com", "team@example.com"


def escalating(**reminders: Any) -> Policy:
    return policy_from_dict({
        "reminders": {"stages": [1, 7, 30], "collapse": "next", **reminders},
        "stage": {"7": {"cc": [f"Account Owner <{OWNER}>"], "fee": {"fixed": 2500}},
                  "30": {"cc": [OWNER], "bcc": [COLLECTIONS], "fee": {"percent": 1.5, "cap": 5000}}},
    }, "oncebeat.toml")


def parsed(data: bytes) -> EmailMessage:
    msg = email.message_from_bytes(data, policy=email.policy.default)
    assert isinstance(msg, EmailMessage)
    return msg


def delivered(maildir: Path) -> list[EmailMessage]:
    return [parsed(m.as_bytes()) for m in mailbox.Maildir(maildir, factory=None)]


class Book:
    """A service on one store with a real sink; ``day(n)`` runs the scan of day n and drains the worker."""

    def __init__(self, store: Store, clock: SimulatedClock, pol: Policy, sink: MailSink) -> None:
        self.store, self.clock, self.policy, self.sink = store, clock, pol, sink
        self.mailer = Mailer(sink.url)
        self.service = ReminderService(store, pol, clock=clock, mailer=self.mailer)
        self.app = build_app(self.service)
        self.clk = ClockProcess(self.app, store, clock=clock)
        self.clk.start()

    def add(self, number: str, due_on: date, amount: int, currency: str = "EUR", locale: str = "en_US") -> None:
        self.service.upsert([Customer(email=f"{number.lower()}@example.com", name=f"Cust {number}", locale=locale)],
                            [Invoice(number=number, customer_email=f"{number.lower()}@example.com", currency=currency,
                                     amount_due=amount, issued_on=due_on - timedelta(days=30), due_on=due_on)])

    def next_scan(self) -> None:
        self.clock.set(self.app.schedules["reminders"].schedule().next_after(self.clock.now()))
        self.clk.tick()
        self.drain()

    def drain(self) -> None:
        Worker(self.app, self.store, clock=self.clock).drain()

    def fees(self) -> list[tuple[str, int, int, str, str]]:
        return [(f["number"], f["stage"], f["amount"], f["currency"], f["basis"]) for f in all_fees(self.store)]

    def close(self) -> None:
        self.mailer.close()


@pytest.fixture
def sink(tmp_path: Path) -> Any:
    s = MailSink(tmp_path / "maildir").start()
    yield s
    s.stop()


def test_cc_is_a_header_bcc_only_an_envelope_recipient_and_the_fee_is_shown_and_recorded_once(
        store: Store, sim_clock: SimulatedClock, sink: MailSink, tmp_path: Path) -> None:
    book = Book(store, sim_clock, escalating(collapse="highest"), sink)
    today = sim_clock.now().date()
    book.add("INV-1", today - timedelta(days=40), 123_456)  # stage 30: 1.5 % = 1851.84 -> 1852
    book.add("INV-2", today - timedelta(days=40), 1_000_000)  # stage 30: 15000 capped at 5000
    book.add("INV-3", today - timedelta(days=8), 99_00, locale="de_DE")  # stage 7: fixed 25,00
    book.add("INV-4", today - timedelta(days=2), 50_00)  # stage 1: no escalation
    try:
        book.next_scan()
    finally:
        book.close()
    assert sorted(book.fees()) == [("INV-1", 30, 1852, "EUR", "percent"), ("INV-2", 30, 5000, "EUR", "percent"),
                                   ("INV-3", 7, 2500, "EUR", "fixed")]
    got = {m["X-Oncebeat-Invoice"]: m for m in delivered(tmp_path / "maildir")}
    stored = {m.headers["X-Oncebeat-Invoice"]: m for m in read_maildir(tmp_path / "maildir")}
    one, two, three, four = got["INV-1"], got["INV-2"], got["INV-3"], got["INV-4"]
    assert [a.addr_spec for a in one["Cc"].addresses] == [OWNER]
    assert one["Bcc"] is None and COLLECTIONS not in one.as_string().replace(
        f"Delivered-To: {COLLECTIONS}", ""), "the BCC address appears nowhere in what the customer gets"
    assert set(stored["INV-1"].envelope_to) == {"inv-1@example.com", OWNER, COLLECTIONS}
    assert set(stored["INV-3"].envelope_to) == {"inv-3@example.com", OWNER}
    assert stored["INV-4"].envelope_to == ("inv-4@example.com",) and four["Cc"] is None
    assert three["Cc"].addresses[0].display_name == "Account Owner"
    for msg, fee, total in ((one, "€18.52", "€1,253.08"), (two, "€50.00", "€10,050.00")):
        assert msg.get_content_type() == "multipart/alternative"
        text, html = msg.iter_parts()
        assert text.get_content_type() == "text/plain" and html.get_content_type() == "text/html"
        body = text.get_content().replace("\u00a0", " ")
        assert "Late fee:" in body and fee in body and total in body, body
        assert fee in html.get_content().replace("\u00a0", " ")
    assert "Mahngebühr" in three.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    assert "25,00" in three.get_body(("plain",)).get_content().replace("\u00a0", " ")  # type: ignore[union-attr]
    assert one["X-Oncebeat-Fee"] == "1852 EUR percent 1.5 % (cap 5000)"
    assert "Late fee" not in four.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    # The proof of notice names the fee with its stage, and the sent headers (Cc, the fee) it carried.
    from oncebeat.reminders.notices.evidence import build_evidence, summary_lines  # noqa: PLC0415

    record = build_evidence(book.service, "INV-1", database="test")
    [stage] = [s for s in record.data["stages"] if s["stage"] == 30]
    assert stage["fee"]["amount_minor"] == 1852 and stage["fee"]["basis"] == "percent"
    assert stage["fee"]["amount"] == "€18.52" and stage["fee"]["rule"] == "1.5 % (cap 5000)"
    headers = dict((k, v) for k, v in stage["message"]["headers"])
    assert headers["Cc"] == OWNER and "Bcc" not in headers and headers["X-Oncebeat-Fee"].startswith("1852 EUR")
    assert any("late fee €18.52" in line for line in summary_lines(record))
    assert build_evidence(book.service, "INV-4", database="test").data["stages"][0]["fee"] is None


def test_a_retry_a_second_send_job_a_rerun_and_retry_failed_never_add_a_second_fee(
        store: Store, sim_clock: SimulatedClock, sink: MailSink, tmp_path: Path) -> None:
    book = Book(store, sim_clock, escalating(collapse="highest"), sink)
    today = sim_clock.now().date()
    book.add("INV-1", today - timedelta(days=40), 200_000)
    sink.faults.fail_next(1, 451, "4.3.0 try later")  # the first attempt freezes the notice, then the relay refuses it
    try:
        book.next_scan()
        [r] = store.read("reminders_page", number=None, email=None, state=None, after_id=0, limit=10)
        assert r["state"] == "pending" and book.fees() == [], "no fee before the stage is sent"
        # The invoice grows meanwhile: the retry sends the frozen notice, and the fee it showed is the one recorded.
        book.service.upsert([], [Invoice(number="INV-1", customer_email="inv-1@example.com", currency="EUR",
                                         amount_due=900_000, issued_on=today - timedelta(days=70),
                                         due_on=today - timedelta(days=40))])
        sim_clock.advance(600)
        book.drain()
        assert book.fees() == [("INV-1", 30, 3000, "EUR", "percent")]  # 1.5 % of 200000, as the frozen notice said
        # A second send job for the same reminder, a rerun of the scan, an operator's retry-failed: nothing new.
        Queue(store, clock=sim_clock, source=current_source("cli")).enqueue(
            SEND_TASK, {"reminder_id": r["id"]}, max_attempts=3)
        book.drain()
        book.next_scan()
        assert book.service.retry_failed(source=current_source("cli")) == []
        book.drain()
    finally:
        book.close()
    assert book.fees() == [("INV-1", 30, 3000, "EUR", "percent")]
    [msg] = [m for m in delivered(tmp_path / "maildir") if m["X-Oncebeat-Invoice"] == "INV-1"]
    assert msg["X-Oncebeat-Fee"].startswith("3000 EUR percent")
    [stored] = read_maildir(tmp_path / "maildir")  # the retry sent the first attempt's bytes: BCC still on
    assert set(stored.envelope_to) == {"inv-1@example.com", OWNER, COLLECTIONS} and "Bcc" not in stored.headers
    assert msg["Date"] != "" and stored.headers["Date"] == msg["Date"]


def test_a_failed_stage_retried_by_the_operator_records_its_fee_once(
        store: Store, sim_clock: SimulatedClock, sink: MailSink, tmp_path: Path) -> None:
    book = Book(store, sim_clock, escalating(collapse="highest"), sink)
    today = sim_clock.now().date()
    book.add("INV-1", today - timedelta(days=8), 10_000)  # stage 7: fixed 2500
    sink.faults.fail_next(1, code=550, text="5.1.1 mailbox unavailable")  # refused for good: failed, no fee
    try:
        book.next_scan()
        assert [r["state"] for r in store.read("list_reminders")] == ["failed"] and book.fees() == []
        assert len(book.service.retry_failed(source=current_source("cli"))) == 1
        book.drain()
        assert book.service.retry_failed(source=current_source("cli")) == []  # sent: never put back
        book.drain()
        book.next_scan()
    finally:
        book.close()
    assert [r["state"] for r in store.read("list_reminders")] == ["sent"]
    assert book.fees() == [("INV-1", 7, 2500, "EUR", "fixed")]


def test_an_in_doubt_notice_resolved_done_or_resent_records_its_fee_once(
        store: Store, sim_clock: SimulatedClock, sink: MailSink, tmp_path: Path) -> None:
    book = Book(store, sim_clock, escalating(collapse="highest"), sink)
    today = sim_clock.now().date()
    book.add("INV-1", today - timedelta(days=40), 100_000)
    book.add("INV-2", today - timedelta(days=40), 300_000)
    sink.faults.drop_before_reply_next(2)  # the final dot went out, no reply: both in doubt, never resent blindly
    try:
        book.next_scan()
        ids = {r["number"]: r["id"] for r in store.read("reminders_page", number=None, email=None, state=None,
                                                          after_id=0, limit=10)}
        assert {r["state"] for r in store.read("list_reminders")} == {"in_doubt"} and book.fees() == []
        book.service.resolve_effect(f"reminder:{ids['INV-1']}", "done", source=current_source("cli"))
        book.service.resolve_effect(f"reminder:{ids['INV-2']}", "not_done", source=current_source("cli"))
        book.drain()  # INV-2 is sent again: its frozen bytes
        # a second decision on either key is refused (not in doubt any more)
        for key in (f"reminder:{ids['INV-1']}", f"reminder:{ids['INV-2']}"):
            with pytest.raises(Exception, match="not in doubt"):
                book.service.resolve_effect(key, "done", source=current_source("cli"))
        book.next_scan()
    finally:
        book.close()
    assert sorted(book.fees()) == [("INV-1", 30, 1500, "EUR", "percent"), ("INV-2", 30, 4500, "EUR", "percent")]
    assert [m["X-Oncebeat-Invoice"] for m in delivered(tmp_path / "maildir")] == ["INV-2"]


def test_the_internal_notice_of_a_final_stage_goes_out_once_naming_customer_invoice_amount_and_notice(
        store: Store, sim_clock: SimulatedClock, sink: MailSink, tmp_path: Path) -> None:
    team = f"Collections Team <{TEAM}>"
    book = Book(store, sim_clock, escalating(collapse="next", notify_final=team), sink)
    today = sim_clock.now().date()
    book.add("INV-1", today - timedelta(days=1), 100_000)
    try:
        for _ in range(35):  # a day at a time: stages 1, 7, then the final 30
            book.next_scan()
        sim_clock.advance(3600)
        book.drain()
        # the notify job again, by hand: the effect key holds it to one email
        [final] = [r for r in store.read("list_reminders") if r["stage"] == 30]
        Queue(store, clock=sim_clock, source=current_source("cli")).enqueue(
            NOTIFY_TASK, {"reminder_id": final["id"], "to": team}, max_attempts=2)
        book.drain()
    finally:
        book.close()
    mails = delivered(tmp_path / "maildir")
    internal = [m for m in mails if m["To"].addresses[0].addr_spec == TEAM]
    customer = [m for m in mails if m["To"].addresses[0].addr_spec == "inv-1@example.com"]
    assert sorted(int(m["X-Oncebeat-Stage"]) for m in customer) == [1, 7, 30]
    [note] = internal
    assert note.get_content_type() == "text/plain" and note["Cc"] is None
    body = note.get_content()
    assert "Cust INV-1 <inv-1@example.com>" in body and "INV-1" in body and "$" not in body
    assert "€1,000.00" in body.replace("\u00a0", " ") and final["message_id"] in body
    assert "€15.00 at stage 30" in body.replace("\u00a0", " ") and "€25.00 at stage 7" in body.replace("\u00a0", " ")
    assert note["X-Oncebeat-Notice"] == final["message_id"]
    row = EffectLedger(store, clock=sim_clock, source=current_source("cli")).get(notify_key(final["invoice_id"], 30))
    assert row is not None and row["state"] == "done"


def test_report_fees_is_the_export_a_team_posts_to_its_ledger_as_csv_json_and_text(
        store: Store, db_url: str, sim_clock: SimulatedClock, sink: MailSink, tmp_path: Path) -> None:
    from test_cli import oncebeat  # noqa: PLC0415  (a real subprocess, as a user runs it)

    book = Book(store, sim_clock, escalating(collapse="highest"), sink)
    today = sim_clock.now().date()
    book.add("INV-1", today - timedelta(days=40), 123_456)
    book.add("INV-2", today - timedelta(days=8), 5_000, currency="JPY")  # fixed 2500 yen: minor units of JPY
    book.add("INV-3", today - timedelta(days=8), 99_00)
    try:
        book.next_scan()
    finally:
        book.close()
    common = ("--db", db_url, "--from", "2026-03", "--to", "2026-03", "--as-of", "2026-03-31")
    out = oncebeat("report", "fees", "--csv", *common, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    import csv  # noqa: PLC0415
    import io  # noqa: PLC0415

    rows = {r["invoice"]: r for r in csv.DictReader(io.StringIO(out.stdout))}
    assert {n: (r["stage"], r["currency"], r["amount"], r["basis"]) for n, r in rows.items()} == {
        "INV-1": ("30", "EUR", "18.52", "percent"), "INV-2": ("7", "JPY", "2500", "fixed"),
        "INV-3": ("7", "EUR", "25.00", "fixed")}
    assert rows["INV-1"]["notice"].startswith("<reminder-inv-1-30.") and rows["INV-1"]["email"] == "inv-1@example.com"
    data = __import__("json").loads(oncebeat("report", "fees", "--json", *common, cwd=tmp_path).stdout)
    [table] = data["reports"]
    assert sorted((r["invoice"], r["amount"]) for r in table["rows"]) == [("INV-1", 1852), ("INV-2", 2500),
                                                                           ("INV-3", 2500)]
    assert "EUR: 2 fee(s), 4352 minor units in total." in table["notes"]
    text = oncebeat("report", "fees", *common, cwd=tmp_path)
    assert text.returncode == 0 and "Late fees recorded" in text.stdout and "¥2,500" in text.stdout, text.stdout
    empty = oncebeat("report", "fees", "--db", db_url, "--from", "2025-01", "--to", "2025-02", cwd=tmp_path)
    assert empty.returncode == 0 and "(no data in this period)" in empty.stdout
