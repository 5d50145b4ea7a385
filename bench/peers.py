"""Task definitions of the peer systems (importable by their worker processes).

Every handler is a no-op apart from :func:`bench.probe.hit` (one mmap write).

- Procrastinate: :func:`procrastinate_app` builds an app on a PostgreSQL
  schema of its own (``search_path``), with one sync and one async task.
- Celery: :data:`celery_app` with the Redis broker, no result backend,
  ``task_ignore_result``; started with ``celery -A bench.peers:celery_app worker``.
- RQ: :func:`rq_noop` (jobs refer to it by import path).
"""

from __future__ import annotations

import os
from typing import Any

from bench import probe

PROCRASTINATE_QUEUE = "bench"
CELERY_QUEUE = "bench_celery"
RQ_QUEUE = "bench_rq"


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
