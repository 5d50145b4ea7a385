"""compose_message: the builder's own header facts say exactly what a reader of its bytes says.

The proof of notice records the decoded headers of the bytes that went out; the send takes them from the builder
(:func:`oncebeat.mail.compose.compose_message`) instead of parsing them back. Every generated message below is read both
ways: the builder's facts, :func:`message_facts` of its bytes and the email package's registry must agree.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta, timezone

import pytest

from oncebeat.mail import build_message_envelope
from oncebeat.mail.compose import compose_message
from oncebeat.reminders.notices.digest import _headers_registry, composed_facts, message_facts

NAMES = ["Ana", "Zoë Müller", "Müller, Zoë", 'Zoë "Zo" Müller', "Zoë\tMüller", "Zoë  Müller", "Zoë (Büro)",
         "李小龙", "J. Smith", "Smith, John", "a  b", "Bill (accounts)", "=?utf-8?q?x?=", "Zoë =?utf-8?q?x?=",
         "Ünïcödé " * 12, "back\\slash é", "Ω", ""]
SUBJECTS = ["Invoice INV-1 is overdue", "Rechnung 536365-3 ist seit 10 Tagen überfällig",
            "Reminder: " + "word " * 40, "請支付發票", "Tabs\tand (comments) and \"quotes\" é",
            "=?not really?= ü", "x" * 950, "Ä" * 200, ""]
ADDRESSES = ["c1@example.com", "zoe@bücher.example", "o'brien+tag@example.co.uk"]


def _compare(**kwargs: object) -> None:
    composed = compose_message(**kwargs)  # type: ignore[arg-type]
    data, envelope = build_message_envelope(**kwargs)  # type: ignore[arg-type]
    assert composed.data == data
    assert composed.envelope == envelope
    facts = composed_facts(composed)
    assert facts == message_facts(data)
    assert facts["headers"] == _headers_registry(data)


@pytest.mark.parametrize(("name", "subject"), list(itertools.product(NAMES, SUBJECTS)))
def test_the_builders_facts_are_the_readers(name: str, subject: str) -> None:
    to = f"{name} <c1@example.com>" if name else "c1@example.com"
    _compare(sender=f"{name or 'Billing'} <billing@example.com>", to=to, subject=subject, text="Hello\n",
             html="<p>Hello</p>", message_id="<reminder-INV-1-7.abc@example.com>",
             reply_to=f"{name} <ar@example.com>" if name else None, date=datetime(2026, 3, 2, 8, tzinfo=UTC),
             cc=["cfo@example.com", f"{name} <c2@example.com>" if name else "c2@example.com"], bcc=["x@example.com"],
             headers={"X-Oncebeat-Invoice": subject[:40] or "INV-1", "X-Oncebeat-Stage": "7",
                      "X-Oncebeat-Fee": "EUR 1500 fixed"})


@pytest.mark.parametrize(("address", "html", "when"), list(itertools.product(
    ADDRESSES, [None, "<p>Grüße</p>"],
    [datetime(2026, 3, 2, 8, 0, 7, 123456, tzinfo=UTC), datetime(2026, 12, 31, 23, 59, tzinfo=timezone(
        timedelta(hours=-3, minutes=-30)))])))
def test_addresses_bodies_and_dates(address: str, html: str | None, when: datetime) -> None:
    _compare(sender="Billing <billing@example.com>", to=f"Zoë Müller <{address}>", subject="Grüße",
             text="Hallo Zoë\n" * 3, html=html, message_id="<r.1@example.com>", date=when)


def test_a_non_ascii_local_part_is_read_from_its_bytes() -> None:
    composed = compose_message(sender="Billing <billing@example.com>", to="Jürgen <jürgen@example.com>",
                               subject="Grüße", text="x", html=None, message_id="<r.2@example.com>",
                               date=datetime(2026, 3, 2, 8, tzinfo=UTC))
    assert composed.fields == ()  # built by the email package (SMTPUTF8): nothing vouched for
    assert composed_facts(composed) == message_facts(composed.data)
    assert composed.envelope.utf8


def test_the_builder_vouches_for_the_non_ascii_values() -> None:
    composed = compose_message(sender="Billing <billing@example.com>", to="Müller, Zoë <zoe@example.com>",
                               subject="Rechnung überfällig", text="x", html=None, message_id="<r.3@example.com>",
                               date=datetime(2026, 3, 2, 8, tzinfo=UTC))
    known = {name: k for name, _, k in composed.fields}
    assert known["To"] == '"Müller, Zoë" <zoe@example.com>'
    assert known["Subject"] == "Rechnung überfällig"
    assert known["From"] is None  # plain ASCII: read from its raw value
