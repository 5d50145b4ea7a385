"""SMTP delivery, URL parsing and the mail sink, against real aiosmtpd servers.

No SMTP behaviour is mocked: every test talks to a :class:`MailSink` on
127.0.0.1 (or to a closed port) over real sockets.
"""

from __future__ import annotations

import io
import logging
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from oncebeat.errors import ConfigError, MailError, PermanentMailError, TransientMailError
from oncebeat.mail import (
    Mailer,
    MailSink,
    SmtpUrl,
    build_message,
    build_message_envelope,
    count_by_header,
    make_message_id,
    parse_smtp_url,
    read_maildir,
    redact_url,
    serve_forever,
)
from oncebeat.mail.smtp import envelope_of_bytes

SECRET = "s3cr3t-Pa55"
SRC = Path(__file__).resolve().parents[2] / "src"


def message(n: int = 1, to: str = "Zoë Müller <zoe@example.com>", **extra: object):
    return build_message(
        sender="Billing <billing@example.com>",
        to=to,
        subject=f"Reminder {n}",
        text=f"Reminder number {n}\n",
        html=f"<p>Reminder number {n}</p>",
        message_id=make_message_id(f"reminder:INV-{n}:1", "example.com"),
        date=datetime(2026, 3, 9, 8, 0, tzinfo=UTC),
        **extra,  # type: ignore[arg-type]
    )


