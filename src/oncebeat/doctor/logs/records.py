"""The values every log parser produces: a source line, the envelope around a message, and events.

A log line is read in two steps. Its **envelope** (a Heroku, log-drain or
journalctl prefix, or none) gives the instant, the process that wrote it
(``clock.1``, ``billing-1:celery[812]``) and the message; then the **message
parsers** (Clockwork, Active Job and Action Mailer, Sidekiq, Celery) turn the
message into zero or more :class:`Event` values. Instants are aware and UTC.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from .mail import DEFAULT, MailMatcher

__all__ = ["EVENT_KINDS", "Line", "Envelope", "Event", "Context"]

EVENT_KINDS = (
    "trigger",   # a clock said it fires a job (Clockwork "Triggering", Celery beat "Sending due task", cron CMD)
    "enqueue",   # a job was put on the queue (Active Job "Enqueued")
    "start",     # a worker began one attempt (Active Job "Performing", Sidekiq "start", Celery "received")
    "done",      # that attempt finished well
    "fail",      # that attempt failed (with the exception when the line says it)
    "retry",     # the queue will run the job again (Active Job "Retrying", Sidekiq retry, Celery "Retry in")
    "error",     # an exception line that belongs to the attempt just failed (Sidekiq WARN lines)
    "mail",      # a message was delivered (Action Mailer "Delivered mail")
    "boot",      # a process (clock, beat, worker) started up
    "restart",   # the platform stopped or restarted a process (Heroku state changes, systemd)
    "exit",      # a process ended (Heroku "Process exited with status N")
    "deploy",    # a release or deploy (Heroku app[api] lines)
    "scale",     # a formation change (Heroku "Scaled to clock@2…")
    "noise",     # a line of a known format that says nothing about jobs (router, web requests)
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Line:
    """One line of input: where it is (``file``:``number``, 1-based) and its text without the newline.

    Attributes:
        offset: the byte offset of the line in ``file`` when it was read from a file, else None.
        crc: the CRC-32 of its bytes (with ``offset``: to re-read the text of evidence, see :meth:`stored`).
        too_long: the line was longer than the reader's cap; ``text`` is empty and nothing parsed it.
    """

    file: str
    number: int
    text: str
    offset: int | None = None
    crc: int | None = None
    too_long: bool = False

    @property
    def where(self) -> str:
        return f"{self.file}:{self.number}"

    def stored(self) -> Line:
        """This line without its text when it can be read again from its file (``offset`` known), else itself.

        What the log doctor keeps of the lines of its events, so that memory does not grow with the lines'
        text; the few lines shown as evidence are read again (:func:`oncebeat.doctor.logs.reader.line_text`).
        """
        if self.offset is None or not self.text:
            return self
        return Line(file=self.file, number=self.number, text="", offset=self.offset, crc=self.crc)


@dataclass(frozen=True, kw_only=True, slots=True)
class Envelope:
    """What the prefix of a line says.

    Attributes:
        fmt: ``heroku``, ``drain`` (RFC 5424 log drain), ``journal`` or ``plain`` (no prefix).
        at: the instant (aware, UTC), or None when the prefix has none.
        offset: the writer's UTC offset when the prefix shows it (journalctl ``-o short-iso``), else None.
        source: ``app``, ``heroku`` (Heroku's own lines), a journal identifier (``celery``, ``CRON``), or ``""``.
        process: the process as the report names it: a dyno (``clock.1``), ``host:ident[pid]``, or the file.
        host: the host (journal), or None.
        pid: the pid when the prefix shows it, else None.
        message: the rest of the line.
    """

    fmt: str
    at: datetime | None
    offset: timedelta | None
    source: str
    process: str
    host: str | None
    pid: int | None
    message: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Event:
    """One thing a line says happened.

    Attributes:
        kind: one of :data:`EVENT_KINDS`.
        at: when (aware, UTC).
        line: the line that says it.
        process: the process that wrote it (see :class:`Envelope`); for ``restart``/``exit`` lines of the
            platform, the process they are about.
        job: the job class or task name (``SendInvoiceOverdueRemindersJob``, ``billing.tasks.send``), or None.
        job_id: the job's id (Active Job id, Sidekiq jid, Celery task id), or None.
        thread: a worker thread or child process (Sidekiq ``tid``, Celery ``ForkPoolWorker-1``), or None.
        detail: the rest: ``alias`` (Clockwork's name for the job), ``error`` (exception), ``status``, ``command``,
            ``local`` (the writer's own wall-clock time, naive) …
    """

    kind: str
    at: datetime
    line: Line
    process: str
    job: str | None = None
    job_id: str | None = None
    thread: str | None = None
    host: str | None = None
    pid: int | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True)
class Context:
    """What a message parser may need besides the message: the envelope and the zone of bare timestamps."""

    envelope: Envelope
    line: Line
    log_tz: Any  # a ZoneInfo: the zone of timestamps that carry no offset (Celery, plain files)
    mail: MailMatcher = DEFAULT  # what a sent mail looks like in the app's own words (--mail-pattern)

    def event(self, kind: str, at: datetime | None = None, **fields: Any) -> Event:
        """An event at ``at`` (default: the envelope's instant) written by the envelope's process."""
        when = at or self.envelope.at
        if when is None:
            raise ValueError("an event needs an instant")
        fields.setdefault("process", self.envelope.process)
        fields.setdefault("host", self.envelope.host)
        fields.setdefault("pid", self.envelope.pid)
        if self.envelope.offset is not None:  # the writer's UTC offset: host TZ evidence
            fields["detail"] = {**fields.get("detail", {}), "offset": self.envelope.offset}
        return Event(kind=kind, at=when, line=self.line, **fields)
