"""The clock's burst tick in-process, two engines side by side: ``python -m bench.clock_burst [--before DIR]``.

W4's burst without the wall clock: a :class:`oncebeat.clock.ClockProcess` over ``--schedules`` (10,000)
``*/1 * * * *`` schedules in W4's 50 zones, on a fresh PostgreSQL schema (``bench_clock_…``, dropped after),
driven by a simulated clock. It starts one second after a minute, prepares ahead as the running clock does
while it waits, then ticks at each of ``--bursts`` following minutes (each tick records 10,000 occurrences and
jobs). Per burst it measures the tick's wall time, the clock process's CPU time and the CPU time of the
PostgreSQL backends serving it (``/proc/PID/stat`` of the backends whose client ports are this process's), and
the wall time from the tick's start to each committed batch (``first commit``: when the first jobs became
visible). Under load, wall time is mostly waiting for a CPU; the CPU times are the work itself.

Each repetition runs, in a shuffled order and each in its own process, the engine on ``PYTHONPATH`` (``after``,
the working tree) and, with ``--before DIR`` (a directory holding an exported ``oncebeat`` package), that one.
Prints per-burst medians and the after ÷ before ratios of each repetition, with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from statistics import median
from typing import Any

from bench.common import fmt_num, log, md_table, pg_backend_cpu, pg_backend_pids


def cell(n: int, bursts: int) -> dict[str, Any]:
    """One engine's run: ``bursts`` burst ticks over ``n`` schedules; returns the per-burst measures."""
    from bench.common import FreshDb, Settings
    from bench.w4_clock import ZONES
    from oncebeat.app import ScheduleDef
    from oncebeat.clock import ClockProcess
    from oncebeat.store import open_store
    from oncebeat.timebase import SimulatedClock

    settings = Settings.make(reps=1, quick=False)
    defs = [ScheduleDef(key=f"s{i:05d}", expression="*/1 * * * *", tz=ZONES[i % len(ZONES)], task="noop")
            for i in range(n)]
    out: list[dict[str, Any]] = []
    with FreshDb("postgres", "clock", settings) as db:
        store = open_store(db.url)
        try:
            t0 = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(seconds=1)
            sim = SimulatedClock(t0)
            clk = ClockProcess(defs, store, clock=sim, tick_interval=1.0)
            clk.start()
            commits: list[float] = []
            real_tx = store.transaction

            def timed_tx(*a: Any, **k: Any) -> Any:
                from contextlib import contextmanager

                @contextmanager
                def wrapped() -> Any:
                    with real_tx(*a, **k) as tx:
                        yield tx
                    commits.append(time.perf_counter())
                return wrapped()

            pids = pg_backend_pids(store)
            for b in range(bursts):
                sim.set(t0 + timedelta(seconds=30 + 60 * b))
                clk.tick()  # an idle tick between bursts: the running clock's re-read falls here, as in W4
                clk.prepare_ahead(60.0)
                sim.set(t0 + timedelta(seconds=59 + 60 * b, milliseconds=50))  # 0.05 s after the minute
                pg0 = pg_backend_cpu(pids)
                commits.clear()
                store.transaction = timed_tx  # type: ignore[method-assign]
                c0, w0 = time.process_time(), time.perf_counter()
                fires = clk.tick()
                w1, c1 = time.perf_counter(), time.process_time()
                store.transaction = real_tx  # type: ignore[method-assign]
                pg1 = pg_backend_cpu(pids)
                pids = pg_backend_pids(store)
                out.append({"fires": len(fires), "wall": w1 - w0, "cpu": c1 - c0, "pg_cpu": pg1 - pg0,
                            "first_commit": (commits[0] - w0) if commits else None, "commits": len(commits)})
        finally:
            store.close()
    return {"bursts": out}


def _run_cell(n: int, bursts: int, src: str | None) -> dict[str, Any]:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = os.pathsep.join([src, str(Path.cwd())])
    p = subprocess.run([sys.executable, "-m", "bench.clock_burst", "--cell", "--schedules", str(n),
                        "--bursts", str(bursts)], env=env, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise RuntimeError(f"cell failed ({p.returncode}):\n{p.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(p.stdout.strip().splitlines()[-1])
    return result


def _med(cell_result: dict[str, Any], field: str) -> float:
    values = [b[field] for b in cell_result["bursts"][1:] or cell_result["bursts"]]  # the first burst warms up
    return median(v for v in values if v is not None)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.clock_burst", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", help="directory holding the before engine's oncebeat package")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--schedules", type=int, default=10_000)
    p.add_argument("--bursts", type=int, default=4, help="burst ticks per run (the first is not counted)")
    p.add_argument("--cell", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.cell:
        print(json.dumps(cell(a.schedules, a.bursts)))
        return 0
    engines = {"after": None} | ({"before": a.before} if a.before else {})
    fields = ("wall", "cpu", "pg_cpu", "first_commit")
    rows, ratios = [], []
    for rep in range(a.reps):
        order = list(engines)
        random.shuffle(order)
        got: dict[str, dict[str, Any]] = {}
        for eng in order:
            load = os.getloadavg()[0]
            got[eng] = _run_cell(a.schedules, a.bursts, engines[eng])
            got[eng]["load"] = load
            rows.append([str(rep + 1), eng, f"{load:.1f}"] + [fmt_num(_med(got[eng], f)) for f in fields]
                        + [str(got[eng]["bursts"][-1]["commits"])])
            log(f"rep {rep + 1} {eng}: load {load:.1f} " + ", ".join(f"{f} {_med(got[eng], f):.3f}" for f in fields))
        if "before" in got:
            ratios.append([str(rep + 1)] + [f"{_med(got['after'], f) / _med(got['before'], f):.2f}" for f in fields])
    print(md_table(["rep", "engine", "load", "tick wall s", "clock CPU s", "PostgreSQL CPU s", "first commit s",
                    "commits"], rows))
    if ratios:
        print()
        print(md_table(["rep", "wall after ÷ before", "clock CPU", "PostgreSQL CPU", "first commit"], ratios))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
