"""One of several clock processes racing on one database (see ../test_processes.py).

Usage::

    python clock_race.py DB_URL START_ISO INSTANTS RENDEZVOUS_DIR PACE

Every process builds the same app (schedule ``minutely``: ``every 1m`` in
UTC), migrates and starts a :class:`ClockProcess` on a :class:`SimulatedClock`
set to ``START_ISO`` (all processes do this at once, so migrations and
schedule syncs race too), then writes ``RENDEZVOUS_DIR/ready-<pid>`` and waits
for the file ``RENDEZVOUS_DIR/go``, which holds a wall-clock instant ``GO_AT``
(Unix seconds) that the parent writes once every process is ready.

Then each process ticks minute by minute through ``INSTANTS`` fire instants.
Simulated minute ``i`` is ticked at wall time ``GO_AT + i * PACE`` seconds (or
at once, if this process is behind), so all processes try to fire each
instant at the same moment — a race on every instant, not only at start-up —
and only the database decides who records it. A process never skips a
minute, so every instant is on time for everyone.

Prints one JSON line: how many occurrences this process recorded, how many
it found already recorded, how many ticks it had to retry (lock timeouts
under heavy load), and when its tick loop started and ended.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from oncebeat.app import App
from oncebeat.clock import ClockProcess
from oncebeat.errors import TransientStoreError
from oncebeat.store import open_store
from oncebeat.timebase import SimulatedClock


def main(argv: list[str]) -> int:
    url, start_iso, count, rendezvous, pace = argv[0], argv[1], int(argv[2]), Path(argv[3]), float(argv[4])
    app = App()

    @app.task()
    def minute_job(ctx: Any) -> None:
        pass

    app.schedule("minutely", "every 1m", tz="UTC", task="minute_job")
    store = open_store(url)
    store.migrate()
    clock = SimulatedClock(datetime.fromisoformat(start_iso))
    beat = ClockProcess(app, store, clock=clock, resync_interval=3600)
    inserted = rejected = retried = 0
    for fire in beat.start():  # at START itself: nothing to fire (no run on boot)
        inserted += fire.inserted
        rejected += not fire.inserted
    (rendezvous / f"ready-{os.getpid()}").touch()
    go = rendezvous / "go"
    while not go.exists():
        time.sleep(0.005)
    go_at = float(go.read_text())
    while time.time() < go_at:
        time.sleep(0.001)
    loop_started = time.time()
    for i in range(1, count + 1):
        wait = go_at + i * pace - time.time()
        if wait > 0:
            time.sleep(wait)
        clock.advance(60)
        while True:
            try:
                fires = beat.tick()
                break
            except TransientStoreError as exc:  # as ClockProcess.run does: the ledger makes a retry safe
                retried += 1
                print(f"tick retried: {exc}", file=sys.stderr, flush=True)
        for fire in fires:
            inserted += fire.inserted
            rejected += not fire.inserted
    loop_ended = time.time()
    store.close()
    print(json.dumps({"pid": os.getpid(), "inserted": inserted, "rejected": rejected, "retried": retried,
                      "started": loop_started, "ended": loop_ended}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