@pytest.fixture(params=[True, False], ids=["pipelining", "stepwise"])
def sink(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[MailSink]:
    """A sink offering PIPELINING (the Mailer sends MAIL, RCPT and DATA at once) or not (one at a time)."""
    with MailSink(tmp_path / "mail", pipelining=request.param) as running:
        yield running


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def attrs(exc: BaseException) -> tuple[int | None, str, str]:
    return exc.code, exc.reply, exc.stage  # type: ignore[attr-defined]


# -- SMTP_URL ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "security", "host", "port", "user", "password", "timeout"),
    [
        ("smtp://localhost", "plain", "localhost", 25, None, None, None),
        ("smtp://127.0.0.1:1025", "plain", "127.0.0.1", 1025, None, None, None),
        ("SMTP://Mail.Example.com:2525/", "plain", "mail.example.com", 2525, None, None, None),
        ("smtp+starttls://bob:pw@mail.example.com", "starttls", "mail.example.com", 587, "bob", "pw", None),
        ("smtp://bob:pw@mail.example.com?starttls=true", "starttls", "mail.example.com", 587, "bob", "pw", None),
        ("smtp://mx?starttls=false&timeout=2.5", "plain", "mx", 25, None, None, 2.5),
        ("smtps://bob@mail.example.com", "tls", "mail.example.com", 465, "bob", None, None),
        ("smtps://b%40ob:p%40ss%3Aw%2Fd@[::1]:4650?timeout=10", "tls", "::1", 4650, "b@ob", "p@ss:w/d", 10.0),
        ("  smtp://mx:26  ", "plain", "mx", 26, None, None, None),
    ],
)
def test_smtp_urls_parse_with_scheme_defaults_and_percent_decoding(
    url: str, security: str, host: str, port: int, user: str | None, password: str | None, timeout: float | None
) -> None:
    parsed = parse_smtp_url(url)
    assert parsed == SmtpUrl(security, host, port, user, password, timeout)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("localhost:25", "not a URL"),
        (f"http://bob:{SECRET}@mx", "unsupported scheme"),
        (f"smtp://bob:{SECRET}@", "no host"),
        (f"smtp://bob:{SECRET}@mx:notaport", "invalid port"),
        (f"smtp://bob:{SECRET}@mx:99999", "invalid port"),
        ("smtp://mx:0", "invalid port"),
        (f"smtp://bob:{SECRET}@mx/inbox", "unexpected path"),
        ("smtp://mx#frag", "fragment"),
        (f"smtp://bob:{SECRET}@mx?timeout=soon", "not a number"),
        ("smtp://mx?timeout=0", "positive"),
        ("smtp://mx?timeout=-1", "positive"),
        ("smtp://mx?starttls=maybe", "not a boolean"),
        (f"smtps://bob:{SECRET}@mx?starttls=true", "cannot be combined"),
        ("smtp+starttls://mx?starttls=false", "contradicts"),
        (f"smtp://bob:{SECRET}@mx?tls=yes", "unknown option"),
        (f"smtp://:{SECRET}@mx", "no user name"),
        ("smtp://b%C3%B6b:pw@mx", "must be ASCII"),
    ],
)
def test_bad_smtp_urls_raise_config_error_naming_smtp_url_without_the_password(url: str, problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_smtp_url(url)
    text = str(info.value)
    assert text.startswith("SMTP_URL")
    assert problem in text
    assert SECRET not in text


def test_a_bad_url_given_to_mailer_raises_config_error() -> None:
    with pytest.raises(ConfigError, match="SMTP_URL"):
        Mailer(f"smtpx://bob:{SECRET}@mx")


def test_str_and_repr_of_a_url_never_show_the_password() -> None:
    url = parse_smtp_url(f"smtp+starttls://bob:{SECRET}@mail.example.com?timeout=5")
    assert str(url) == "smtp+starttls://bob:***@mail.example.com:587?timeout=5"
    assert url.redacted() == str(url)
    assert repr(url) == "SmtpUrl('smtp+starttls://bob:***@mail.example.com:587?timeout=5')"
    assert SECRET not in f"{url} {url!r} {[url]} {url.__dict__.keys()}"
    mailer = Mailer(url)
    assert SECRET not in repr(mailer)
    assert str(parse_smtp_url("smtp://[::1]:25")) == "smtp://[::1]:25"
    assert str(parse_smtp_url("smtps://b%40ob@mx")) == "smtps://b%40ob@mx:465"


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        (f"connect smtp://bob:{SECRET}@mx:25 failed", "connect smtp://bob:***@mx:25 failed"),
        (f"a smtps://u:{SECRET}@h and smtp://v:x@k", "a smtps://u:***@h and smtp://v:***@k"),
        ("smtp://bob:p@ss@mx", "smtp://bob:***@mx"),
        ("postgresql://app:pw@db/x", "postgresql://app:***@db/x"),
        ("smtp://mx:25 and bob@example.com", "smtp://mx:25 and bob@example.com"),
        ("smtp://bob@mx:25", "smtp://bob@mx:25"),
        ("no scheme: a:b@c", "no scheme: a:***@c"),  # user:password@host without a scheme is masked too
        ("no credentials here: a@c b:c", "no credentials here: a@c b:c"),
    ],
)
def test_redact_url_masks_passwords_in_any_text(text: str, redacted: str) -> None:
    assert redact_url(text) == redacted


# -- delivery and connection reuse ---------------------------------------------------


def test_several_sends_reuse_one_connection_and_return_the_final_reply(sink: MailSink) -> None:
    with Mailer(sink.url) as mailer:
        replies = [mailer.send(message(n)) for n in range(1, 4)]
        assert mailer.connected
    assert sink.connections == 1
    assert sink.accepted == 3
    stored = read_maildir(sink.maildir)
    assert [s.subject for s in stored] == ["Reminder 1", "Reminder 2", "Reminder 3"]
    assert replies == [f"250 OK queued as {s.key}" for s in stored]


def test_with_two_connections_a_second_thread_sends_while_the_first_holds_one(sink: MailSink) -> None:
    holding, release = threading.Event(), threading.Event()

    def hold_one(mailer: Mailer) -> None:
        with mailer.reserved():
            mailer.send(message(1))
            holding.set()
            release.wait(10)

    with Mailer(sink.url, connections=2) as mailer:
        first = threading.Thread(target=hold_one, args=(mailer,))
        first.start()
        assert holding.wait(10)
        mailer.send(message(2))  # does not wait for the first thread's connection
        release.set()
        first.join(10)
        mailer.send(message(3))
    assert sink.accepted == 3 and sink.connections == 2


