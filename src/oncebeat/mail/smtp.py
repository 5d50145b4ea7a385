"""SMTP delivery with error classification, connection reuse and safe URLs.

Configuration is one URL (the ``SMTP_URL`` setting, :mod:`.smtpurl`): ``smtp://``, ``smtp+starttls://`` or
``smtps://``, with ``?starttls=`` and ``?timeout=``; when a user is given the :class:`Mailer` logs in (``AUTH``). A
password is never shown: every error message and every log line use the redacted URL. The envelope and the DATA
payload of a message are :mod:`.wire`'s.

Error classification (every error is a :class:`~oncebeat.errors.MailError`
carrying ``.code`` (``int | None``, the SMTP reply code), ``.reply`` (``str``,
the server's reply text, ``""`` if none) and ``.stage`` (``str``, the step
that failed: ``"envelope"``, ``"connect"``, ``"EHLO"``, ``"starttls"``,
``"auth"``, ``"MAIL FROM"``, ``"RCPT TO"``, ``"DATA"``, ``"DATA content"``)):

* :class:`~oncebeat.errors.PermanentMailError` — a 5xx reply to the *mail
  transaction* (``MAIL FROM``, ``RCPT TO``, ``DATA``), e.g. ``550 no such
  user``; the message has no SMTPUTF8-capable server for its non-ASCII
  address; or the message has no sender/recipient. Retrying cannot help.
* :class:`~oncebeat.errors.TransientMailError` — a 4xx reply; connection
  refused, reset or dropped; timeouts; DNS failures; and **session-level
  failures before any message is judged** (greeting, ``EHLO``, ``STARTTLS``,
  ``AUTH`` — even when the server answers them with a 5xx such as ``535 bad
  credentials``). Those say nothing about the message and usually mean a
  configuration or server problem an operator can fix, so they must not mark
  every reminder as permanently failed.
* A drop *after* the message content was sent but *before* the final reply is
  ambiguous (the server may or may not have accepted it) and is raised as
  :class:`~oncebeat.errors.TransientMailError` with ``stage == "DATA
  content"``; callers using an effect ledger should treat it as in doubt.

Delivery is final once the server's ``250`` reply to the message content has
been read: :meth:`Mailer.send` returns that reply immediately. It never sends
``QUIT`` after a message (the connection is kept for reuse), so a server that
drops the connection right after its ``250`` cannot turn a delivered message
into an error; :meth:`Mailer.close` ignores errors from ``QUIT``.

Point of no return: the server can accept a message only once it has read
the final ``.`` of ``DATA``. :meth:`Mailer.send` sends the content, then calls
``before_final_dot`` (an effect ledger records its point of no return there),
then the final ``.``: if the callback raises, the connection is dropped
without the ``.`` and nothing can have been delivered. A message given as
bytes (:func:`message_bytes`, e.g. frozen with an effect at its first
attempt) is sent exactly as given, so a retry or a resend is the same message.
Telemetry events (crash points hang on them, :mod:`oncebeat.crashpoints`):
``mail.connecting``, ``mail.data``, ``mail.final_dot``.

Connection reuse: one :class:`Mailer` keeps one connection open across
:meth:`~Mailer.send` calls. If a *reused* connection turns out to be dead
before the message content was sent (the server closed it while idle: EOF,
reset, a ``421`` to ``MAIL FROM``), the mailer reconnects once, transparently.
"""

from __future__ import annotations

import logging
import re
import smtplib
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.message import EmailMessage
from types import TracebackType

from oncebeat import telemetry
from oncebeat.errors import (
    ConnectionCapped,
    DeliveryUnknown,
    MailError,
    PermanentMailError,
    TransientMailError,
)
from oncebeat.redact import redact_url

from .message import Envelope
from .smtpurl import DEFAULT_TIMEOUT, SmtpUrl, _warn_clear_text_auth, parse_smtp_url
from .wire import _dot_stuff, _envelope, _mail_error, _reply_text, _serialize, envelope_of_bytes, message_bytes

