"""Drains only, two engines side by side: ``python -m bench.drain_ab --before DIR [--reps 3] [--cells …]``.

W1's drain columns without its enqueue columns and variants, for engine changes on the claim path
(issue 27): each repetition runs, in a shuffled order and each in its own process (so ``--before``, a
directory holding an exported ``oncebeat`` package, can be put first on ``PYTHONPATH``), the raw
100-per-statement loop (2 workers), PgQueuer ``run(batch_size=100)`` (2 workers), and oncebeat's
``Worker.run`` batch 100 on PostgreSQL (2 workers) and SQLite (1 and 2 workers) for the engine before
and after (the working tree). Jobs are enqueued 1,000 per call before each drain; the drain is timed as
in W1 (first claim to last completion). Prints jobs/s (median [min–max]), the load average at each
repetition and the per-repetition ratios issue 27 names; writes the raw numbers to
``bench/results/<timestamp>-drain_ab.json``.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

from bench.common import fmt_stat, log, md_table, write_json

ONCEBEAT_CELLS = ("ob_postgres_2w", "ob_sqlite_1w", "ob_sqlite_2w")
#: Run only when named in --cells: SQLite with ``?synchronous=normal`` (the opt-in that leaves the fsync out of COMMIT).
NORMAL_CELLS = ("ob_sqlite-normal_1w", "ob_sqlite-normal_2w")
PEER_CELLS = ("raw_pg_100_2w", "pgqueuer_b100_2w")


def _cell(name: str, n: int) -> float:
    from bench.common import FreshDb, Settings
    from bench.w1_queue import RawDb, oncebeat_drain, oncebeat_enqueue, pgqueuer_run

    settings = Settings.make(reps=1, quick=False)  # makes its own temp dir (SQLite files), removed below
    workers = int(name.rsplit("_", 1)[1].rstrip("w"))
    try:
        if name.startswith("ob_"):
            backend, _, synchronous = name.split("_")[1].partition("-")
            db = FreshDb(backend, "drain", settings)
            if synchronous:
                db.url += f"?synchronous={synchronous}"
            with db:
                oncebeat_enqueue(db, n, per_call=1000)
                return oncebeat_drain(db, n, settings, workers=workers).rate
        if name.startswith("pgqueuer"):
            return pgqueuer_run(n, settings, workers=workers, bulk=True, batch_size=100)[1].rate
        with RawDb("postgres", settings) as raw:
            raw.enqueue(n, per_call=1000)
            return raw.drain(n, workers=workers, batch=100).rate
    finally:
        shutil.rmtree(settings.tmp, ignore_errors=True)


def _run_cell(name: str, n: int, src: str | None) -> float:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = os.pathsep.join([src, str(Path.cwd())])
    out = subprocess.run([sys.executable, "-m", "bench.drain_ab", "--cell", name, "--n", str(n)],
                         env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"cell {name} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return float(out.stdout.strip().splitlines()[-1])


def _ratio_rows(reps: list[dict[str, float]], engines: list[str], cells: list[str]) -> list[list[str]]:
    pairs = [("ob_postgres_2w", "pgqueuer_b100_2w", "≥ 2.0"), ("ob_postgres_2w", "raw_pg_100_2w", "≥ 0.5"),
             ("ob_sqlite_2w", "ob_sqlite_1w", "≥ 1.3"), ("ob_sqlite-normal_2w", "ob_sqlite-normal_1w", "≥ 1.3"),
             ("ob_sqlite-normal_1w", "ob_sqlite_1w", "–"), ("ob_sqlite-normal_2w", "ob_sqlite_2w", "–")]
    rows = []
    for eng in engines:
        for a, b, target in pairs:
            b_key = b if b in PEER_CELLS else f"{eng}:{b}"
            if a not in cells or b not in cells:
                continue
            rows.append([eng, f"{a} ÷ {b}", fmt_stat([r[f"{eng}:{a}"] / r[b_key] for r in reps], 2), target])
    if "before" in engines:
        for c in ONCEBEAT_CELLS + NORMAL_CELLS:
            if c in cells:
                rows.append(["after ÷ before", c,
                             fmt_stat([r[f"after:{c}"] / r[f"before:{c}"] for r in reps], 2), "–"])
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.drain_ab", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cell", help=argparse.SUPPRESS)
    p.add_argument("--n", type=int, default=20_000, help="jobs per drain (default 20,000, as W1)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--cells", default=",".join(ONCEBEAT_CELLS + PEER_CELLS),
                   help=f"cells to run, comma separated (default all: {', '.join(ONCEBEAT_CELLS + PEER_CELLS)}; "
                        f"also {', '.join(NORMAL_CELLS)}: SQLite with ?synchronous=normal)")
    p.add_argument("--before", help="directory with the engine before (an exported src/), first on PYTHONPATH")
    a = p.parse_args(argv)
    if a.cell:
        print(_cell(a.cell, a.n))
        return 0
    wanted = [c.strip() for c in a.cells.split(",") if c.strip()]
    known = ONCEBEAT_CELLS + NORMAL_CELLS + PEER_CELLS
    unknown = [c for c in wanted if c not in known]
    if unknown:
        p.error(f"unknown cell(s) {', '.join(unknown)}; the cells are {', '.join(known)}")
    engines = {"after": None, **({"before": a.before} if a.before else {})}
    cells = [(f"{e}:{c}", c, src) for e, src in engines.items() for c in ONCEBEAT_CELLS + NORMAL_CELLS if c in wanted]
    cells += [(c, c, None) for c in PEER_CELLS if c in wanted]
    reps: list[dict[str, float]] = []
    loads: list[float] = []
    for rep in range(a.reps):
        order = cells[:]
        random.shuffle(order)
        loads.append(os.getloadavg()[0])
        r = {key: _run_cell(name, a.n, src) for key, name, src in order}
        reps.append(r)
        log(f"rep {rep + 1}/{a.reps}, load {loads[-1]:.1f}: "
            + ", ".join(f"{k} {v:,.0f}" for k, v in sorted(r.items())))
    loads.append(os.getloadavg()[0])
    rates = md_table(["cell", "jobs/s"], [[k, fmt_stat([r[k] for r in reps])] for k in sorted(reps[0])])
    ratio = md_table(["engine", "ratio (per repetition)", "median [min–max]", "issue 27 target"],
                     _ratio_rows(reps, list(engines), wanted))
    per_rep = md_table(["repetition", "load (1 min)", *sorted(reps[0])],
                       [[str(i + 1), f"{loads[i]:.1f}", *(f"{r[k]:,.0f}" for k in sorted(r))]
                        for i, r in enumerate(reps)])
    path = write_json("drain_ab", {"n": a.n, "reps": reps, "load_1min": loads, "before": a.before})
    print(f"load average (1 min) per repetition: {', '.join(f'{x:.1f}' for x in loads)}\n\n{per_rep}\n\n"
          f"{rates}\n\n{ratio}")
    log(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
