"""W1 queue drain: enqueue no-op jobs, then drain them with 1 and 2 worker processes.

Per repetition, for every system (interleaved, so machine noise hits all alike):

- **enqueue**, one API call per job (``Queue.enqueue``, one transaction each),
  and in bulk (``Queue.enqueue_many``, 100 and 1,000 jobs per call), measured in
  this (the "API") process;
- **drain** with 1 and 2 worker OS processes started beforehand and released
  together; the rate is jobs / (first claim → last completion). For oncebeat
  that interval is read from the job rows (``min(started_at)`` →
  ``max(finished_at)``); for the raw loops each process reports the monotonic
  time before its first successful claim and after its last commit; for
  Procrastinate, PgQueuer, DBOS, Celery and RQ (whose start-up we do not
  control) it is the first to the last handler call seen by :mod:`bench.probe`.

Every run uses a fresh PostgreSQL schema (dropped after) or a fresh SQLite
file. oncebeat workers are ``Worker(app, store, concurrency=1, batch_size=100,
lease_seconds=30).run(install_signals=False)`` in their own processes — what
``oncebeat worker --concurrency 1 --batch-size 100`` runs; variants: other batch
sizes, the CLI defaults (``--concurrency 4``, batch 40) and a serial loop
over ``Worker.run_batch()``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from bench import probe
from bench.common import (PG_BASE, REDIS_URL, ROOT, Child, FreshDb, Settings, create_schema, drop_schema, fmt_stat,
                          libpq_url, log, md_table, new_schema, pg_connect, probe_dir, ratios, start_children,
                          wait_until)

BULK = 100


# --------------------------------------------------------------------------- measurement helpers


@dataclass
class Drain:
    jobs: int
    seconds: float
    wall: float  # go → queue empty, as seen from outside
    cpu: float | None = None  # worker CPU seconds (all worker processes) during the drain
    maxrss_kb: int | None = None

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds if self.seconds > 0 else float("nan")

    def as_dict(self) -> dict[str, Any]:
        return {"jobs": self.jobs, "seconds": self.seconds, "rate": self.rate, "wall": self.wall, "cpu": self.cpu,
                "maxrss_kb": self.maxrss_kb}


def _timeout(n: int) -> float:
    return max(180.0, n / 50)


def _spy(settings: Settings, kids: list[Child], name: str) -> list[subprocess.Popen[bytes]]:
    """Attach py-spy (on-CPU samples of every thread, collapsed stacks) to each child when profiling."""
    if not settings.profile:
        return []
    from bench.profiling import spy

    return [spy(k.pid, f"{name}-{i}") for i, k in enumerate(kids)]


def _unspy(spies: list[subprocess.Popen[bytes]]) -> None:
    for p in spies:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGINT)
            p.wait(timeout=30)


def _env(pdir: Path) -> dict[str, str]:
    return {"BENCH_PROBE_DIR": str(pdir), "BENCH_REDIS_URL": REDIS_URL}


# --------------------------------------------------------------------------- oncebeat


def oncebeat_enqueue(db: FreshDb, n: int, *, per_call: int | None) -> float:
    """Jobs/s: ``Queue.enqueue`` once per job (per_call None) or ``enqueue_many`` with ``per_call`` jobs."""
    from oncebeat.provenance import current_source
    from oncebeat.queue import Queue
    from oncebeat.store import open_store
    from oncebeat.timebase import SystemClock

    with open_store(db.url) as store:
        q = Queue(store, clock=SystemClock(), source=current_source("api"))
        t = time.perf_counter()
        if per_call is None:
            for _ in range(n):
                q.enqueue("noop")
        else:
            for start in range(0, n, per_call):
                q.enqueue_many([{"task": "noop"}] * min(per_call, n - start))
        return n / (time.perf_counter() - t)


def oncebeat_drain(db: FreshDb, n: int, settings: Settings, *, workers: int, batch: int = 100,
                   concurrency: int = 1, mode: str = "run", spy_name: str | None = None) -> Drain:
    """Drain ``n`` jobs with ``workers`` processes."""
    pdir = probe_dir(settings)
    spec = {"url": db.url, "batch_size": batch, "concurrency": concurrency, "mode": mode}
    kids = start_children("oncebeat-worker", [spec] * workers, env=_env(pdir), logdir=settings.tmp / "logs")
    spies = _spy(settings, kids, spy_name) if spy_name else []
    try:
        t0 = time.monotonic()
        for k in kids:
            k.go()
        wait_until(lambda: probe.read(pdir).count >= n, timeout=_timeout(n), children=kids, what="handlers")
        wait_until(lambda: db.jobs_unfinished() == 0, timeout=60, interval=0.005, children=kids, what="completion")
        wall = time.monotonic() - t0
        for k in kids:
            k.stop()
        infos = [k.finish() for k in kids]
    except BaseException:
        for k in kids:
            k.kill()
        raise
    _unspy(spies)
    done, secs = db.job_span()
    if done != n:
        raise RuntimeError(f"oncebeat drain: {done} of {n} jobs completed")
    return Drain(jobs=n, seconds=secs, wall=wall, cpu=sum(i["work_cpu"] for i in infos),
                 maxrss_kb=max(i["maxrss_kb"] for i in infos))


# --------------------------------------------------------------------------- raw psycopg / sqlite3

RAW_PG_DDL = """
CREATE TABLE rawjobs (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    queue TEXT NOT NULL, args JSONB NOT NULL, state TEXT NOT NULL,
    run_at TIMESTAMPTZ NOT NULL, finished_at TIMESTAMPTZ);
