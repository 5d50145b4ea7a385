"""Pruning beside a running drain: do workers stall while `oncebeat prune --apply` deletes a million jobs?

PostgreSQL, a fresh schema: ``--old`` finished jobs (finished 100 days ago) are inserted with one statement, then
``--jobs`` no-op jobs are enqueued and drained by one worker process (``Worker(concurrency=1, batch_size=100)``).
Per repetition, interleaved:

- **alone**: the drain with nothing else running;
- **beside prune**: the same drain while :func:`oncebeat.retention.prune` (``apply=True``, default batch) deletes
  the old jobs in this process.

Reported: the drain rate (jobs / first start → last finish, from the job rows), the longest gap between two
consecutive job completions (a stall shows here), and the prune's rows per second.

    python -m bench.prune [--old 1000000] [--jobs 50000] [--reps 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from datetime import timedelta

from bench.common import create_schema, drop_schema, log, new_schema, pg_connect, pg_url

WORKER = textwrap.dedent("""
    import sys
    from oncebeat.app import App
    from oncebeat.store import open_store
    from oncebeat.worker import Worker
    app = App()
    @app.task()
    def noop(ctx):
        pass
    store = open_store(sys.argv[1])
    print("ready", flush=True)
    sys.stdin.readline()
    w = Worker(app, store, concurrency=1, batch_size=100)
    w.register()
    w.drain()
""")


def _fill(schema: str, old: int, jobs: int) -> None:
    with pg_connect(schema) as conn:
        conn.execute(
            "INSERT INTO jobs (queue, task, state, run_at, source_kind, source_host, source_pid, source_name, "
            "source_version, created_at, started_at, finished_at) "
            "SELECT 'default', 'old', 'completed', now() - interval '100 days', 'bench', 'h', 1, 'n', 'v', "
            "now() - interval '100 days', now() - interval '100 days', now() - interval '100 days' "
            "FROM generate_series(1, %s)", (old,))
        conn.execute(
            "INSERT INTO jobs (queue, task, state, run_at, source_kind, source_host, source_pid, source_name, "
            "source_version, created_at) "
            "SELECT 'default', 'noop', 'available', now(), 'bench', 'h', 1, 'n', 'v', now() "
            "FROM generate_series(1, %s)", (jobs,))
        conn.execute("ANALYZE jobs")


def _drain_stats(schema: str) -> tuple[float, float]:
    with pg_connect(schema) as conn:
        rows = conn.execute("SELECT started_at, finished_at FROM jobs WHERE task = 'noop' AND state = 'completed' "
                            "ORDER BY finished_at").fetchall()
    first = min(r[0] for r in rows)
    last = rows[-1][1]
    gaps = [(b[1] - a[1]).total_seconds() for a, b in zip(rows, rows[1:])]
    return len(rows) / (last - first).total_seconds(), max(gaps, default=0.0)


def one(old: int, jobs: int, with_prune: bool) -> dict[str, float]:
    from oncebeat.retention import prune
    from oncebeat.store import open_store

    schema = new_schema("prune")
    create_schema(schema)
    url = pg_url(schema)
    try:
        store = open_store(url)
        store.migrate()
        _fill(schema, old, jobs)
        proc = subprocess.Popen([sys.executable, "-c", WORKER, url], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True)
        assert proc.stdout is not None and proc.stdin is not None
        proc.stdout.readline()
        pruned: dict[str, float] = {}

        def run_prune() -> None:
            t0 = time.perf_counter()
            report = prune(store, timedelta(days=30), apply=True, tables=("jobs",))
            pruned["rows"] = report.total
            pruned["seconds"] = time.perf_counter() - t0

        thread = threading.Thread(target=run_prune) if with_prune else None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        if thread:
            thread.start()
        proc.wait(timeout=1800)
        if thread:
            thread.join()
        rate, gap = _drain_stats(schema)
        store.close()
        out = {"rate": rate, "max_gap": gap}
        if pruned:
            out["prune_rows_per_s"] = pruned["rows"] / pruned["seconds"]
            out["prune_seconds"] = pruned["seconds"]
            out["prune_rows"] = pruned["rows"]
        return out
    finally:
        drop_schema(schema)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.prune")
    ap.add_argument("--old", type=int, default=1_000_000, help="finished jobs to prune")
    ap.add_argument("--jobs", type=int, default=50_000, help="jobs drained meanwhile")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    alone: list[dict[str, float]] = []
    beside: list[dict[str, float]] = []
    for rep in range(args.reps):
        alone.append(one(args.old, args.jobs, False))
        beside.append(one(args.old, args.jobs, True))
        log(f"rep {rep + 1}: alone {alone[-1]['rate']:.0f} jobs/s (max gap {alone[-1]['max_gap'] * 1000:.0f} ms); "
            f"beside prune {beside[-1]['rate']:.0f} jobs/s (max gap {beside[-1]['max_gap'] * 1000:.0f} ms), "
            f"ratio {beside[-1]['rate'] / alone[-1]['rate']:.2f}; prune {beside[-1]['prune_rows']:.0f} rows in "
            f"{beside[-1]['prune_seconds']:.1f} s ({beside[-1]['prune_rows_per_s']:.0f}/s)")
    ratios = [b["rate"] / a["rate"] for a, b in zip(alone, beside)]
    print(f"drain beside prune / alone: median {statistics.median(ratios):.2f} "
          f"(per repetition {', '.join(f'{r:.2f}' for r in ratios)}); longest gap beside prune "
          f"{max(b['max_gap'] for b in beside) * 1000:.0f} ms vs alone {max(a['max_gap'] for a in alone) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
