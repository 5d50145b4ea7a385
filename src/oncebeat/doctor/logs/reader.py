"""Reading log files into events: envelope first, then each message parser in turn.

Unknown lines are counted, never an error: a log export is full of web
requests, SQL, backtraces and lines of other programs. :class:`ReadStats`
says how many lines each format recognised, so a report can tell when it
understood (almost) nothing.

Bounded, whatever the input: a line longer than :data:`MAX_LINE` is counted as
unknown (and ``too_long``) without being held whole — it is read in chunks of at
most the cap and skipped — and every pattern of the parsers runs in time linear
in the line (``tests/unit/test_doctor_logs_hostile.py``). :func:`iter_events`
yields events as it reads, so a caller keeps only what it needs.
"""

from __future__ import annotations

import io
import re
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta, timezone
from typing import IO, Any

from . import activejob, celery, clockwork, heroku, journald, rubylogger, sidekiq
from .mail import DEFAULT, MailMatcher
from .records import Context, Envelope, Event, Line

__all__ = ["MAX_LINE", "ReadStats", "read_lines", "read_file_lines", "parse_lines", "iter_events", "line_text"]

#: The longest line read (bytes of a file; characters of a text stream such as standard input). A longer line
#: is counted as unknown and ``too_long``: no log line the doctor reads comes near it.
MAX_LINE = 64 * 1024

_MESSAGE_PARSERS: tuple[tuple[str, Callable[[Context, str], list[Event] | None]], ...] = (
    ("sidekiq", sidekiq.parse),
    ("celery", celery.parse),
    ("clockwork", clockwork.parse),
    ("activejob", activejob.parse),
)
_YEAR = re.compile(r"\b(20\d\d)-\d\d-\d\d")


@dataclass(kw_only=True)
class ReadStats:
    """How many lines were read, recognised (by format) and left unknown; the span of their instants.

    ``too_long`` lines (longer than :data:`MAX_LINE`) are counted in ``unknown`` too.
    """

    lines: int = 0
    recognised: int = 0
    unknown: int = 0
    outside: int = 0  # lines outside --since/--until
    too_long: int = 0
    by_format: Counter[str] = field(default_factory=Counter)
    first: datetime | None = None
    last: datetime | None = None
    files: list[str] = field(default_factory=list)
    # how the files were read (not part of the report): the number of reads, and the job lines of jobs no clock
    # schedules that were counted and dropped (see oncebeat.doctor.logs.scope)
    reads: int = 1
    dropped: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"files": self.files, "lines": self.lines, "recognised": self.recognised, "unknown": self.unknown,
                "outside_range": self.outside, "too_long": self.too_long,
                "by_format": dict(sorted(self.by_format.items())),
                "first": self.first.astimezone(UTC).isoformat() if self.first else None,
                "last": self.last.astimezone(UTC).isoformat() if self.last else None}


def read_lines(name: str, stream: IO[str]) -> Iterator[Line]:
    """Each line of the text ``stream`` as a :class:`Line` named ``name``:number (1-based), newline removed.

    A line longer than :data:`MAX_LINE` characters comes as ``too_long`` with empty text; it is read in chunks
    of at most the cap and dropped, never held whole.
    """
    number = 0
    while text := stream.readline(MAX_LINE + 1):
        number += 1
        if len(text) > MAX_LINE and not text.endswith("\n"):
            while (rest := stream.readline(MAX_LINE)) and not rest.endswith("\n"):
                pass
            yield Line(file=name, number=number, text="", too_long=True)
            continue
        yield Line(file=name, number=number, text=text.rstrip("\r\n"))


def read_file_lines(name: str, stream: IO[bytes], limit: int | None = None) -> Iterator[Line]:
    """Each line of the binary ``stream`` (a file opened ``rb``) as a :class:`Line`, UTF-8 with bad bytes
    replaced, with its byte ``offset`` and ``crc`` so that :func:`line_text` can read it again — only when the
    stream is seekable (a regular file; a pipe such as ``<(zcat log.gz)`` cannot be read twice).

    A line longer than :data:`MAX_LINE` bytes comes as ``too_long`` with empty text (read in chunks, dropped).
    ``limit``: read only the first ``limit`` bytes (a seekable stream: the size a file had when a first read of
    it began, so that a second read of a log still being written sees the same lines).
    """
    if not stream.seekable():
        text = io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline="\n")
        try:
            yield from read_lines(name, text)
        finally:
            text.detach()  # the caller closes its stream
        return
    end = limit if limit is not None else -1
    number = offset = 0

    def room(n: int) -> int:
        return n if end < 0 else min(n, end - offset)

    while room(1) > 0 and (raw := stream.readline(room(MAX_LINE + 1))):
        number += 1
        at = offset
        offset += len(raw)
        if len(raw) > MAX_LINE and not raw.endswith(b"\n"):
            while room(1) > 0 and (rest := stream.readline(room(MAX_LINE))):
                offset += len(rest)
                if rest.endswith(b"\n"):
                    break
            yield Line(file=name, number=number, text="", offset=at, too_long=True)
            continue
        body = raw.rstrip(b"\r\n")
        yield Line(file=name, number=number, text=body.decode("utf-8", errors="replace"), offset=at,
                   crc=zlib.crc32(body))


