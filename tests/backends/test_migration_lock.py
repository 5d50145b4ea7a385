"""PostgreSQL's migration lock is per schema: one schema's migrations take turns, other schemas' do not wait.

Many schemas of one database (a test suite's parallel processes, tenants) migrate at the same time; processes
migrating the same schema still apply each version once (test_store_contract's concurrent migrations).
"""

from __future__ import annotations

import threading
import time
from urllib.parse import parse_qsl, urlsplit

import psycopg
import pytest
from conftest import _libpq_url, drop_pg_schema

from oncebeat.store import open_store
from oncebeat.store.postgres import _MIGRATION_LOCK

pytestmark = pytest.mark.postgres


def _migrate_in_thread(url: str) -> tuple[threading.Thread, list[object]]:
    outcome: list[object] = []

    def run() -> None:
        with open_store(url) as s:
            try:
                outcome.append(s.migrate())
            except Exception as exc:  # noqa: BLE001 - reported by the test's assertion
                outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def _waits_on_lock(conn: psycopg.Connection[tuple[object, ...]], schema: str) -> bool:
    """True while some session waits for ``schema``'s migration lock."""
    row = conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
                       "AND classid = %s AND objid = hashtext(%s)::oid AND objsubid = 2",
                       (_MIGRATION_LOCK, schema)).fetchone()
    return bool(row and row[0])


def test_a_held_migration_lock_delays_its_own_schema_only(pg_db_url: str) -> None:
    schema = dict(parse_qsl(urlsplit(pg_db_url).query))["schema"]
    other_url = pg_db_url.replace(f"schema={schema}", f"schema={schema}_b")
    try:
        _held_lock_delays_its_own_schema_only(pg_db_url, schema, other_url)
    finally:
        drop_pg_schema(other_url)


def _held_lock_delays_its_own_schema_only(url: str, schema: str, other_url: str) -> None:
    with psycopg.connect(_libpq_url(url)) as holder:
        # What a process in the middle of migrating ``schema`` holds.
        holder.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_MIGRATION_LOCK, schema))
        try:
            other, other_outcome = _migrate_in_thread(other_url)
            other.join(timeout=120)
            assert not other.is_alive(), "migrating another schema waited on this schema's migration lock"
            assert isinstance(other_outcome[0], list) and other_outcome[0], other_outcome
            same, same_outcome = _migrate_in_thread(url)
            with psycopg.connect(_libpq_url(url), autocommit=True) as watcher:
                deadline = time.monotonic() + 120
                while not _waits_on_lock(watcher, schema):
                    assert same.is_alive(), f"migrating the locked schema did not wait for its lock: {same_outcome}"
                    assert time.monotonic() < deadline, "migrating the locked schema never asked for its lock"
                    time.sleep(0.02)
        finally:
            holder.rollback()  # releases the lock
        same.join(timeout=120)
        assert not same.is_alive(), "migrating the schema did not go on once the lock was released"
        assert isinstance(same_outcome[0], list) and same_outcome[0], same_outcome