def test_with_one_connection_a_second_thread_waits_for_it(sink: MailSink) -> None:
    holding, release = threading.Event(), threading.Event()
    order: list[str] = []

    def hold_one(mailer: Mailer) -> None:
        with mailer.reserved():
            mailer.send(message(1))
            holding.set()
            release.wait(0.3)
            order.append("released")

    with Mailer(sink.url) as mailer:
        first = threading.Thread(target=hold_one, args=(mailer,))
        first.start()
        assert holding.wait(10)
        mailer.send(message(2))
        order.append("second sent")
        first.join(10)
    assert order == ["released", "second sent"]
    assert sink.accepted == 2 and sink.connections == 1


def test_a_mailer_needs_at_least_one_connection() -> None:
    with pytest.raises(ValueError, match="connections"):
        Mailer("smtp://127.0.0.1:1025", connections=0)


def test_a_closed_mailer_reconnects_on_the_next_send(sink: MailSink) -> None:
    mailer = Mailer(sink.url)
    mailer.send(message(1))
    mailer.close()
    assert not mailer.connected
    mailer.close()  # idempotent
    mailer.send(message(2))
    mailer.close()
    assert sink.connections == 2
    assert sink.accepted == 2


def test_a_connection_dropped_by_the_server_while_idle_is_replaced_transparently(
    sink: MailSink, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="oncebeat.mail")
    with Mailer(sink.url) as mailer:
        mailer.send(message(1))
        assert sink.drop_connections() == 1
        mailer.send(message(2))
    assert sink.accepted == 2
    assert sink.connections == 2
    assert "reconnecting" in caplog.text


def test_an_idle_timeout_on_the_server_is_survived(tmp_path: Path) -> None:
    with MailSink(tmp_path / "mail", idle_timeout=0.3) as sink, Mailer(sink.url) as mailer:
        mailer.send(message(1))
        time.sleep(0.8)  # the server closes the idle connection silently (no 421)
        mailer.send(message(2))
        assert sink.accepted == 2
        assert sink.connections == 2


def test_bcc_recipients_get_the_message_but_not_the_header(sink: MailSink) -> None:
    msg = message(1)
    msg["Cc"] = "Carol <carol@example.com>"
    msg["Bcc"] = "audit@example.com"
    with Mailer(sink.url) as mailer:
        mailer.send(msg)
    (stored,) = read_maildir(sink.maildir)
    assert stored.envelope_to == ("zoe@example.com", "carol@example.com", "audit@example.com")
    assert "Bcc" not in stored.headers
    assert msg["Bcc"] == "audit@example.com"  # the caller's message is untouched


def test_a_message_without_recipients_is_a_permanent_error(sink: MailSink) -> None:
    msg = message(1)
    del msg["To"]
    with Mailer(sink.url) as mailer, pytest.raises(PermanentMailError, match="no To/Cc/Bcc") as info:
        mailer.send(msg)
    assert attrs(info.value) == (None, "", "envelope")
    assert sink.connections == 0


# -- error classification ------------------------------------------------------------


def test_451_twice_then_success_gives_two_transient_errors_then_one_stored_message(sink: MailSink) -> None:
    sink.faults.fail_next(2, code=451, text="4.3.0 try later")
    outcomes: list[str] = []
    with Mailer(sink.url) as mailer:
        for _ in range(3):
            try:
                outcomes.append(mailer.send(message(1)))
            except TransientMailError as exc:
                assert attrs(exc) == (451, "4.3.0 try later", "DATA content")
                assert "451" in str(exc) and "try later" in str(exc)
                outcomes.append("transient")
    assert outcomes[:2] == ["transient", "transient"]
    assert outcomes[2].startswith("250 OK queued as ")
    assert sink.accepted == 1
    assert sink.rejected == 2
    assert sink.connections == 1  # an error reply does not cost the connection
    assert len(read_maildir(sink.maildir)) == 1


