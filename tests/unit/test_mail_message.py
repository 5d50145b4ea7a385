"""Building reminder emails: structure, encodings, injection safety, Message-IDs.

Round trips go through a real aiosmtpd server (:class:`MailSink`) into a
Maildir; nothing about SMTP is mocked.
"""

from __future__ import annotations

import email.policy
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from email import message_from_bytes
from email.headerregistry import Address
from pathlib import Path

import pytest

from oncebeat.errors import PermanentMailError
from oncebeat.mail import (
    MailSink,
    Mailer,
    build_message,
    make_message_id,
    parse_address,
    read_maildir,
    sanitize_header_text,
)

SENDER = '"Billing" <billing@example.com>'
WHEN = datetime(2026, 3, 9, 8, 0, tzinfo=UTC)


def message(**overrides: object):
    fields: dict[str, object] = {
        "sender": SENDER,
        "to": '"Zoë Müller" <zoe@example.com>',
        "subject": "Invoice INV-7 is overdue",
        "text": "Hello Zoë,\nplease pay INV-7.\n",
        "html": "<p>Hello Zoë,</p><p>please pay INV-7.</p>",
        "message_id": make_message_id("reminder:INV-7:1", "example.com"),
        "date": WHEN,
    }
    fields.update(overrides)
    return build_message(**fields)  # type: ignore[arg-type]


@pytest.fixture
def sink(tmp_path: Path) -> Iterator[MailSink]:
    with MailSink(tmp_path / "mail") as running:
        yield running


def deliver(sink: MailSink, msg) -> str:
    with Mailer(sink.url, timeout=5) as mailer:
        return mailer.send(msg)


def stored_bytes(sink: MailSink) -> list[bytes]:
    out = []
    for sub in ("new", "cur"):
        for path in sorted((sink.maildir / sub).iterdir()):
            out.append(path.read_bytes())
    return out


# -- structure ------------------------------------------------------------------


def test_text_and_html_make_a_multipart_alternative_with_text_first() -> None:
    msg = message()
    assert msg.get_content_type() == "multipart/alternative"
    parts = list(msg.iter_parts())
    assert [p.get_content_type() for p in parts] == ["text/plain", "text/html"]
    assert parts[0].get_content() == "Hello Zoë,\nplease pay INV-7.\n"
    assert "<p>Hello Zoë,</p>" in parts[1].get_content()
    assert all(p["MIME-Version"] is None for p in parts)
    assert msg["MIME-Version"] == "1.0"


def test_a_message_without_html_is_plain_text() -> None:
    msg = message(html=None)
    assert msg.get_content_type() == "text/plain"
    assert msg.get_content() == "Hello Zoë,\nplease pay INV-7.\n"


def test_the_serialised_message_uses_crlf_and_is_seven_bit_clean() -> None:
    raw = message().as_bytes()
    assert raw.isascii()
    assert b"\r\n" in raw
    assert b"\n" not in raw.replace(b"\r\n", b"")


def test_date_comes_from_the_argument_and_a_naive_date_is_refused() -> None:
    msg = message(date=datetime(2026, 3, 9, 2, 0, tzinfo=timezone(timedelta(hours=-6))))
    assert msg["Date"].datetime == datetime(2026, 3, 9, 8, 0, tzinfo=UTC)
    with pytest.raises(ValueError, match="timezone-aware"):
        message(date=datetime(2026, 3, 9, 8, 0))


def test_without_a_date_the_header_is_the_current_time() -> None:
    msg = message(date=None)
    assert abs(msg["Date"].datetime - datetime.now(UTC)) < timedelta(minutes=1)


def test_reply_to_and_extra_headers_are_set() -> None:
    msg = message(reply_to="Support <help@example.com>", headers={"X-Oncebeat-Effect": "reminder:INV-7:1"})
    assert msg["Reply-To"].addresses[0].addr_spec == "help@example.com"
    assert msg["X-Oncebeat-Effect"] == "reminder:INV-7:1"


@pytest.mark.parametrize("name", ["Bcc", "to", "Message-ID", "Content-Type", "From"])
def test_extra_headers_cannot_override_structural_headers(name: str) -> None:
    with pytest.raises(ValueError, match="cannot be overridden"):
        message(headers={name: "x"})


@pytest.mark.parametrize("name", ["X Bad", "X:Bad", "", "X-Ümlaut"])
def test_an_invalid_extra_header_name_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="not a valid header name"):
        message(headers={name: "x"})


