"""The SQLite ``synchronous`` option (issue 27 target 3): ``?synchronous=normal`` is an opt-in applied to every
connection of the store, FULL stays the default, and a bad value is refused with what each value gives up.

NORMAL in WAL mode promises durability against a crash of the process (the committed transaction is in the WAL,
which the OS keeps), not against a power loss or an OS crash: the kill -9 test below checks the first half."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from oncebeat.errors import StoreError
from oncebeat.store import open_store

# PRAGMA synchronous reads back a number: 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA.
FULL, NORMAL, EXTRA = 2, 1, 3


def _pragma(store: object, name: str) -> object:
    with store.transaction() as tx:  # type: ignore[attr-defined]
        return tx.execute(f"PRAGMA {name}")[0][name]


def _pragma_in_thread(store: object, name: str) -> object:
    """The pragma as a new thread's own connection (the store opens one per thread) reads it."""
    out: list[object] = []
    t = threading.Thread(target=lambda: out.append(_pragma(store, name)))
    t.start()
    t.join()
    return out[0]


def test_full_is_the_default(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'db.sqlite'}") as store:
        assert store.synchronous == "FULL"
        assert _pragma(store, "synchronous") == FULL
        assert _pragma_in_thread(store, "synchronous") == FULL


@pytest.mark.parametrize(("option", "expected"), [("normal", NORMAL), ("NORMAL", NORMAL), ("Normal", NORMAL),
                                                  ("full", FULL), ("extra", EXTRA)])
def test_the_option_is_applied_to_every_connection_in_wal_mode(tmp_path: Path, option: str, expected: int) -> None:
    with open_store(f"sqlite:///{tmp_path / 'db.sqlite'}?busy_timeout=5&synchronous={option}") as store:
        store.migrate()
        assert _pragma(store, "synchronous") == expected
        assert _pragma_in_thread(store, "synchronous") == expected  # each thread's connection, not only the first
        assert _pragma(store, "journal_mode") == "wal"
        assert store.busy_timeout == 5  # the other option is still read


@pytest.mark.parametrize("bad", ["off", "0", "1", "fast", "", "normal;", "full extra"])
def test_a_bad_value_is_a_clear_error_naming_it_and_what_each_value_gives_up(tmp_path: Path, bad: str) -> None:
    with pytest.raises(StoreError) as info:
        open_store(f"sqlite:///{tmp_path / 'db.sqlite'}?synchronous={bad}")
    text = str(info.value)
    assert f"not {bad!r}" in text
    assert "synchronous must be full" in text and "normal" in text and "power loss" in text
    assert not (tmp_path / "db.sqlite").exists()  # refused before the file is created


def test_the_cli_takes_it_from_database_url(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'db.sqlite'}?synchronous=off"
    cli = Path(sys.executable).with_name("oncebeat")
    out = subprocess.run([str(cli), "migrate"], env={**os.environ, "DATABASE_URL": db}, cwd=tmp_path,
                         capture_output=True, text=True, check=False)
    assert out.returncode != 0
    assert "synchronous must be full" in out.stderr and "not 'off'" in out.stderr


COMMIT_THEN_DIE = textwrap.dedent("""
    import os, signal, sys
    from oncebeat.provenance import current_source
    from oncebeat.queue import Queue
    from oncebeat.store import open_store
    from oncebeat.timebase import SystemClock
    store = open_store(sys.argv[1])
    ids = [Queue(store, clock=SystemClock(), source=current_source("cli")).enqueue("work") for _ in range(3)]
    print(" ".join(map(str, ids)), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)       # no close, no checkpoint: the commits are only in the WAL
""")


def test_with_normal_a_committed_job_survives_a_kill_9_of_its_process(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}?synchronous=normal"
    with open_store(url) as store:
        store.migrate()
    proc = subprocess.run([sys.executable, "-c", COMMIT_THEN_DIE, url], capture_output=True, text=True, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    ids = [int(x) for x in proc.stdout.split()]
    assert len(ids) == 3
    assert (tmp_path / "db.sqlite-wal").stat().st_size > 0  # left in the WAL by the killed process
    with open_store(url) as store:
        assert [(r["state"], r["n"]) for r in store.read("count_jobs_by_state")] == [("available", 3)]
        with store.transaction() as tx:
            assert [r["id"] for r in tx.execute("SELECT id FROM jobs ORDER BY id")] == ids
