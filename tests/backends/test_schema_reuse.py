"""The reused PostgreSQL test schemas (tests/pg_schemas.py): a reset schema is exactly a migrated one.

What a test left (rows, sequence values, a trigger's guard) is gone after the reset; the rows the migrations wrote
are back; a schema whose definition a test changed is dropped, never handed out again.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import psycopg
import pytest
from conftest import _libpq_url, drop_pg_schema
from pg_schemas import LENT, SchemaPool

from oncebeat.store import open_store

pytestmark = pytest.mark.postgres


def _schema(url: str) -> str:
    return dict(parse_qsl(urlsplit(url).query))["schema"]


def _exists(url: str) -> bool:
    with psycopg.connect(_libpq_url(url)) as conn:
        row = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (_schema(url),)).fetchone()
    return bool(row and row[0])


def _migrated(url: str) -> tuple[dict[str, list[int]], dict[str, list[tuple[str, str]]]]:
    with open_store(url) as s:
        assert s.migrate() == []  # nothing left to apply
        return s.schema_versions(), s.table_columns()


def test_a_used_schema_comes_back_as_a_fresh_migrated_one(_pg_schema_pool: SchemaPool) -> None:
    pool = _pg_schema_pool
    if not pool.enabled:
        pytest.skip("the PostgreSQL role is not a superuser: every test gets a new schema")
    url = pool.take()
    assert url is not None and url in LENT
    with open_store(url) as s:
        s.migrate()
        expected = (s.schema_versions(), s.table_columns())
        with s.transaction() as tx:
            tx.execute("INSERT INTO customers (email, name) VALUES (%s, %s)", ("a@example.com", "A"))
            tx.execute("INSERT INTO customers (email, name) VALUES (%s, %s)", ("b@example.com", "B"))
            tx.execute("DELETE FROM schema_migrations WHERE version = 1")
    pool.give_back(url, drop_pg_schema)
    assert url not in LENT and _exists(url)
    again = pool.take()
    assert again == url, "the reset schema is the next one handed out"
    try:
        assert _migrated(again) == expected
        with open_store(again) as s, s.transaction() as tx:
            assert tx.execute("SELECT count(*) AS n FROM customers")[0]["n"] == 0
            tx.execute("INSERT INTO customers (email, name) VALUES (%s, %s)", ("c@example.com", "C"))
            assert tx.execute("SELECT id FROM customers")[0]["id"] == 1, "sequences start again"
    finally:
        pool.give_back(again, drop_pg_schema)


def test_a_schema_a_test_changed_is_dropped_not_reused(_pg_schema_pool: SchemaPool) -> None:
    pool = _pg_schema_pool
    if not pool.enabled:
        pytest.skip("the PostgreSQL role is not a superuser: every test gets a new schema")
    url = pool.take()
    assert url is not None
    with open_store(url) as s:
        s.migrate()
        with s.transaction() as tx:
            tx.execute("CREATE INDEX a_test_index ON customers (name)")
    pool.give_back(url, drop_pg_schema)
    assert not _exists(url)
    fresh = pool.take()
    assert fresh is not None and fresh != url
    try:
        with open_store(fresh) as s:
            s.migrate()
    finally:
        pool.give_back(fresh, drop_pg_schema)
