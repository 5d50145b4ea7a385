"""A real worker process for the kill/terminate tests (see ../test_processes.py).

Usage::

    python worker.py DB_URL OUTBOX [--lease S] [--grace S] [--rescue S] [--stop-after S]

Task ``send_reminder(invoice_id, hang=0)``: on its first attempt it first
hangs ``hang`` seconds (a slow SMTP server), then "sends" the reminder
through ``ctx.effect(f"reminder:{invoice_id}")``. Sending appends one line
to the file ``OUTBOX`` — the outside world's record of what went out, which
survives the process being killed.

``ONCEBEAT_CRASH_AT=<point>`` in the environment makes the process SIGKILL
itself at that crash point. On exit (SIGTERM, or ``--stop-after``) it prints
one JSON line with the worker's counts.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from typing import Any

from oncebeat.app import App
from oncebeat.store import open_store
from oncebeat.worker import Worker


def build_app(outbox: str) -> App:
    app = App()

    def deliver(invoice_id: int) -> dict[str, Any]:
        with open(outbox, "a", encoding="utf-8") as f:
            f.write(f"reminder:{invoice_id} pid={os.getpid()}\n")
        return {"delivered_by": os.getpid()}

    @app.task(max_attempts=3)
    def send_reminder(ctx: Any, invoice_id: int, hang: float = 0.0) -> None:
        if ctx.job.attempt == 1 and hang:
            time.sleep(hang)
        ctx.effect(f"reminder:{invoice_id}", lambda: deliver(invoice_id), payload={"invoice_id": invoice_id})

    return app


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("db_url")
    parser.add_argument("outbox")
    parser.add_argument("--lease", type=float, default=30.0)
    parser.add_argument("--grace", type=float, default=25.0)
    parser.add_argument("--rescue", type=float, default=15.0)
    parser.add_argument("--stop-after", type=float, default=60.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s worker pid {os.getpid()} %(levelname)s %(message)s")
    store = open_store(args.db_url)
    worker = Worker(build_app(args.outbox), store, lease_seconds=args.lease, grace_seconds=args.grace,
                    rescue_interval=args.rescue, poll_interval=0.1)
    counts = worker.run(stop_after=args.stop_after)
    store.close()
    print(json.dumps({"pid": os.getpid(), "worker_id": worker.process_id, **counts}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
