"""A near-free progress probe shared between a benchmark and its worker processes.

Each process that runs a benchmark handler calls :func:`hit` once per job. The
first call (per process id, so forked pool children get their own) creates a
24-byte file ``<dir>/<pid>.probe`` mapped with ``MAP_SHARED`` and from then on
writes ``(first, last, count)`` into it: ``time.monotonic()`` of the first and
latest handler call and the number of calls. The benchmark reads every file to
see how many handlers ran (to know when a drain is over without polling the
queue) and the span from the first to the last handler (CLOCK_MONOTONIC is
one clock for every process on a Linux host).

The directory comes from ``BENCH_PROBE_DIR`` (set by the benchmark before it
starts workers); without it :func:`hit` does nothing.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["hit", "read", "ProbeTotals"]

_FMT = "<ddq"
_SIZE = struct.calcsize(_FMT)


class _Probe:
    def __init__(self, directory: str) -> None:
        self.pid = os.getpid()
        path = Path(directory) / f"{self.pid}.probe"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, _SIZE)
            self.mm = mmap.mmap(fd, _SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        self.first = 0.0
        self.count = 0
        self.lock = threading.Lock()  # handlers may run in several threads of one process

    def hit(self) -> None:
        with self.lock:
            now = time.monotonic()
            if not self.count:
                self.first = now
            self.count += 1
            struct.pack_into(_FMT, self.mm, 0, self.first, now, self.count)


_state: _Probe | None = None
_init_lock = threading.Lock()


def hit() -> None:
    """Record one handler call in this process (no-op without ``BENCH_PROBE_DIR``)."""
    global _state
    if _state is None or _state.pid != os.getpid():
        with _init_lock:
            if _state is None or _state.pid != os.getpid():
                directory = os.environ.get("BENCH_PROBE_DIR")
                if not directory:
                    return
                _state = _Probe(directory)
    _state.hit()


@dataclass(frozen=True, slots=True)
class ProbeTotals:
    count: int
    first: float | None  # monotonic seconds of the first handler call in any process
    last: float | None  # monotonic seconds of the latest handler call in any process
    processes: int

    @property
    def span(self) -> float | None:
        return None if self.first is None or self.last is None else self.last - self.first


def read(directory: str | Path) -> ProbeTotals:
    """Sum the probes in ``directory``."""
    count = 0
    first: float | None = None
    last: float | None = None
    n = 0
    for path in Path(directory).glob("*.probe"):
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            continue
        if len(raw) < _SIZE:
            continue
        f, lst, c = struct.unpack_from(_FMT, raw, 0)
        if c <= 0:
            continue
        n += 1
        count += c
        first = f if first is None else min(first, f)
        last = lst if last is None else max(last, lst)
    return ProbeTotals(count=count, first=first, last=last, processes=n)