# -- addresses --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "name", "spec"),
    [
        ("zoe@example.com", "", "zoe@example.com"),
        ("Zoë Müller <zoe@example.com>", "Zoë Müller", "zoe@example.com"),
        ('"Zoë Müller" <zoe@example.com>', "Zoë Müller", "zoe@example.com"),
        ('"Müller, Zoë (Billing)" <zoe@example.com>', "Müller, Zoë (Billing)", "zoe@example.com"),
        ('"Say \\"hi\\"" <zoe@example.com>', 'Say "hi"', "zoe@example.com"),
        ("Zoë <zoe@bücher.example>", "Zoë", "zoe@xn--bcher-kva.example"),
        ("  zoe@EXAMPLE.com  ", "", "zoe@EXAMPLE.com"),
    ],
)
def test_mailboxes_are_parsed_strictly_and_domains_are_idna_encoded(text: str, name: str, spec: str) -> None:
    addr = parse_address(text)
    assert (addr.display_name, addr.addr_spec) == (name, spec)


def test_an_address_object_is_accepted_and_its_display_name_sanitised() -> None:
    # Address() itself refuses CR/LF but lets other line separators through.
    addr = parse_address(Address(display_name="Eve\u2028Bcc: x@example.com", username="eve", domain="example.com"))
    assert addr.display_name == "Eve Bcc: x@example.com"
    assert addr.addr_spec == "eve@example.com"


@pytest.mark.parametrize(
    "text",
    ["", "zoe", "zoe@", "@example.com", "a@b, c@d", "zoe@exa mple.com", "Zoë <zoe@example.com", "zoe@exa..mple.com"],
)
def test_invalid_mailboxes_raise_value_error_naming_the_field(text: str) -> None:
    with pytest.raises(ValueError, match="^to:"):
        message(to=text)


def test_a_display_name_that_looks_like_a_recipient_never_becomes_one() -> None:
    # Without quotes the email package would parse this as a group containing
    # evil@example.com; we only ever take the address in the last <...>.
    msg = message(to="Eve Bcc: evil@example.com <eve@example.com>")
    (addr,) = msg["To"].addresses
    assert addr.addr_spec == "eve@example.com"
    assert addr.display_name == "Eve Bcc: evil@example.com"


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("a\r\nBcc: x", "a Bcc: x"),
        ("a\nb\rc", "a b c"),
        ("a\u2028b\x0bc\x0cd\x85e\x00f", "a b c d e f"),
        ("  Grüße \t ok ", "Grüße \t ok"),
    ],
)
def test_header_text_loses_line_breaks_and_control_characters(raw: str, clean: str) -> None:
    assert sanitize_header_text(raw) == clean


# -- Message-ID -------------------------------------------------------------------


def test_the_same_key_always_gives_the_same_message_id() -> None:
    first = make_message_id("reminder:INV-2024-07:stage-1", "example.com")
    assert first == make_message_id("reminder:INV-2024-07:stage-1", "example.com")
    assert first.startswith("<reminder-inv-2024-07-stage-1.")
    assert first.endswith("@example.com>")


def test_different_keys_give_different_message_ids_even_with_the_same_slug() -> None:
    ids = {make_message_id(key, "example.com") for key in ("INV 7", "inv-7", "INV/7", "inv_7")}
    assert len(ids) == 4


def test_message_ids_stay_short_and_ascii_for_long_or_non_ascii_keys() -> None:
    long_id = make_message_id("x" * 500, "example.com")
    assert len(long_id) < 100
    unicode_id = make_message_id("Rechnung für Zoë", "bücher.example")
    assert unicode_id.isascii()
    assert unicode_id.endswith("@xn--bcher-kva.example>")
    assert make_message_id("ÄÖÜ", "example.com").startswith("<")  # slug may be empty


@pytest.mark.parametrize(("key", "domain"), [("", "example.com"), ("k", ""), ("k", "exa mple.com"), ("k", "[127.0.0.1]")])
def test_make_message_id_refuses_an_empty_key_or_bad_domain(key: str, domain: str) -> None:
    with pytest.raises(ValueError):
        make_message_id(key, domain)


@pytest.mark.parametrize("bad", ["no-brackets@example.com", "<no-at>", "<a b@example.com>", "<x@y>\r\nBcc: e@x"])
def test_build_message_refuses_a_malformed_message_id(bad: str) -> None:
    with pytest.raises(ValueError, match="message_id"):
        message(message_id=bad)


# -- round trips through a real SMTP server ---------------------------------------


