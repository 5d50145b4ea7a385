"""A PostgreSQL drain's server cost per 100 jobs, oncebeat beside the raw loop: ``python -m bench.drain_profile``.

Issue 27 target 2 (the drain ≥ 0.5 × the raw 100-per-statement loop). One process, one connection, serial batches
of 100 (no contention, so each figure is the statement's own cost), on a fresh schema holding both tables:

- **CPU per job** of each whole drain: the server backend's (``/proc/PID/stat``, 10 ms ticks) and this process's,
  which a loaded machine does not inflate as it does wall times;
- **wall per statement**: the client's wall time of each statement of a batch as the engine sends it
  (``Queue.claim`` with the previous batch's completion riding on it: ``BEGIN; SET LOCAL …``, ``complete_jobs``,
  ``claim_jobs``, ``COMMIT``) and as the raw loop sends it (claim ``SELECT … FOR UPDATE SKIP LOCKED``, ``UPDATE``,
  ``COMMIT``); medians over the batches, µs;
- **server work per statement**: ``EXPLAIN (ANALYZE, BUFFERS, WAL)`` of the same statements on the same kind of
  rows (executed for real): execution time, WAL records / bytes / full-page images, buffers dirtied;
- **index entries**: each index's size growth over a whole drain, and the table's updates and HOT updates
  (``pg_stat_user_tables``; the schema is this run's own, so other sessions do not count).

Prints markdown tables; nothing is written elsewhere. ``BENCH_PG_URL`` as every bench.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

RAW_CLAIM = ("SELECT id, args FROM rawjobs WHERE state = 'available' AND queue = 'default' "
             "ORDER BY run_at, id LIMIT %s FOR UPDATE SKIP LOCKED")
RAW_DONE = "UPDATE rawjobs SET state = 'done', finished_at = now() WHERE id = ANY(%s)"


def _enqueue(url: str, schema: str, n: int) -> None:
    from bench.common import pg_connect
    from bench.w1_queue import RAW_PG_DDL
    from oncebeat.provenance import current_source
    from oncebeat.queue import Queue
    from oncebeat.store import open_store
    from oncebeat.timebase import SystemClock

    with open_store(url) as store:
        q = Queue(store, clock=SystemClock(), source=current_source("api"))
        for start in range(0, n, 1000):
            q.enqueue_many([{"task": "noop"}] * min(1000, n - start))
    with pg_connect(schema) as c:
        c.execute(RAW_PG_DDL)
        c.execute("INSERT INTO rawjobs (queue, args, state, run_at) SELECT 'default', '{}'::jsonb, 'available', "
                  "now() FROM generate_series(1, %s)", (n,))
        c.execute("ANALYZE jobs")
        c.execute("ANALYZE rawjobs")


def _sizes(schema: str) -> dict[str, int]:
    from bench.common import pg_connect

    with pg_connect(schema) as c:
        rows = c.execute("SELECT indexrelname, pg_relation_size(indexrelid) FROM pg_stat_user_indexes "
                         "WHERE schemaname = %s AND relname IN ('jobs', 'rawjobs')", (schema,)).fetchall()
        rows += c.execute("SELECT relname || ' (heap)', pg_relation_size(relid) FROM pg_stat_user_tables "
                          "WHERE schemaname = %s AND relname IN ('jobs', 'rawjobs')", (schema,)).fetchall()
    return {str(r[0]): int(r[1]) for r in rows}


def _tuples(schema: str) -> dict[str, tuple[int, int]]:
    from bench.common import pg_connect

    with pg_connect(schema) as c:
        time.sleep(0.6)  # the statistics collector's flush (PGSTAT_MIN_INTERVAL 1 s at most)
        c.execute("SELECT pg_stat_clear_snapshot()")
        rows = c.execute("SELECT relname, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
                         "WHERE schemaname = %s AND relname IN ('jobs', 'rawjobs')", (schema,)).fetchall()
    return {str(r[0]): (int(r[1]), int(r[2])) for r in rows}


def _timed_drain(url: str, schema: str, batch: int, n: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Drain both tables serially; wall µs per statement kind, per batch, and CPU per job of the whole drains."""
    import psycopg

    from oncebeat.provenance import current_source
    from oncebeat.queue import Queue
    from oncebeat.store import open_store
    from oncebeat.timebase import SystemClock

    ob: dict[str, list[float]] = defaultdict(list)
    current: list[Any] = [None]
    original = psycopg.Connection.execute

    def timed(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
        name = current[0] or str(query).split(None, 1)[0].rstrip(";")
        current[0] = None
        t = time.perf_counter()
        try:
            return original(self, query, params, **kw)
        finally:
            ob[name].append((time.perf_counter() - t) * 1e6)

    with open_store(url + "&pool_size=1") as store:  # one connection: its backend's CPU is the drain's
        q = Queue(store, clock=SystemClock(), source=current_source("worker"))
        wid = 1
        with store.transaction() as tx:
            pid = int(tx.execute("SELECT pg_backend_pid() AS pid")[0]["pid"])
        store.before_statement = lambda name: current.__setitem__(0, name)
        psycopg.Connection.execute = timed  # type: ignore[method-assign]
        server, client = _cpu(pid), time.process_time()
        try:
            done: list[int] = []
            while True:
                t = time.perf_counter()
                jobs = q.claim(wid, limit=batch, complete=done)
                ob["batch (claim + previous completion)"].append((time.perf_counter() - t) * 1e6)
                if not jobs:
                    break
                done = [j.id for j in jobs]
        finally:
            psycopg.Connection.execute = original  # type: ignore[method-assign]
        ob["server CPU per job (whole drain)"] = [(_cpu(pid) - server) * 1e6 / n]
        ob["client CPU per job (whole drain, timing wrapper included)"] = [(time.process_time() - client) * 1e6 / n]
    raw: dict[str, list[float]] = defaultdict(list)
    with _connect(schema) as c:
        pid = int(c.execute("SELECT pg_backend_pid()").fetchone()[0])
        c.commit()
        server, client = _cpu(pid), time.process_time()
        while True:
            t0 = time.perf_counter()
            rows = c.execute(RAW_CLAIM, (batch,)).fetchall()
            t1 = time.perf_counter()
            if not rows:
                c.commit()
                break
            c.execute(RAW_DONE, ([r[0] for r in rows],))
            t2 = time.perf_counter()
            c.commit()
            t3 = time.perf_counter()
            raw["claim (SELECT … FOR UPDATE SKIP LOCKED)"].append((t1 - t0) * 1e6)
            raw["done (UPDATE … id = ANY)"].append((t2 - t1) * 1e6)
            raw["COMMIT"].append((t3 - t2) * 1e6)
            raw["batch"].append((t3 - t0) * 1e6)
        raw["server CPU per job (whole drain)"] = [(_cpu(pid) - server) * 1e6 / n]
        raw["client CPU per job (whole drain)"] = [(time.process_time() - client) * 1e6 / n]
    return dict(ob), dict(raw)


def _cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` (a backend on this host), in clock ticks (10 ms)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _connect(schema: str) -> Any:
    """A connection in transaction mode (pg_connect's are autocommit) with the schema on its search path."""
    import psycopg

    from bench.common import PG_BASE, libpq_url

    return psycopg.connect(libpq_url(PG_BASE), options=f"-c search_path={schema}")


def _explain(conn: Any, sql: str, params: Any) -> dict[str, float]:
    plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS, WAL, FORMAT JSON) " + sql, params).fetchone()[0][0]
    top = plan["Plan"]
    return {"ms": plan["Execution Time"] + plan.get("Planning Time", 0.0), "exec_ms": plan["Execution Time"],
            "wal_records": top.get("WAL Records", 0), "wal_bytes": top.get("WAL Bytes", 0),
            "wal_fpi": top.get("WAL FPI", 0), "dirtied": top.get("Shared Dirtied Blocks", 0),
            "hit": top.get("Shared Hit Blocks", 0)}


def _explained(url: str, schema: str, batch: int, n_batches: int) -> dict[str, list[dict[str, float]]]:
    """EXPLAIN ANALYZE each statement of ``n_batches`` batches (executed and committed, as the drain would)."""
    from datetime import UTC, datetime, timedelta

    from oncebeat.store import open_store

    with open_store(url) as store:
        claim_sql = store.query_sql("claim_jobs")
        complete_sql = store.query_sql("complete_jobs")
    out: dict[str, list[dict[str, float]]] = defaultdict(list)
    with _connect(schema) as c:
        c.execute("SET plan_cache_mode = force_custom_plan")
        for _ in range(n_batches):
            now = datetime.now(UTC)
            ids = [r[0] for r in c.execute(
                "SELECT id FROM jobs WHERE state = 'available' ORDER BY priority, run_at, id LIMIT %s", (batch,))]
            if not ids:
                break
            out["ob claim_jobs"].append(_explain(c, claim_sql, {
                "worker_id": 1, "lease_expires_at": now + timedelta(seconds=30), "now": now, "queue": "default",
                "capped": 0, "limit": batch}))
            c.commit()
            out["ob complete_jobs"].append(_explain(c, complete_sql, {"worker_id": 1, "ids": ids, "now": now}))
            c.commit()
            rids = [r[0] for r in c.execute(RAW_CLAIM, (batch,))]
            c.rollback()  # the EXPLAIN below claims the same rows
            out["raw claim"].append(_explain(c, RAW_CLAIM, (batch,)))
            out["raw done"].append(_explain(c, RAW_DONE, (rids,)))
            c.commit()
    return dict(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20_000, help="jobs per table (default 20,000)")
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--explain-batches", type=int, default=20)
    ap.add_argument("--drop-index", action="append", default=[],
                    help="what-if: drop this index of jobs before enqueueing (repeatable)")
    ap.add_argument("--setup", action="append", default=[],
                    help="what-if: run this SQL on the fresh schema before enqueueing (repeatable), e.g. "
                         "'ALTER TABLE jobs SET (fillfactor = 50)'")
    ap.add_argument("--json", action="store_true", help="print the raw numbers as JSON too")
    args = ap.parse_args(argv)

    from bench.common import Settings

    settings = Settings.make(reps=1, quick=False)  # makes a temp dir (unused on PostgreSQL), removed below
    try:
        setup = [f'DROP INDEX "{name}"' for name in args.drop_index] + args.setup
        ob, raw, explained, sizes0, sizes1, tup0, tup1 = _measure(settings, args.n, args.batch, args.explain_batches,
                                                                    setup)
    finally:
        shutil.rmtree(settings.tmp, ignore_errors=True)
    _print(args, ob, raw, explained, sizes0, sizes1, tup0, tup1)
    return 0


def _measure(settings: Any, n: int, batch: int, explain_batches: int, drop: list[str]) -> tuple[Any, ...]:
    from bench.common import FreshDb, pg_connect

    def what_if(schema: str) -> None:
        with pg_connect(schema) as c:
            for sql in drop:
                c.execute(sql)

    with FreshDb("postgres", "dprof", settings) as db:
        assert db.schema is not None
        what_if(db.schema)
        _enqueue(db.url, db.schema, n)
        sizes0, tup0 = _sizes(db.schema), _tuples(db.schema)
        ob, raw = _timed_drain(db.url, db.schema, batch, n)
        sizes1, tup1 = _sizes(db.schema), _tuples(db.schema)
    with FreshDb("postgres", "dprof", settings) as db:
        assert db.schema is not None
        what_if(db.schema)
        _enqueue(db.url, db.schema, batch * (explain_batches + 1))
        explained = _explained(db.url, db.schema, batch, explain_batches)
    return ob, raw, explained, sizes0, sizes1, tup0, tup1


def _print(args: Any, ob: Any, raw: Any, explained: Any, sizes0: Any, sizes1: Any, tup0: Any, tup1: Any) -> None:
    from bench.common import md_table

    def med(xs: list[float]) -> str:
        return f"{statistics.median(xs):,.1f}" if len(xs) == 1 else f"{statistics.median(xs):,.0f}"

    print(f"## wall per statement, serial, one connection, batch {args.batch}, {args.n:,} jobs (µs, median)\n")
    rows = [["oncebeat", k, str(len(v)), med(v)] for k, v in ob.items()]
    rows += [["raw", k, str(len(v)), med(v)] for k, v in raw.items()]
    print(md_table(["loop", "statement", "count", "µs"], rows))
    print(f"\n## server work per {args.batch} jobs (EXPLAIN ANALYZE BUFFERS WAL, median of {args.explain_batches})\n")
    keys = ["exec_ms", "ms", "wal_records", "wal_bytes", "wal_fpi", "dirtied", "hit"]
    print(md_table(["statement", *keys],
                   [[k, *(f"{statistics.median(x[key] for x in v):,.3f}" if key.endswith("ms")
                          else f"{statistics.median(x[key] for x in v):,.0f}" for key in keys)]
                    for k, v in explained.items()]))
    print(f"\n## growth over the drain of {args.n:,} jobs (bytes per job) and updates per job\n")
    rows = [[k, f"{(sizes1[k] - sizes0.get(k, 0)) / args.n:,.1f}"] for k in sorted(sizes1)]
    rows += [[f"{t}: updates, HOT updates per job",
              f"{(tup1[t][0] - tup0[t][0]) / args.n:.2f}, {(tup1[t][1] - tup0[t][1]) / args.n:.2f}"] for t in tup1]
    print(md_table(["relation", "per job"], rows))
    if args.json:
        print(json.dumps({"ob": ob, "raw": raw, "explained": explained, "sizes0": sizes0, "sizes1": sizes1,
                          "tuples0": tup0, "tuples1": tup1}))


if __name__ == "__main__":
    raise SystemExit(main())
