"""tests/worksteal_order.py: the blocks worksteal hands out, balanced and longest first, run through xdist's own
scheduler (``WorkStealingScheduling``) by a small event simulation: test processes that take their queues in order,
each test taking its weight in simulated seconds, and answer steal requests as xdist's workers do."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace

import pytest
from xdist.scheduler.worksteal import WorkStealingScheduling

from worksteal_order import (
    expected_weights,
    read_durations,
    share_sizes,
    units_of,
    worksteal_order,
    write_durations,
)


class _Process:
    """A test process as the scheduler sees it: a queue it runs in order, one test at a time."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.queue: list[int] = []
        self.batches: list[list[int]] = []
        self.running: int | None = None
        self.done_at = 0.0
        self.ran: list[int] = []
        self.steal: list[int] | None = None

    def send_runtest_some(self, indices: list[int]) -> None:
        self.batches.append(list(indices))
        self.queue.extend(indices)

    def send_steal(self, indices: list[int]) -> None:
        self.steal = list(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def _run(weights: list[float], order: list[int], processes: int) -> tuple[float, list[_Process]]:
    """Simulate a worksteal run of the collection laid out in ``order``; the makespan and the processes."""
    collection = [f"t{i}" for i in order]
    config = SimpleNamespace(getvalue=lambda name: {"tx": [f"{processes}*popen"]}[name])
    scheduler = WorkStealingScheduling(config)  # type: ignore[arg-type]
    nodes = [_Process(f"gw{i}") for i in range(processes)]
    for node in nodes:
        scheduler.add_node(node)  # type: ignore[arg-type]
    for node in nodes:
        scheduler.add_node_collection(node, collection)  # type: ignore[arg-type]
    scheduler.schedule()
    now = 0.0
    while True:
        for node in nodes:
            if node.steal is not None:  # a worker gives back the requested tests it has not started
                wanted, node.steal = set(node.steal), None
                stolen = [i for i in node.queue if i in wanted]
                node.queue = [i for i in node.queue if i not in wanted]
                scheduler.remove_pending_tests_from_node(node, stolen)  # type: ignore[arg-type]
        for node in nodes:
            if node.running is None and node.queue:
                node.running = node.queue.pop(0)
                node.done_at = now + weights[order[node.running]]
        busy = [node for node in nodes if node.running is not None]
        if not busy:
            break
        node = min(busy, key=lambda n: n.done_at)
        now, index, node.running = node.done_at, node.running, None
        assert index is not None
        node.ran.append(index)
        scheduler.mark_test_complete(node, index)  # type: ignore[arg-type]
    assert sorted(i for node in nodes for i in node.ran) == list(range(len(order))), "a test ran twice or never"
    return now, nodes


def _bunched(count: int, seed: int) -> list[float]:
    """Mostly short tests, then a tail of long ones in file order (like the acceptance and browser files)."""
    rng = random.Random(seed)
    short = [rng.uniform(0.01, 0.5) for _ in range(count - count // 10)]
    long = [rng.uniform(5.0, 60.0) for _ in range(count // 10)]
    return short + long


def test_share_sizes_are_the_blocks_xdist_hands_out_first() -> None:
    weights = [1.0] * 103
    _, nodes = _run(weights, list(range(103)), 4)
    assert [len(node.batches[0]) for node in nodes] == share_sizes(103, 4) == [25, 26, 26, 26]
    assert sum(share_sizes(7, 3)) == 7


@pytest.mark.parametrize("processes", [2, 4])
def test_each_process_starts_its_block_longest_first(processes: int) -> None:
    weights = _bunched(200, seed=processes)
    order = worksteal_order(weights, [[i] for i in range(200)], processes)
    _, nodes = _run(weights, order, processes)
    for node in nodes:
        first = [weights[order[i]] for i in node.batches[0]]
        assert first == sorted(first, reverse=True)
        assert first[0] >= 5.0, "every process starts on a long test"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_ordered_run_ends_sooner_than_file_order_and_near_the_bound(seed: int) -> None:
    weights = _bunched(300, seed)
    processes = 4
    file_order, _ = _run(weights, list(range(300)), processes)
    ordered, _ = _run(weights, worksteal_order(weights, [[i] for i in range(300)], processes), processes)
    bound = max(max(weights), sum(weights) / processes)  # no schedule can end sooner
    assert ordered < file_order
    assert ordered <= bound * 1.05


def test_a_unit_stays_together_in_file_order() -> None:
    keys = ["a.py::t1", "b.py::t1", "a.py::t2", "c.py::t1", "a.py::t3", "b.py::t2"]
    units = units_of(keys, {"a.py"})
    assert units == [[0, 2, 4], [1], [3], [5]]
    weights = [0.1, 5.0, 0.1, 3.0, 0.1, 4.0]
    order = worksteal_order(weights, units, 2)
    assert sorted(order) == list(range(6))
    where = [order.index(i) for i in (0, 2, 4)]
    assert where == list(range(where[0], where[0] + 3)), "the unit's tests run one after another, in file order"


def test_one_process_or_few_tests_keep_file_order() -> None:
    assert worksteal_order([3.0, 1.0, 2.0], [[0], [1], [2]], 1) == [0, 1, 2]
    assert worksteal_order([3.0, 1.0, 2.0], [[0], [1], [2]], 3) == [0, 1, 2]


def test_same_durations_give_the_same_order_in_every_process() -> None:
    weights = [1.0, 2.0, 1.0, 2.0, 0.5, 0.5, 1.0, 2.0]  # ties broken by collection order, never by chance
    units = [[i] for i in range(8)]
    assert worksteal_order(weights, units, 2) == worksteal_order(list(weights), list(units), 2) == \
        [1, 7, 6, 5, 3, 0, 2, 4]


def test_unrecorded_tests_weigh_the_median(tmp_path: Path) -> None:
    path = tmp_path / "durations.txt"
    write_durations(path, {"b.py::t": 3.0, "a.py::t": 1.0, "c.py::t[x y]": 2.0}, "recorded for a test")
    assert path.read_text().splitlines() == ["# recorded for a test", "1.00 a.py::t", "3.00 b.py::t",
                                             "2.00 c.py::t[x y]"]
    durations = read_durations(path)
    assert durations == {"a.py::t": 1.0, "b.py::t": 3.0, "c.py::t[x y]": 2.0}
    assert expected_weights(["a.py::t", "new.py::t"], durations) == [1.0, 2.0]
    assert read_durations(tmp_path / "missing.txt") == {}


def test_a_malformed_durations_line_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "durations.txt"
    path.write_text("# header\n1.5 a.py::t\nfast b.py::t\n")
    with pytest.raises(ValueError, match="durations.txt:3: expected"):
        read_durations(path)
