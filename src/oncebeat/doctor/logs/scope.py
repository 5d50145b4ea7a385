"""Which job lines the log doctor keeps: those of jobs a clock may schedule, found by a first read of the files.

Most job lines of a busy app belong to jobs no clock schedules (mail deliveries, webhooks, syncs that web
requests enqueue: 99 % of them in ``bench/doctor_logs.py``'s log), and no finding is about them. When every
source is a regular file, :func:`~oncebeat.doctor.logs.diagnose_logs` reads the files twice:

1. :class:`ScheduleScan` keeps only names and processes, and gives the jobs a clock may schedule
   (:meth:`ScheduleScan.scheduled`): a superset of the jobs the analysis makes stories of;
2. :class:`UnscheduledFilter` then drops, as they are read, the lines of every other job (counted in
   ``ReadStats.dropped``): the analysis never holds their events, runs or attempts.

The findings are the same as with every line kept, because the analysis looks at the lines of other jobs
only to know which attempt a line with no usable job id belongs to, and through job ids. The filter notes
what could make that matter, and the doctor then reads again keeping the lines it names (or every line):

- a delivery, exception or retry line of a dropped job that its job id may not tie to a run started before
  it (a Sidekiq line, no job id, a run whose start comes later): it could be ascribed to another job's attempt;
- (after the analysis, :meth:`UnscheduledFilter.widen_for`) a line tied to an attempt by its process and
  thread alone, on a process or thread where dropped jobs started or ended attempts;
- (:meth:`UnscheduledFilter.collides`) a kept line whose job id is also a dropped line's (two jobs, one id).

Standard input and pipes cannot be read twice: there every job line is kept (one read).
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from .records import Event
from .story import is_clock_event

__all__ = ["ScheduleScan", "UnscheduledFilter"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
_FILES = 1 << 16  # files told apart in a start's key; more: the filter asks for every line to be kept


class ScheduleScan:
    """The first read: the names, clocks, triggers and enqueuing processes that tell which jobs a clock may
    schedule (memory grows with the distinct names and processes, not with the lines)."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.clocks: set[str] = set()
        self.trigger_processes: set[str] = set()
        self._triggered: set[str] = set()
        self._commands: set[str] = set()
        self._enqueued: set[tuple[str, str]] = set()

    def add(self, e: Event) -> None:
        if e.job:
            self.names.add(e.job)
        if is_clock_event(e):
            self.clocks.add(e.process)
        if e.kind == "trigger":
            self.trigger_processes.add(e.process)
            for name in (e.job, e.detail.get("alias")):
                if name:
                    self._triggered.add(str(name))
            if e.detail.get("command"):
                self._commands.add(str(e.detail["command"]))
        elif e.kind == "enqueue" and e.job:
            self._enqueued.add((e.job, e.process))

    def scheduled(self, job: str | None) -> frozenset[str]:
        """The jobs whose lines are kept: each job a trigger names, each job enqueued by a clock process or by a
        process that logged a trigger (the enqueue a trigger causes, and every other enqueue a trigger could be
        linked to), each job a cron command names, and ``job`` (``--job``)."""
        keep = set(self._triggered)
        keep |= {j for j, p in self._enqueued if p in self.clocks or p in self.trigger_processes}
        keep |= {n for n in self.names if any(n in c for c in self._commands)}
        if job:
            keep.add(job)
        return frozenset(keep)


class UnscheduledFilter:
    """The second read's test (``filter(event)`` → drop it?), and what it saw of the dropped lines.

    Attributes:
        dropped: lines dropped.
        widen: jobs whose lines must be kept after all (read again); ``everything``: keep every line.
    """

    def __init__(self, keep: frozenset[str], trigger_processes: set[str]) -> None:
        self.keep = keep
        self.trigger_processes = trigger_processes
        self.dropped = 0
        self.widen: set[str] = set()
        self.everything = False
        self._procs: dict[str, set[str]] = defaultdict(set)  # process → dropped jobs that started/ended there
        self._threads: dict[str, set[str]] = defaultdict(set)
        # Python's hash of the job ids (a 64-bit int, not the text: 8 bytes a line). Two ids with one hash can
        # only make the doctor read again or keep more, except in _starts, where it could let one delivery
        # line of a dropped job go whose run it took for started: odds of the order of runs² / 2⁶⁴.
        self._starts: dict[int, int] = {}  # id → earliest (instant in µs << 16 | file) of a dropped start
        self._ids = array("q")
        self._files: dict[str, int] = {}

    def __call__(self, e: Event) -> bool:
        if e.job is None or e.job in self.keep or (e.kind == "enqueue" and e.process in self.trigger_processes):
            return False
        self.dropped += 1
        ident = hash(e.job_id) if e.job_id is not None else None
        if ident is not None:
            self._ids.append(ident)
        if e.kind in ("start", "done", "fail"):  # they open and close attempts (and name the last failed one)
            self._procs[e.process].add(e.job)
            if e.thread:
                self._threads[e.thread].add(e.job)
        if e.kind == "start" and ident is not None:
            key = self._key(e)
            if key is not None and (old := self._starts.get(ident)) is not None and old >> 16 <= key >> 16:
                key = old
            if key is not None:
                self._starts[ident] = key
        elif e.kind in ("mail", "error", "retry") and not self._run_before(e, ident):
            self.widen.add(e.job)
        return True

    def _key(self, e: Event) -> int | None:
        n = self._files.setdefault(e.line.file, len(self._files))
        if n >= _FILES:
            self.everything = True
            return None
        return (e.at - _EPOCH) // _US << 16 | n

    def _run_before(self, e: Event, ident: int | None) -> bool:
        """Whether a dropped start of ``e``'s job id sorts before ``e`` (by instant, then file and line), so that
        the analysis ties ``e`` to that run by its id. A Sidekiq line's jid may be mapped to an Active Job id
        whose start this cannot see: not ours to judge."""
        if ident is None or e.detail.get("via") == "sidekiq" or (start := self._starts.get(ident)) is None:
            return False
        key = self._key(e)
        if key is None:
            return False
        # read earlier from the same file means an earlier line: an equal instant is enough there
        return start >> 16 < key >> 16 or (start == key)

    def collides(self, kept: Iterable[Event]) -> bool:
        """Whether a kept event's job id is also a dropped line's (the analysis would have joined them)."""
        mine = {hash(e.job_id) for e in kept if e.job_id is not None}
        return any(h in mine for h in self._ids)

    def widen_for(self, floating: Iterable[Event]) -> set[str]:
        """The dropped jobs that could have claimed the lines the analysis tied to an attempt by process and
        thread alone (``floating``: see :func:`~.story.build`), had their attempts been kept."""
        out: set[str] = set()
        for e in floating:
            out |= self._procs.get(e.process, set())
            if e.thread:
                out |= self._threads.get(e.thread, set())
                out |= self._procs.get(e.thread.split("/", 1)[0], set())
        return out
