"""The simulator's ``db-blip`` draws do not depend on how many statements a run issues.

A seeded simulation must keep its fault plan when the engine stops issuing an idle statement (a clock's resync read,
a claim after an empty one): each statement's blip is decided by (seed, statement name, simulated instant, how many
statements of that name ran at that instant before it), and the run's sequential generator, from which crashes,
SMTP faults and races are drawn, is not touched per statement.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from oncebeat.errors import TransientStoreError
from oncebeat.simulate.faults import keyed_draw
from oncebeat.simulate.runner import SimConfig, _Sim
from oncebeat.timebase import SimulatedClock

T0 = datetime(2026, 1, 5, tzinfo=UTC)
BUSY = ("heartbeat_process", "claim_jobs", "rescue_jobs", "claim_jobs", "complete_job")


def _feed(seed: int, *, idle_reads: bool) -> tuple[list[tuple[int, int, str]], float]:
    """Feed 400 instants' statements to one simulation's hook; return the blipped (instant, position, name) of the
    busy statements and the sequential generator's next draw afterwards."""
    sim = _Sim(SimConfig(seed=seed, faults={"db-blip": 0.2}))
    sim.clock = SimulatedClock(T0)
    blipped: list[tuple[int, int, str]] = []
    for tick in range(400):
        sim.clock.set(T0 + timedelta(minutes=tick))
        for pos, name in enumerate(BUSY):
            if idle_reads:
                try:  # the statement a change to the engine might drop; its own blips do not matter here
                    sim.blip("get_schedule")
                except TransientStoreError:
                    pass
            try:
                sim.blip(name)
            except TransientStoreError:
                blipped.append((tick, pos, name))
    return blipped, sim.rng.random()


def test_an_idle_statement_more_or_less_changes_no_other_draw() -> None:
    for seed in (1, 7, 11):
        with_reads, next_with = _feed(seed, idle_reads=True)
        without, next_without = _feed(seed, idle_reads=False)
        assert with_reads == without, seed
        # the other faults' generator is where it started: statements draw nothing from it
        assert next_with == next_without == random.Random(seed).random()
        assert 0.1 * 2000 < len(without) < 0.3 * 2000  # the rate holds: 2,000 busy statements at 0.2


def test_draws_repeat_per_seed_and_differ_across_seeds_and_instants() -> None:
    assert _feed(3, idle_reads=False) == _feed(3, idle_reads=False)
    assert _feed(3, idle_reads=False)[0] != _feed(4, idle_reads=False)[0]
    assert keyed_draw("db-blip", 3, "claim_jobs", T0, 0) != keyed_draw("db-blip", 3, "claim_jobs", T0, 1)
    draws = [keyed_draw("k", i) for i in range(20_000)]
    assert all(0 <= d < 1 for d in draws)
    assert abs(sum(draws) / len(draws) - 0.5) < 0.01


def test_no_more_than_two_blips_in_a_row_per_statement() -> None:
    sim = _Sim(SimConfig(seed=1, faults={"db-blip": 1.0}))
    sim.clock = SimulatedClock(T0)
    outcomes = []
    for _ in range(6):
        try:
            sim.blip("claim_jobs")
            outcomes.append("ran")
        except TransientStoreError:
            outcomes.append("blip")
    assert outcomes == ["blip", "blip", "ran", "blip", "blip", "ran"]
