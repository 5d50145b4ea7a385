"""A real worker process for the fencing tests (see ../test_fencing_processes.py).

Usage::

    python fenced_worker.py DB_URL DIR [--lease S] [--concurrency N] [--batch N] [--rescue S] [--cut-heartbeat FILE]

Task ``work(n, steps=1, pause=0.3)``: writes ``start`` to ``DIR/bodies.txt`` (job, attempt, pid, wall time),
then ``steps`` times sleeps ``pause`` seconds and runs the effect ``work:<n>:<i>``, which appends the key to
``DIR/outbox.txt`` (the outside world's record, which survives the process being frozen or killed); it writes
``end`` when the body leaves, however it leaves.

``--cut-heartbeat FILE``: while FILE exists, every statement of the worker's heartbeat thread fails as a cut
connection would (a ``TransientStoreError`` from the store's ``before_statement`` hook), while the job slots'
statements go through: a node whose heartbeat connection is cut while its job connection works. The worker
code under test is the real one. On SIGTERM it prints one JSON line with its counts.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from oncebeat.app import App
from oncebeat.errors import TransientStoreError
from oncebeat.store import open_store
from oncebeat.worker import Worker


def note(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as f:  # one short append per line: whole lines, whoever writes
        f.write(line + "\n")


def build_app(folder: Path) -> App:
    app = App()
    bodies, outbox = folder / "bodies.txt", folder / "outbox.txt"

    @app.task(max_attempts=5)
    def work(ctx: Any, n: int, steps: int = 1, pause: float = 0.3) -> None:
        job = f"job={ctx.job.id} n={n} attempt={ctx.job.attempt} pid={os.getpid()}"
        note(bodies, f"start {job} t={time.time():.6f}")
        try:
            for i in range(steps):
                time.sleep(pause)
                key = f"work:{n}:{i}"
                ctx.effect(key, lambda key=key: note(outbox, f"{key} pid={os.getpid()}"), payload={"n": n, "i": i})
        finally:
            note(bodies, f"end {job} t={time.time():.6f}")

    return app


def cut_heartbeat(flag: Path) -> Any:
    def before_statement(name: str) -> None:
        if threading.current_thread().name == "oncebeat-heartbeat" and flag.exists():
            raise TransientStoreError(f"query {name}: heartbeat connection cut (test fault)")

    return before_statement


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("db_url")
    parser.add_argument("folder", type=Path)
    parser.add_argument("--lease", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--rescue", type=float, default=0.3)
    parser.add_argument("--cut-heartbeat", type=Path, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s fenced worker pid {os.getpid()} %(threadName)s %(levelname)s %(message)s")
    store = open_store(args.db_url)
    if args.cut_heartbeat is not None:
        store.before_statement = cut_heartbeat(args.cut_heartbeat)
    worker = Worker(build_app(args.folder), store, lease_seconds=args.lease, concurrency=args.concurrency,
                    batch_size=args.batch, rescue_interval=args.rescue, poll_interval=0.1, grace_seconds=5)
    counts = worker.run()
    store.close()
    print(json.dumps({"pid": os.getpid(), "worker_id": worker.process_id, **counts}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