def test_a_5xx_reply_to_the_content_is_permanent(sink: MailSink) -> None:
    sink.faults.fail_next(1, code=554, text="5.7.1 message content rejected")
    with Mailer(sink.url) as mailer:
        with pytest.raises(PermanentMailError) as info:
            mailer.send(message(1))
        assert attrs(info.value) == (554, "5.7.1 message content rejected", "DATA content")
        mailer.send(message(2))
    assert sink.accepted == 1


def test_a_550_recipient_is_a_permanent_error_with_code_and_reply(sink: MailSink) -> None:
    sink.faults.reject_recipient("gone@example.com", code=550, text="5.1.1 no such user")
    with Mailer(sink.url) as mailer:
        with pytest.raises(PermanentMailError) as info:
            mailer.send(message(1, to="Gone <gone@example.com>"))
        code, reply, stage = attrs(info.value)
        assert (code, reply, stage) == (550, "5.1.1 no such user", "RCPT TO")
        assert "550" in str(info.value) and "no such user" in str(info.value)
        assert "gone@example.com" in str(info.value)
        mailer.send(message(2))  # the connection was reset and is reusable
    assert sink.accepted == 1
    assert sink.connections == 1


def test_a_4xx_recipient_is_a_transient_error(sink: MailSink) -> None:
    sink.faults.reject_recipient("busy@example.com", code=450, text="4.2.1 mailbox busy")
    with Mailer(sink.url) as mailer, pytest.raises(TransientMailError) as info:
        mailer.send(message(1, to="busy@example.com"))
    assert attrs(info.value) == (450, "4.2.1 mailbox busy", "RCPT TO")


def test_one_refused_recipient_of_two_means_nothing_is_sent(sink: MailSink) -> None:
    sink.faults.reject_recipient("GONE@example.com")
    msg = message(1)
    msg["Cc"] = "gone@example.com"
    with Mailer(sink.url) as mailer, pytest.raises(PermanentMailError, match="nothing sent"):
        mailer.send(msg)
    assert sink.accepted == 0
    sink.faults.accept_recipient("gone@example.com")
    with Mailer(sink.url) as mailer:
        mailer.send(msg)
    assert sink.accepted == 1


def test_a_recipient_refused_inside_a_pipelined_group_drops_the_connection_before_any_content(
        tmp_path: Path) -> None:
    # The sink answers 354 to the pipelined DATA because one recipient was accepted; RSET cannot be sent
    # inside DATA, so the client ends the transaction by dropping the connection: no final "." ever.
    with MailSink(tmp_path / "mail", pipelining=True) as sink:
        sink.faults.reject_recipient("gone@example.com")
        msg = message(1)
        msg["Cc"] = "gone@example.com"
        marks: list[int] = []
        with Mailer(sink.url) as mailer:
            with pytest.raises(PermanentMailError, match="nothing sent"):
                mailer.send(msg, before_final_dot=lambda: marks.append(1))
            assert not mailer.connected
            mailer.send(message(2))
        assert marks == []  # never at the point of no return
        assert sink.accepted == 1 and sink.connections == 2
        assert [s.subject for s in read_maildir(sink.maildir)] == ["Reminder 2"]


def test_the_point_of_no_return_comes_after_the_content_and_before_the_final_dot(sink: MailSink) -> None:
    seen: list[int] = []
    with Mailer(sink.url) as mailer:
        mailer.send(message(1), before_final_dot=lambda: seen.append(sink.accepted))
        assert seen == [0]  # called once, before the sink had the message

        def refuse() -> None:
            raise RuntimeError("could not record the point of no return")

        with pytest.raises(RuntimeError, match="could not record"):
            mailer.send(message(2), before_final_dot=refuse)
        assert not mailer.connected  # dropped without the final "."
        mailer.send(message(3))
    assert [s.subject for s in read_maildir(sink.maildir)] == ["Reminder 1", "Reminder 3"]


