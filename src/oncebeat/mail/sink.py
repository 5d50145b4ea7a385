"""A real local SMTP server (aiosmtpd) that stores mail in a Maildir.

Used for development (``oncebeat mailsink``), tests and the simulator. It
speaks real SMTP on a real socket, so the :class:`~oncebeat.mail.smtp.Mailer`
is exercised exactly as in production, and it can inject faults at runtime::

    with MailSink(tmp_path / "mail") as sink:           # 127.0.0.1, free port
        sink.faults.fail_next(2, code=451, text="try later")
        sink.faults.reject_recipient("gone@example.com")
        ...                                              # send via sink.url
        assert sink.accepted == 1
    messages = read_maildir(tmp_path / "mail")

Every accepted message is stored in a :class:`mailbox.Maildir` (in ``new/``),
prefixed with a ``Return-Path: <envelope sender>`` header and one
``Delivered-To: <recipient>`` header per envelope recipient. The reply to an
accepted message is ``250 OK queued as <maildir key>``.

Fault injection (:class:`SinkFaults`, thread-safe, effective immediately):

* ``fail_next(n, code, text)`` — the next ``n`` messages get ``code text`` in
  reply to their content; nothing is stored.
* ``reject_recipient(address, code, text)`` — ``RCPT TO`` for that address
  (case-insensitive) gets ``code text`` until :meth:`SinkFaults.accept_recipient`
  or :meth:`SinkFaults.clear`.
* ``drop_after_accept_next(n)`` — store the message, send ``250``, then close
  the connection (the client sees a dead connection on its next command or
  ``QUIT``; the message *was* delivered).
* ``drop_before_reply_next(n)`` — close the connection after the content was
  received, without storing or replying (ambiguous for the client, but the
  message was *not* delivered).
* ``cap_connections(n)`` — greet each client connection beyond ``n`` open
  at once with ``421 4.7.0 too many connections`` and close it (a relay's
  cap on connections per client).
* ``stall_next(n, seconds)`` — wait ``seconds`` before sending the reply to
  the content (to provoke client timeouts). The message is stored *before*
  the wait (unless a fail/drop-before-reply fault applies too), so a client
  that times out produces the classic "client gave up, but the server
  delivered" case.

For one message, faults apply in this order: drop-before-reply, fail (or
store), stall, then (if stored) drop-after-accept. ``drop_before_reply``,
``fail`` and ``stall`` entries are consumed by the next message whatever
else applies; ``drop_after_accept`` only by the next *stored* message.
"""

from __future__ import annotations

import asyncio
import collections
import hmac
import mailbox
import re
import signal
import socket
import ssl
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, TextIO

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

# What reads a Maildir lives in .maildir (no aiosmtpd there); it is part of this module's interface as before.
from .maildir import StoredMessage, count_by_header, read_maildir

__all__ = [
    "MailSink",
    "SinkFaults",
    "SinkCounters",
    "StoredMessage",
    "read_maildir",
    "count_by_header",
    "serve_forever",
]

_DEFAULT_HOSTNAME = "oncebeat-mailsink"


def _status(code: int, text: str) -> str:
    if not 400 <= code <= 599:
        raise ValueError(f"SMTP error code must be 4xx or 5xx, got {code}")
    if re.search(r"[\r\n]", text):
        raise ValueError("reply text must be a single line")
    return f"{code} {text}".rstrip()


@dataclass(frozen=True)
class _DataAction:
    stall: float = 0.0
    drop_before_reply: bool = False
    fail: str | None = None


