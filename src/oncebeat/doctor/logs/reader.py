"""Reading log files into events: envelope first, then each message parser in turn.

Unknown lines are counted, never an error: a log export is full of web
requests, SQL, backtraces and lines of other programs. :class:`ReadStats`
says how many lines each format recognised, so a report can tell when it
understood (almost) nothing.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import IO, Any

from . import activejob, celery, clockwork, heroku, journald, rubylogger, sidekiq
from .records import Context, Envelope, Event, Line

__all__ = ["ReadStats", "read_lines", "parse_lines"]

_MESSAGE_PARSERS: tuple[tuple[str, Callable[[Context, str], list[Event] | None]], ...] = (
    ("sidekiq", sidekiq.parse),
    ("celery", celery.parse),
    ("clockwork", clockwork.parse),
    ("activejob", activejob.parse),
)
_YEAR = re.compile(r"\b(20\d\d)-\d\d-\d\d")


@dataclass(kw_only=True)
class ReadStats:
    """How many lines were read, recognised (by format) and left unknown; the span of their instants."""

    lines: int = 0
    recognised: int = 0
    unknown: int = 0
    outside: int = 0  # lines outside --since/--until
    by_format: Counter[str] = field(default_factory=Counter)
    first: datetime | None = None
    last: datetime | None = None
    files: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"files": self.files, "lines": self.lines, "recognised": self.recognised, "unknown": self.unknown,
                "outside_range": self.outside, "by_format": dict(sorted(self.by_format.items())),
                "first": self.first.astimezone(UTC).isoformat() if self.first else None,
                "last": self.last.astimezone(UTC).isoformat() if self.last else None}


def read_lines(name: str, stream: IO[str]) -> Iterator[Line]:
    """Each line of ``stream`` as a :class:`Line` named ``name``:number (1-based), newline removed."""
    for number, text in enumerate(stream, start=1):
        yield Line(file=name, number=number, text=text.rstrip("\r\n"))


def _envelope(line: Line, year: int, log_tz: Any) -> Envelope:
    text = line.text
    env = heroku.envelope(text, line.file) or journald.envelope(text, line.file, year=year, log_tz=log_tz)
    if env is not None:
        return env
    return Envelope(fmt="plain", at=None, offset=None, source="", process=line.file.rsplit("/", 1)[-1], host=None,
                    pid=None, message=text)


def _parse_one(line: Line, env: Envelope, log_tz: Any) -> tuple[str | None, list[Event]]:
    """``(format, events)``; format None when no parser knew the message (its events, if any, are noise)."""
    ctx = Context(envelope=env, line=line, log_tz=log_tz)
    if env.at is not None:
        system = heroku.parse_system(ctx) if env.fmt in ("heroku", "drain") else journald.parse_system(ctx)
        if system is not None:
            return env.fmt, system
    message, local, _pid = rubylogger.strip(env.message)
    if env.at is None and local is not None:  # a plain file of Ruby Logger lines: their stamps are --log-tz time
        env = replace(env, at=local.replace(tzinfo=log_tz).astimezone(UTC))
        ctx = Context(envelope=env, line=line, log_tz=log_tz)
    for name, parse in _MESSAGE_PARSERS:
        try:
            events = parse(ctx, message)
        except ValueError:  # an envelope-less line of a format that needs one (no instant): unknown
            events = None
        if events is not None:
            if local is not None:
                events = [_with_local(e, local) for e in events]
            return name, events
    if env.at is not None:  # an unknown message of a known process: it shows the process was alive then
        return None, [ctx.event("noise", detail={"local": local} if local else {})]
    return None, []


def _with_local(event: Event, local: datetime) -> Event:
    detail = dict(event.detail)
    detail.setdefault("local", local)
    return Event(kind=event.kind, at=event.at, line=event.line, process=event.process, job=event.job,
                 job_id=event.job_id, thread=event.thread, host=event.host, pid=event.pid, detail=detail)


def parse_lines(lines: Iterable[Line], *, log_tz: Any, year: int, stats: ReadStats,
                since: datetime | None = None, until: datetime | None = None) -> list[Event]:
    """The events of ``lines`` in ``[since, until)``, in input order; ``stats`` is updated.

    Args:
        log_tz: the zone of stamps that carry no offset (journalctl ``-o short``, plain Celery files).
        year: the year of journalctl ``-o short`` stamps until a full date is seen.
    """
    events: list[Event] = []
    for line in lines:
        stats.lines += 1
        if m := _YEAR.search(line.text[:40]):
            year = int(m[1])
        env = _envelope(line, year, log_tz)
        fmt, found = _parse_one(line, env, log_tz)
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
        events.extend(kept)
    return events