__all__ = [
    "SmtpUrl",
    "parse_smtp_url",
    "redact_url",
    "Mailer",
    "DEFAULT_TIMEOUT",
    "message_bytes",
    "envelope_of_bytes",
]

log = logging.getLogger("oncebeat.mail")

class _Retryable(Exception):
    """Internal: a reused connection died before the message content was sent."""

    def __init__(self, error: MailError) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass(slots=True)
class _Stage:
    """Where one SMTP transaction is (named in errors) and whether the final ``.`` may have been sent."""

    stage: str
    content_started: bool = False


REGROW_AFTER = 60.0  # seconds without a refused connection before a shrunk pool takes one more
MAX_CONNECTIONS = 1024  # per Mailer; one slot object each is made up front (the CLI allows 256 handler slots)


class _Slot:
    """One kept SMTP connection of a :class:`Mailer`; its lock is held by the thread sending over it."""

    def __init__(self) -> None:
        self.conn: smtplib.SMTP | None = None
        self.connecting = False  # its holder is opening a connection (the server may have counted it already)
        self.lock = threading.RLock()


class Mailer:
    """Sends messages over reusable SMTP connections: one by default, or up to ``connections``.

    Thread-safe: each send holds one connection for its whole transaction; with ``connections=N``
    up to N threads (e.g. a worker's handler slots) send at once, each over its own connection,
    and further threads wait. Use as a context manager or call :meth:`close`::

        with Mailer("smtp://127.0.0.1:1025") as mailer:
            reply = mailer.send(msg)      # "250 OK queued as ..."

    Args:
        url: An :class:`SmtpUrl` or the ``SMTP_URL`` text.
        timeout: Socket timeout in seconds used when the URL has no
            ``?timeout=`` (the URL, being operator configuration, wins).
        ssl_context: TLS settings for ``smtps``/``STARTTLS``; default
            :func:`ssl.create_default_context` (verifies the certificate).
        local_hostname: Name sent in ``EHLO``; default the host's FQDN.
        connections: Connections kept at most (>= 1); each is opened when first needed. The most recently
            used free one is taken first, so a single thread keeps reusing one connection. A server that
            refuses one more connection at connect (a 4xx greeting, e.g. ``421 too many connections``) while
            others are open shrinks the pool to those (:attr:`pool_size`; the send raises
            :class:`~oncebeat.errors.ConnectionCapped`, to be retried over one of them).
        regrow_after: Seconds without a refusal after which a shrunk pool grows by one connection again (at
            the next successful send; one more each such period), up to ``connections``.

    Raises:
        ConfigError: ``url`` is a string that :func:`parse_smtp_url` rejects.
        ValueError: ``connections`` not a whole number from 1 to ``MAX_CONNECTIONS`` (a slot each, made up front).
    """

    def __init__(
        self,
        url: SmtpUrl | str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        ssl_context: ssl.SSLContext | None = None,
        local_hostname: str | None = None,
        connections: int = 1,
        regrow_after: float = REGROW_AFTER,
    ) -> None:
        if isinstance(connections, bool) or not isinstance(connections, int) or not 1 <= connections <= MAX_CONNECTIONS:
            raise ValueError(f"connections must be a whole number from 1 to {MAX_CONNECTIONS}, not {connections!r}")
        self.url: SmtpUrl = parse_smtp_url(url) if isinstance(url, str) else url
        self.timeout: float = self.url.timeout if self.url.timeout is not None else float(timeout)
        _warn_clear_text_auth(self.url)
        self._ssl_context = ssl_context
        self._local_hostname = local_hostname
        if not regrow_after >= 0:
            raise ValueError(f"regrow_after must be a number of seconds >= 0, not {regrow_after!r}")
        self._slots = [_Slot() for _ in range(connections)]
        self._pool = threading.Condition()  # guards _free, _in_use, _allowed, _changed_at
        self._free: list[_Slot] = list(reversed(self._slots))  # the end is taken first (most recently used)
        self._in_use = 0
        self._allowed = connections  # shrinks when the server refuses one more connection, grows back slowly
        self._regrow_after = float(regrow_after)
        self._changed_at = 0.0  # time.monotonic() of the last shrink or growth
        self._held = threading.local()  # .slot: the connection this thread holds, if any

    @property
    def _conn(self) -> smtplib.SMTP | None:
        """The connection of the slot this thread holds (internal methods run only while holding one)."""
        slot: _Slot = self._held.slot  # threading.local attributes are untyped
        return slot.conn

    @_conn.setter
    def _conn(self, conn: smtplib.SMTP | None) -> None:
        self._held.slot.conn = conn

    @contextmanager
    def _hold(self) -> Iterator[_Slot]:
        """Hold a connection slot for this thread (re-entrant: a thread already holding one keeps it)."""
        held = getattr(self._held, "slot", None)
        if held is not None:
            yield held
            return
        with self._pool:
            while self._in_use >= self._allowed or not self._free:
                self._pool.wait()
            # A free slot with an open connection first (most recently used): after a shrink, the connections
            # the server accepted are the ones reused.
            index = next((i for i in range(len(self._free) - 1, -1, -1) if self._free[i].conn is not None),
                         len(self._free) - 1)
            slot = self._free.pop(index)
            self._in_use += 1
        try:
            with slot.lock:
                self._held.slot = slot
                try:
                    yield slot
                finally:
                    self._held.slot = None
        finally:
            with self._pool:
                self._in_use -= 1
                self._free.append(slot)
                self._pool.notify_all()

    @property
    def pool_size(self) -> int:
        """Connections this mailer uses at once now: ``connections``, less after the server refused one more."""
        with self._pool:
            return self._allowed

    def _shrink(self) -> int | None:
        """The server refused one more connection: keep at most the others open now; None if none is open."""
        held = getattr(self._held, "slot", None)
        with self._pool:
            # Open ones, and those being opened (the server may count them already): several refused at once
            # each shrink to what they see, the last to what the server really took.
            others = sum(1 for s in self._slots if s is not held and (s.conn is not None or s.connecting))
            if others == 0:
                return None
            if others < self._allowed:
                self._allowed = others
                self._changed_at = time.monotonic()
                log.warning("SMTP %s refused connection %d: keeping at most %d connection(s) open (grows back "
                            "after %g s without a refusal)", self.url.redacted(), others + 1, others,
                            self._regrow_after, extra={"event": "mail.pool_shrunk", "connections": others})
            return self._allowed

    def _regrow(self) -> None:
        """After a send: one more connection allowed if ``regrow_after`` seconds passed since the last change."""
        with self._pool:
            if self._allowed >= len(self._slots) or time.monotonic() - self._changed_at < self._regrow_after:
                return
            self._allowed += 1
            self._changed_at = time.monotonic()
            self._pool.notify_all()

    def __repr__(self) -> str:
        return f"Mailer({self.url.redacted()!r}, connected={self.connected})"

    @property
    def connected(self) -> bool:
        """Whether a connection is currently open (it may still be stale): the one this thread holds, else any."""
        held = getattr(self._held, "slot", None)
        slots = [held] if held is not None else self._slots
        return any(s.conn is not None and s.conn.sock is not None for s in slots)

    # -- public API -------------------------------------------------------

    @contextmanager
    def reserved(self) -> Iterator[Mailer]:
        """Hold one of this mailer's connections for one send (when all are held, other threads wait): an
        effect claims its key only once a connection is free (``ctx.effect(..., resource=mailer.reserved())``);
        the send inside uses the connection held."""
        with self._hold():
            yield self

    def send(self, msg: EmailMessage | bytes, *, before_final_dot: Callable[[], None] | None = None,
             envelope: Envelope | None = None, before_transaction: Callable[[], None] | None = None) -> str:
        """Deliver ``msg`` to its ``To``/``Cc``/``Bcc`` recipients.

        The envelope sender is ``Sender`` or else ``From``; ``Bcc`` headers are
        removed from the transmitted copy (``msg`` is not modified). If any
        recipient is refused, nothing is sent (all-or-nothing).

        Args:
            msg: The message, e.g. from :func:`oncebeat.mail.build_message`, or its bytes from
                :func:`message_bytes` (sent exactly as given; the envelope comes from their headers).
            before_final_dot: called after the content and before the final ``.`` of ``DATA`` — the
                point of no return. If it raises, the connection is dropped without the ``.`` (nothing
                delivered) and its exception propagates.
            envelope: with bytes, their envelope as built with them
                (:func:`~oncebeat.mail.message.build_message_envelope`): the header block is then not parsed
                back (the strict header registry cost ~0.5 ms per message). The caller vouches that it is
                the envelope of exactly these bytes; None reads it from their ``From``/``To``/``Cc``/``Bcc``.
            before_transaction: called once, when the connection is open and right before ``MAIL FROM`` (e.g.
                to take a rate-limit permit as late as possible, never for a connection the server refused). If
                it raises, nothing is sent, the connection is kept and its exception propagates.

        Returns:
            str: The server's final reply to the message content, code first,
            e.g. ``"250 OK queued as 1712.M5P9Q1.host"``.

        Raises:
            TransientMailError: 4xx reply, network failure, timeout, session
                failure (connect/TLS/AUTH), or a drop while the outcome is
                ambiguous (``stage == "DATA content"``).
            PermanentMailError: 5xx reply to ``MAIL FROM``/``RCPT TO``/``DATA``,
                no recipients/sender, or SMTPUTF8 needed but not offered.
        """
        try:
            reply = self._send(msg, before_final_dot, envelope, before_transaction)
        except MailError as exc:
            code = getattr(exc, "code", None)
            telemetry.emit("mail.reply", {"reply_class": f"{code // 100}xx" if code else "none"})
            raise
        telemetry.emit("mail.reply", {"reply_class": "2xx"})
        self._regrow()
        return reply

    def _send(self, msg: EmailMessage | bytes, before_final_dot: Callable[[], None] | None,
              envelope: Envelope | None, before_transaction: Callable[[], None] | None = None) -> str:
        if isinstance(msg, bytes):
            envelope = envelope if envelope is not None else envelope_of_bytes(msg)
            payload = _dot_stuff(re.sub(rb"\r\n|\n|\r", b"\r\n", msg))
        else:
            envelope = _envelope(msg)
            payload = _dot_stuff(_serialize(msg, utf8=envelope.utf8))
        with self._hold():
            retried = False
            while True:
                reused = self.connected
                if not reused:
                    telemetry.emit("mail.connecting", {})
                conn = self._conn if reused else self._open()
                assert conn is not None
                if before_transaction is not None:
                    ready: Callable[[], None] = before_transaction
                    before_transaction = None  # once per send, even if a dead reused connection is replaced
                    ready()
                try:
                    return self._transaction(conn, envelope, payload, before_final_dot)
                except _Retryable as retry:
                    self._discard()
                    if reused and not retried:
                        retried = True
                        log.info(
                            "reused SMTP connection to %s was closed by the server (%s); reconnecting",
                            self.url.redacted(),
                            self._scrub(str(retry.error)),
                        )
                        continue
                    raise retry.error from None

    def close(self) -> None:
        """Say ``QUIT`` and close the connection; never raises.

        Errors during ``QUIT`` (e.g. the server already dropped the connection
        after accepting the last message) are ignored: a message whose ``250``
        was received is delivered regardless.
        """
        for slot in self._slots:
            with slot.lock:  # waits for a send in flight on it
                conn, slot.conn = slot.conn, None
                if conn is None:
                    continue
                try:
                    if conn.sock is not None:
                        conn.quit()
                except (smtplib.SMTPException, OSError) as exc:
                    log.debug("ignoring error on QUIT to %s: %s", self.url.redacted(), self._scrub(str(exc)))
                finally:
                    conn.close()

    def __enter__(self) -> Mailer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- internals --------------------------------------------------------

    def _scrub(self, text: str) -> str:
        text = redact_url(text)
        password = self.url.password
        if password and len(password) >= 3:
            text = text.replace(password, "***")
        return text

    def _error(
        self, cls: type[MailError], what: str, *, code: int | None = None, reply: str = "", stage: str
    ) -> MailError:
        where = f"{self.url.host}:{self.url.port}"
        if code is not None:
            message = f"SMTP {where} replied {code} to {stage}" + (f": {reply}" if reply else "")
            if what:
                message += f" ({what})"
        else:
            message = f"SMTP {where} {stage}: {what}"
        return _mail_error(cls, self._scrub(message), code=code, reply=self._scrub(reply), stage=stage)

    def _reply_error(self, code: int, resp: bytes | str, stage: str) -> MailError:
        cls: type[MailError] = PermanentMailError if 500 <= code <= 599 else TransientMailError
        return self._error(cls, "", code=code, reply=_reply_text(resp), stage=stage)

    def _discard(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _context(self) -> ssl.SSLContext:
        if self._ssl_context is None:
            self._ssl_context = ssl.create_default_context()
        return self._ssl_context

    def _open(self) -> smtplib.SMTP:
        """:meth:`_connect` on the held slot, marked as being opened meanwhile (see :meth:`_shrink`)."""
        slot: _Slot = self._held.slot
        slot.connecting = True
        try:
            return self._connect()
        finally:
            slot.connecting = False

    def _connect(self) -> smtplib.SMTP:
        url = self.url
        stage = "connect"
        try:
            if url.security == "tls":
                conn: smtplib.SMTP = smtplib.SMTP_SSL(
                    url.host, url.port, local_hostname=self._local_hostname, timeout=self.timeout,
                    context=self._context())
            else:
                conn = smtplib.SMTP(url.host, url.port, local_hostname=self._local_hostname, timeout=self.timeout)
        except smtplib.SMTPResponseException as exc:  # greeting other than 220
            capped = self._shrink() if 400 <= exc.smtp_code <= 499 else None
            if capped is not None:  # the server has our other connections open: a cap per client, not an outage
                error = self._error(
                    ConnectionCapped, f"refused one more connection; keeping at most {capped} connection(s)",
                    code=exc.smtp_code, reply=_reply_text(exc.smtp_error), stage=stage)
                error.connections = capped  # type: ignore[attr-defined]
                raise error from None
            raise self._error(
                TransientMailError, "greeting refused", code=exc.smtp_code, reply=_reply_text(exc.smtp_error),
                stage=stage) from None
        except (smtplib.SMTPException, OSError) as exc:
            raise self._error(
                TransientMailError, f"cannot connect to {url.redacted()}: {type(exc).__name__}: {exc}", stage=stage
            ) from None
        try:
            stage = "EHLO"
            conn.ehlo_or_helo_if_needed()
            if url.security == "starttls":
                stage = "starttls"
                if not conn.has_extn("starttls"):
                    raise self._error(
                        TransientMailError,
                        "server does not offer STARTTLS (use smtp:// for a plain connection or fix the server)",
                        stage=stage,
                    )
                conn.starttls(context=self._context())
                conn.ehlo()
            if url.username is not None:
                stage = "auth"
                conn.login(url.username, url.password or "")
        except MailError:
            conn.close()
            raise
        except smtplib.SMTPResponseException as exc:
            conn.close()
            raise self._error(
                TransientMailError,
                "session setup failed; check SMTP_URL credentials/TLS settings",
                code=exc.smtp_code,
                reply=_reply_text(exc.smtp_error),
                stage=stage,
            ) from None
        except (smtplib.SMTPException, OSError) as exc:
            conn.close()
            raise self._error(TransientMailError, f"{type(exc).__name__}: {exc}", stage=stage) from None
        except BaseException:
            conn.close()
            raise
        log.debug("connected to %s", url.redacted())
        if conn.sock is not None and conn.sock.family in (socket.AF_INET, socket.AF_INET6):
            # The final "." is a 3-byte write after the content; with Nagle on it waits for the server's
            # delayed ACK of the content (up to 40 ms on Linux) on every message of a kept connection.
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._conn = conn
        return conn

    def _rset(self, conn: smtplib.SMTP) -> None:
        """Reset the transaction after an error reply; drop the connection if that fails."""
        try:
            code, _ = conn.docmd("RSET")
        except (smtplib.SMTPException, OSError):
            code = -1
        if code != 250:
            self._discard()

    def _transaction(self, conn: smtplib.SMTP, env: Envelope, payload: bytes,
                     before_final_dot: Callable[[], None] | None = None) -> str:
        options: list[str] = []
        if env.utf8:
            if not conn.has_extn("smtputf8"):
                raise self._error(
                    PermanentMailError,
                    "an address has a non-ASCII local part but the server does not offer SMTPUTF8",
                    stage="envelope",
                )
            options += ["SMTPUTF8", "BODY=8BITMIME"]
        elif not payload.isascii() and conn.has_extn("8bitmime"):
            options.append("BODY=8BITMIME")
        conn.command_encoding = "utf-8" if env.utf8 else "ascii"
        where = _Stage("MAIL FROM")
        try:
            if conn.has_extn("pipelining"):
                self._open_data_pipelined(conn, env, options, where)
            else:
                self._open_data(conn, env, options, where)
            where.stage = "DATA content"
            conn.send(payload)
            if before_final_dot is not None:
                try:
                    before_final_dot()
                except BaseException:
                    self._discard()  # no final ".": the server throws the partial message away
                    raise
            where.content_started = True  # from the final "." on the server may accept it: a drop is ambiguous
            conn.send(b".\r\n")
            telemetry.emit("mail.final_dot", {})
            code, resp = conn.getreply()
            if code == 250:
                reply = f"{code} {_reply_text(resp)}".strip()
                log.debug("sent message to %d recipient(s) via %s: %s", len(env.recipients), self.url.redacted(), reply)
                return reply
            if code == 421:
                self._discard()
            raise self._reply_error(code, resp, where.stage)
        except smtplib.SMTPServerDisconnected as exc:
            self._discard()
            if where.content_started:
                raise self._error(
                    DeliveryUnknown,
                    f"connection lost before the final reply; delivery is UNKNOWN ({exc})",
                    stage=where.stage,
                ) from None
            raise _Retryable(self._error(TransientMailError, f"connection lost: {exc}", stage=where.stage)) from None
        except smtplib.SMTPResponseException as exc:  # e.g. over-long reply line
            self._discard()
            raise self._reply_error(exc.smtp_code, exc.smtp_error, where.stage) from None
        except OSError as exc:  # defensive: smtplib normally wraps these
            self._discard()
            if where.content_started:  # e.g. a read timeout waiting for the final reply
                raise self._error(DeliveryUnknown, f"{type(exc).__name__} before the final reply; delivery is UNKNOWN",
                                  stage=where.stage) from None
            err = self._error(TransientMailError, f"{type(exc).__name__}: {exc}", stage=where.stage)
            raise _Retryable(err) from None
        finally:
            conn.command_encoding = "ascii"

    def _open_data(self, conn: smtplib.SMTP, env: Envelope, options: list[str], where: _Stage) -> None:
        """MAIL, each RCPT, DATA one at a time, each waiting for its reply; returns on ``354``, else raises."""
        code, resp = conn.docmd("MAIL", f"FROM:<{env.sender}>" + "".join(f" {o}" for o in options))
        if code == 421:
            raise _Retryable(self._reply_error(code, resp, where.stage))
        if code != 250:
            self._rset(conn)
            raise self._reply_error(code, resp, where.stage)
        where.stage = "RCPT TO"
        refused: list[tuple[str, int, str]] = []
        for rcpt in env.recipients:
            code, resp = conn.docmd("RCPT", f"TO:<{rcpt}>")
            if code == 421:
                raise _Retryable(self._reply_error(code, resp, where.stage))
            if code not in (250, 251):
                refused.append((rcpt, code, _reply_text(resp)))
        if refused:
            self._rset(conn)
            raise self._refused_error(refused, len(env.recipients))
        where.stage = "DATA"
        telemetry.emit("mail.data", {})
        code, resp = conn.docmd("DATA")
        if code == 421:
            raise _Retryable(self._reply_error(code, resp, where.stage))
        if code != 354:
            self._rset(conn)
            raise self._reply_error(code, resp, where.stage)

    def _open_data_pipelined(self, conn: smtplib.SMTP, env: Envelope, options: list[str], where: _Stage) -> None:
        """MAIL, every RCPT and DATA in one write (RFC 2920, the server offered ``PIPELINING``), then their
        replies in order: one round trip instead of 2 + recipients. Returns on ``354`` to DATA with every
        earlier reply positive; else raises, having read every reply. Nothing of the content is sent before
        the ``354`` (DATA ends the group), so a refusal never delivers anything: after a ``354`` that came
        despite a refused recipient the connection is dropped (no final ``.``), as RSET cannot be sent
        inside DATA."""
        lines = [f"MAIL FROM:<{env.sender}>" + "".join(f" {o}" for o in options),
                 *(f"RCPT TO:<{rcpt}>" for rcpt in env.recipients), "DATA"]
        if any("\r" in line or "\n" in line for line in lines):
            raise ValueError("a line break in an SMTP command")  # as smtplib.putcmd: never inject a command
        telemetry.emit("mail.data", {})
        conn.send("".join(f"{line}\r\n" for line in lines).encode(conn.command_encoding))
        mail = conn.getreply()
        rcpts = [conn.getreply() for _ in env.recipients]
        data = conn.getreply()
        if 421 in (mail[0], data[0], *(c for c, _ in rcpts)):
            stage, (code, resp) = next((st, r) for st, r in (("MAIL FROM", mail), *(("RCPT TO", r) for r in rcpts),
                                                              ("DATA", data)) if r[0] == 421)
            where.stage = stage
            raise _Retryable(self._reply_error(code, resp, stage))
        refused = [(rcpt, code, _reply_text(resp)) for rcpt, (code, resp) in zip(env.recipients, rcpts, strict=True)
                   if code not in (250, 251)]
        failure: MailError | None = None
        if mail[0] != 250:
            failure = self._reply_error(mail[0], mail[1], "MAIL FROM")
        elif refused:
            where.stage = "RCPT TO"
            failure = self._refused_error(refused, len(env.recipients))
        elif data[0] != 354:
            where.stage = "DATA"
            failure = self._reply_error(data[0], data[1], "DATA")
        if failure is None:
            where.stage = "DATA"
            return
        if data[0] == 354:
            self._discard()  # inside DATA: only dropping the connection ends it without delivering
        else:
            self._rset(conn)
        raise failure

    def _refused_error(self, refused: list[tuple[str, int, str]], total: int) -> MailError:
        permanent = all(500 <= code <= 599 for _, code, _ in refused)
        cls: type[MailError] = PermanentMailError if permanent else TransientMailError
        first_code = refused[0][1]
        if len(refused) == 1:
            rcpt, code, text = refused[0]
            what = f"recipient <{rcpt}> refused" + ("" if total == 1 else f"; nothing sent to the other {total - 1}")
            return self._error(cls, what, code=code, reply=text, stage="RCPT TO")
        reply = "; ".join(f"<{rcpt}>: {code} {text}" for rcpt, code, text in refused)
        what = f"{len(refused)} of {total} recipients refused; nothing sent"
        return self._error(cls, what, code=first_code, reply=reply, stage="RCPT TO")