class SinkFaults:
    """Thread-safe fault switches for a :class:`MailSink` (see module doc)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fail: collections.deque[str] = collections.deque()
        self._stall: collections.deque[float] = collections.deque()
        self._drop_before = 0
        self._drop_after = 0
        self._rejected: dict[str, str] = {}
        self._connection_cap: int | None = None

    def cap_connections(self, n: int | None) -> None:
        """Greet a client connection beyond ``n`` open at once with ``421 4.7.0 too many connections`` and close
        it, as relays that cap connections per client do; None lifts the cap (also :meth:`clear`).

        Raises:
            ValueError: ``n`` is not None nor a whole number >= 1.
        """
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ValueError(f"connection cap must be a whole number >= 1 or None, not {n!r}")
        with self._lock:
            self._connection_cap = n

    @property
    def connection_cap(self) -> int | None:
        """Client connections served at once at most (:meth:`cap_connections`); None: no cap."""
        with self._lock:
            return self._connection_cap

    def fail_next(self, n: int = 1, code: int = 451, text: str = "try later") -> None:
        """Reply ``code text`` to the content of the next ``n`` messages (not stored).

        Args:
            n: Number of messages, >= 0.
            code: A 4xx (temporary) or 5xx (permanent) SMTP code.
            text: Single-line reply text, e.g. ``"4.3.0 try later"``.

        Raises:
            ValueError: ``code`` is not 4xx/5xx, ``text`` has a line break or
                ``n`` is negative.
        """
        status = _status(code, text)
        with self._lock:
            self._fail.extend([status] * _count(n))

    def reject_recipient(self, address: str, code: int = 550, text: str = "no such user") -> None:
        """Refuse ``RCPT TO:<address>`` with ``code text`` until undone.

        Args:
            address: The envelope address, compared case-insensitively.
            code: A 4xx or 5xx SMTP code.
            text: Single-line reply text.

        Raises:
            ValueError: ``code`` is not 4xx/5xx or ``text`` has a line break.
        """
        status = _status(code, text)
        with self._lock:
            self._rejected[address.strip().lower()] = status

    def accept_recipient(self, address: str) -> None:
        """Undo :meth:`reject_recipient` for ``address``."""
        with self._lock:
            self._rejected.pop(address.strip().lower(), None)

    def drop_after_accept_next(self, n: int = 1) -> None:
        """Store the next ``n`` messages, reply ``250``, then close the connection."""
        with self._lock:
            self._drop_after += _count(n)

    def drop_before_reply_next(self, n: int = 1) -> None:
        """Close the connection after the content of the next ``n`` messages, storing nothing."""
        with self._lock:
            self._drop_before += _count(n)

    def stall_next(self, n: int = 1, seconds: float = 1.0) -> None:
        """Delay the reply to the content of the next ``n`` messages by ``seconds``.

        The message is stored before the delay (see the module doc).
        """
        if not seconds >= 0:
            raise ValueError("seconds must be >= 0")
        with self._lock:
            self._stall.extend([float(seconds)] * _count(n))

    def clear(self) -> None:
        """Remove every pending fault and recipient rejection."""
        with self._lock:
            self._fail.clear()
            self._stall.clear()
            self._drop_before = 0
            self._drop_after = 0
            self._rejected.clear()
            self._connection_cap = None

    def pending(self) -> dict[str, Any]:
        """A snapshot of the pending faults, for debugging and assertions."""
        with self._lock:
            return {
                "fail": list(self._fail),
                "stall": list(self._stall),
                "drop_before_reply": self._drop_before,
                "drop_after_accept": self._drop_after,
                "rejected_recipients": dict(self._rejected),
            }

    # -- used by the handler (event-loop thread) --------------------------

    def _recipient_status(self, address: str) -> str | None:
        with self._lock:
            return self._rejected.get(address.strip().lower())

    def _take_data_action(self) -> _DataAction:
        with self._lock:
            stall = self._stall.popleft() if self._stall else 0.0
            if self._drop_before:
                self._drop_before -= 1
                return _DataAction(stall=stall, drop_before_reply=True)
            if self._fail:
                return _DataAction(stall=stall, fail=self._fail.popleft())
            return _DataAction(stall=stall)

    def _take_drop_after(self) -> bool:
        with self._lock:
            if self._drop_after:
                self._drop_after -= 1
                return True
            return False


def _count(n: int) -> int:
    if n < 0:
        raise ValueError("n must be >= 0")
    return int(n)


@dataclass(frozen=True)
class SinkCounters:
    """Counts since :meth:`MailSink.start` (not reset by ``stop``/``start``).

    Attributes:
        accepted: Messages stored in the Maildir.
        rejected: Negative replies injected (``fail_next`` and refused recipients).
        dropped: Connections closed by ``drop_*`` faults.
        connections: Client connections opened (the sink's own start-up probe
            is not counted).
        capped: Client connections refused with 421 over the connection cap
            (:meth:`SinkFaults.cap_connections`; counted in ``connections`` too).
    """

    accepted: int = 0
    rejected: int = 0
    dropped: int = 0
    connections: int = 0
    capped: int = 0


class _State:
    """Counters and live connections, shared by the loop thread and callers."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: collections.Counter[str] = collections.Counter()
        self.live: set[_SinkSMTP] = set()

    def bump(self, name: str) -> None:
        with self.lock:
            self.counts[name] += 1


