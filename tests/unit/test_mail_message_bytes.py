"""The direct message builder: the same message as the email package builds, without the email package.

:func:`build_message_bytes` must parse (``policy.default``) to the same headers and bodies as
``message_bytes(build_message(...))`` for every input, keep the header-injection defences, stay
valid MIME, and survive a real SMTP round trip into a Maildir.
"""

from __future__ import annotations

import base64
import email.policy
import email.utils
from collections.abc import Iterator
from datetime import UTC, datetime
from email import message_from_bytes
from pathlib import Path

import pytest

from oncebeat.mail import (
    Mailer,
    MailSink,
    build_message,
    build_message_bytes,
    build_message_envelope,
    make_message_id,
    message_bytes,
)
from oncebeat.mail.smtp import envelope_of_bytes

WHEN = datetime(2026, 3, 9, 8, 0, tzinfo=UTC)
HEADERS = ("From", "To", "Reply-To", "Subject", "Date", "Message-ID", "MIME-Version", "X-Oncebeat-Invoice")


def _b_word(text: str) -> str:
    return "=?utf-8?b?" + base64.b64encode(text.encode()).decode() + "?="


def fields(**overrides: object) -> dict[str, object]:
    out: dict[str, object] = {
        "sender": '"Billing" <billing@example.com>',
        "to": '"Zoë Müller" <zoe@example.com>',
        "subject": "Invoice INV-7 is overdue",
        "text": "Hello Zoë,\nplease pay INV-7.\n",
        "html": "<p>Hello Zoë,</p><p>please pay INV-7.</p>\n",
        "message_id": make_message_id("reminder:INV-7:1", "example.com"),
        "reply_to": "help@example.com",
        "headers": {"X-Oncebeat-Invoice": "INV-7"},
        "date": WHEN,
    }
    out.update(overrides)
    return out


CASES = {
    "reminder": {},
    "text only": {"html": None},
    "ascii bodies (7bit)": {"text": "Hello,\nplease pay.\n", "html": "<p>pay</p>"},
    "long german subject": {"subject": "Rechnung 536365-3 ist überfällig — bitte zahlen Sie jetzt den offenen Betrag "
                                       "von 1.234,50 € innerhalb von 7 Tagen"},
    "long ascii subject": {"subject": "Invoice 536365-3 is overdue " * 8},
    "long ascii name with specials": {"to": '"Müller, Zoë (Accounts Payable) and a very long department name here" '
                                            "<zoe@example.com>".replace("ü", "u").replace("ë", "e")},
    "name looking like a recipient": {"to": "Eve Bcc: evil@example.com <eve@example.com>"},
    "encoded-word payloads": {"to": '"' + _b_word("x\r\nX-Injected: 1") + '" <bob@example.com>',
                              "sender": f"{_b_word('Billing')} <billing@example.com>",
                              "subject": "Pay now " + _b_word("x\r\nBcc: a@example.com"),
                              "headers": {"X-Oncebeat-Invoice": _b_word("INV\r\nX-Injected: 1")}},
    "control characters": {"subject": "a\r\nBcc: evil@example.com\x00\u2028b", "to": "Bob\nX: 1 <bob@example.com>"},
    "idna domain": {"to": "Zoë <zoe@bücher.example>"},
    "dots, long lines and the boundary in a 7bit body": {
        "text": ".leading dot\n" + "x" * 200 + "\n--=_oncebeat_\n", "html": "<p>" + "y" * 990 + "</p>\n"},
    "cjk and emoji": {"subject": "請求書 INV-7 の支払期限が過ぎています 🙏" * 3, "to": "山田 太郎 <taro@example.com>",
                      "text": "山田様\n" * 50},
    "crlf and lone cr in the body": {"text": "a\r\nb\rc\n", "html": "<p>a</p>\r\n"},
}


def parsed(data: bytes) -> email.message.EmailMessage:
    return message_from_bytes(data, policy=email.policy.default)  # type: ignore[return-value]


@pytest.mark.parametrize("case", CASES)
def test_the_direct_bytes_parse_to_the_same_message_as_the_email_package_builds(case: str) -> None:
    args = fields(**CASES[case])
    direct = build_message_bytes(**args)  # type: ignore[arg-type]
    reference = parsed(message_bytes(build_message(**args)))  # type: ignore[arg-type]
    msg = parsed(direct)
    assert direct.isascii() and b"\r\n" in direct and b"\n" not in direct.replace(b"\r\n", b"")
    assert all(len(line) <= 998 for line in direct.split(b"\r\n"))
    for name in HEADERS:
        assert str(msg[name]) == str(reference[name]), name
    assert sorted(k.lower() for k in msg) == sorted(k.lower() for k in reference)
    assert msg.get_content_type() == reference.get_content_type()
    mine = list(msg.iter_parts()) if msg.is_multipart() else [msg]
    theirs = list(reference.iter_parts()) if reference.is_multipart() else [reference]
    assert [p.get_content_type() for p in mine] == [p.get_content_type() for p in theirs]
    assert [p.get_content() for p in mine] == [p.get_content() for p in theirs]
    assert [p.get_content_charset() for p in mine] == ["utf-8"] * len(mine)
    assert not msg.defects and not any(p.defects for p in mine)
    assert envelope_of_bytes(direct) == envelope_of_bytes(message_bytes(build_message(**args)))  # type: ignore[arg-type]
    # The envelope handed over with the bytes is the one the Mailer would read back from them.
    assert build_message_envelope(**args) == (direct, envelope_of_bytes(direct))  # type: ignore[arg-type]


