"""SQLite: CPU of the claim and completion statements per 100-job transaction, engine 0013 against 0014.

``python -m bench.claim_upkeep_cpu [--reps 5] [--n 20000]``: one process, one connection per database
(``synchronous=normal``, so the fsync stays out), the same 20,000 available jobs in each; per repetition it drains
a fresh engine-0013 file with the statements as written (state lists as ``IN``) and a fresh file at the newest
engine migration with the statements as loaded (``oncebeat.store.sqlfiles.to_sqlite``), in alternating order,
timing ``BEGIN IMMEDIATE`` … ``claim_jobs`` … ``complete_jobs`` … ``COMMIT`` by process CPU time. Prints the
milliseconds per transaction on each side and their ratio per repetition.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
from pathlib import Path

from oncebeat.store import open_store
from oncebeat.store.sqlfiles import ENGINE, line_blocks, load_queries

NOW = "2026-01-01T00:00:00.000000+00:00"


def _as_written() -> dict[str, str]:
    """The engine's SQLite statements without the loader's rewrite (as engine 0013 ran them)."""
    out: dict[str, str] = {}
    for block in line_blocks(ENGINE):
        if block.folder == "common" or block.folder == "sqlite":
            out[block.name] = block.sql
    return out


def drain(path: Path, target: int | None, queries: dict[str, str], n: int, batch: int) -> float:
    """Milliseconds of process CPU per claim-and-complete transaction of ``batch`` jobs."""
    with open_store(f"sqlite:///{path}") as store:
        store.migrate(target=target, lines=(ENGINE,))
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=normal")
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO jobs (queue, task, args, state, run_at, source_kind, source_host, source_pid, "
                         "source_name, source_version, created_at) VALUES ('default', 't', '[]', 'available', ?, "
                         "'k', 'h', 1, 'n', 'v', ?)", [(NOW, NOW)] * n)
        conn.execute("COMMIT")
        spent = 0.0
        for _ in range(n // batch):
            start = time.process_time()
            conn.execute("BEGIN IMMEDIATE")
            rows = conn.execute(queries["claim_jobs"], {
                "worker_id": 1, "lease_expires_at": "2026-01-01T01:00:00.000000+00:00", "now": NOW,
                "queue": "default", "capped": 0, "limit": batch}).fetchall()
            conn.execute(queries["complete_jobs"], {"worker_id": 1, "now": NOW,
                                                    "ids": json.dumps([r[0] for r in rows])})
            conn.execute("COMMIT")
            spent += time.process_time() - start
            assert len(rows) == batch, len(rows)
        return spent / (n // batch) * 1000
    finally:
        conn.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--n", type=int, default=20_000)
    p.add_argument("--batch", type=int, default=100)
    args = p.parse_args()
    before, after = _as_written(), load_queries("sqlite")
    with open("/proc/loadavg") as f:
        print("load", f.read().split()[0])
    with tempfile.TemporaryDirectory(prefix="claim-upkeep-") as tmp:
        for rep in range(args.reps):
            sides = [("before", 13, before), ("after", None, after)]
            if rep % 2:
                sides.reverse()
            ms = {side: drain(Path(tmp) / f"{rep}-{side}.db", target, queries, args.n, args.batch)
                  for side, target, queries in sides}
            print(f"rep {rep + 1}: before {ms['before']:.3f} ms, after {ms['after']:.3f} ms per {args.batch}-job "
                  f"transaction, after ÷ before {ms['after'] / ms['before']:.2f}", flush=True)
    with open("/proc/loadavg") as f:
        print("load", f.read().split()[0])


if __name__ == "__main__":
    main()