class _SinkSession(Session):
    """aiosmtpd's Session without the deprecation log line on ``login_data``.

    aiosmtpd 1.4 itself assigns ``session.login_data`` after every successful
    AUTH and that setter logs a WARNING ("Session.login_data is deprecated")
    each time; we keep the value but not the noise.
    """

    @property
    def login_data(self) -> Any:
        return self._login_data

    @login_data.setter
    def login_data(self, value: Any) -> None:
        self._login_data = value


class _SinkSMTP(SMTP):
    """aiosmtpd's SMTP protocol plus connection accounting."""

    def __init__(self, handler: Any, *, state: _State, **kwargs: Any) -> None:
        super().__init__(handler, **kwargs)
        self._sink_state = state
        self._sink_faults: SinkFaults | None = getattr(handler, "faults", None)
        self._over_cap = False

    def _create_session(self) -> Session:
        return _SinkSession(self.loop)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        upgrading = self._original_transport is not None  # STARTTLS re-entry, same connection
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            # asyncio turns Nagle off only for sockets made with proto=IPPROTO_TCP, not for ours (proto 0):
            # with it on, the 2nd reply to a pipelined group waited for the client's delayed ACK (~40 ms).
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if not upgrading:
            cap = self._sink_faults.connection_cap if self._sink_faults is not None else None
            with self._sink_state.lock:
                self._sink_state.counts["connections"] += 1
                if cap is not None and len(self._sink_state.live) >= cap:
                    self._over_cap = True  # greeted with 421 and closed by _handle_client
                    self._sink_state.counts["capped"] += 1
                else:
                    self._sink_state.live.add(self)

    async def _handle_client(self) -> None:
        if self._over_cap:
            await self.push("421 4.7.0 too many connections from your host, try again later")
            assert self.transport is not None
            self.transport.close()
            return
        await super()._handle_client()

    def connection_lost(self, error: Exception | None) -> None:
        with self._sink_state.lock:
            self._sink_state.live.discard(self)
        super().connection_lost(error)


