"""Migrated PostgreSQL schemas reused from test to test within one test process (the ``store`` fixture's).

Migrating a new schema runs every migration of every SQL line: ~150 DDL statements, 0.3 s on a quiet server and
seconds on a busy one, for each of hundreds of PostgreSQL tests. Resetting a schema a test has used to the state
``migrate()`` leaves takes a few milliseconds: every row deleted, the rows the migrations wrote put back and each
sequence set back, all in one transaction with triggers and foreign keys off (``session_replication_role =
replica``, which needs a superuser; without one every test gets a new schema, as before).

A schema is reused only when it is exactly the migrated schema: its definition (tables, columns, defaults,
indexes, constraints, triggers, functions, types, views, sequences) is compared with a template schema migrated
once per test process, and a schema a test changed (a migration of its own, a dropped index) is dropped instead.
A reset that cannot take its locks within seconds (a connection the test left open) drops the schema as well.
"""

from __future__ import annotations

import hashlib
import secrets
import warnings
from collections.abc import Callable
from typing import Any

import psycopg

from oncebeat.store import open_store

#: URLs of the schemas lent to running tests (the ``store`` fixture resets them through the pool, never drops them).
LENT: set[str] = set()

_DEFINITION = """
SELECT 'column ' || c.relname || '.' || a.attname || ' ' || a.attnum || ' ' || format_type(a.atttypid, a.atttypmod)
       || ' ' || a.attnotnull || ' ' || a.attidentity::text || a.attgenerated::text || ' '
       || coalesce(pg_get_expr(d.adbin, d.adrelid), '-')
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
 WHERE n.nspname = %(s)s AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL SELECT 'index ' || indexname || ' ' || indexdef FROM pg_indexes WHERE schemaname = %(s)s
UNION ALL SELECT 'constraint ' || c.relname || '.' || k.conname || ' ' || pg_get_constraintdef(k.oid)
  FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = k.connamespace
 WHERE n.nspname = %(s)s
UNION ALL SELECT 'trigger ' || c.relname || '.' || t.tgname || ' ' || t.tgenabled::text || ' ' || pg_get_triggerdef(t.oid)
  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = %(s)s AND NOT t.tgisinternal
UNION ALL SELECT 'function ' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ') '
       || pg_get_functiondef(p.oid)
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = %(s)s
UNION ALL SELECT 'type ' || t.typname || ' ' || t.typtype::text || ' '
       || coalesce((SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder) FROM pg_enum e
                     WHERE e.enumtypid = t.oid), '')
  FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname = %(s)s
UNION ALL SELECT 'relation ' || c.relname || ' ' || c.relkind::text || ' ' || c.relpersistence::text
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %(s)s
UNION ALL SELECT 'view ' || viewname || ' ' || definition FROM pg_views WHERE schemaname = %(s)s
UNION ALL SELECT 'sequence ' || sequencename || ' ' || data_type || ' ' || start_value || ' ' || increment_by || ' '
       || min_value || ' ' || max_value || ' ' || cycle
  FROM pg_sequences WHERE schemaname = %(s)s
"""


def _definition(conn: psycopg.Connection[Any], schema: str) -> str:
    """A digest of everything ``schema`` defines, with the schema's own name left out."""
    lines = sorted(str(row[0]).replace(schema, "<schema>") for row in conn.execute(_DEFINITION, {"s": schema}))
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


class SchemaPool:
    """Migrated schemas of one test process: ``take()`` one, ``give_back()`` it after the test.

    Args:
        base_url: the PostgreSQL URL tests use, without ``?schema=``.
        with_schema: ``(url, schema) -> url`` (the conftest's).
        libpq_url: ``url -> conninfo`` without oncebeat's own URL options (the conftest's).
    """

    def __init__(self, base_url: str, with_schema: Callable[[str, str], str],
                 libpq_url: Callable[[str], str]) -> None:
        self._base = base_url
        self._with_schema = with_schema
        self._conninfo = libpq_url(base_url)
        self._free: list[str] = []
        self._template: str | None = None
        self._tables: list[str] = []
        self._seeded: list[str] = []  # tables that hold rows after migrate() (schema_migrations)
        self._sequences: list[tuple[str, int, int | None]] = []
        self._digest = ""
        with psycopg.connect(self._conninfo, connect_timeout=5) as conn:
            row = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
        self.enabled = bool(row and row[0])

    def take(self) -> str | None:
        """A schema URL for a test that migrates it (``store``): a reset one, or a new name; None when disabled."""
        if not self.enabled:
            return None
        schema = self._free.pop() if self._free else f"ob_t_{secrets.token_hex(6)}"
        url = self._with_schema(self._base, schema)
        LENT.add(url)
        return url

    def give_back(self, url: str, drop: Callable[[str], None]) -> None:
        """Reset the schema of ``url`` for the next test, or ``drop(url)`` it if it is not the migrated schema."""
        LENT.discard(url)
        schema = url.rsplit("schema=", 1)[1]
        try:
            if self._reset(schema):
                self._free.append(schema)
                return
        except psycopg.Error as exc:  # a lock the test left held, or a bug here: the test passed all the same
            warnings.warn(f"schema {schema} not reused (dropped): {exc}", stacklevel=1)
        drop(url)

    def close(self, drop: Callable[[str], None]) -> None:
        """Drop every schema this pool kept, and its template."""
        for schema in [*self._free, *([self._template] if self._template else [])]:
            drop(self._with_schema(self._base, schema))
        self._free.clear()

    def _ensure_template(self) -> str:
        if self._template is None:
            schema = f"ob_t_tpl_{secrets.token_hex(6)}"
            self._template = schema
            with open_store(self._with_schema(self._base, schema)) as template:
                template.migrate()
            with psycopg.connect(self._conninfo, autocommit=True) as conn:
                self._tables = [r[0] for r in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename", (schema,))]
                self._seeded = [t for t in self._tables if conn.execute(
                    f'SELECT EXISTS (SELECT 1 FROM "{schema}"."{t}")').fetchone()[0]]  # type: ignore[index]
                self._sequences = [(r[0], r[1], r[2]) for r in conn.execute(
                    "SELECT sequencename, start_value, last_value FROM pg_sequences WHERE schemaname = %s", (schema,))]
                self._digest = _definition(conn, schema)
        return self._template

    def _reset(self, schema: str) -> bool:
        template = self._ensure_template()
        with psycopg.connect(self._conninfo, autocommit=True, connect_timeout=5) as conn:
            if _definition(conn, schema) != self._digest:
                return False
            with conn.transaction():
                conn.execute("SET LOCAL lock_timeout = '5s'")
                conn.execute("SET LOCAL session_replication_role = replica")  # no triggers, no foreign keys
                conn.execute(f'SET LOCAL search_path = "{schema}"')
                conn.execute("; ".join(f'DELETE FROM "{schema}"."{t}"' for t in self._tables))
                for t in self._seeded:
                    conn.execute(f'INSERT INTO "{schema}"."{t}" SELECT * FROM "{template}"."{t}"')
                for name, start, last in self._sequences:
                    value, called = (start, False) if last is None else (last, True)
                    conn.execute("SELECT setval(%s::regclass, %s, %s)", (f'"{schema}"."{name}"', value, called))
        return True