def test_bytes_sent_with_their_envelope_go_to_the_envelope_recipients(sink: MailSink) -> None:
    data, envelope = build_message_envelope(
        sender="Billing <billing@example.com>", to="Zoë Müller <zoe@bücher.example>", subject="Reminder 1",
        text="Reminder number 1\n", html=None, message_id=make_message_id("reminder:INV-1:1", "example.com"),
        date=datetime(2026, 3, 9, 8, 0, tzinfo=UTC))
    assert envelope == envelope_of_bytes(data)
    assert envelope.recipients == ("zoe@xn--bcher-kva.example",)
    with Mailer(sink.url) as mailer:
        mailer.send(data, envelope=envelope)
    (stored,) = read_maildir(sink.maildir)
    assert list(stored.envelope_to) == ["zoe@xn--bcher-kva.example"] and stored.subject == "Reminder 1"


def test_connection_refused_is_transient(tmp_path: Path) -> None:
    port = free_port()
    with Mailer(f"smtp://bob:{SECRET}@127.0.0.1:{port}", timeout=2) as mailer:
        with pytest.raises(TransientMailError) as info:
            mailer.send(message(1))
    code, reply, stage = attrs(info.value)
    assert (code, reply, stage) == (None, "", "connect")
    assert "ConnectionRefusedError" in str(info.value)
    assert f"smtp://bob:***@127.0.0.1:{port}" in str(info.value)
    assert SECRET not in str(info.value) and SECRET not in repr(info.value)


def test_a_timeout_waiting_for_the_reply_is_transient_and_the_outcome_is_unknown(tmp_path: Path) -> None:
    with MailSink(tmp_path / "mail") as sink:
        sink.faults.stall_next(1, seconds=2.0)
        with Mailer(sink.url, timeout=0.3) as mailer:
            with pytest.raises(TransientMailError, match="UNKNOWN") as info:
                mailer.send(message(1))
            assert attrs(info.value)[2] == "DATA content"
            assert not mailer.connected
            # The sink had stored the message before stalling: the client gave
            # up on a message that was in fact delivered (why effects go "in doubt").
            assert sink.accepted == 1
            mailer.send(message(2))
        assert sink.accepted == 2


def test_a_drop_before_the_final_reply_is_transient_and_nothing_is_stored(sink: MailSink) -> None:
    with Mailer(sink.url) as mailer:
        mailer.send(message(1))
        sink.faults.drop_before_reply_next(1)
        with pytest.raises(TransientMailError, match="delivery is UNKNOWN") as info:
            mailer.send(message(2))
        assert attrs(info.value) == (None, "", "DATA content")
        mailer.send(message(3))
    assert [s.subject for s in read_maildir(sink.maildir)] == ["Reminder 1", "Reminder 3"]
    assert sink.dropped == 1
    assert sink.connections == 2  # the ambiguous send was NOT retried


def test_a_drop_right_after_the_250_counts_as_success(sink: MailSink) -> None:
    sink.faults.drop_after_accept_next(1)
    mailer = Mailer(sink.url)
    reply = mailer.send(message(1))
    (stored,) = read_maildir(sink.maildir)
    # send() returns the 250 it read before the server hung up ...
    assert reply == f"250 OK queued as {stored.key}"
    # ... and closing (QUIT on a dead connection) does not raise.
    mailer.close()
    assert sink.dropped == 1


def test_after_a_drop_following_the_250_the_next_send_reconnects(sink: MailSink) -> None:
    sink.faults.drop_after_accept_next(1)
    with Mailer(sink.url) as mailer:
        mailer.send(message(1))
        mailer.send(message(2))
    assert sink.accepted == 2
    assert sink.connections == 2
    assert count_by_header(sink.maildir, "Message-ID") == {
        make_message_id("reminder:INV-1:1", "example.com"): 1,
        make_message_id("reminder:INV-2:1", "example.com"): 1,
    }


# -- authentication and secrets ---------------------------------------------------------


def test_login_with_the_right_password_delivers(tmp_path: Path) -> None:
    with MailSink(tmp_path / "mail", credentials={"bob": SECRET}) as sink:
        with Mailer(f"smtp://bob:{SECRET}@{sink.host}:{sink.port}") as mailer:
            mailer.send(message(1))
        assert sink.accepted == 1