class _SinkHandler:
    """aiosmtpd handler: stores mail in the Maildir and applies faults."""

    def __init__(self, maildir: mailbox.Maildir, faults: SinkFaults, state: _State, *, pipelining: bool) -> None:
        self._maildir = maildir
        self._faults = faults
        self.faults = faults  # read by each connection (the connection cap)
        self._state = state
        self._pipelining = pipelining

    async def handle_EHLO(self, server: SMTP, session: Session, envelope: Envelope, hostname: str,
                          responses: list[str]) -> list[str]:
        session.host_name = hostname
        if self._pipelining:  # aiosmtpd reads commands line by line from a buffer: a pipelined group is fine
            responses.insert(len(responses) - 1, "250-PIPELINING")
        return responses

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, rcpt_options: list[str]
    ) -> str:
        status = self._faults._recipient_status(address)
        if status is not None:
            self._state.bump("rejected")
            return status
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(rcpt_options)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        action = self._faults._take_data_action()
        if action.drop_before_reply:
            self._state.bump("dropped")
            assert server.transport is not None
            server.transport.abort()  # type: ignore[attr-defined]
            await _until_cancelled()  # connection_lost() cancels this session task
        if action.fail is not None:
            self._state.bump("rejected")
            status = action.fail
        else:
            key = self._store(envelope)
            self._state.bump("accepted")
            status = f"250 OK queued as {key}"
        if action.stall:
            # If the client gives up meanwhile, aiosmtpd cancels this task; a
            # stored message stays stored (the "timed out but delivered" case).
            await asyncio.sleep(action.stall)
        if action.fail is None and self._faults._take_drop_after():
            await server.push(status)
            self._state.bump("dropped")
            assert server.transport is not None
            server.transport.close()  # flushes the 250, then FIN
            await _until_cancelled()
        return status

    def _store(self, envelope: Envelope) -> str:
        content = envelope.original_content or b""
        if isinstance(content, str):  # pragma: no cover - decode_data is off
            content = content.encode("utf-8", "surrogateescape")
        mail_from = envelope.mail_from or ""
        trace = [f"Return-Path: <{mail_from}>"] + [f"Delivered-To: {rcpt}" for rcpt in envelope.rcpt_tos]
        data = ("\r\n".join(trace) + "\r\n").encode("utf-8", "surrogateescape") + content
        data = data.replace(b"\r\n", b"\n")
        return self._maildir.add(data)


async def _until_cancelled() -> None:
    await asyncio.get_running_loop().create_future()


class _SinkController(Controller):
    """aiosmtpd Controller serving on a socket we bound ourselves (port 0 works)."""

    def __init__(self, handler: Any, sock: socket.socket, state: _State, **kwargs: Any) -> None:
        host, port = sock.getsockname()[:2]
        super().__init__(handler, hostname=host, port=port, **kwargs)
        self._sock = sock
        self._state = state

    def factory(self) -> SMTP:
        return _SinkSMTP(self.handler, state=self._state, **self.SMTP_kwargs)

    def _create_server(self):  # type: ignore[no-untyped-def]
        return self.loop.create_server(self._factory_invoker, sock=self._sock, ssl=self.ssl_context)


