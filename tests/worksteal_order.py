"""Longest tests first in each test process's share of a ``--dist worksteal`` run, from recorded durations.

How pytest-xdist's worksteal scheduler hands out tests (``xdist/scheduler/worksteal.py``, 3.x): once every test
process has collected, process after process takes a contiguous block of the collection, ``len(pending) //
processes_left`` tests each; a process whose queue runs low later takes half of the longest queue, **from its end**.
In file order the long tests bunch together (the acceptance and browser files), so one process gets most of them and
the others, done early, steal a few at a time while the last long test starts minutes before the end.

:func:`worksteal_order` lays the collection out as exactly those blocks instead: the tests, heaviest first, each go
to the block with the least recorded time that still has room (longest processing time first, with the blocks' sizes
fixed by the scheduler's arithmetic), and each block runs its own tests longest first. Every process starts on its
longest tests, the blocks take about the same time, and what is stolen late is short.

Tests of a module whose tests share a module- or class-scoped fixture stay together as one unit, in file order
(:func:`units_of`), so such a fixture is still set up once per process, not once per test; so do the tests of a
file marked ``pytest.mark.file_order`` (one of its tests reads what the earlier ones left).

Durations come from ``tests/durations.txt``: one ``<seconds> <node id>`` line per test (set-up + call + tear-down
wall time of a ``make test`` run), written by ``make test-durations`` (conftest's ``--record-durations``). A test the
file does not name (new since the recording) weighs the median of the recorded ones.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

#: The recorded durations that ``make test`` orders by (``make test-durations`` writes it).
DURATIONS_FILE = Path(__file__).resolve().parent / "durations.txt"


def read_durations(path: Path) -> dict[str, float]:
    """``{node id: seconds}`` from a durations file; ``{}`` when it does not exist.

    Lines are ``<seconds> <node id>``; blank lines and lines starting with ``#`` are skipped.

    Raises:
        ValueError: a line is not ``<seconds> <node id>`` (a hand-edited file gone wrong).
    """
    if not path.exists():
        return {}
    durations: dict[str, float] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        seconds, _, node_id = line.partition(" ")
        try:
            durations[node_id.strip()] = float(seconds)
        except ValueError:
            raise ValueError(f"{path}:{number}: expected '<seconds> <node id>', got {line!r}") from None
    return durations


def write_durations(path: Path, durations: Mapping[str, float], header: str) -> None:
    """Write ``{node id: seconds}`` as a durations file, sorted by node id (a re-recording diffs line by line)."""
    lines = [f"# {line}" for line in header.splitlines()]
    lines += [f"{durations[node_id]:.2f} {node_id}" for node_id in sorted(durations)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def share_sizes(tests: int, processes: int) -> list[int]:
    """The sizes of the blocks worksteal first hands out, in the order it hands them: ``tests // processes_left``."""
    sizes = []
    left = tests
    for i in range(processes):
        size = left // (processes - i)
        sizes.append(size)
        left -= size
    return sizes


def units_of(keys: Sequence[str], grouped: Iterable[str]) -> list[list[int]]:
    """Indexes of ``keys`` (node ids, in collection order) grouped into scheduling units.

    A test is a unit of its own unless the part of its node id before ``::`` (its file) is in ``grouped``: then
    the tests of that file form one unit, in collection order, at the place of the file's first test.
    """
    grouped = set(grouped)
    units: list[list[int]] = []
    unit_of_file: dict[str, list[int]] = {}
    for index, key in enumerate(keys):
        file = key.partition("::")[0]
        if file not in grouped:
            units.append([index])
        elif file in unit_of_file:
            unit_of_file[file].append(index)
        else:
            unit_of_file[file] = [index]
            units.append(unit_of_file[file])
    return units


def worksteal_order(weights: Sequence[float], units: Sequence[Sequence[int]], processes: int) -> list[int]:
    """A permutation of ``range(len(weights))``: worksteal's blocks balanced by weight, each longest first.

    Args:
        weights: Each test's expected seconds, in collection order.
        units: Indexes of tests that must stay together and in this order (:func:`units_of`); every index
            appears in exactly one unit.
        processes: The number of test processes (xdist's ``-n``).

    Returns:
        The new order, as indexes into the collection. With one process, or no more tests than processes, the
        collection order unchanged.
    """
    count = len(weights)
    if processes < 2 or count <= processes:
        return list(range(count))
    sizes = share_sizes(count, processes)
    totals = [0.0] * processes
    room = list(sizes)
    shares: list[list[tuple[float, int, Sequence[int]]]] = [[] for _ in range(processes)]
    # Heaviest unit first; ties in collection order, so every process computes the same layout.
    heaviest_first = sorted(units, key=lambda unit: (-sum(weights[i] for i in unit), unit[0]))
    for unit in heaviest_first:
        weight = sum(weights[i] for i in unit)
        fits = [s for s in range(processes) if room[s] >= len(unit)]
        # A unit larger than every block's room goes where most room is left: that block overflows into the next
        # process's first block, so the unit's last tests start in the next process (a small run only: in the whole
        # suite a block holds ~900 tests).
        share = (min(fits, key=lambda s: (totals[s], s)) if fits
                 else max(range(processes), key=lambda s: (room[s], -s)))
        shares[share].append((weight, unit[0], unit))
        totals[share] += weight
        room[share] -= len(unit)
    order: list[int] = []
    for share_units in shares:
        for _, _, unit in sorted(share_units, key=lambda entry: (-entry[0], entry[1])):
            order.extend(unit)
    return order


def expected_weights(keys: Sequence[str], durations: Mapping[str, float]) -> list[float]:
    """Each node id's recorded seconds; the median of every recorded test for a node id not recorded."""
    default = statistics.median(durations.values()) if durations else 0.0
    return [durations.get(key, default) for key in keys]
