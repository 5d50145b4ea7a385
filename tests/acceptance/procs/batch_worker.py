"""A real worker process with several slots whose done records meet in one write (see ../test_done_batch_processes.py).

Usage::

    python batch_worker.py DB_URL SMTP_URL --jobs N [--concurrency 4] [--lease S] [--kill-at-batch PATH]
    python batch_worker.py DB_URL SMTP_URL --burst

Task ``mail(n)``: one email through a real SMTP server inside ``ctx.effect`` (message frozen at the first attempt,
the key claimed once a connection is free, the point of no return marked before the final ``.``). The slots
meet at a barrier after each send, so their done records reach the process's group commit together and a write
carries several of them. ``--kill-at-batch PATH``: at the first write of two or more done records, write its keys
to PATH and SIGKILL this process (a ``kill -9`` mid-batch). Without it the worker runs (``Worker.run``) until N
jobs finished, then stops and prints one JSON line. ``--burst``: ``Worker.burst`` (rescue, then every due job,
serially, waiting up to 10 s for other workers' leases to end), then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from oncebeat import telemetry
from oncebeat.app import App
from oncebeat.effects import EffectAttempt
from oncebeat.mail import Mailer, build_message, make_message_id, message_bytes
from oncebeat.store import open_store
from oncebeat.worker import Worker


def build_app(mailer: Mailer, meet: threading.Barrier) -> App:
    app = App()

    @app.task(max_attempts=3)
    def mail(ctx: Any, n: int) -> None:
        key = f"mail:{n}"
        msg = build_message(sender="Billing <billing@example.test>", to=f"customer{n}@example.test",
                            subject=f"Invoice {n}", text=f"Invoice {n} is overdue.", html=None,
                            message_id=make_message_id(key, "example.test"))

        def deliver(attempt: EffectAttempt) -> dict[str, str]:
            assert attempt.frozen is not None
            reply = mailer.send(attempt.frozen, before_final_dot=attempt.point_of_no_return)
            try:  # the slots leave their sends together: their done records meet in the group commit
                meet.wait(timeout=1.0)
            except threading.BrokenBarrierError:
                meet.reset()
            return {"reply": reply}

        ctx.effect(key, deliver, payload={"n": n}, freeze=lambda: message_bytes(msg), marks_point_of_no_return=True,
                   resource=mailer.reserved())

    return app


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("db_url")
    parser.add_argument("smtp_url")
    parser.add_argument("--jobs", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--lease", type=float, default=30.0)
    parser.add_argument("--burst", action="store_true")
    parser.add_argument("--kill-at-batch", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s batch worker pid {os.getpid()} %(levelname)s %(message)s")
    kill_file: Path | None = args.kill_at_batch

    def kill_mid_batch(event: str, data: Mapping[str, Any]) -> None:
        if kill_file is not None and len(data["keys"]) >= 2:
            with kill_file.open("w") as out:
                out.write("\n".join(data["keys"]))
                out.flush()
                os.fsync(out.fileno())
            os.kill(os.getpid(), signal.SIGKILL)

    telemetry.attach("effect.batch", kill_mid_batch)
    store = open_store(args.db_url)
    with Mailer(args.smtp_url, connections=args.concurrency) as mailer:
        worker = Worker(build_app(mailer, threading.Barrier(args.concurrency)), store,
                        concurrency=args.concurrency, batch_size=args.concurrency, lease_seconds=args.lease,
                        poll_interval=0.1)
        if args.burst:
            outcomes = worker.burst(wait_for_leases=10.0)
        else:
            finished: list[str] = []

            def count(event: str, data: Mapping[str, Any]) -> None:
                finished.append(str(data["outcome"]))
                if len(finished) >= args.jobs:
                    worker.request_stop()

            telemetry.attach("job.finished", count)
            worker.run(install_signals=False)
            outcomes = {"finished": len(finished)}
    store.close()
    print(json.dumps({"pid": os.getpid(), **outcomes}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
