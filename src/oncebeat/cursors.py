"""The clock's in-memory cursors: each schedule's next fire instant, indexed by time.

A clock ticks every second over every schedule it fires. With 100,000 schedules, scanning all of them per tick
for "which are due" and "which comes next" cost more CPU than the firing itself, so :class:`Cursors` keeps a heap
beside the mapping: both questions cost the number of due schedules (plus a logarithm), not the number of
schedules.
"""

from __future__ import annotations

import heapq
from datetime import datetime


class Cursors(dict[str, datetime]):
    """``schedule key -> next fire instant (UTC)``, a dict whose writes also feed a time index.

    Write only through ``c[key] = at``, ``pop`` and :meth:`clear` (other dict writers such as ``update`` are
    refused): the heap holds ``(at, key)`` for every write and stale entries are dropped lazily, when they reach
    the top, and the heap is rebuilt when they outnumber the live ones four to one.
    """

    def __init__(self) -> None:
        super().__init__()
        self._heap: list[tuple[datetime, str]] = []

    def __setitem__(self, key: str, at: datetime) -> None:
        super().__setitem__(key, at)
        heapq.heappush(self._heap, (at, key))
        if len(self._heap) > 4 * len(self) + 1024:  # mostly stale entries (every fire leaves one): rebuild, rarely
            self._heap = [(t, k) for k, t in self.items()]
            heapq.heapify(self._heap)

    def clear(self) -> None:
        super().clear()
        self._heap.clear()

    def update(self, *args: object, **kwargs: object) -> None:  # pragma: no cover - guards the heap's invariant
        raise TypeError("Cursors: write one key at a time (c[key] = at)")

    setdefault = popitem = update  # type: ignore[assignment]

    def _drop_stale_top(self) -> None:
        heap = self._heap
        while heap and self.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)

    def due(self, now: datetime) -> list[str]:
        """The keys whose instant is at or before ``now``, earliest first (then by key); nothing is removed."""
        return [key for _, key in sorted(self._entries_until(now))]

    def due_unordered(self, now: datetime) -> set[str]:
        """The keys of :meth:`due` without its sort (what :meth:`ClockProcess.prepare_ahead` needs each second)."""
        return {key for _, key in self._entries_until(now)}

    def _entries_until(self, now: datetime) -> set[tuple[datetime, str]]:
        self._drop_stale_top()
        heap, out, stack = self._heap, set(), [0] if self._heap else []
        while stack:  # the heap's nodes at or before `now` form a subtree at its root: walk only that
            i = stack.pop()
            at, key = heap[i]
            if at > now:
                continue
            if self.get(key) == at:
                out.add((at, key))  # a set: a key written twice with one instant has two entries
            if 2 * i + 1 < len(heap):
                stack.append(2 * i + 1)
            if 2 * i + 2 < len(heap):
                stack.append(2 * i + 2)
        return out

    def earliest(self) -> datetime | None:
        """The earliest instant held, or None when empty."""
        self._drop_stale_top()
        return self._heap[0][0] if self._heap else None