def line_text(line: Line) -> str:
    """The text of ``line``: its own, or read again from its file when it was stored without (:meth:`Line.stored`).

    Returns a note in place of the text when the file cannot be read or its line changed since (rotated, edited).
    """
    if line.text or line.offset is None or line.too_long:
        return line.text
    try:
        with open(line.file, "rb") as fh:
            fh.seek(line.offset)
            raw = fh.readline(MAX_LINE + 1).rstrip(b"\r\n")
    except OSError as exc:
        return f"(line not shown: {line.file} cannot be read again: {exc.strerror or exc})"
    if zlib.crc32(raw) != line.crc:
        return f"(line not shown: {line.file} changed since it was read)"
    return raw.decode("utf-8", errors="replace")


def _envelope(line: Line, year: int, log_tz: Any) -> Envelope:
    text = line.text
    env = heroku.envelope(text, line.file) or journald.envelope(text, line.file, year=year, log_tz=log_tz)
    if env is not None:
        return env
    return Envelope(fmt="plain", at=None, offset=None, source="", process=line.file.rsplit("/", 1)[-1], host=None,
                    pid=None, message=text)


def _parse_one(line: Line, env: Envelope, log_tz: Any, mail: MailMatcher = DEFAULT) -> tuple[str | None, list[Event]]:
    """``(format, events)``; format None when no parser knew the message (its events, if any, are noise)."""
    ctx = Context(envelope=env, line=line, log_tz=log_tz, mail=mail)
    if env.at is not None:
        system = heroku.parse_system(ctx) if env.fmt in ("heroku", "drain") else journald.parse_system(ctx)
        if system is not None:
            return env.fmt, system
    message, local, _pid = rubylogger.strip(env.message)
    if env.at is None and local is not None:  # a plain file of Ruby Logger lines: their stamps are --log-tz time
        env = replace(env, at=local.replace(tzinfo=log_tz).astimezone(UTC))
        ctx = Context(envelope=env, line=line, log_tz=log_tz, mail=mail)
    elif env.fmt == "journal" and local is not None and env.offset is not None and env.at is not None:
        # journalctl stamps whole seconds; the Ruby Logger stamp inside has microseconds: with the journal's
        # offset it is the finer instant (two runs within one second overlap or not by it), when the process's
        # zone is the host's (the two agree within the second)
        fine = local.replace(tzinfo=timezone(env.offset)).astimezone(UTC)
        if timedelta(0) <= fine - env.at < timedelta(seconds=1):
            env = replace(env, at=fine)
            ctx = Context(envelope=env, line=line, log_tz=log_tz, mail=mail)
    for name, parse in _MESSAGE_PARSERS:
        try:
            events = parse(ctx, message)
        except ValueError:  # an envelope-less line of a format that needs one (no instant): unknown
            events = None
        if events is not None:
            if local is not None:
                events = [_with_local(e, local) for e in events]
            return name, events
    if env.at is not None and (sent := mail.match(message)) is not None:
        # the app's own words for a sent mail, outside any job format: tied to the attempt running on that process
        event = ctx.event("mail", detail={"via": "app", **sent})
        return "mail", [_with_local(event, local) if local is not None else event]
    if env.at is not None:  # an unknown message of a known process: it shows the process was alive then
        return None, [ctx.event("noise", detail={"local": local} if local else {})]
    return None, []


def _with_local(event: Event, local: datetime) -> Event:
    detail = dict(event.detail)
    detail.setdefault("local", local)
    return Event(kind=event.kind, at=event.at, line=event.line, process=event.process, job=event.job,
                 job_id=event.job_id, thread=event.thread, host=event.host, pid=event.pid, detail=detail)


def parse_lines(lines: Iterable[Line], *, log_tz: Any, year: int, stats: ReadStats,
                since: datetime | None = None, until: datetime | None = None,
                mail: MailMatcher = DEFAULT) -> list[Event]:
    """The events of ``lines`` in ``[since, until)``, in input order; ``stats`` is updated (see :func:`iter_events`)."""
    return list(iter_events(lines, log_tz=log_tz, year=year, stats=stats, since=since, until=until, mail=mail))


def iter_events(lines: Iterable[Line], *, log_tz: Any, year: int, stats: ReadStats,
                since: datetime | None = None, until: datetime | None = None,
                mail: MailMatcher = DEFAULT) -> Iterator[Event]:
    """Yield the events of ``lines`` in ``[since, until)`` as they are read, in input order; ``stats`` is updated.

    Args:
        log_tz: the zone of stamps that carry no offset (journalctl ``-o short``, plain Celery files).
        year: the year of journalctl ``-o short`` stamps until a full date is seen.
        mail: what a sent mail looks like in the app's own words (:mod:`.mail`; ``--mail-pattern``).
    """
    for line in lines:
        stats.lines += 1
        if line.too_long:
            stats.unknown += 1
            stats.too_long += 1
            continue
        if m := _YEAR.search(line.text[:40]):
            year = int(m[1])
        env = _envelope(line, year, log_tz)
        fmt, found = _parse_one(line, env, log_tz, mail)
        if fmt is None:
            stats.unknown += 1
        else:
            stats.recognised += 1
            stats.by_format[fmt] += 1
        if not found:
            continue
        kept = [e for e in found if (since is None or e.at >= since) and (until is None or e.at < until)]
        if not kept:
            stats.outside += 1
            continue
        for e in kept:
            stats.first = e.at if stats.first is None or e.at < stats.first else stats.first
            stats.last = e.at if stats.last is None or e.at > stats.last else stats.last
        yield from kept
