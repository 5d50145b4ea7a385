"""A process that stops in the middle of a SQLite write transaction (see ../test_sqlite_writer_lock.py).

Usage::

    python lock_holder.py DB_URL

Opens a transaction (the writer lock ``<db>-lock`` and SQLite's write lock), cancels every job in it, prints
``holding`` and sleeps there until it is killed: the transaction never commits.
"""

from __future__ import annotations

import sys
import time

from oncebeat.store import open_store


def main(argv: list[str]) -> int:
    store = open_store(argv[0])
    with store.transaction() as tx:
        tx.execute("UPDATE jobs SET state = 'cancelled'")
        print("holding", flush=True)
        while True:
            time.sleep(60)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