class MailSink:
    """A local SMTP server storing every accepted message in a Maildir.

    Args:
        maildir: Directory of the Maildir; created (with ``tmp``/``new``/``cur``)
            if missing.
        host: Address to bind; ``127.0.0.1`` by default (never all interfaces
            unless you ask for it).
        port: TCP port; ``0`` picks a free port (see :attr:`port` after
            :meth:`start`). A restarted sink keeps its port.
        hostname: Name the server announces in its greeting.
        smtputf8: Offer SMTPUTF8 (RFC 6531).
        credentials: ``{user: password}``; when set, ``AUTH PLAIN/LOGIN`` is
            offered (also without TLS, for testing) and checked. Logging in is
            optional for clients.
        tls_context: Server TLS context; offers ``STARTTLS`` (or, with
            ``implicit_tls``, wraps the whole connection).
        implicit_tls: Serve SMTPS (TLS from the first byte); needs ``tls_context``.
        idle_timeout: Seconds after which an idle client connection is closed.
        pipelining: Offer PIPELINING (RFC 2920), as real MTAs do: a client may then send ``MAIL``, every
            ``RCPT`` and ``DATA`` at once. False tests a client against a server without it.
    """

    def __init__(
        self,
        maildir: Path | str,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        hostname: str = _DEFAULT_HOSTNAME,
        smtputf8: bool = True,
        credentials: Mapping[str, str] | None = None,
        tls_context: ssl.SSLContext | None = None,
        implicit_tls: bool = False,
        idle_timeout: float = 300.0,
        pipelining: bool = True,
    ) -> None:
        if implicit_tls and tls_context is None:
            raise ValueError("implicit_tls=True needs a tls_context")
        self.maildir = Path(maildir)
        self.host = host
        self._port = port
        self.hostname = hostname
        self.smtputf8 = smtputf8
        self.credentials = dict(credentials) if credentials else None
        self.tls_context = tls_context
        self.implicit_tls = implicit_tls
        self.idle_timeout = idle_timeout
        self.pipelining = pipelining
        self.faults = SinkFaults()
        self._state = _State()
        self._controller: _SinkController | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MailSink({self.url!r}, maildir={str(self.maildir)!r}, running={self.running})"

    # -- properties -------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound TCP port (the requested one before the first :meth:`start`)."""
        return self._port

    @property
    def url(self) -> str:
        """``smtp://HOST:PORT`` (``smtps://`` with implicit TLS); no credentials."""
        scheme = "smtps" if self.implicit_tls else "smtp"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self._port}"

    @property
    def running(self) -> bool:
        """Whether the server thread is serving."""
        return self._controller is not None

    def counters(self) -> SinkCounters:
        """A consistent snapshot of all counters."""
        with self._state.lock:
            c = self._state.counts
            return SinkCounters(
                accepted=c["accepted"], rejected=c["rejected"], dropped=c["dropped"], connections=c["connections"],
                capped=c["capped"])

    @property
    def accepted(self) -> int:
        """Messages stored so far."""
        return self.counters().accepted

    @property
    def rejected(self) -> int:
        """Negative replies injected so far (failed DATA + refused recipients)."""
        return self.counters().rejected

    @property
    def dropped(self) -> int:
        """Connections closed by drop faults so far."""
        return self.counters().dropped

    @property
    def connections(self) -> int:
        """Client connections opened so far."""
        return self.counters().connections

    # -- lifecycle --------------------------------------------------------

    def start(self) -> MailSink:
        """Bind the socket and serve in a background thread.

        Returns:
            MailSink: ``self``, for chaining.

        Raises:
            OSError: The address cannot be bound (e.g. the port is in use).
            RuntimeError: The sink is already running.
        """
        with self._lock:
            if self._controller is not None:
                raise RuntimeError("MailSink is already running")
            for sub in ("tmp", "new", "cur"):
                (self.maildir / sub).mkdir(parents=True, exist_ok=True)
            box = mailbox.Maildir(self.maildir, factory=None, create=False)
            sock = socket.create_server((self.host, self._port), family=_family(self.host), reuse_port=False)
            kwargs: dict[str, Any] = {
                "server_hostname": self.hostname,
                "enable_SMTPUTF8": self.smtputf8,
                "timeout": self.idle_timeout,
                "ready_timeout": 10.0,
            }
            if self.credentials is not None:
                kwargs["authenticator"] = self._authenticate
                kwargs["auth_require_tls"] = False
            if self.tls_context is not None:
                if self.implicit_tls:
                    kwargs["ssl_context"] = self.tls_context
                else:
                    kwargs["tls_context"] = self.tls_context
            handler = _SinkHandler(box, self.faults, self._state, pipelining=self.pipelining)
            controller = _SinkController(handler, sock, self._state, **kwargs)
            self._port = sock.getsockname()[1]
            before = self.counters().connections
            try:
                controller.start()
            except BaseException:
                sock.close()
                _abandon(controller)
                raise
            with self._state.lock:  # do not count aiosmtpd's start-up probe connection
                self._state.counts["connections"] = before
            self._controller = controller
            return self

    def stop(self) -> None:
        """Close all client connections, stop serving and join the thread (idempotent)."""
        with self._lock:
            controller, self._controller = self._controller, None
            if controller is None:
                return
            try:
                future = asyncio.run_coroutine_threadsafe(self._close_connections(), controller.loop)
                future.result(timeout=5)
            finally:
                controller.stop()

    def drop_connections(self) -> int:
        """Close every open client connection now (like a server restart or idle kill).

        Returns:
            int: How many connections were closed.

        Raises:
            RuntimeError: The sink is not running.
        """
        controller = self._controller
        if controller is None:
            raise RuntimeError("MailSink is not running")
        future = asyncio.run_coroutine_threadsafe(self._close_connections(), controller.loop)
        return future.result(timeout=5)

    async def _close_connections(self) -> int:
        with self._state.lock:
            live = list(self._state.live)
        for proto in live:
            if proto.transport is not None:
                proto.transport.close()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 2.0
        while loop.time() < deadline:
            with self._state.lock:
                if not any(p in self._state.live for p in live):
                    break
            await asyncio.sleep(0.01)
        return len(live)

    def _authenticate(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, auth_data: Any
    ) -> AuthResult:
        if not isinstance(auth_data, LoginPassword) or self.credentials is None:
            return AuthResult(success=False, handled=False)
        user = auth_data.login.decode("utf-8", "replace")
        expected = self.credentials.get(user)
        ok = expected is not None and hmac.compare_digest(expected.encode("utf-8"), auth_data.password)
        return AuthResult(success=ok, handled=False, auth_data=user if ok else None)

    def __enter__(self) -> MailSink:
        if self._controller is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _abandon(controller: Controller) -> None:
    """Release what a failed ``Controller.start`` left behind (thread, event loop)."""
    thread = getattr(controller, "_thread", None)
    if thread is not None:
        if controller.loop.is_running():
            controller.loop.call_soon_threadsafe(controller.cancel_tasks)
        thread.join(timeout=5)
        controller._thread = None
    if not controller.loop.is_running() and not controller.loop.is_closed():
        controller.loop.close()


