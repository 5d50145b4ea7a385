"""Which job lines the log doctor keeps: those of jobs a clock may schedule, found by a first read of the files.

Most job lines of a busy app belong to jobs no clock schedules (mail deliveries, webhooks, syncs that web
requests enqueue: 99 % of them in ``bench/doctor_logs.py``'s log), and no finding is about them. When every
source is a regular file, :func:`~oncebeat.doctor.logs.diagnose_logs` reads the files twice:

1. :class:`ScheduleScan` keeps only names and processes, and gives the jobs a clock may schedule
   (:meth:`ScheduleScan.scheduled`): a superset of the jobs the analysis makes stories of;
2. :class:`UnscheduledFilter` then drops, as they are read, the lines of every other job (counted in
   ``ReadStats.dropped``): the analysis never holds their events, runs or attempts.

The findings are the same as with every line kept, because the analysis looks at the lines of other jobs
only to know which attempt a line with no usable job id belongs to, and through job ids. Where that could
matter, the doctor reads again keeping the lines of the jobs named (a fourth read keeps every line):

- (:meth:`UnscheduledFilter.widen_for`, after the analysis) a line tied to a kept attempt by its process and
  thread alone, where a dropped job failed on that thread or process before it or was running on that
  process at it; and a *probe*: a dropped job's delivery, exception or retry line that its job id may not tie
  to a run started before it (a Sidekiq line, no job id, a start read later), which the analysis would tie
  to a kept attempt by process and thread;
- (:meth:`UnscheduledFilter.collides`) a kept line whose job id is also a dropped line's (two jobs, one id).

Standard input and pipes cannot be read twice: there every job line is kept (one read).
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import replace
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
    """The second read's test (``filter(event)``: keep it, drop it or probe it), and what it saw of the dropped
    lines.

    Attributes:
        dropped: lines dropped.
        everything: more files than a start's key tells apart (:data:`_FILES`): keep every line.
    """

    def __init__(self, keep: frozenset[str], trigger_processes: set[str]) -> None:
        self.keep = keep
        self.trigger_processes = trigger_processes
        self.dropped = 0
        self.everything = False
        # what the dropped attempts could have claimed of a line tied to an attempt by process and thread alone:
        # as the last failed attempt of a thread or process (instants of their failures per key), or as an attempt
        # open on the process at that line (their spans, from start to the end of the same job id)
        self._failures: dict[str, array[int]] = defaultdict(lambda: array("q"))
        self._spans: dict[str, tuple[array[int], array[int]]] = defaultdict(lambda: (array("q"), array("q")))
        self._open: dict[int, tuple[str, int]] = {}  # job id → (process, start µs) of a dropped attempt not ended
        self._names: dict[str, set[str]] = defaultdict(set)  # key → the dropped jobs seen there
        self._coarse: set[str] = set()  # keys where spans cannot be told: any dropped job there may matter
        # Python's hash of the job ids (a 64-bit int, not the text: 8 bytes a line). Two ids with one hash can
        # only make the doctor read again or keep more, except in _starts, where it could let one delivery
        # line of a dropped job go whose run it took for started: odds of the order of runs² / 2⁶⁴.
        self._starts: dict[int, int] = {}  # id → earliest (instant in µs << 16 | file) of a dropped start
        self._ids = array("q")
        self._files: dict[str, int] = {}

    def __call__(self, e: Event) -> Event | None:
        """``e`` to keep it, None to drop it, or a *probe*: ``e`` marked ``detail["probe"]``, which the analysis
        only asks which attempt it would be tied to by process and thread (:func:`~.story.build`)."""
        if e.job is None or e.job in self.keep or (e.kind == "enqueue" and e.process in self.trigger_processes):
            return e
        self.dropped += 1
        ident = hash(e.job_id) if e.job_id is not None else None
        if ident is not None:
            self._ids.append(ident)
        if e.kind in ("start", "done", "fail"):  # they open and close attempts (and name the last failed one)
            self._attempt(e, ident)
        if e.kind == "start" and ident is not None:
            key = self._key(e)
            if key is not None and (old := self._starts.get(ident)) is not None and old >> 16 <= key >> 16:
                key = old
            if key is not None:
                self._starts[ident] = key
        elif e.kind in ("mail", "error", "retry") and not self._run_before(e, ident):
            # the analysis may not tie it to its run by id: where it would be tied by process and thread
            # instead, to a kept attempt, it must be kept (widen_for); elsewhere it cannot change a finding
            return replace(e, detail={**e.detail, "probe": True})
        return None

    def _attempt(self, e: Event, ident: int | None) -> None:
        at = (e.at - _EPOCH) // _US
        keys = (e.process, e.thread) if e.thread else (e.process,)
        for k in keys:
            self._names[k].add(e.job or "")
        opened = self._open.pop(ident, None) if ident is not None else None
        if opened is not None:  # it ends that attempt (a new start too: the old one failed, restarted)
            proc, start = opened
            if at < start:
                self._coarse.add(proc)
            starts, ends = self._spans[proc]
            starts.append(start)
            ends.append(at)
            if e.kind != "done":
                for k in keys:
                    self._failures[k].append(at)
        elif e.kind != "start":  # an end with no start read before it: read out of order
            self._coarse.update(keys)
        if e.kind == "start" and ident is not None:
            self._open[ident] = (e.process, at)

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
        mine = {hash(e.job_id) for e in kept if e.job_id is not None and not e.detail.get("probe")}
        return any(h in mine for h in self._ids)

    def widen_for(self, floating: Iterable[Event], kept: Iterable[Event]) -> set[str]:
        """The dropped jobs that could have claimed a line the analysis tied to an attempt by process and thread
        alone (``floating``: see :func:`~.story.build`), had their attempts been kept: one failed on its thread or
        process before it, or was open on its process at it (``kept``: the exits that end attempts too)."""
        for proc, start in self._open.values():  # never ended: open until the end of the log
            starts, ends = self._spans[proc]
            starts.append(start)
            ends.append(1 << 62)
        self._open.clear()
        first_failure = {k: min(v) for k, v in self._failures.items() if v}
        covers: dict[str, Callable[[int], bool]] = {}
        exits: dict[str, list[int]] = defaultdict(list)
        for e in kept:
            if e.kind == "exit":
                exits[e.process].append((e.at - _EPOCH) // _US)
        out: set[str] = set()
        for e in floating:
            if e.detail.get("probe"):
                out.add(e.job or "")
                continue
            at = (e.at - _EPOCH) // _US
            keys = {e.process, e.thread or e.process, (e.thread or e.process).split("/", 1)[0]}
            for k in keys:
                if k in self._coarse or first_failure.get(k, at + 1) <= at:
                    out |= self._names.get(k, set())
                if k not in self._spans:
                    continue
                if k not in covers:
                    covers[k] = _coverage(*self._spans[k])
                # open on the process at the line; or at an exit before it, which ended it as a failure
                if covers[k](at) or any(x <= at and covers[k](x) for x in exits.get(k, ())):
                    out |= self._names.get(k, set())
        return out


def _coverage(starts: array[int], ends: array[int]) -> Callable[[int], bool]:
    """``covered(t)``: whether a span ``[start, end]`` holds ``t`` (log n a question)."""
    spans = sorted(zip(starts, ends, strict=True))
    first = [s for s, _ in spans]
    reach: list[int] = []  # the latest end of the spans up to each one
    for _, end in spans:
        reach.append(max(end, reach[-1]) if reach else end)

    def covered(t: int) -> bool:
        i = bisect_right(first, t)
        return i > 0 and reach[i - 1] >= t

    return covered
