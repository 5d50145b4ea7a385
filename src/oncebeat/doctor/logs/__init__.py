"""The log doctor: why did a job of a stack that does **not** use oncebeat run twice?

It reads the logs such a stack writes — Heroku (``heroku logs``, log drains),
``journalctl``, Clockwork, Active Job and Action Mailer, Sidekiq, Celery beat and
workers — and reports, with the doctor's finding model (cause code, severity,
evidence lines with file:line and the instant in the schedule's zone and UTC,
fix): two enqueues of one scheduled day and which process made each (a second
clock, a clock that restarted and fired on boot, a leftover Heroku Scheduler
job or cron entry, a manual one-off dyno), retries that re-delivered mail, runs
that overlapped, a clock whose host zone gives the wrong date or a schedule
kept in UTC, restarts and deploys at the fire time, and a per-day table
(enqueued, performed, failed, mails delivered).

Formats: one module each (:mod:`.heroku`, :mod:`.journald`, :mod:`.rubylogger`,
:mod:`.clockwork`, :mod:`.activejob`, :mod:`.sidekiq`, :mod:`.celery`), each with
its example lines; ``docs/doctor-logs.md`` has the table. Unknown lines are
counted, never an error. It reads only the files: it needs no database and
imports nothing of the reminders app.

Example::

    report = diagnose_logs(["heroku.log"], tz="America/Chicago")
    print(report.to_text())
    for f in report.by_code("multiple-clocks"):
        print(f.day, f.finding.summary)
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, date, datetime
from pathlib import Path
from typing import IO
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ...errors import ConfigError
from ..model import CheckRun, DoctorReport
from .analysis import analyse
from .mail import compile_mail_pattern
from .reader import MAX_LINE, ReadStats, iter_events, read_file_lines, read_lines
from .records import Event, Line
from .report import LOG_CHECK_CODES, SCHEMA, LogReport
from .scope import ScheduleScan, UnscheduledFilter
from .story import DayRow, EventStore, JobStory, LogFinding

__all__ = ["diagnose_logs", "LogReport", "LogFinding", "JobStory", "DayRow", "ReadStats", "Event", "Line",
           "SCHEMA", "LOG_CHECK_CODES", "MAX_LINE", "zone"]


def zone(name: str, option: str) -> ZoneInfo:
    """The IANA zone ``name``, or a ConfigError naming ``option`` and the fix."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(f"{option} {name!r} is not an IANA time zone; use a name such as America/Chicago or UTC") \
            from exc