# -- CLI entry point -----------------------------------------------------------


def serve_forever(
    maildir: Path | str,
    host: str = "127.0.0.1",
    port: int = 1025,
    *,
    stop: threading.Event | None = None,
    out: TextIO | None = None,
    max_connections: int | None = None,
) -> SinkCounters:
    """Run a :class:`MailSink` until Ctrl-C, SIGTERM or ``stop`` is set.

    Prints one line ``mailsink listening on smtp://HOST:PORT, storing in DIR``
    (flushed, so a parent process can read the URL) and, on exit, the counters.
    SIGTERM is handled only when called from the main thread; the previous
    handler is restored afterwards.

    Args:
        maildir: Maildir directory to store messages in.
        host: Address to bind (default ``127.0.0.1``).
        port: TCP port (default 1025; ``0`` picks a free one).
        stop: Optional event that ends the server when set (for embedding).
        out: Where to print; default ``sys.stdout``.
        max_connections: Client connections served at once; one more is greeted with ``421`` and closed
            (:meth:`SinkFaults.cap_connections`). None: no cap.

    Returns:
        SinkCounters: The counters at shutdown.

    Raises:
        OSError: The address cannot be bound.
    """
    stream = out if out is not None else sys.stdout
    done = stop if stop is not None else threading.Event()
    previous: Any = None
    installed = False
    in_main = threading.current_thread() is threading.main_thread()

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        done.set()

    sink = MailSink(maildir, host, port)
    sink.faults.cap_connections(max_connections)
    sink.start()
    try:
        if in_main:
            previous = signal.signal(signal.SIGTERM, on_sigterm)
            installed = True
        print(f"mailsink listening on {sink.url}, storing in {sink.maildir}", file=stream, flush=True)
        try:
            while not done.wait(0.2):
                pass
        except KeyboardInterrupt:
            pass
    finally:
        if installed:
            signal.signal(signal.SIGTERM, previous)
        sink.stop()
    counters = sink.counters()
    print(
        f"mailsink stopped: {counters.accepted} accepted, {counters.rejected} rejected, "
        f"{counters.dropped} dropped, {counters.connections} connections"
        + (f" ({counters.capped} refused over the cap of {max_connections})" if max_connections else ""),
        file=stream,
        flush=True,
    )
    return counters