@pytest.mark.parametrize("case", ["reminder", "long german subject", "cjk and emoji", "long ascii subject"])
def test_header_lines_stay_within_78_characters(case: str) -> None:
    direct = build_message_bytes(**fields(**CASES[case]))  # type: ignore[arg-type]
    head = direct.split(b"\r\n\r\n", 1)[0]
    assert max(len(line) for line in head.split(b"\r\n")) <= 78


@pytest.mark.parametrize("field", ["to", "sender", "subject", "header"])
def test_no_decoded_line_break_ever_becomes_a_header(field: str) -> None:
    payload = _b_word("x\r\nX-Injected: 1")
    over: dict[str, object] = {"to": f'"{payload}" <bob@example.com>'} if field == "to" else \
        {"sender": f"{payload} <billing@example.com>"} if field == "sender" else \
        {"subject": payload} if field == "subject" else {"headers": {"X-Oncebeat-Invoice": payload}}
    direct = build_message_bytes(**fields(**over))  # type: ignore[arg-type]
    for policy in (email.policy.compat32, email.policy.default):
        assert "X-Injected" not in message_from_bytes(direct, policy=policy)
    # decoded (policy.default unfolds and decodes encoded-words): no line break anywhere
    assert all("\r" not in str(v) and "\n" not in str(v) for v in parsed(direct).values())
    assert b"=?utf-8?b?eA0KWC1JbmplY3RlZDogMQ==?=" not in direct  # the payload never reaches the wire intact


def test_the_multipart_is_alternative_text_then_html_with_rfc5322_date_and_message_id() -> None:
    msg = parsed(build_message_bytes(**fields()))  # type: ignore[arg-type]
    assert msg.get_content_type() == "multipart/alternative"
    assert [p.get_content_type() for p in msg.iter_parts()] == ["text/plain", "text/html"]
    assert email.utils.parsedate_to_datetime(msg["Date"]) == WHEN
    assert msg["Message-ID"] == make_message_id("reminder:INV-7:1", "example.com")
    assert msg["MIME-Version"] == "1.0"


def test_a_non_ascii_local_part_is_built_by_the_email_package_for_smtputf8() -> None:
    args = fields(to="Jürgen <jürgen@example.com>")
    direct = build_message_bytes(**args)  # type: ignore[arg-type]
    msg = email.message_from_string(direct.decode("utf-8"), policy=email.policy.default)
    assert msg["To"].addresses[0].username == "jürgen"
    assert envelope_of_bytes(direct).utf8
    # (the email package draws a random MIME boundary: only the envelopes compare)
    assert build_message_envelope(**args)[1] == envelope_of_bytes(direct)  # type: ignore[arg-type]


def test_bad_input_is_refused_like_build_message() -> None:
    with pytest.raises(ValueError, match="message_id"):
        build_message_bytes(**fields(message_id="no-brackets@example.com"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cannot be overridden"):
        build_message_bytes(**fields(headers={"Bcc": "x@example.com"}))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="naive|timezone|aware"):
        build_message_bytes(**fields(date=datetime(2026, 3, 9, 8, 0)))  # type: ignore[arg-type]


@pytest.fixture
def sink(tmp_path: Path) -> Iterator[MailSink]:
    with MailSink(tmp_path / "mail") as running:
        yield running


def test_the_bytes_survive_smtp_into_the_maildir_unchanged(sink: MailSink) -> None:
    direct = build_message_bytes(**fields(**CASES["dots, long lines and the boundary in a 7bit body"]))  # type: ignore[arg-type]
    with Mailer(sink.url, timeout=5) as mailer:
        assert mailer.send(direct).startswith("250")
    [path] = [p for sub in ("new", "cur") for p in sorted((sink.maildir / sub).iterdir())]
    stored = parsed(path.read_bytes())
    sent = parsed(direct)
    def bodies(msg: email.message.EmailMessage) -> list[str]:  # the Maildir stores LF line endings
        return [p.get_content().replace("\r\n", "\n") for p in msg.iter_parts()]

    assert bodies(stored) == bodies(sent)
    assert stored["Subject"] == sent["Subject"] and stored["To"] == sent["To"]
