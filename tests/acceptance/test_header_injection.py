"""Hostile header text (CVE-2024-6923 class) never becomes a header of a delivered reminder.

Python 3.11.0-3.11.9 and 3.12.0-3.12.4 decode an RFC 2047 encoded-word while re-parsing a header
and write the decoded CR/LF verbatim. Every payload below travels the real path: policy, import
data, template, ``build_message``, ``Mailer``, the aiosmtpd sink, and is read back from the Maildir.
"""

from __future__ import annotations

import base64
import email
import email.policy
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path

import pytest
from reminder_harness import FIRST_FIRE, Harness, invoice, maildir_sink

from oncebeat.mail.message import build_message, make_message_id, parse_address, sanitize_header_text
from oncebeat.reminders.model import Customer
from oncebeat.reminders.policy import Policy
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock


def _b_word(text: str) -> str:
    return "=?utf-8?b?" + base64.b64encode(text.encode()).decode() + "?="


NAME = _b_word("Bob\r\nReply-To: eve@example.test")
SENDER = '"=?utf-8?q?Billing=0D=0AX-Injected-Sender:_1?=" <billing@example.test>'
NUMBER = _b_word("INV-1\r\nX-Injected-Number: 1")
SUBJECT = "Pay now " + _b_word("x\r\nX-Injected-Subject: 1")
INJECTED = ("reply-to", "x-injected-sender", "x-injected-number", "x-injected-subject")


@pytest.fixture
def harness(store: Store, tmp_path: Path) -> Iterator[Harness]:
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "reminder_first.subject.j2").write_text(SUBJECT + " {{ invoice_number }}\n", encoding="utf-8")
    sink = maildir_sink(tmp_path)
    h = Harness(store=store, sink=sink, clock=SimulatedClock(FIRST_FIRE - timedelta(hours=1)),
                policy=Policy(sender=SENDER, templates=templates))
    yield h
    h.close()
    sink.stop()


def _delivered_headers(maildir: Path) -> list[email.message.Message]:
    files = sorted((maildir / "new").iterdir()) + sorted((maildir / "cur").iterdir())
    return [email.message_from_bytes(f.read_bytes(), policy=email.policy.compat32) for f in files]


def test_encoded_word_payloads_in_name_sender_subject_and_number_add_no_header(harness: Harness) -> None:
    customer = Customer(email="bob@example.test", name=NAME, locale="en_US", tz="America/Chicago")
    harness.add_invoices(invoice(NUMBER, date(2026, 3, 1), email="bob@example.test"), customers=(customer,))
    harness.tick_to(FIRST_FIRE)
    harness.new_worker().drain()
    assert [r["state"] for r in harness.reminders()] == ["sent"]
    [msg] = _delivered_headers(harness.sink.maildir)
    names = [k.lower() for k in msg]
    assert not set(names) & set(INJECTED), names
    assert names.count("to") == 1 and names.count("from") == 1 and names.count("subject") == 1
    assert "= ?utf-8?b?" in str(email.header.make_header(email.header.decode_header(msg["To"])))


@pytest.mark.parametrize("field", ["to", "sender", "subject", "header"])
def test_build_message_never_serialises_a_decoded_line_break(field: str) -> None:
    payload = _b_word("x\r\nX-Injected: 1")
    args = {"sender": "Billing <billing@example.test>", "to": "bob@example.test", "subject": "hello"}
    extra = {}
    if field == "to":
        args["to"] = f'"{payload}" <bob@example.test>'
    elif field == "sender":
        args["sender"] = f"{payload} <billing@example.test>"
    elif field == "subject":
        args["subject"] = payload
    else:
        extra = {"X-Oncebeat-Invoice": payload}
    msg = build_message(**args, text="hi", html=None, headers=extra,
                        message_id=make_message_id("k", "example.test"))
    parsed = email.message_from_bytes(msg.as_bytes(), policy=email.policy.compat32)
    assert "X-Injected" not in parsed


def test_encoded_words_are_broken_up_and_control_characters_become_spaces() -> None:
    assert sanitize_header_text("a=?utf-8?q?b?=\r\nc\x00d") == "a= ?utf-8?q?b?= c d"


@pytest.mark.parametrize("local", ["=?utf-8?q?a=0D=0AX-Injected:_1?=", "a\x01b"])
def test_a_local_part_holding_an_encoded_word_or_control_character_is_refused(local: str) -> None:
    with pytest.raises(ValueError, match="local part"):
        parse_address(email.headerregistry.Address(username=local, domain="example.test"))
