"""message_facts reads header values as the email package's registry does, however it gets there.

The fast path (values the registry would hand back unchanged are copied) must never change what a proof of
notice says: every generated message and every hand-written header block below is compared with the registry's
reading of the same bytes.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest

from oncebeat.mail.message import build_message_envelope
from oncebeat.reminders.notices.digest import _headers_registry, message_facts

NAMES = ["Ana", "Zoë Müller", "J. Smith", "Smith, John", 'Anna "Nan" Lee', "李小龙", "O'Brien Ltd", "a  b",
         "Bill (accounts)", "Very Long Company Name Incorporated Worldwide Holdings " * 3, "=?utf-8?q?x?=", ""]
SUBJECTS = ["Invoice INV-1 is overdue", "Rechnung 536365-3 ist seit 10 Tagen überfällig",
            "Reminder: " + "word " * 40, "請支付發票", "Tabs\tand (comments) and \"quotes\"", "=?not really?="]


@pytest.mark.parametrize(("name", "subject"), list(itertools.product(NAMES, SUBJECTS)))
def test_generated_messages_read_as_the_registry_reads_them(name: str, subject: str) -> None:
    to = f"{name} <c1@example.com>" if name else "c1@example.com"
    data, _ = build_message_envelope(
        sender="Billing Team <billing@example.com>", to=to, subject=subject, text="Hello\n", html="<p>Hello</p>",
        message_id="<reminder-INV-1-7.abc@example.com>", reply_to="Accounts, Receivable <ar@example.com>",
        date=datetime(2026, 3, 2, 8, tzinfo=UTC), cc=["cfo@example.com", f"{name} <c2@example.com>"
                                                       if name else "c2@example.com"],
        headers={"X-Oncebeat-Invoice": "INV-1", "X-Oncebeat-Stage": "7", "X-Oncebeat-Fee": "EUR 1500 fixed"})
    assert message_facts(data)["headers"] == _headers_registry(data)


@pytest.mark.parametrize("head", [
    b"From: a@example.test\r\nSubject: Hi\r\n",
    b"From: A B <a@example.test>, c@example.test\r\nTo: undisclosed-recipients:;\r\n",
    b"Date: Mon, 2 Mar 2026 08:00:00 +0000\r\nDate: Mon, 02 Mar 2026 08:00:00 -0000\r\nDate: nonsense\r\n",
    b"Content-Type: text/plain; charset=\"utf-8\"\r\nContent-Type: multipart/mixed;\r\n boundary=\"x y\"\r\n",
    b"Content-Type: text/plain; name*=utf-8''%C3%A9.pdf\r\nContent-Disposition: attachment; filename=\"a.pdf\"\r\n",
    b"Subject: folded\r\n  twice\r\n\tand tabbed\r\nX-Empty:\r\nX-Spaces:   lead\r\n",
    b"Subject: =?utf-8?q?caf=C3=A9?= =?utf-8?q?_bar?=\r\nTo: =?utf-8?b?WsO2?= <z@example.test>\r\n",
    b"To: <a@example.test>\r\nTo: a@[127.0.0.1]\r\nTo: \"quoted\"@example.test\r\nCc: Group: a@example.test;\r\n",
    b"Message-ID: <a@b>\r\nMessage-ID: not an id\r\nMIME-Version: 1.0 (comment)\r\n",
    b"To: A.B <a@example.test>\r\nReply-To: a@example.test (comment)\r\nFrom: a@b@c\r\n",
    b"Subject: non-ascii \xc3\xa9 raw\r\n",
    b"Subject: bare LF\nTo: a@example.test\n",
    b" leading continuation\r\nSubject: x\r\n",
])
def test_hand_written_header_blocks_read_as_the_registry_reads_them(head: bytes) -> None:
    data = head + b"\r\nbody\r\n"
    assert message_facts(data)["headers"] == _headers_registry(data)


def test_the_digest_and_size_are_of_the_whole_bytes() -> None:
    data = b"From: a@example.test\r\nSubject: Hi\r\n\r\nbody"
    facts = message_facts(data)
    assert facts["size"] == len(data) == 41
    assert facts["headers"] == [["From", "a@example.test"], ["Subject", "Hi"]]
