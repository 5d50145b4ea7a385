"""A hand-over lock for SQLite writers: ``flock`` on ``<db>-lock`` around ``BEGIN IMMEDIATE … COMMIT``.

Why: a process waiting for SQLite's write lock polls it from the busy handler, sleeping 1, 2, 5, 10,
… 100 ms between tries, so the lock often sits free while the waiter sleeps; a second worker process
then adds no throughput. A waiter blocked in ``flock`` is woken by the kernel the moment the holder
releases it.

Invariants:

- **Advisory only.** SQLite's own lock still decides who writes; this lock only orders the waits of
  oncebeat's writers. Readers, the ``sqlite3`` shell and older oncebeat versions never take it and stay
  correct: their waits go through the busy handler as before. A lock file deleted under running
  processes at worst brings back the busy handler's polling.
- **Crash-safe.** The kernel drops a ``flock`` when its holder's last descriptor closes, so a process
  killed with ``kill -9`` in the middle of a transaction cannot leave it held (SQLite rolls the
  transaction back from the WAL in the same way).
- **Bounded.** A wait ends after ``timeout`` seconds (the store's ``busy_timeout``): ``acquire`` then
  returns False and the store reports the database locked, as SQLite's busy handler would. The blocking
  ``flock`` call runs in a helper thread only when the lock is taken (an uncontended acquire is one
  non-blocking ``flock``), so the caller can stop waiting.
- **One holder per process.** Threads of a process queue on a ``threading.Lock`` first and share one
  descriptor; a forked child closes its inherited copy without unlocking (unlocking would free the
  parent's lock).
"""

from __future__ import annotations

import fcntl
import os
import queue
import threading
import time
import weakref

__all__ = ["WriteLock"]

_LIVE: weakref.WeakSet[WriteLock] = weakref.WeakSet()


class _Wait:
    """One blocked acquire handed to the waiter thread."""

    __slots__ = ("fd", "got", "abandoned")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.got = threading.Event()
        self.abandoned = False


class WriteLock:
    """The cross-process writer lock of one SQLite file (``path`` is the lock file, e.g. ``app.db-lock``)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._threads = threading.Lock()  # one thread of this process holds or waits for the flock
        self._state = threading.Lock()  # guards a _Wait's got/abandoned hand-over
        self._fd: int | None = None
        self._owner: int | None = None  # the thread holding the lock (a nested transaction must not wait for itself)
        self._requests: queue.SimpleQueue[_Wait | None] | None = None
        #: The last acquire found the lock held by another process (and waited for it). Read by the holder
        #: (the store's transaction) while it holds the lock: the worker claims a larger batch when writers queue.
        self.waited = False
        _LIVE.add(self)

    def acquire(self, timeout: float) -> bool:
        """Take the lock, waiting at most ``timeout`` seconds; False if it could not be had in time.

        Raises:
            OSError: the lock file cannot be opened (the caller goes on without this lock).
        """
        deadline = time.monotonic() + timeout
        if not self._threads.acquire(timeout=max(0.0, timeout)):
            return False
        try:
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                got, waited = True, False
            except BlockingIOError:
                got, waited = self._wait(fd, deadline - time.monotonic()), True
        except BaseException:
            self._threads.release()
            raise
        if got:
            self._owner = threading.get_ident()
            self.waited = waited
        return got  # not got: the waiter thread releases _threads once its late flock is undone

    def held_here(self) -> bool:
        """True if the calling thread holds the lock (it is inside a transaction of this store)."""
        return self._owner == threading.get_ident()

    def release(self) -> None:
        """Release the lock taken by :meth:`acquire` (from the thread that took it)."""
        self._owner = None
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        self._threads.release()

    def close(self) -> None:
        """Close the lock file (the store is closing; no transaction is open)."""
        if self._requests is not None:
            self._requests.put(None)
            self._requests = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        return self._fd

    def _wait(self, fd: int, timeout: float) -> bool:
        """Block in ``flock`` (in the waiter thread) for at most ``timeout`` seconds."""
        if self._requests is None:
            self._requests = queue.SimpleQueue()
            threading.Thread(target=self._waiter, args=(self._requests,), name="oncebeat-sqlite-lock",
                             daemon=True).start()
        # The waiter locks through its own duplicate of the descriptor (same open file, so the same lock):
        # closing the store meanwhile can then never make it lock or unlock a reused descriptor number.
        wait = _Wait(os.dup(fd))
        self._requests.put(wait)
        if wait.got.wait(max(0.0, timeout)):
            return True
        with self._state:
            if wait.got.is_set():
                return True
            wait.abandoned = True  # the waiter undoes its late flock, then frees _threads
        return False

    def _waiter(self, requests: queue.SimpleQueue[_Wait | None]) -> None:
        while (wait := requests.get()) is not None:
            fcntl.flock(wait.fd, fcntl.LOCK_EX)
            with self._state:
                if not wait.abandoned:
                    wait.got.set()
            if wait.abandoned:
                fcntl.flock(wait.fd, fcntl.LOCK_UN)
            os.close(wait.fd)  # the lock stays with the caller's descriptor (closing a duplicate keeps it)
            if wait.abandoned:
                self._threads.release()

    def _after_fork(self) -> None:
        """In a forked child: forget the parent's descriptor, waiter and thread lock (never unlock them)."""
        if self._fd is not None:
            os.close(self._fd)
        self._fd = None
        self._requests = None
        self._owner = None
        self._threads = threading.Lock()
        self._state = threading.Lock()


def _reset_in_child() -> None:
    for lock in list(_LIVE):
        lock._after_fork()


os.register_at_fork(after_in_child=_reset_in_child)