def test_a_non_ascii_display_name_round_trips_through_the_sink_into_the_maildir(sink: MailSink) -> None:
    msg = message()
    reply = deliver(sink, msg)

    assert reply.startswith("250 ")
    (stored,) = read_maildir(sink.maildir)
    assert stored.message_id == make_message_id("reminder:INV-7:1", "example.com")
    assert stored.subject == "Invoice INV-7 is overdue"
    assert stored.to == "Zoë Müller <zoe@example.com>"
    assert stored.envelope_to == ("zoe@example.com",)
    assert stored.headers["From"] == "Billing <billing@example.com>"
    assert stored.key in reply

    (raw,) = stored_bytes(sink)
    parsed = message_from_bytes(raw, policy=email.policy.default)
    assert parsed.get_content_type() == "multipart/alternative"
    text, html = parsed.iter_parts()
    assert text.get_content() == "Hello Zoë,\nplease pay INV-7.\n"
    assert html.get_content_type() == "text/html"
    assert "<p>Hello Zoë,</p>" in html.get_content()


def test_crlf_in_name_and_subject_injects_no_bcc_and_does_not_crash(sink: MailSink) -> None:
    msg = message(
        to='"Zoë\r\nBcc: evil@example.com" <zoe@example.com>',
        subject="Overdue\r\nBcc: evil@example.com",
        headers={"X-Note": "a\r\nBcc: evil@example.com"},
    )
    deliver(sink, msg)

    (stored,) = read_maildir(sink.maildir)
    assert "Bcc" not in stored.headers
    assert stored.envelope_to == ("zoe@example.com",)
    assert stored.subject == "Overdue Bcc: evil@example.com"
    assert stored.headers["X-Note"] == "a Bcc: evil@example.com"
    (raw,) = stored_bytes(sink)
    assert b"\nBcc:" not in raw
    assert sink.accepted == 1


def test_lines_starting_with_a_dot_survive_smtp_transparency(sink: MailSink) -> None:
    body = ".\n..two dots\n.one dot\nend\n"
    deliver(sink, message(text=body, html=None))
    (raw,) = stored_bytes(sink)
    assert message_from_bytes(raw, policy=email.policy.default).get_content() == body


def test_a_non_ascii_domain_is_delivered_in_idna_form(sink: MailSink) -> None:
    deliver(sink, message(to="Zoë <zoe@bücher.example>"))
    (stored,) = read_maildir(sink.maildir)
    assert stored.envelope_to == ("zoe@xn--bcher-kva.example",)
    assert stored.to == "Zoë <zoe@xn--bcher-kva.example>"


def test_a_non_ascii_local_part_is_sent_with_smtputf8(sink: MailSink) -> None:
    deliver(sink, message(to="Jürgen <jürgen@example.com>"))
    (stored,) = read_maildir(sink.maildir)
    assert stored.envelope_to == ("jürgen@example.com",)
    assert stored.to == "Jürgen <jürgen@example.com>"
    (raw,) = stored_bytes(sink)
    assert "jürgen@example.com".encode() in raw  # raw UTF-8 header (RFC 6532)


def test_a_non_ascii_local_part_to_a_server_without_smtputf8_is_a_permanent_error(tmp_path: Path) -> None:
    with MailSink(tmp_path / "mail", smtputf8=False) as sink:
        with pytest.raises(PermanentMailError, match="SMTPUTF8") as info:
            deliver(sink, message(to="jürgen@example.com"))
        assert info.value.code is None  # type: ignore[attr-defined]
        assert sink.accepted == 0
        # An ASCII message still goes through that server.
        deliver(sink, message())
        assert sink.accepted == 1


def test_bidi_controls_and_invisible_format_characters_never_reach_a_header() -> None:
    """Issue 21 item 10: 'Zoë \\u202egnp.exe' would show as 'Zoë exe.png' in a mail client."""
    assert sanitize_header_text("Zoë \u202egnp.exe") == "Zoë gnp.exe"
    assert sanitize_header_text("\u2066INV-7\u2069 is over\u200bdue\u00ad") == "INV-7 is overdue"
    assert sanitize_header_text("Family \U0001f468\u200d\U0001f469") == "Family \U0001f468\u200d\U0001f469"
    msg = message(to=parse_address('"Zoë \u202egnp.exe" <zoe@example.com>', field="to"),
                  subject="Invoice \u202eINV-7 is overdue")
    parsed = message_from_bytes(bytes(msg), policy=email.policy.default)
    assert parsed["To"].addresses[0].display_name == "Zoë gnp.exe" and "\u202e" not in str(parsed["To"])
    assert str(parsed["Subject"]) == "Invoice INV-7 is overdue"
