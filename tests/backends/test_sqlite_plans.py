"""SQLite: the index each hot statement on ``jobs`` reads (EXPLAIN QUERY PLAN), on the schema of engine 0014.

Engine 0014 writes the partial indexes' state lists as ORs and the loader spells the queries' lists alike
(``oncebeat.store.sqlfiles.to_sqlite``): SQLite uses a partial index only when the query's WHERE implies the
index's. The plans below are read from a migrated file with the loaded SQL; on a database left at engine 0013
(its indexes written ``state IN (...)``) the same check fails, which the last tests show.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from oncebeat.store import open_store
from oncebeat.store.sqlfiles import ENGINE, load_migrations, load_queries

#: statement -> (index its plan must name on jobs, or "PRIMARY KEY"; what the plan must not contain).
HOT = {
    "claim_jobs": ("jobs_fetch", "SCAN jobs"),
    "complete_jobs": ("PRIMARY KEY", "SCAN jobs"),
    "fail_job": ("PRIMARY KEY", "SCAN jobs"),
    "snooze_job": ("PRIMARY KEY", "SCAN jobs"),
    "return_jobs": ("PRIMARY KEY", "SCAN jobs"),
    "extend_leases": ("PRIMARY KEY", "SCAN jobs"),  # the heartbeat
    "rescue_jobs": ("jobs_running_lease", "SCAN jobs"),
    "next_run_at": ("jobs_fetch", "SCAN jobs"),
    # a limited queue's claim counts its running jobs: one queue's entries, not every running job's
    "running_in_queue": ("jobs_unfinished_queue (queue=? AND state=?)", "jobs_running_lease"),
    "running_jobs": ("jobs_running_lease", "jobs_unfinished_queue"),
    "retention_prunable_processes": ("jobs_running_lease", "jobs_unfinished_queue"),
    "unfinished_run_of": ("jobs_one_run_per_occurrence", "SCAN jobs"),
    "overlap_holder": ("jobs_unique_key", "SCAN jobs"),
    "release_buffered_job": ("jobs_unique_key", "SCAN jobs"),
}


def _migrated(path: Path, target: int | None = None) -> sqlite3.Connection:
    with open_store(f"sqlite:///{path}") as store:
        store.migrate(target=target, lines=(ENGINE,))
    return sqlite3.connect(path)


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection = _migrated(tmp_path / "plans.db")
    try:
        yield connection
    finally:
        connection.close()


def plan(conn: sqlite3.Connection, name: str, **values: object) -> str:
    """EXPLAIN QUERY PLAN of the loaded query ``name``, one line per step; unset parameters are NULL."""
    sql = load_queries("sqlite")[name]
    params = {p: values.get(p) for p in re.findall(r"(?<![:\w]):(\w+)", sql)}
    return "\n".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params))


@pytest.mark.parametrize("name", sorted(HOT))
def test_each_hot_statement_reads_the_index_meant_for_it(conn: sqlite3.Connection, name: str) -> None:
    wanted, unwanted = HOT[name]
    text = plan(conn, name)
    if wanted == "PRIMARY KEY":
        assert re.search(r"SEARCH jobs USING INTEGER PRIMARY KEY", text), text
    else:
        assert f"INDEX {wanted}" in text, text
    assert unwanted not in text, text


def test_no_sqlite_index_on_jobs_spells_a_state_list_as_in(conn: sqlite3.Connection) -> None:
    indexes = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'jobs' "
                                "AND sql IS NOT NULL"))
    assert "jobs_state_id_resting" not in indexes
    assert {"jobs_fetch", "jobs_unfinished_queue", "jobs_unique_key", "jobs_one_run_per_occurrence",
            "jobs_running_lease", "jobs_in_doubt"} <= set(indexes)
    for name, sql in indexes.items():
        assert not re.search(r"\bIN\s*\(", sql, re.IGNORECASE), (name, sql)


def test_the_job_list_by_state_walks_the_primary_key_newest_first_as_before(tmp_path: Path) -> None:
    """The dashboard's list (a state filter, or none) never read jobs_state_id_resting on SQLite; nor now."""
    old, new = _migrated(tmp_path / "old.db", target=13), _migrated(tmp_path / "new.db")
    try:
        for state in (None, "discarded", "available", "running"):
            plans = [plan(c, "list_jobs_page", state=state, limit=50) for c in (old, new)]
            assert plans[0].splitlines()[0] == plans[1].splitlines()[0] == "SCAN jobs", plans
            assert "TEMP B-TREE" not in plans[1], plans[1]  # ORDER BY id DESC by the walk itself
    finally:
        old.close()
        new.close()


def test_the_job_list_by_state_finds_rare_states_among_many_finished_jobs(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'list.db'}") as store:
        store.migrate(lines=(ENGINE,))
        with store.transaction() as tx:
            tx.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000) "
                       "INSERT INTO jobs (queue, task, args, state, run_at, source_kind, source_host, source_pid, "
                       "source_name, source_version, created_at) SELECT 'default', 't', '[]', CASE "
                       "WHEN i % 1000 = 7 THEN 'discarded' WHEN i % 500 = 3 THEN 'available' ELSE 'completed' END, "
                       "'2026-01-01T00:00:00.000000+00:00', 'k', 'h', 1, 'n', 'v', "
                       "'2026-01-01T00:00:00.000000+00:00' FROM n")
        rows = store.read("list_jobs_page", state="discarded", task=None, queue=None, since=None, until=None,
                          before_id=None, limit=2)
        assert [r["id"] for r in rows] == [2007, 1007]
        rows = store.read("list_jobs_page", state="available", task=None, queue=None, since=None, until=None,
                          before_id=2503, limit=10)
        assert [r["id"] for r in rows] == [2003, 1503, 1003, 503, 3]


def test_these_checks_fail_on_the_indexes_of_engine_0013(tmp_path: Path) -> None:
    """The checks above can fail: on engine 0013's indexes (state lists as IN) three of them read
    other indexes or the whole table."""
    assert max(v for v, _, _ in load_migrations("sqlite", ENGINE)) >= 14
    old = _migrated(tmp_path / "old.db", target=13)
    try:
        assert "jobs_unfinished_queue" not in plan(old, "running_in_queue")
        assert "SCAN jobs" in plan(old, "release_buffered_job")
        assert "jobs_state_id_resting" in dict(old.execute("SELECT name, sql FROM sqlite_master"))
    finally:
        old.close()
