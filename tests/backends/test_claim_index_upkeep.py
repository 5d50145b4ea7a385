"""SQLite: how many of ``jobs``' indexes a state change maintains, and what their conditions cost (engine 0014).

An UPDATE opens for writing (VDBE ``OpenWrite``) every index that holds a column it sets or whose partial
condition names one; for each row it then evaluates that condition on the old and the new row. Every partial
index on ``jobs`` names ``state``, so each state change maintains all of them. Engine 0014 dropped
``jobs_state_id_resting`` (read by no SQLite statement) and wrote the other conditions' state lists as ORs: a
list of three or more constants is evaluated through an ephemeral table (``OpenEphemeral``) that the statement
fills first and probes per row and index. Read from the statements' bytecode (``EXPLAIN``) on a migrated file.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from oncebeat.store import open_store
from oncebeat.store.sqlfiles import ENGINE, load_queries

#: The indexes a claim maintains (the job turns running): every partial index that names state.
CLAIMED = {"jobs_fetch", "jobs_unfinished_queue", "jobs_unique_key", "jobs_one_run_per_occurrence",
           "jobs_running_lease", "jobs_in_doubt"}
#: statement -> the jobs indexes it maintains on engine 0014.
UPKEEP = {
    "claim_jobs": CLAIMED,
    "return_jobs": CLAIMED,
    "snooze_job": CLAIMED,
    "complete_jobs": CLAIMED | {"jobs_finished_at"},
    "fail_job": CLAIMED | {"jobs_finished_at"},
    "rescue_jobs": CLAIMED | {"jobs_finished_at"},
    "extend_leases": {"jobs_running_lease"},  # the heartbeat sets no state
}
#: statement -> ephemeral tables on engine 0014: its own lists (`id IN (…)`, json_each) and the table's CHECK
#: on state; none for a partial index's condition.
EPHEMERAL = {"claim_jobs": 4, "return_jobs": 4, "snooze_job": 2, "complete_jobs": 2, "fail_job": 2,
             "rescue_jobs": 4, "extend_leases": 3}


def _upkeep(path: Path, name: str) -> tuple[set[str], int]:
    """(the jobs indexes ``name`` opens for writing, how many ephemeral tables its bytecode opens)."""
    sql = load_queries("sqlite")[name]
    conn = sqlite3.connect(path)
    try:
        roots = {root: index for index, root in conn.execute(
            "SELECT name, rootpage FROM sqlite_master WHERE type = 'index' AND tbl_name = 'jobs'")}
        ops = conn.execute("EXPLAIN " + sql, {p: None for p in re.findall(r"(?<![:\w]):(\w+)", sql)}).fetchall()
    finally:
        conn.close()
    opened = {roots[op[3]] for op in ops if op[1] == "OpenWrite" and op[3] in roots}
    return opened, sum(1 for op in ops if op[1] == "OpenEphemeral")


def _migrated(path: Path, target: int | None = None) -> Path:
    with open_store(f"sqlite:///{path}") as store:
        store.migrate(target=target, lines=(ENGINE,))
    return path


@pytest.mark.parametrize("name", sorted(UPKEEP))
def test_a_state_change_maintains_only_the_indexes_a_statement_reads(tmp_path: Path, name: str) -> None:
    opened, ephemeral = _upkeep(_migrated(tmp_path / "now.db"), name)
    assert opened == UPKEEP[name]
    assert ephemeral == EPHEMERAL[name]


def test_engine_0013_maintained_one_index_more_and_probed_a_table_per_state_list(tmp_path: Path) -> None:
    """The same statements on a database left at engine 0013: the counts above fail there."""
    old, new = _migrated(tmp_path / "old.db", target=13), _migrated(tmp_path / "new.db")
    for name in ("claim_jobs", "complete_jobs"):
        (old_opened, old_ephemeral), (new_opened, new_ephemeral) = _upkeep(old, name), _upkeep(new, name)
        assert old_opened - new_opened == {"jobs_state_id_resting"} and new_opened < old_opened
        # 0013's index conditions spell their lists as IN: each is one ephemeral table more per statement
        assert new_ephemeral < old_ephemeral


def test_the_claim_and_completion_keep_their_results_through_the_new_indexes(tmp_path: Path) -> None:
    """A drain on the migrated file: each index holds exactly the rows its condition names after each step."""
    path = _migrated(tmp_path / "drain.db")
    conn = sqlite3.connect(path, isolation_level=None)
    now = "2026-01-01T00:00:00.000000+00:00"
    try:
        conn.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 250) "
                     "INSERT INTO jobs (queue, task, args, state, run_at, unique_key, source_kind, source_host, "
                     "source_pid, source_name, source_version, created_at) SELECT 'default', 't', '[]', 'available', "
                     "?, 'k' || i, 'k', 'h', 1, 'n', 'v', ? FROM n", (now, now))
        queries = load_queries("sqlite")
        claimed = conn.execute(queries["claim_jobs"], {
            "worker_id": 1, "lease_expires_at": "2026-01-01T01:00:00.000000+00:00", "now": now, "queue": "default",
            "capped": 0, "limit": 100}).fetchall()
        assert sorted(r[0] for r in claimed) == list(range(1, 101))
        conn.execute(queries["complete_jobs"], {"worker_id": 1, "now": now, "ids": str(list(range(1, 51)))})
        counts = {index: conn.execute(f"SELECT COUNT(*) FROM jobs INDEXED BY {index} WHERE {where}").fetchone()[0]
                  for index, where in (
                      ("jobs_fetch", "queue = 'default' AND (state = 'available' OR state = 'scheduled' "
                                     "OR state = 'retryable')"),
                      ("jobs_running_lease", "state = 'running'"),
                      ("jobs_unfinished_queue", "queue = 'default' AND state = 'running'"),
                      ("jobs_unique_key", "unique_key = 'k200' AND state = 'available'"))}
        held_k1 = conn.execute("SELECT COUNT(*) FROM jobs INDEXED BY jobs_unique_key WHERE unique_key = 'k1' "
                               "AND (state = 'available' OR state = 'scheduled' OR state = 'running' "
                               "OR state = 'retryable')").fetchone()[0]
        assert counts["jobs_fetch"] == 150 and counts["jobs_running_lease"] == 50
        assert counts["jobs_unfinished_queue"] == 50 and counts["jobs_unique_key"] == 1  # k200 waits
        assert held_k1 == 0  # k1 completed: its key is free again
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()


def test_a_database_with_jobs_upgrades_to_0014_and_its_unique_indexes_still_refuse(tmp_path: Path) -> None:
    path = _migrated(tmp_path / "upgrade.db", target=13)
    states = ("available", "scheduled", "running", "retryable", "completed", "discarded", "cancelled")
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.executemany("INSERT INTO jobs (queue, task, args, state, run_at, unique_key, run_of, source_kind, "
                         "source_host, source_pid, source_name, source_version, created_at) VALUES ('q', 't', '[]', "
                         "?, '2026-01-01', ?, ?, 'k', 'h', 1, 'n', 'v', '2026-01-01')",
                         [(state, f"key{i % 2}", i % 2 + 100) for i, state in enumerate(states)
                          if state in ("completed", "discarded", "cancelled") or i == 0])
    finally:
        conn.close()
    with open_store(f"sqlite:///{path}") as store:
        assert store.migrate(lines=(ENGINE,)) == [("engine", 14), ("engine", 15), ("engine", 16)]
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        unique = "INSERT INTO jobs (queue, task, args, state, run_at, unique_key, run_of, source_kind, source_host, " \
                 "source_pid, source_name, source_version, created_at) VALUES ('q', 't', '[]', ?, '2026-01-01', ?, " \
                 "?, 'k', 'h', 1, 'n', 'v', '2026-01-01')"
        for state in ("scheduled", "running", "retryable"):  # key0 and run_of 100 are held by the available job
            with pytest.raises(sqlite3.IntegrityError, match="unique_key"):
                conn.execute(unique, (state, "key0", None))
            with pytest.raises(sqlite3.IntegrityError, match="run_of"):
                conn.execute(unique, (state, None, 100))
        conn.execute(unique, ("completed", "key0", 100))  # a finished job holds neither
        conn.execute(unique, ("available", "key1", 101))  # key1's jobs are all finished
    finally:
        conn.close()
