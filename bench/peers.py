"""Task definitions of the peer systems (importable by their worker processes).

Every handler is a no-op apart from :func:`bench.probe.hit` (one mmap write).

- Procrastinate: :func:`procrastinate_app` builds an app on a PostgreSQL
  schema of its own (``search_path``), with one sync and one async task.
- Celery: :data:`celery_app` with the Redis broker, no result backend,
  ``task_ignore_result``; started with ``celery -A bench.peers:celery_app worker``.
- RQ: :func:`rq_noop` (jobs refer to it by import path).
- PgQueuer: :func:`pgqueuer_app` registers an async no-op entrypoint on
  ``PgQueuer(AsyncpgDriver(conn))``; :func:`pgqueuer_env` places its tables in a
  schema of their own (``PGQUEUER_SCHEMA``) with a NOTIFY channel of their own.
- DBOS: :func:`dbos_define` registers a no-op workflow that calls one no-op
  step (the probe runs in the step); the queue is registered in the system
  database by the benchmark (``DBOSClient.register_queue``) and polled by
  ``DBOS.launch()``-ed worker processes.

Only public APIs of the peers are used; nothing of theirs is copied here.
"""

from __future__ import annotations

import os
from typing import Any

from bench import probe

PROCRASTINATE_QUEUE = "bench"
CELERY_QUEUE = "bench_celery"
RQ_QUEUE = "bench_rq"
PGQUEUER_ENTRYPOINT = "bench_noop"
DBOS_APP = "bench"
DBOS_QUEUE = "bench_dbos"
DBOS_WORKFLOW = "bench_noop_workflow"
DBOS_VERSION = "bench-noop-1"


def procrastinate_app(conninfo: str, schema: str, *, sync_pool: bool = False) -> Any:
    import procrastinate

    kwargs = {"conninfo": conninfo, "kwargs": {"options": f"-c search_path={schema}"}}
    connector = procrastinate.SyncPsycopgConnector(**kwargs) if sync_pool else procrastinate.PsycopgConnector(**kwargs)
    app = procrastinate.App(connector=connector)

    @app.task(name="noop_sync", queue=PROCRASTINATE_QUEUE)
    def noop_sync() -> None:
        probe.hit()

    @app.task(name="noop_async", queue=PROCRASTINATE_QUEUE)
    async def noop_async() -> None:
        probe.hit()

    return app


# --------------------------------------------------------------------------- Celery

def _make_celery() -> Any:
    try:
        from celery import Celery
    except ImportError:  # the bench extra is not installed
        return None
    broker = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
    app = Celery("bench", broker=broker)
    app.conf.update(task_ignore_result=True, task_default_queue=CELERY_QUEUE, worker_hijack_root_logger=False,
                    broker_connection_retry_on_startup=True, worker_prefetch_multiplier=4)

    @app.task(name="bench.noop")
    def noop() -> None:
        probe.hit()

    return app


celery_app = _make_celery()


# --------------------------------------------------------------------------- RQ

def rq_noop() -> None:
    probe.hit()


# --------------------------------------------------------------------------- PgQueuer


def pgqueuer_env(schema: str) -> dict[str, str]:
    """Environment that puts PgQueuer's tables in ``schema`` and gives it its own NOTIFY channel.

    PgQueuer reads ``PGQUEUER_*`` once per process (``db_settings()``, cached); the benchmark passes
    these to its worker processes and sets them (clearing that cache) around its own enqueue calls.
    """
    return {"PGQUEUER_SCHEMA": schema, "PGQUEUER_CHANNEL": f"ch_{schema}"}


def pgqueuer_app(conn: Any) -> Any:
    """``PgQueuer(AsyncpgDriver(conn))`` with one async no-op entrypoint."""
    from pgqueuer import AsyncpgDriver, PgQueuer

    pgq = PgQueuer(AsyncpgDriver(conn))

    @pgq.entrypoint(PGQUEUER_ENTRYPOINT)
    async def noop(job: Any) -> None:
        probe.hit()

    return pgq


# --------------------------------------------------------------------------- DBOS

_dbos_defined = False


def dbos_define() -> None:
    """Register the no-op workflow (one no-op step) with DBOS's registry; once per process."""
    global _dbos_defined
    if _dbos_defined:
        return
    from dbos import DBOS

    @DBOS.step(name="bench_noop_step")
    def noop_step() -> None:
        probe.hit()

    @DBOS.workflow(name=DBOS_WORKFLOW)
    def noop_workflow() -> None:
        noop_step()

    _dbos_defined = True
