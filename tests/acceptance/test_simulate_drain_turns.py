"""The simulator's workers stop taking turns at a wake-up once each of them in a row has claimed nothing.

After those empty claims no job ran and the simulated time stood still, so another claim would find the queue as
empty: the old loop made it anyway (a whole round of empty claims after the last claim that found work), a
statement per worker and wake-up that the run did not need. The run still settles with every invariant holding.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pytest

from oncebeat.reminders.policy import Policy
from oncebeat.simulate import SimConfig, parse_faults, runner
from oncebeat.worker import Worker


def test_each_wake_up_ends_at_the_first_run_of_empty_claims_one_per_worker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wake_ups: list[list[int]] = []  # per call of _drain: what each turn claimed, in turn order
    real_drain = runner._Sim._drain

    def recording_drain(self: runner._Sim, workers: list[Worker], *args: Any) -> None:
        turns: list[int] = []
        wake_ups.append(turns)
        real_worker_drain = Worker.drain

        def drain(worker: Worker, *, max_batches: int | None = None) -> int:
            n = real_worker_drain(worker, max_batches=max_batches)
            turns.append(n)
            return n

        with monkeypatch.context() as m:
            m.setattr(Worker, "drain", drain)
            real_drain(self, workers, *args)

    monkeypatch.setattr(runner._Sim, "_drain", recording_drain)
    sim = runner._Sim(SimConfig(days=6, start=date(2026, 1, 5), seed=3, faults=parse_faults("none"),
                                workdir=tmp_path / "sim", settle_days=1.5, invoices=40, policy=Policy()))
    report = sim.run()
    assert report.passed, report.to_text()
    workers = sim.cfg.workers
    busy = [t for t in wake_ups if any(t)]
    assert len(wake_ups) > 20 and len(busy) >= 5, (len(wake_ups), busy)
    for turns in wake_ups:
        # ends on exactly one empty claim per worker, and no earlier run of that many empty claims
        assert turns[-workers:] == [0] * workers, turns
        assert len(turns) == workers or turns[-workers - 1] > 0, turns
        runs = "".join("0" if n == 0 else "x" for n in turns[:-workers])
        assert "0" * workers not in runs, turns
    # a wake-up whose last claim with work was the first worker's: the old loop let that worker claim again
    assert any(len(t) > workers and t[-workers - 1] > 0 and (len(t) - workers - 1) % workers == 0 for t in busy), busy
