"""The doctor's headlines say what happened, no more: on both backends, with the real engine and SMTP sink."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
from test_doctor import Billing, at, doctor, simple_app, src, tick_every

from oncebeat.clock import ClockProcess
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock


@pytest.fixture
def billing(store: Store, sim_clock: SimulatedClock, tmp_path: Path) -> Iterator[Billing]:
    b = Billing(store, sim_clock, tmp_path / "maildir")
    yield b
    b.close()


def test_a_chain_of_overlapping_restarts_counts_the_clocks_alive_at_one_instant(
        store: Store, sim_clock: SimulatedClock) -> None:
    app = simple_app()
    clocks = [ClockProcess(app, store, clock=sim_clock, source=src("clock", f"dyno-{n}", 100 + n, f"clock.{n}"))
              for n in range(4)]
    sim_clock.set(at(13))
    clocks[0].start()
    # Each clock starts while the previous one still runs, for 10 minutes, then the previous one stops
    # ticking: 4 clocks overlap in a chain, never more than 2 of them at once.
    for previous, current in itertools.pairwise(clocks):
        tick_every(sim_clock, sim_clock.now() + (at(0, 20) - at(0)), 5, previous)
        current.start()
        tick_every(sim_clock, sim_clock.now() + (at(0, 10) - at(0)), 5, previous, current)
    [finding] = doctor(store, sim_clock).by_code("multiple-clocks")
    assert finding.summary.startswith("2 clock processes were alive at the same time"), finding.summary
    assert "4 clocks overlapping" in finding.summary


def test_an_smtp_drop_after_the_message_was_sent_is_not_called_a_dead_worker(billing: Billing) -> None:
    billing.add_invoice("INV-8", date(2026, 2, 27))
    billing.first_fire()
    billing.sink.faults.drop_before_reply_next(1)  # the content went out; the 250 never came back
    billing.worker().drain()
    [doubt] = doctor(billing.store, billing.clock, maildir=billing.maildir).by_code("in-doubt")
    assert "died" not in doubt.summary, doubt.summary
    assert "never learned whether it took effect" in doubt.summary and "kept running" in doubt.summary