def diagnose_logs(sources: Sequence[str | Path], *, tz: str = "UTC", since: datetime | None = None,
                  until: datetime | None = None, job: str | None = None, log_tz: str = "UTC",
                  stdin: IO[str] | None = None, two_reads: bool = True, mail_pattern: str | None = None) -> LogReport:
    """Read the log files (``-`` is standard input) and explain duplicate runs of scheduled jobs.

    Args:
        sources: file paths; ``-`` reads ``stdin`` (default ``sys.stdin``).
        tz: the schedule's IANA zone: days are local dates in it, instants are shown in it and in UTC.
        since: only lines at or after this aware instant; until: only lines before it.
        job: only this job (an Active Job class, a Celery task, or the clock's name for it).
        log_tz: the zone of stamps that carry no offset (journalctl ``-o short``, Celery and Ruby Logger files
            read without an envelope).
        two_reads: read regular files twice, keeping only the lines of jobs a clock may schedule (memory grows
            with those); False, or any source that is not a regular file (``-``, a pipe): one read, every job
            line kept. The report is the same either way (see :mod:`.scope`; ``stats.reads`` says how many
            reads it took: a third, keeping more lines, when dropping them could have changed a finding).
        mail_pattern: a regular expression (searched in each message) that says a mail was sent, in place of the
            default rule of :mod:`.mail` (an address with an SMTP 250 reply or "sent"/"e-mailed"); Action Mailer's
            ``Delivered mail`` lines count either way.
    Returns:
        A :class:`LogReport`; ``exit_code`` is 1 when a finding is an error.
    Raises:
        ConfigError: a ``mail_pattern`` that does not compile, an unknown zone, an unreadable file (named), a naive
            ``since``/``until``, or a ``job`` that no line mentions (the known names are listed).
    """
    mail = compile_mail_pattern(mail_pattern)
    schedule_zone = zone(tz, "--tz")
    line_zone = zone(log_tz, "--log-tz")
    for name, value in (("--since", since), ("--until", until)):
        if value is not None and value.tzinfo is None:
            raise ConfigError(f"{name} {value.isoformat()} has no UTC offset; give one (e.g. -06:00) or a date")
    year = (since or datetime.now(UTC)).year
    sizes: dict[str, int] = {}

    def read(sink: Callable[[Event], None]) -> ReadStats:
        stats = ReadStats()
        for source in sources:
            name = str(source)
            stats.files.append(name)
            if name == "-":
                lines: Iterator[Line] = read_lines("<stdin>", stdin or sys.stdin)
                for e in iter_events(lines, log_tz=line_zone, year=year, stats=stats, since=since, until=until,
                                     mail=mail):
                    sink(e)
                continue
            try:
                with open(source, "rb") as fh:
                    if two_reads:
                        sizes.setdefault(name, os.fstat(fh.fileno()).st_size)
                    lines = read_file_lines(name, fh, sizes.get(name))
                    for e in iter_events(lines, log_tz=line_zone, year=year, stats=stats, since=since, until=until,
                                     mail=mail):
                        sink(e)
            except OSError as exc:
                raise ConfigError(f"cannot read log file {name}: {exc.strerror or exc}; check the path") from exc
        return stats

    # Streamed: lines are read one at a time and only what the analysis uses is kept (see EventStore). Regular
    # files are read twice, the first time for the jobs a clock may schedule, so that the lines of other jobs
    # need not be kept (see .scope); standard input and pipes are read once, keeping every job line.
    # (a file named twice would give two lines one (file, line) key: the filter's order test assumes it does not)
    two_reads = two_reads and all(_regular(s) for s in sources) and len({str(s) for s in sources}) == len(sources)
    keep: frozenset[str] | None = None
    trigger_processes: set[str] = set()
    reads = 0
    if two_reads:
        scan = ScheduleScan()
        read(scan.add)
        reads += 1
        keep, trigger_processes = scan.scheduled(job), scan.trigger_processes
    while True:
        drop = UnscheduledFilter(keep, trigger_processes) if keep is not None else None
        store = EventStore(drop)
        stats = read(store.add)
        reads += 1
        floating: list[Event] | None = None
        if drop is not None:
            if drop.everything or drop.collides(store.events):
                keep = None
                continue
            floating = []
        result = analyse(store.events, tz=schedule_zone.key, job=job, clocks=store.clocks, floating=floating)
        if drop is not None and any(_bare(story) for story in result[0]):
            # a clock event whose job logs no enqueue line (Clockwork's perform_async: "dunning_digest" runs as
            # DunningDigestWorker) is named after the runs that follow it, which the first read could not know
            # to keep: read again keeping every line
            keep = None
            del result
            continue
        if drop is not None and floating and (more := drop.widen_for(floating, store.events)):
            keep = drop.keep | more if reads < 3 else None
            del result  # not held while the files are read again
            continue
        break
    stories, findings, rows, _aliases = result
    stats.reads, stats.dropped = reads, drop.dropped if drop is not None else 0
    if job is not None and not stories:
        known = ", ".join(sorted(store.names)) or "none"
        raise ConfigError(f"--job {job!r}: no line mentions that job; jobs in these logs: {known}")
    notes = []
    if stats.lines and stats.recognised == 0:
        notes.append("no line of a known format was found: see docs/doctor-logs.md for the formats read")
    elif not stories:
        notes.append("no scheduled job found: no clock (Clockwork, Celery beat) enqueued a job in these lines; "
                     "name one with --job")
    ordered = DoctorReport.ordered(f.finding for f in findings)
    by_finding = {id(f.finding): f for f in findings}
    checks = tuple(CheckRun(code=c, ran=True, findings=sum(1 for f in findings if f.finding.code == c))
                   for c in LOG_CHECK_CODES)
    scope = {"files": [str(s) for s in sources], "since": since, "until": until, "job": job,
             "log_tz": log_tz if log_tz != "UTC" else None}
    return LogReport(tz=schedule_zone.key, scope=scope, stats=stats, jobs=tuple(stories),
                     findings=tuple(by_finding[id(f)] for f in ordered), days=tuple(rows), checks=checks,
                     notes=tuple(notes))


def _bare(story: JobStory) -> bool:
    """A story of clock triggers alone: no enqueue line, no run (a job whose runs go by another name)."""
    return not story.runs and all(q.lines[-1].kind == "trigger" for q in story.enqueues)


def _regular(source: str | Path) -> bool:
    """Whether ``source`` is a regular file (it can be read twice); an unreadable one is read once, and fails."""
    if str(source) == "-":
        return False
    try:
        return stat.S_ISREG(os.stat(source).st_mode)
    except OSError:
        return False


def day_bound(text: str, tz: str, option: str, *, end: bool = False) -> datetime:
    """``--since``/``--until`` text: an ISO instant with offset, or a date (midnight in ``tz``; ``end``: the next).

    Raises:
        ConfigError: neither form, or an instant without an offset.
    """
    from datetime import timedelta

    try:
        d = date.fromisoformat(text)
        start = datetime(d.year, d.month, d.day, tzinfo=zone(tz, "--tz"))
        return start + timedelta(days=1) if end else start
    except ValueError:
        pass
    try:
        value = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ConfigError(f"{option} {text!r} is neither a date YYYY-MM-DD nor an ISO instant such as "
                          "2026-03-02T08:00:00-06:00") from exc
    if value.tzinfo is None:
        raise ConfigError(f"{option} {text!r} has no UTC offset; add one (e.g. -06:00) or give a date")
    return value.astimezone(UTC)
