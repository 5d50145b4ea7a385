"""Bulk enqueue only, two engines side by side: ``python -m bench.enqueue_ab --before DIR [--reps 5]``.

W1's enqueue columns without its drains, for changes to ``Queue.enqueue_many``: each repetition runs,
in a shuffled order and each in its own process (so ``--before``, a directory holding an exported
``oncebeat`` package, can be put first on ``PYTHONPATH``), the raw ``INSERT … SELECT unnest`` loop,
PgQueuer's ``Queries.enqueue`` with lists of 100, the raw sqlite3 ``executemany`` loop, and oncebeat's
``enqueue_many`` on both backends for the engine before and after (the working tree), 100 and 1,000
jobs per call. Cells are the code of :mod:`bench.w1_queue` (same tables, same sizes). Prints jobs/s
(median [min–max]) and the per-repetition ratios the issue 14 targets name; writes the raw numbers
to ``bench/results/<timestamp>-enqueue_ab.json``.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.common import fmt_stat, log, md_table, write_json

ONCEBEAT_CELLS = ("ob_postgres_100", "ob_postgres_1000", "ob_sqlite_100", "ob_sqlite_1000")
PEER_CELLS = ("raw_pg_100", "raw_pg_1000", "pgqueuer_100", "raw_sqlite_100", "raw_sqlite_1000")
#: Run only when named in --cells: SQLite with ``?synchronous=normal`` (the opt-in that leaves the fsync out of COMMIT).
NORMAL_CELLS = ("ob_sqlite-normal_100", "ob_sqlite-normal_1000")


def _cell(name: str, n: int) -> float:
    from bench.common import FreshDb, Settings
    from bench.w1_queue import RawDb, oncebeat_enqueue

    settings = Settings.make(reps=1, quick=False)  # makes its own temp dir (SQLite files), removed below
    kind, per_call = name.rsplit("_", 1)
    try:
        if kind.startswith("ob_"):
            backend, _, synchronous = kind[3:].partition("-")
            db = FreshDb(backend, "enq", settings)
            if synchronous:
                db.url += f"?synchronous={synchronous}"
            with db:
                return oncebeat_enqueue(db, n, per_call=int(per_call))
        if kind == "pgqueuer":
            return _pgqueuer_enqueue(n)
        with RawDb("postgres" if kind == "raw_pg" else "sqlite", settings) as raw:
            return raw.enqueue(n, per_call=int(per_call))
    finally:
        shutil.rmtree(settings.tmp, ignore_errors=True)


def _pgqueuer_enqueue(n: int) -> float:
    """:func:`bench.w1_queue.pgqueuer_run`'s enqueue with lists of 100, without the drain."""
    import asyncio

    from bench.common import PG_BASE, create_schema, drop_schema, libpq_url, new_schema
    from bench.peers import PGQUEUER_ENTRYPOINT, pgqueuer_env

    schema = new_schema("pgq")
    create_schema(schema)
    os.environ.update(pgqueuer_env(schema))
    try:
        import asyncpg
        from pgqueuer import AsyncpgDriver, Queries

        async def fill() -> float:
            conn = await asyncpg.connect(libpq_url(PG_BASE))
            try:
                q = Queries(AsyncpgDriver(conn))
                await q.install(create_schema=False)
                t = time.perf_counter()
                for start in range(0, n, 100):
                    k = min(100, n - start)
                    await q.enqueue([PGQUEUER_ENTRYPOINT] * k, [None] * k, [0] * k)
                return n / (time.perf_counter() - t)
            finally:
                await conn.close()

        return asyncio.run(fill())
    finally:
        drop_schema(schema)


def _run_cell(name: str, n: int, src: str | None) -> float:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = os.pathsep.join([src, str(Path.cwd())])
    out = subprocess.run([sys.executable, "-m", "bench.enqueue_ab", "--cell", name, "--n", str(n)],
                         env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def _ratio_rows(reps: list[dict[str, float]], engines: list[str], cells: list[str]) -> list[list[str]]:
    pairs = [("ob_postgres_100", "pgqueuer_100", "≥ 1.5"), ("ob_postgres_1000", "pgqueuer_100", "≥ 1.5"),
             ("ob_postgres_100", "raw_pg_100", "≥ 0.65"), ("ob_postgres_1000", "raw_pg_100", "≥ 0.65"),
             ("ob_postgres_1000", "raw_pg_1000", "–"),
             ("ob_sqlite_100", "raw_sqlite_100", "–"), ("ob_sqlite_1000", "raw_sqlite_1000", "–"),
             ("ob_sqlite-normal_100", "ob_sqlite_100", "–"), ("ob_sqlite-normal_1000", "ob_sqlite_1000", "–")]
    rows = []
    for eng in engines:
        for a, b, target in pairs:
            if a not in cells or b not in cells:
                continue
            b_key = b if b in PEER_CELLS else f"{eng}:{b}"
            vals = [r[f"{eng}:{a}"] / r[b_key] for r in reps]
            rows.append([eng, f"{a} ÷ {b}", fmt_stat(vals, 2), target])
    if "before" in engines:
        for c in [c for c in ONCEBEAT_CELLS + NORMAL_CELLS if c in cells]:
            rows.append(["after ÷ before", c, fmt_stat([r[f"after:{c}"] / r[f"before:{c}"] for r in reps], 2), "–"])
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.enqueue_ab", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cell", help=argparse.SUPPRESS)
    p.add_argument("--n", type=int, default=20_000, help="jobs per cell (default 20,000, as W1)")
    p.add_argument("--reps", type=int, default=5)
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
    ratio = md_table(["engine", "ratio (per repetition)", "median [min–max]", "issue 14 target"],
                     _ratio_rows(reps, list(engines), wanted))
    per_rep = md_table(["repetition", "load (1 min)", *sorted(reps[0])],
                       [[str(i + 1), f"{loads[i]:.1f}", *(f"{r[k]:,.0f}" for k in sorted(r))]
                        for i, r in enumerate(reps)])
    path = write_json("enqueue_ab", {"n": a.n, "reps": reps, "load_1min": loads, "before": a.before})
    print(f"load average (1 min) per repetition: {', '.join(f'{x:.1f}' for x in loads)}\n\n{per_rep}\n\n"
          f"{rates}\n\n{ratio}")
    log(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
