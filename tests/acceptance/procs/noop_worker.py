"""A worker process draining no-op jobs, for the SQLite writer-lock tests (see ../test_sqlite_writer_lock.py).

Usage::

    python noop_worker.py DB_URL RENDEZVOUS_DIR [--batch N] [--stop-after S]

Builds ``Worker.run`` on the task ``noop`` (concurrency 1), registers, writes
``RENDEZVOUS_DIR/ready-<pid>`` and waits for the file ``RENDEZVOUS_DIR/go`` so
that several processes start claiming together. Stops on SIGTERM (or after
``--stop-after`` seconds) and prints one JSON line: pid, worker id and the
number of jobs it completed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from oncebeat.app import App
from oncebeat.store import open_store
from oncebeat.worker import Worker


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("db_url")
    parser.add_argument("rendezvous", type=Path)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--stop-after", type=float, default=60.0)
    args = parser.parse_args(argv)
    app = App()

    @app.task()
    def noop(ctx: Any) -> None:
        pass

    store = open_store(args.db_url)
    worker = Worker(app, store, batch_size=args.batch, poll_interval=0.05)
    worker.register()
    (args.rendezvous / f"ready-{os.getpid()}").touch()
    while not (args.rendezvous / "go").exists():
        time.sleep(0.01)
    counts = worker.run(stop_after=args.stop_after)
    store.close()
    print(json.dumps({"pid": os.getpid(), "worker_id": worker.process_id, **counts}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
