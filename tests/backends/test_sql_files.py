"""The per-backend SQL files stay in step: same query names, same migrations, same tables."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from oncebeat.store import open_store
from oncebeat.store.sqlfiles import load_migrations, load_queries, split_statements

ENGINE_TABLES = {"schema_migrations", "schedules", "schedule_sets", "occurrences", "jobs", "effects",
                 "processes", "events"}
DOMAIN_TABLES = {"customers", "invoices", "reminders", "stripe_events"}


def created_objects(sql: str, earlier: frozenset[str] = frozenset()) -> list[str]:
    """``CREATE TABLE x`` / ``CREATE [UNIQUE] INDEX y`` / ``ADD COLUMN t.c`` of each statement, in order.

    SQLite cannot alter a constraint, so it rebuilds the table (``ALTER TABLE t RENAME TO t_before_NNNN``,
    create, copy, drop) where PostgreSQL alters it in place: a rebuilt table's re-creation (the table and its
    indexes named in ``earlier`` migrations) counts as that alteration, and other statements (copies,
    constraint changes) are not compared.
    """
    statements = split_statements(sql)
    rebuilt = {m.group(1) for s in statements
               if (m := re.match(r"ALTER\s+TABLE\s+(\w+)\s+RENAME\s+TO\s+\w+_before_\d+", s, re.IGNORECASE))}
    out = []
    for statement in statements:
        create = re.match(r"CREATE\s+(UNIQUE\s+)?(TABLE|INDEX)\s+(\w+)(?:\s+ON\s+(\w+))?", statement, re.IGNORECASE)
        column = re.match(r"ALTER\s+TABLE\s+(\w+)\s+ADD\s+COLUMN\s+(\w+)", statement, re.IGNORECASE)
        if create is not None:
            unique, kind, name, table = create.groups()
            if (kind.upper() == "TABLE" and name in rebuilt) or (table in rebuilt and name in earlier):
                continue
            out.append(f"{'UNIQUE ' if unique else ''}{kind.upper()} {name}")
        elif column is not None:
            out.append(f"ADD COLUMN {column.group(1)}.{column.group(2)}")
    return out


def test_both_backends_define_exactly_the_same_query_names() -> None:
    sqlite, postgres = load_queries("sqlite"), load_queries("postgres")
    assert sorted(set(sqlite) - set(postgres)) == [], "defined for SQLite only"
    assert sorted(set(postgres) - set(sqlite)) == [], "defined for PostgreSQL only"
    assert all(sql.strip() for sql in sqlite.values()) and all(sql.strip() for sql in postgres.values())


def test_both_backends_number_their_migrations_the_same_way() -> None:
    sqlite = [(version, name) for version, name, _ in load_migrations("sqlite")]
    postgres = [(version, name) for version, name, _ in load_migrations("postgres")]
    assert sqlite == postgres
    assert [version for version, _ in sqlite] == list(range(1, len(sqlite) + 1)), "no gaps, no duplicates"


def test_each_migration_creates_the_same_tables_and_indexes_on_both_backends() -> None:
    earlier: set[str] = set()
    for (version, _, sqlite_sql), (_, _, pg_sql) in zip(load_migrations("sqlite"), load_migrations("postgres"),
                                                        strict=True):
        sqlite_objects = created_objects(sqlite_sql, frozenset(earlier))
        assert sqlite_objects == created_objects(pg_sql, frozenset(earlier)), f"migration {version:04d} differs"
        earlier |= {entry.split()[-1] for entry in sqlite_objects}


def test_replaying_every_migration_on_fresh_databases_gives_the_same_schema(
        make_db_url: Callable[[], str]) -> None:
    with open_store(make_db_url()) as first, open_store(make_db_url()) as second:
        assert first.migrate() == second.migrate() == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
        schema = first.table_columns()
        assert schema == second.table_columns()
        assert set(schema) == ENGINE_TABLES | DOMAIN_TABLES


def test_both_backends_have_the_same_tables_and_columns(tmp_path: Path, pg_db_url: str) -> None:
    with open_store(f"sqlite:///{tmp_path}/oncebeat.db") as sqlite, open_store(pg_db_url) as postgres:
        sqlite.migrate()
        postgres.migrate()
        sqlite_schema, pg_schema = sqlite.table_columns(), postgres.table_columns()
    assert set(sqlite_schema) == set(pg_schema)
    for table in sorted(sqlite_schema):
        assert [c for c, _ in sqlite_schema[table]] == [c for c, _ in pg_schema[table]], f"columns of {table}"


def test_upgrading_from_each_older_version_gives_the_same_schema_as_a_fresh_install(
        make_db_url: Callable[[], str]) -> None:
    with open_store(make_db_url()) as fresh:
        fresh.migrate()
        expected = fresh.table_columns()
    versions = [v for v, _, _ in load_migrations("sqlite")]  # both backends number alike (tested above)
    for stop in versions[:-1]:
        with open_store(make_db_url()) as old:
            assert old.migrate(target=stop) == [v for v in versions if v <= stop]
            applied_later = old.migrate()
            assert applied_later == [v for v in versions if v > stop]
            assert old.table_columns() == expected
