"""A real worker process whose job sends many emails, one ``ctx.effect`` each (see ../test_effect_edges_processes.py).

Usage::

    python newsletter_worker.py DB_URL SMTP_URL [--lease S] [--rescue]

Task ``newsletter(recipients)``: for each recipient it sends one message through a real SMTP server, the
way the README recommends for library users: the message is rendered once and frozen with the effect
(``freeze``), the effect claims its key only when the SMTP connection is free (``resource``) and marks its
point of no return right before the final ``.`` of DATA. With ``--rescue`` it first rescues jobs whose lease
expired (their worker was killed). It drains every due job serially, then prints one JSON line with its
counts and exits. ``ONCEBEAT_CRASH_AT=<point>[:N]`` makes it SIGKILL itself at that crash point.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any

from oncebeat.app import App
from oncebeat.effects import EffectAttempt
from oncebeat.mail import Mailer, build_message, make_message_id, message_bytes
from oncebeat.store import open_store
from oncebeat.worker import Worker


def build_app(mailer: Mailer) -> App:
    app = App()

    @app.task(max_attempts=3)
    def newsletter(ctx: Any, edition: str, recipients: list[str]) -> None:
        for rcpt in recipients:
            key = f"newsletter:{edition}:{rcpt}"
            msg = build_message(sender="News <news@example.test>", to=rcpt, subject=f"The {edition} edition",
                                text=f"Hello {rcpt}, here is the {edition} edition.", html=None,
                                message_id=make_message_id(key, "example.test"))

            def deliver(attempt: EffectAttempt) -> dict[str, str]:
                assert attempt.frozen is not None
                return {"reply": mailer.send(attempt.frozen, before_final_dot=attempt.point_of_no_return)}

            ctx.effect(key, deliver, payload={"to": rcpt}, freeze=lambda msg=msg: message_bytes(msg),
                       marks_point_of_no_return=True, resource=mailer.reserved())

    return app


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("db_url")
    parser.add_argument("smtp_url")
    parser.add_argument("--lease", type=float, default=30.0)
    parser.add_argument("--rescue", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s newsletter worker pid {os.getpid()} %(levelname)s %(message)s")
    store = open_store(args.db_url)
    with Mailer(args.smtp_url) as mailer:
        worker = Worker(build_app(mailer), store, lease_seconds=args.lease)
        rescued = len(worker.rescue()) if args.rescue else 0
        processed = worker.drain()
        worker.stop_process()
    store.close()
    print(json.dumps({"pid": os.getpid(), "rescued": rescued, "processed": processed}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