def test_a_wrong_password_is_transient_and_never_leaks_the_password(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, aiosmtpd's included
    wrong = "Wr0ng-" + SECRET
    with MailSink(tmp_path / "mail", credentials={"bob": SECRET}) as sink:
        url = parse_smtp_url(f"smtp://bob:{wrong}@{sink.host}:{sink.port}")
        with Mailer(url) as mailer:
            with pytest.raises(TransientMailError) as info:
                mailer.send(message(1))
        assert sink.accepted == 0
    exc = info.value
    code, reply, stage = attrs(exc)
    assert (code, stage) == (535, "auth")
    assert "535" in str(exc) and "credentials invalid" in reply
    for text in (str(exc), repr(exc), repr(url), str(url), repr(mailer), caplog.text):
        assert wrong not in text
        assert SECRET not in text
    assert caplog.text  # something was logged, and it is clean


def test_login_against_a_server_without_auth_is_a_transient_session_error(sink: MailSink) -> None:
    with Mailer(f"smtp://bob:{SECRET}@{sink.host}:{sink.port}") as mailer:
        with pytest.raises(TransientMailError, match="AUTH") as info:
            mailer.send(message(1))
    assert attrs(info.value)[2] == "auth"
    assert SECRET not in str(info.value)


def test_mail_errors_are_oncebeat_mail_errors() -> None:
    assert issubclass(TransientMailError, MailError)
    assert issubclass(PermanentMailError, MailError)


# -- TLS ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is needed to make a test certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    return cert, key


def server_context(certificate: tuple[Path, Path]) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(*certificate)
    return ctx


def client_context(certificate: tuple[Path, Path]) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(certificate[0]))
    ctx.verify_flags &= ~getattr(ssl, "VERIFY_X509_STRICT", 0)  # a bare self-signed test cert
    return ctx


def test_starttls_upgrades_the_connection_and_logs_in(tmp_path: Path, certificate: tuple[Path, Path]) -> None:
    with MailSink(tmp_path / "mail", tls_context=server_context(certificate), credentials={"bob": SECRET}) as sink:
        url = f"smtp+starttls://bob:{SECRET}@127.0.0.1:{sink.port}"
        with Mailer(url, ssl_context=client_context(certificate)) as mailer:
            mailer.send(message(1))
            mailer.send(message(2))
        assert sink.accepted == 2
        assert sink.connections == 1


def test_implicit_tls_delivers(tmp_path: Path, certificate: tuple[Path, Path]) -> None:
    with MailSink(tmp_path / "mail", tls_context=server_context(certificate), implicit_tls=True) as sink:
        assert sink.url.startswith("smtps://")
        with Mailer(sink.url, ssl_context=client_context(certificate)) as mailer:
            mailer.send(message(1))
        assert sink.accepted == 1


def test_an_untrusted_certificate_is_a_transient_connect_error(tmp_path: Path, certificate: tuple[Path, Path]) -> None:
    with MailSink(tmp_path / "mail", tls_context=server_context(certificate), implicit_tls=True) as sink:
        with Mailer(sink.url, timeout=5) as mailer, pytest.raises(TransientMailError, match="CERTIFICATE_VERIFY_FAILED"):
            mailer.send(message(1))
        assert sink.accepted == 0


def test_starttls_requested_but_not_offered_is_a_transient_error(sink: MailSink) -> None:
    with Mailer(f"smtp://{sink.host}:{sink.port}?starttls=true") as mailer:
        with pytest.raises(TransientMailError, match="does not offer STARTTLS") as info:
            mailer.send(message(1))
    assert attrs(info.value)[2] == "starttls"
    assert sink.accepted == 0


# -- the sink itself ---------------------------------------------------------------------


def test_the_sink_binds_loopback_on_a_free_port_and_creates_the_maildir(tmp_path: Path) -> None:
    sink = MailSink(tmp_path / "deep" / "mail")
    assert sink.host == "127.0.0.1"
    with sink:
        assert sink.port > 0
        assert sink.url == f"smtp://127.0.0.1:{sink.port}"
        assert all((tmp_path / "deep" / "mail" / sub).is_dir() for sub in ("tmp", "new", "cur"))
        with socket.create_connection(("127.0.0.1", sink.port), timeout=2) as conn:
            assert conn.recv(100).startswith(b"220 ")
    assert not sink.running


