"""Instructions a PostgreSQL backend executes per drained job, by callgrind: ``python -m bench.drain_callgrind``.

Issue 27 target 2. Wall time and CPU ticks of a drain swing with the load of a shared machine; the instructions a
backend executes do not. Each drain runs in a fresh schema on a new connection: ``--n1`` and then ``--n2`` jobs
drained serially in batches of ``--batch`` (oncebeat's with the previous batch's completion riding on the next
claim, as ``Worker.run`` does: ``Queue.claim(complete=…)``; then the raw 100-per-statement loop), and the
instructions per job are ``(Ir(n2) - Ir(n1)) / (n2 - n1)`` of the draining backends, so that a backend's start,
its first plans and its exit cancel. The engine measured is the one on ``PYTHONPATH``.

It needs a PostgreSQL server of its own under callgrind (each backend is a forked child that writes its own
count when it exits), e.g. as the ``postgres`` user::

    initdb -D DIR -A trust -U postgres   # port, listen_addresses = '127.0.0.1', autovacuum = off in postgresql.conf
    valgrind --tool=callgrind --trace-children=yes --callgrind-out-file=OUTDIR/cg.%p postgres -D DIR

and ``BENCH_PG_URL`` pointing at it; ``--outdir`` is OUTDIR.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time

RAW_CLAIM = ("SELECT id, args FROM rawjobs WHERE state = 'available' AND queue = 'default' "
             "ORDER BY run_at, id LIMIT %s FOR UPDATE SKIP LOCKED")
RAW_DONE = "UPDATE rawjobs SET state = 'done', finished_at = now() WHERE id = ANY(%s)"


def _total(pid: int, outdir: str) -> int:
    """The instructions backend ``pid`` executed in its life: callgrind writes them when it exits."""
    path = os.path.join(outdir, f"cg.{pid}")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith("totals:"):
                        return int(line.split()[1])
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"no callgrind output of backend {pid} at {path}")


def drain_ir(kind: str, n: int, batch: int, outdir: str) -> int:
    """Instructions of the backend that drained ``n`` jobs (``kind`` oncebeat or raw) in a fresh schema, from its
    connection to its exit."""
    import psycopg

    from bench.common import PG_BASE, FreshDb, Settings, libpq_url, pg_connect
    from bench.w1_queue import RAW_PG_DDL
    from oncebeat.provenance import current_source
    from oncebeat.queue import Queue
    from oncebeat.store import open_store
    from oncebeat.timebase import SystemClock

    settings = Settings.make(reps=1, quick=False)
    try:
        with FreshDb("postgres", "draincg", settings) as db:
            assert db.schema is not None
            if kind == "raw":
                with pg_connect(db.schema) as c:
                    c.execute(RAW_PG_DDL)
                    c.execute("INSERT INTO rawjobs (queue, args, state, run_at) SELECT 'default', '{}'::jsonb, "
                              "'available', now() FROM generate_series(1, %s)", (n,))
                    c.execute("ANALYZE rawjobs")
                with psycopg.connect(libpq_url(PG_BASE), options=f"-c search_path={db.schema}") as c:
                    pid = int(c.execute("SELECT pg_backend_pid()").fetchone()[0])
                    c.commit()
                    drained = 0
                    while True:
                        rows = c.execute(RAW_CLAIM, (batch,)).fetchall()
                        if not rows:
                            c.commit()
                            break
                        c.execute(RAW_DONE, ([r[0] for r in rows],))
                        c.commit()
                        drained += len(rows)
            else:
                with open_store(db.url) as store:
                    q = Queue(store, clock=SystemClock(), source=current_source("api"))
                    for start in range(0, n, 1000):
                        q.enqueue_many([{"task": "noop"}] * min(1000, n - start))
                with pg_connect(db.schema) as c:
                    c.execute("ANALYZE jobs")
                with open_store(db.url + "&pool_size=1") as store:
                    q = Queue(store, clock=SystemClock(), source=current_source("worker"))
                    with store.transaction() as tx:
                        pid = int(tx.execute("SELECT pg_backend_pid() AS pid")[0]["pid"])
                    done: list[int] = []
                    drained = 0
                    while True:
                        jobs = q.claim(1, limit=batch, complete=done)
                        if not jobs:
                            break
                        done = [j.id for j in jobs]
                        drained += len(done)
            assert drained == n, (drained, n)
    finally:
        shutil.rmtree(settings.tmp, ignore_errors=True)
    return _total(pid, outdir)


def measure(n1: int, n2: int, batch: int, outdir: str) -> dict[str, float]:
    """Instructions per job, ``(Ir(n2) - Ir(n1)) / (n2 - n1)``: what a backend's start, its first plans and its
    exit cost is the same in both drains and cancels."""
    out: dict[str, float] = {}
    for kind in ("oncebeat", "raw"):
        a, b = drain_ir(kind, n1, batch, outdir), drain_ir(kind, n2, batch, outdir)
        out[f"{kind} Ir({n1})"], out[f"{kind} Ir({n2})"] = a, b
        out[kind] = (b - a) / (n2 - n1)
    out["oncebeat ÷ raw"] = out["oncebeat"] / out["raw"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.drain_callgrind", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n1", type=int, default=1_000, help="jobs of the shorter drain (default 1,000)")
    ap.add_argument("--n2", type=int, default=3_000, help="jobs of the longer drain (default 3,000)")
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--outdir", required=True, help="the directory the server's callgrind writes its dumps to")
    a = ap.parse_args(argv)
    print(json.dumps(measure(a.n1, a.n2, a.batch, a.outdir)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