CREATE INDEX rawjobs_fetch ON rawjobs (queue, run_at, id) WHERE state = 'available';
"""
RAW_SQLITE_DDL = """
CREATE TABLE rawjobs (
    id INTEGER PRIMARY KEY, queue TEXT NOT NULL, args TEXT NOT NULL, state TEXT NOT NULL,
    run_at TEXT NOT NULL, finished_at TEXT);
CREATE INDEX rawjobs_fetch ON rawjobs (queue, run_at, id) WHERE state = 'available';
"""


class RawDb:
    def __init__(self, backend: str, settings: Settings) -> None:
        self.backend = backend
        self.settings = settings
        if backend == "postgres":
            self.schema = new_schema("raw")
        else:
            d = settings.tmp / f"raw-{secrets.token_hex(3)}"
            d.mkdir(parents=True)
            self.path = d / "raw.db"

    def __enter__(self) -> RawDb:
        if self.backend == "postgres":
            create_schema(self.schema)
            with pg_connect(self.schema) as c:
                c.execute(RAW_PG_DDL)
        else:
            c = sqlite3.connect(self.path)
            c.execute("PRAGMA journal_mode=WAL")
            c.executescript(RAW_SQLITE_DDL)
            c.close()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.backend == "postgres":
            drop_schema(self.schema)
        else:
            import shutil

            shutil.rmtree(self.path.parent, ignore_errors=True)

    def enqueue(self, n: int, *, per_call: int | None) -> float:
        if self.backend == "postgres":
            from psycopg.types.json import Jsonb

            with pg_connect(self.schema) as c:
                t = time.perf_counter()
                if per_call is None:
                    for _ in range(n):
                        c.execute("INSERT INTO rawjobs (queue, args, state, run_at) "
                                  "VALUES ('default', %s, 'available', now())", (Jsonb({}),))
                else:
                    for start in range(0, n, per_call):
                        k = min(per_call, n - start)
                        c.execute("INSERT INTO rawjobs (queue, args, state, run_at) SELECT 'default', a, "
                                  "'available', now() FROM unnest(CAST(%s AS jsonb[])) AS a", ([Jsonb({})] * k,))
                return n / (time.perf_counter() - t)
        c = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        c.execute("PRAGMA synchronous=FULL")
        sql = ("INSERT INTO rawjobs (queue, args, state, run_at) "
               "VALUES ('default', ?, 'available', strftime('%Y-%m-%dT%H:%M:%f','now'))")
        t = time.perf_counter()
        if per_call is None:
            for _ in range(n):
                c.execute(sql, ("{}",))
        else:
            for start in range(0, n, per_call):
                c.execute("BEGIN IMMEDIATE")
                c.executemany(sql, [("{}",)] * min(per_call, n - start))
                c.execute("COMMIT")
        rate = n / (time.perf_counter() - t)
        c.close()
        return rate

    def drain(self, n: int, *, workers: int, batch: int) -> Drain:
        pdir = probe_dir(self.settings)
        if self.backend == "postgres":
            role, spec = "raw-pg", {"conninfo": libpq_url(PG_BASE), "schema": self.schema, "batch": batch}
        else:
            role, spec = "raw-sqlite", {"path": str(self.path), "batch": batch}
        kids = start_children(role, [spec] * workers, env=_env(pdir), logdir=self.settings.tmp / "logs")
        try:
            t0 = time.monotonic()
            for k in kids:
                k.go()
            wait_until(lambda: probe.read(pdir).count >= n, timeout=_timeout(n), children=kids, what="raw drain")
            for k in kids:
                k.stop()
            infos = [k.finish() for k in kids]
            wall = time.monotonic() - t0
        except BaseException:
            for k in kids:
                k.kill()
            raise
        processed = sum(i["processed"] for i in infos)
        if processed != n:
            raise RuntimeError(f"raw drain processed {processed} of {n}")
        first = min(i["first"] for i in infos if i["first"] is not None)
        last = max(i["last"] for i in infos if i["last"] is not None)
        return Drain(jobs=n, seconds=last - first, wall=wall, cpu=sum(i["work_cpu"] for i in infos),
                     maxrss_kb=max(i["maxrss_kb"] for i in infos))


# --------------------------------------------------------------------------- Procrastinate


def procrastinate_run(n: int, settings: Settings, *, workers: int, bulk: bool) -> tuple[float, Drain]:
    from bench.peers import procrastinate_app

    schema = new_schema("proc")
    create_schema(schema)
    try:
        app = procrastinate_app(libpq_url(PG_BASE), schema, sync_pool=True)
        with app.open():
            app.schema_manager.apply_schema()
            task = app.tasks["noop_async"]
            t = time.perf_counter()
            if bulk:
                for start in range(0, n, BULK):
                    task.batch_defer(*([{}] * min(BULK, n - start)))
            else:
                for _ in range(n):
                    task.defer()
            enq = n / (time.perf_counter() - t)
        pdir = probe_dir(settings)
        spec = {"conninfo": libpq_url(PG_BASE), "schema": schema}
        kids = start_children("procrastinate", [spec] * workers, env=_env(pdir), logdir=settings.tmp / "logs")
        try:
            t0 = time.monotonic()
            for k in kids:
                k.go()
            wait_until(lambda: probe.read(pdir).count >= n, timeout=_timeout(n), children=kids, what="procrastinate")
            wall = time.monotonic() - t0
            infos = [k.finish() for k in kids]
        except BaseException:
            for k in kids:
                k.kill()
            raise
        tot = probe.read(pdir)
        return enq, Drain(jobs=n, seconds=tot.span or float("nan"), wall=wall,
                          cpu=sum(i["work_cpu"] for i in infos),
                          maxrss_kb=max(i["maxrss_kb"] for i in infos))
    finally:
        drop_schema(schema)


# --------------------------------------------------------------------------- Celery


def _redis() -> Any:
    import redis

    return redis.Redis.from_url(REDIS_URL)


def celery_run(n: int, settings: Settings, *, workers: int) -> tuple[float, Drain]:
    from bench.peers import CELERY_QUEUE, celery_app

    r = _redis()
    r.flushdb()
    noop = celery_app.tasks["bench.noop"]
    with celery_app.connection_for_write() as conn:
        conn.ensure_connection()
    t = time.perf_counter()
    for _ in range(n):
        noop.delay()
    enq = n / (time.perf_counter() - t)
    pdir = probe_dir(settings)
    logf = (settings.tmp / "logs" / f"celery-{secrets.token_hex(3)}.log")
    logf.parent.mkdir(parents=True, exist_ok=True)
    with logf.open("w") as lf:
        t0 = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "bench.peers:celery_app", "worker", "-c", str(workers),
             "-P", "prefork", "-Q", CELERY_QUEUE, "--without-gossip", "--without-mingle", "--without-heartbeat",
             "-l", "WARNING", "-n", f"bench{secrets.token_hex(3)}@%h"],
            cwd=ROOT, env={**os.environ, **_env(pdir)}, stdout=lf, stderr=subprocess.STDOUT)
        try:
            def ok() -> bool:
                if proc.poll() is not None:
                    raise RuntimeError(f"celery worker exited; log {logf}:\n{logf.read_text()[-3000:]}")
                return probe.read(pdir).count >= n

            wait_until(ok, timeout=_timeout(n), what="celery")
            wall = time.monotonic() - t0
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    tot = probe.read(pdir)
    r.flushdb()
    return enq, Drain(jobs=n, seconds=tot.span or float("nan"), wall=wall)


# --------------------------------------------------------------------------- RQ


def rq_run(n: int, settings: Settings, *, workers: int, bulk: bool) -> tuple[float, Drain]:
    from rq import Queue

    from bench.peers import RQ_QUEUE, rq_noop

    r = _redis()
    r.flushdb()
    q = Queue(RQ_QUEUE, connection=r)
    t = time.perf_counter()
    if bulk:
        for start in range(0, n, BULK):
            q.enqueue_many([Queue.prepare_data(rq_noop) for _ in range(min(BULK, n - start))])
    else:
        for _ in range(n):
            q.enqueue(rq_noop)
    enq = n / (time.perf_counter() - t)
    pdir = probe_dir(settings)
    kids = start_children("rq", [{"redis_url": REDIS_URL}] * workers, env=_env(pdir), logdir=settings.tmp / "logs")
    try:
        t0 = time.monotonic()
        for k in kids:
            k.go()
        wait_until(lambda: probe.read(pdir).count >= n, timeout=_timeout(n), children=kids, what="rq")
        wall = time.monotonic() - t0
        infos = [k.finish() for k in kids]
    except BaseException:
        for k in kids:
            k.kill()
        raise
    tot = probe.read(pdir)
    r.flushdb()
    return enq, Drain(jobs=n, seconds=tot.span or float("nan"), wall=wall,
                      cpu=sum(i["work_cpu"] for i in infos),
                      maxrss_kb=max(i["maxrss_kb"] for i in infos))


# --------------------------------------------------------------------------- PgQueuer


def pgqueuer_run(n: int, settings: Settings, *, workers: int, bulk: bool,
                 batch_size: int | None) -> tuple[float, Drain]:
    """Enqueue ``n`` jobs (``Queries.enqueue`` per job, or lists of 100), drain with PgQueuer workers.

    ``batch_size`` None = PgQueuer's default of ``run()`` (10). Tables live in a fresh schema
    (``PGQUEUER_SCHEMA``, dropped after); the drain is timed from the first to the last handler call.
    """
    import asyncio

    from bench.peers import PGQUEUER_ENTRYPOINT, pgqueuer_env

    schema = new_schema("pgq")
    create_schema(schema)
    env = pgqueuer_env(schema)
    try:
        with _environ(env):
            from pgqueuer import AsyncpgDriver, Queries
            from pgqueuer.domain.settings import db_settings

            db_settings.cache_clear()  # PgQueuer reads PGQUEUER_* once per process

            async def fill() -> float:
                import asyncpg

                conn = await asyncpg.connect(libpq_url(PG_BASE))
                try:
                    q = Queries(AsyncpgDriver(conn))
                    await q.install(create_schema=False)
                    t = time.perf_counter()
                    if bulk:
                        for start in range(0, n, BULK):
                            k = min(BULK, n - start)
                            await q.enqueue([PGQUEUER_ENTRYPOINT] * k, [None] * k, [0] * k)
                    else:
                        for _ in range(n):
                            await q.enqueue(PGQUEUER_ENTRYPOINT, None)
                    return n / (time.perf_counter() - t)
                finally:
                    await conn.close()

            enq = asyncio.run(fill())
            db_settings.cache_clear()
        pdir = probe_dir(settings)
        spec = {"conninfo": libpq_url(PG_BASE), "batch_size": batch_size}
        kids = start_children("pgqueuer", [spec] * workers, env={**_env(pdir), **env}, logdir=settings.tmp / "logs")
        return enq, _probe_drain(kids, pdir, n, "pgqueuer")
    finally:
        drop_schema(schema)


class _environ:
    """Set environment variables for a block (PgQueuer's settings come from the environment)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.saved: dict[str, str | None] = {}

    def __enter__(self) -> None:
        for k, v in self.env.items():
            self.saved[k] = os.environ.get(k)
            os.environ[k] = v

    def __exit__(self, *exc: object) -> None:
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _probe_drain(kids: list[Child], pdir: Path, n: int, what: str, release: Any = None) -> Drain:
    """Release ``kids`` (and the start gate ``release``), wait until ``n`` handlers ran, stop them."""
    try:
        t0 = time.monotonic()
        for k in kids:
            k.go()
        if release is not None:
            release()
        wait_until(lambda: probe.read(pdir).count >= n, timeout=_timeout(n), children=kids, what=what)
        wall = time.monotonic() - t0
        for k in kids:
            k.stop()
        infos = [k.finish() for k in kids]
    except BaseException:
        for k in kids:
            k.kill()
        raise
    tot = probe.read(pdir)
    if tot.count != n:
        raise RuntimeError(f"{what}: {tot.count} handler calls for {n} jobs")
    return Drain(jobs=n, seconds=tot.span or float("nan"), wall=wall, cpu=sum(i["work_cpu"] for i in infos),
                 maxrss_kb=max(i["maxrss_kb"] for i in infos))


# --------------------------------------------------------------------------- DBOS

DBOS_WORKER_CONCURRENCY = 100
DBOS_POLLING_INTERVAL = 0.01


def dbos_run(n: int, settings: Settings, *, workers: int, bulk: bool) -> tuple[float, Drain]:
    """Enqueue ``n`` no-op workflows on a DBOS queue, then drain them with ``workers`` DBOS executors.

    A fresh system database per run (created here, migrated with ``dbos migrate``, dropped after).
    Enqueue: ``DBOSClient.enqueue`` per workflow, or ``enqueue_in_transaction`` 100 per transaction
    (DBOS has no batch enqueue call). Executors poll as soon as they launch, so the benchmark holds an
    ``EXCLUSIVE`` lock on ``dbos.workflow_status`` (their claim's ``FOR UPDATE`` waits; reads do not)
    until all of them are ready, then releases it: the start gate.
    """
    import psycopg
    import sqlalchemy as sa
    from dbos import DBOSClient

    from bench.peers import DBOS_APP, DBOS_QUEUE, DBOS_VERSION, DBOS_WORKFLOW

    dbname = f"bench_dbos_{secrets.token_hex(3)}"
    parts = urlsplit(libpq_url(PG_BASE))
    url = urlunsplit((parts.scheme, parts.netloc, f"/{dbname}", parts.query, ""))
    with pg_connect() as c:
        c.execute(f'CREATE DATABASE "{dbname}"')
    client = None
    try:
        exe = shutil.which("dbos") or str(Path(sys.executable).with_name("dbos"))
        subprocess.run([exe, "migrate", "-s", url], check=True, capture_output=True, cwd=ROOT)
        client = DBOSClient(system_database_url=url, application_name=DBOS_APP)
        client.register_queue(DBOS_QUEUE, worker_concurrency=DBOS_WORKER_CONCURRENCY,
                              polling_interval_sec=DBOS_POLLING_INTERVAL, application_name=DBOS_APP)
        opts: Any = {"workflow_name": DBOS_WORKFLOW, "queue_name": DBOS_QUEUE, "app_version": DBOS_VERSION}
        t = time.perf_counter()
        if bulk:
            engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
            try:
                for start in range(0, n, BULK):
                    with engine.begin() as conn:
                        for _ in range(min(BULK, n - start)):
                            client.enqueue_in_transaction(conn, opts)
            finally:
                engine.dispose()
        else:
            for _ in range(n):
                client.enqueue(opts)
        enq = n / (time.perf_counter() - t)
        gate = psycopg.connect(url)
        try:
            gate.execute("LOCK TABLE dbos.workflow_status IN EXCLUSIVE MODE")
            pdir = probe_dir(settings)
            kids = start_children("dbos", [{"url": url}] * workers, env=_env(pdir), logdir=settings.tmp / "logs")
            drain = _probe_drain(kids, pdir, n, "dbos", release=gate.commit)
        finally:
            gate.close()
        return enq, drain
    finally:
        if client is not None:
            client.destroy()
        with pg_connect() as c:
            c.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


# --------------------------------------------------------------------------- the workload

# (key, label) of the rows of the tables, in order.
ROWS = [
    ("raw_pg_1", "raw psycopg, 1 job/txn (**baseline**)"),
    ("raw_pg_100", "raw psycopg, 100 jobs per claim/commit"),
    ("raw_sqlite_1", "raw sqlite3 WAL FULL, 1 job/txn"),
    ("raw_sqlite_100", "raw sqlite3 WAL FULL, 100 jobs per txn"),
    ("ob_postgres", "**oncebeat PostgreSQL**, `Worker.run`, batch 100"),
    ("ob_postgres_b10", "oncebeat PostgreSQL, batch 10"),
    ("ob_postgres_b1000", "oncebeat PostgreSQL, batch 1000"),
    ("ob_postgres_cli", "oncebeat PostgreSQL, CLI defaults (concurrency 4, batch 40)"),
    ("ob_postgres_loop", "oncebeat PostgreSQL, `run_batch()` loop, batch 100"),
    ("ob_sqlite", "**oncebeat SQLite**, `Worker.run`, batch 100"),
    ("ob_sqlite_b10", "oncebeat SQLite, batch 10"),
    ("ob_sqlite_b1000", "oncebeat SQLite, batch 1000"),
    ("ob_sqlite_cli", "oncebeat SQLite, CLI defaults (concurrency 4, batch 40)"),
    ("ob_sqlite_loop", "oncebeat SQLite, `run_batch()` loop, batch 100"),
    ("pgqueuer_b10", "PgQueuer, async entrypoint, `run()` default batch_size (10)"),
    ("pgqueuer_b100", "PgQueuer, async entrypoint, `run(batch_size=100)`"),
    ("dbos", "DBOS queue, workflow + step (`worker_concurrency` 100; 1 worker: peer jobs)"),
    ("procrastinate", "Procrastinate, async task"),
    ("celery", "Celery + Redis broker (prefork pool of 1 / 2)"),
    ("rq", "RQ `SimpleWorker`"),
]


def _want(settings: Settings, key: str) -> bool:
    return not settings.only or any(key.startswith(o) for o in settings.only)


def one_rep(settings: Settings, rep: int) -> dict[str, dict[str, Any]]:
    """One repetition of every system; returns {row key: {metric: value}}."""
    n, p = settings.jobs, settings.peer_jobs
    out: dict[str, dict[str, Any]] = {}

    def put(key: str, **metrics: Any) -> None:
        out.setdefault(key, {}).update(metrics)

    # raw loops: the baseline of this repetition
    for backend, tag in (("postgres", "raw_pg"), ("sqlite", "raw_sqlite")):
        if not (_want(settings, tag) or tag == "raw_pg"):
            continue
        for workers, per_call in ((1, None), (2, BULK)):
            with RawDb(backend, settings) as raw:
                enq = raw.enqueue(n, per_call=per_call)
                d = raw.drain(n, workers=workers, batch=1)
            put(f"{tag}_1", **({"enqueue": enq} if per_call is None else {"bulk100": enq}),
                **{f"w{workers}": d.as_dict()})
            log(f"  {tag} 1/txn: enqueue {enq:,.0f}/s, {workers} worker(s) {d.rate:,.0f} jobs/s")
            with RawDb(backend, settings) as raw:
                raw.enqueue(n, per_call=1000)
                d = raw.drain(n, workers=workers, batch=100)
            put(f"{tag}_100", **{f"w{workers}": d.as_dict()})
            log(f"  {tag} 100/txn: {workers} worker(s) {d.rate:,.0f} jobs/s")

    for backend in settings.backends:
        tag = f"ob_{backend}"
        if not _want(settings, tag):
            continue
        with FreshDb(backend, "w1", settings) as db:
            enq = oncebeat_enqueue(db, n, per_call=None)
            d = oncebeat_drain(db, n, settings, workers=1)
        put(tag, enqueue=enq, w1=d.as_dict())
        log(f"  {tag}: enqueue {enq:,.0f}/s; 1 worker {d.rate:,.0f} jobs/s")
        with FreshDb(backend, "w1", settings) as db:
            enq = oncebeat_enqueue(db, n, per_call=BULK)
            d = oncebeat_drain(db, n, settings, workers=2, spy_name=f"w1-{backend}-2w-b100" if rep == 0 else None)
        put(tag, bulk100=enq, w2=d.as_dict())
        log(f"  {tag}: enqueue_many(100) {enq:,.0f}/s; 2 workers {d.rate:,.0f} jobs/s")
        variants: list[tuple[str, dict[str, Any]]] = [
            ("b10", {"batch": 10}), ("b1000", {"batch": 1000}), ("cli", {"batch": 40, "concurrency": 4}),
            ("loop", {"mode": "loop"})]
        for vkey, kw in variants:
            with FreshDb(backend, "w1", settings) as db:
                enq = oncebeat_enqueue(db, n, per_call=1000)
                d = oncebeat_drain(db, n, settings, workers=2, **kw)
            if vkey == "b10":
                put(tag, bulk1000=enq)
            put(f"{tag}_{vkey}", w2=d.as_dict())
            log(f"  {tag}_{vkey}: 2 workers {d.rate:,.0f} jobs/s")

    for key, batch_size in (("pgqueuer_b10", None), ("pgqueuer_b100", 100)):
        if not _want(settings, key):
            continue
        for workers, bulk in ((1, False), (2, True)):
            enq, d = pgqueuer_run(n, settings, workers=workers, bulk=bulk, batch_size=batch_size)
            put(key, **({"bulk100": enq} if bulk else {"enqueue": enq}), **{f"w{workers}": d.as_dict()})
            log(f"  {key}: enqueue{'(lists of 100)' if bulk else ''} {enq:,.0f}/s, "
                f"{workers} worker(s) {d.rate:,.0f} jobs/s")
    if _want(settings, "dbos"):
        # 1 worker drains the peer job count (DBOS drains a few hundred jobs/s here); 2 workers drain n.
        for workers, bulk, jobs in ((1, False, p), (2, True, n)):
            enq, d = dbos_run(jobs, settings, workers=workers, bulk=bulk)
            put("dbos", **({"bulk100": enq} if bulk else {"enqueue": enq}), **{f"w{workers}": d.as_dict()})
            log(f"  dbos: enqueue{'_in_transaction(100)' if bulk else ''} {enq:,.0f}/s, "
                f"{workers} worker(s) {d.rate:,.0f} jobs/s ({jobs:,} jobs)")
    if _want(settings, "procrastinate"):
        for workers, bulk in ((1, False), (2, True)):
            enq, d = procrastinate_run(p, settings, workers=workers, bulk=bulk)
            put("procrastinate", **({"bulk100": enq} if bulk else {"enqueue": enq}), **{f"w{workers}": d.as_dict()})
            log(f"  procrastinate: enqueue{'(batch_defer)' if bulk else ''} {enq:,.0f}/s, "
                f"{workers} worker(s) {d.rate:,.0f} jobs/s")
    if _want(settings, "celery"):
        for workers in (1, 2):
            enq, d = celery_run(p, settings, workers=workers)
            put("celery", enqueue=enq if workers == 1 else out.get("celery", {}).get("enqueue", enq),
                **{f"w{workers}": d.as_dict()})
            log(f"  celery: delay {enq:,.0f}/s, pool {workers}: {d.rate:,.0f} jobs/s")
    if _want(settings, "rq"):
        for workers, bulk in ((1, False), (2, True)):
            enq, d = rq_run(p, settings, workers=workers, bulk=bulk)
            put("rq", **({"bulk100": enq} if bulk else {"enqueue": enq}), **{f"w{workers}": d.as_dict()})
            log(f"  rq: enqueue{'_many' if bulk else ''} {enq:,.0f}/s, {workers} worker(s) {d.rate:,.0f} jobs/s")
    return out


def run(settings: Settings) -> dict[str, Any]:
    reps: list[dict[str, dict[str, Any]]] = []
    for rep in range(settings.reps):
        log(f"W1 repetition {rep + 1}/{settings.reps} ({settings.jobs:,} jobs; peers {settings.peer_jobs:,})")
        reps.append(one_rep(settings, rep))
    return {"settings": {"jobs": settings.jobs, "peer_jobs": settings.peer_jobs, "reps": settings.reps,
                         "bulk_per_call": BULK},
            "reps": reps, "tables": tables(reps)}


def _series(reps: list[dict[str, dict[str, Any]]], key: str, metric: str) -> list[float | None]:
    vals: list[float | None] = []
    for r in reps:
        m = r.get(key, {}).get(metric)
        vals.append(m["rate"] if isinstance(m, dict) else m)
    return vals


def _cell(vals: list[float | None], base: list[float | None], *, show_ratio: bool = True) -> tuple[str, str]:
    clean = [v for v in vals if v is not None]
    if not clean:
        return "–", "–"
    return fmt_stat(clean), (fmt_stat(ratios(vals, base), 2) if show_ratio else "–")


def tables(reps: list[dict[str, dict[str, Any]]]) -> dict[str, str]:
    base_enq = _series(reps, "raw_pg_1", "enqueue")
    base_w1 = _series(reps, "raw_pg_1", "w1")
    base_w2 = _series(reps, "raw_pg_1", "w2")
    enqueue_rows = []
    process_rows = []
    for key, label in ROWS:
        if not any(key in r for r in reps):
            continue
        e1, e1r = _cell(_series(reps, key, "enqueue"), base_enq)
        b100, b100r = _cell(_series(reps, key, "bulk100"), base_enq)
        b1000, b1000r = _cell(_series(reps, key, "bulk1000"), base_enq)
        if e1 != "–" or b100 != "–" or b1000 != "–":
            enqueue_rows.append([label.split(",")[0] if key.startswith("ob_") else label, e1, e1r, b100, b100r,
                                 b1000, b1000r])
        w1, w1r = _cell(_series(reps, key, "w1"), base_w1)
        w2, w2r = _cell(_series(reps, key, "w2"), base_w2)
        cpu = [r[key]["w2"]["cpu"] / r[key]["w2"]["jobs"] * 1e6 for r in reps
               if key in r and "w2" in r[key] and r[key]["w2"].get("cpu") is not None]
        rss = [r[key]["w2"]["maxrss_kb"] / 1024 for r in reps
               if key in r and "w2" in r[key] and r[key]["w2"].get("maxrss_kb")]
        process_rows.append([label, w1, w1r, w2, w2r, fmt_stat(cpu, 0) if cpu else "–",
                             fmt_stat(rss, 0) if rss else "–"])
    enqueue = md_table(["system", "enqueue, 1 call per job (jobs/s)", "ratio", f"bulk, {BULK} per call", "ratio",
                        "bulk, 1,000 per call", "ratio"], enqueue_rows)
    process = md_table(["system", "process, 1 worker (jobs/s)", "ratio", "process, 2 workers", "ratio",
                        "worker CPU ms / 1k jobs (2 w)", "peak RSS MB per worker (2 w)"], process_rows)
    return {"enqueue": enqueue, "process": process}