def test_a_restarted_sink_keeps_its_port_and_its_mail(tmp_path: Path) -> None:
    sink = MailSink(tmp_path / "mail").start()
    try:
        port = sink.port
        with Mailer(sink.url) as mailer:
            mailer.send(message(1))
            sink.stop()
            with pytest.raises(TransientMailError):
                mailer.send(message(2))
            sink.start()
            assert sink.port == port
            mailer.send(message(3))
    finally:
        sink.stop()
    assert [s.subject for s in read_maildir(tmp_path / "mail")] == ["Reminder 1", "Reminder 3"]
    assert sink.accepted == 2


def test_read_maildir_reads_new_and_cur_and_a_missing_maildir_is_empty(sink: MailSink, tmp_path: Path) -> None:
    assert read_maildir(tmp_path / "nowhere") == []
    with Mailer(sink.url) as mailer:
        mailer.send(message(1))
        mailer.send(message(2))
    first = next((sink.maildir / "new").iterdir())
    first.rename(sink.maildir / "cur" / (first.name + ":2,S"))
    assert sorted(s.subject for s in read_maildir(sink.maildir)) == ["Reminder 1", "Reminder 2"]
    assert count_by_header(sink.maildir, "subject") == {"Reminder 1": 1, "Reminder 2": 1}
    assert count_by_header(sink.maildir, "X-Missing") == {}


@pytest.mark.parametrize(
    "call",
    [
        lambda f: f.fail_next(1, code=250),
        lambda f: f.fail_next(1, code=451, text="a\r\nb"),
        lambda f: f.fail_next(-1),
        lambda f: f.reject_recipient("x@example.com", code=600),
        lambda f: f.stall_next(1, seconds=-1),
    ],
)
def test_invalid_fault_settings_are_refused(sink: MailSink, call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError):
        call(sink.faults)


def test_faults_can_be_inspected_and_cleared(sink: MailSink) -> None:
    sink.faults.fail_next(2)
    sink.faults.drop_after_accept_next(1)
    sink.faults.reject_recipient("x@example.com")
    assert sink.faults.pending()["fail"] == ["451 try later", "451 try later"]
    sink.faults.clear()
    assert sink.faults.pending() == {
        "fail": [],
        "stall": [],
        "drop_before_reply": 0,
        "drop_after_accept": 0,
        "rejected_recipients": {},
    }


def test_serve_forever_prints_the_url_and_stops_on_request(tmp_path: Path) -> None:
    out = io.StringIO()
    stop = threading.Event()
    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(serve_forever(tmp_path / "mail", port=0, stop=stop, out=out)))
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while "listening on" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.02)
        url = out.getvalue().split("listening on ", 1)[1].split(",", 1)[0]
        with Mailer(url) as mailer:
            mailer.send(message(1))
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()
    assert result[0].accepted == 1  # type: ignore[attr-defined]
    assert "1 accepted" in out.getvalue()


@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM semantics")
def test_serve_forever_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    code = "import sys; from oncebeat.mail import serve_forever; serve_forever(sys.argv[1], port=0)"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen(
        [sys.executable, "-W", "error", "-c", code, str(tmp_path / "mail")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "listening on smtp://127.0.0.1:" in line
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)  # the sink's threads stop within seconds; a loaded CI host is slow
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "mailsink stopped" in out
    assert err == ""


@pytest.mark.parametrize("connections", [0, -1, 10**9, 2.5, True, "4", None])
def test_a_mailer_refuses_a_connection_count_that_is_not_a_small_whole_number(connections: object) -> None:
    # One slot object per connection is made up front: 10**9 once took the machine's memory.
    with pytest.raises(ValueError, match="connections must be a whole number from 1 to 1024"):
        Mailer("smtp://127.0.0.1:1", connections=connections)  # type: ignore[arg-type]
