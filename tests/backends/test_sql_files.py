"""The per-backend SQL files stay in step: same query names, same migrations, same tables."""

from __future__ import annotations

import re
import sqlite3
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from oncebeat.store import Store, open_store
from oncebeat.store.sqlfiles import (
    BACKENDS,
    ENGINE,
    SqlLine,
    line_blocks,
    line_queries,
    load_migrations,
    load_queries,
    query_files,
    registered_lines,
    split_statements,
    to_sqlite,
)

ENGINE_TABLES = {"schema_migrations", "schedules", "schedule_sets", "occurrences", "jobs", "effects",
                 "processes", "events", "idempotency_keys",
                 "rate_limits", "rate_permits", "paused_queues", "queue_limits"}
DOMAIN_TABLES = {"customers", "invoices", "reminders", "stripe_events", "reminder_holds", "source_reads",
                 "payment_watermarks", "ladder_versions", "invoice_pins", "reminder_attachments", "notices",
                 "reminder_fees", "invoice_open_totals", "receivable_moves", "report_runs"}


def created_objects(sql: str, earlier: frozenset[str] = frozenset()) -> list[str]:
    """``CREATE TABLE x`` / ``CREATE [UNIQUE] INDEX y`` / ``ADD COLUMN t.c`` of each statement, in order.

    SQLite cannot alter a constraint, so it rebuilds the table (``ALTER TABLE t RENAME TO t_before_NNNN``,
    create, copy, drop) where PostgreSQL alters it in place: a rebuilt table's re-creation (the table and its
    indexes named in ``earlier`` migrations) counts as that alteration, and other statements (copies,
    constraint changes) are not compared. Nor is an index of ``earlier`` dropped and created again under its
    name (engine 0014 on SQLite: the same index, its condition spelled for SQLite's planner).
    """
    statements = split_statements(sql)
    rebuilt = {m.group(1) for s in statements
               if (m := re.match(r"ALTER\s+TABLE\s+(\w+)\s+RENAME\s+TO\s+\w+_before_\d+", s, re.IGNORECASE))}
    respelled = {m.group(1) for s in statements
                 if (m := re.match(r"DROP\s+INDEX\s+(\w+)", s, re.IGNORECASE)) and m.group(1) in earlier}
    out = []
    for statement in statements:
        create = re.match(r"CREATE\s+(UNIQUE\s+)?(TABLE|INDEX)\s+(\w+)(?:\s+ON\s+(\w+))?", statement, re.IGNORECASE)
        column = re.match(r"ALTER\s+TABLE\s+(\w+)\s+ADD\s+COLUMN\s+(\w+)", statement, re.IGNORECASE)
        if create is not None:
            unique, kind, name, table = create.groups()
            if (kind.upper() == "TABLE" and name in rebuilt) or (table in rebuilt and name in earlier) \
                    or (kind.upper() == "INDEX" and name in respelled):
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


LINES = registered_lines()  # the engine's and the reminder app's (tests/conftest.py imports the app)


def _statement(sql: str) -> str:
    """A block without its comments and with its whitespace collapsed: what the database runs."""
    return " ".join(" ".join(ln for ln in sql.splitlines() if not ln.strip().startswith("--")).split())


@pytest.mark.parametrize("line", LINES, ids=lambda line: line.name)
def test_every_query_of_a_line_resolves_on_every_backend(line: SqlLine) -> None:
    names = set(query_files(line))
    for backend in BACKENDS:
        assert set(line_queries(backend, line)) == names, backend


def _copies(line: SqlLine) -> list[str]:
    """Blocks written twice: an override saying what its common block says, or the same text for each backend."""
    blocks = line_blocks(line)
    common = {b.name: b for b in blocks if b.folder == "common"}
    postgres = {b.name: b for b in blocks if b.folder == "postgres"}
    found = [f"{b.folder}/{b.file}: {b.name} overrides common/{b.file} with the same statement" for b in blocks
             if b.folder != "common" and b.name in common and _statement(b.sql) == _statement(common[b.name].sql)]
    found += [f"{b.file}: {b.name} is the same on both backends: write it once in common/{b.file}" for b in blocks
              if b.folder == "sqlite" and b.name not in common
              and _statement(b.sql) == _statement(postgres[b.name].sql)]
    return found


@pytest.mark.parametrize("line", LINES, ids=lambda line: line.name)
def test_an_override_differs_from_what_it_replaces_and_nothing_is_written_twice(line: SqlLine) -> None:
    assert _copies(line) == []


def test_the_copy_check_sees_a_pointless_override_and_a_pair_that_should_be_common(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    line = _line_in(tmp_path, monkeypatch, {
        "common/a.sql": "-- name: q\nSELECT * FROM t;\n",
        "postgres/a.sql": "-- name: q\n-- the same, only commented\nSELECT *\n  FROM t;\n-- name: r\nSELECT 1;\n",
        "sqlite/a.sql": "-- name: r\nSELECT 1;\n",
    })
    assert _copies(line) == ["postgres/a.sql: q overrides common/a.sql with the same statement",
                             "a.sql: r is the same on both backends: write it once in common/a.sql"]


def _line_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> SqlLine:
    """A throwaway SQL line (package ``sql_probe_<hex>``) holding ``files`` ({"common/a.sql": text, …})."""
    package = f"sql_probe_{uuid.uuid4().hex}"  # loads are cached per line: a fresh package each time
    root = tmp_path / package
    (root / "sql").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    for rel, text in files.items():
        (root / "sql" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "sql" / rel).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    return SqlLine("probe", package)


def test_a_backend_block_replaces_the_common_block_and_only_on_its_backend(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    line = _line_in(tmp_path, monkeypatch, {
        "common/thing.sql": "-- name: get_thing\nSELECT * FROM t WHERE id = :id;\n"
                            "-- name: all_things\nSELECT * FROM t;\n",
        "postgres/thing.sql": "-- name: get_thing\nSELECT * FROM t WHERE id = :id FOR SHARE;\n"
                              "-- name: now\nSELECT clock_timestamp();\n",
        "sqlite/thing.sql": "-- name: now\nSELECT strftime('%s', 'now');\n",
        "postgres/notes.txt": "-- name: ignored\nSELECT 1;\n",
    })
    assert line_queries("sqlite", line) == {"get_thing": "SELECT * FROM t WHERE id = :id",
                                            "all_things": "SELECT * FROM t", "now": "SELECT strftime('%s', 'now')"}
    assert line_queries("postgres", line) == {"get_thing": "SELECT * FROM t WHERE id = %(id)s FOR SHARE",
                                              "all_things": "SELECT * FROM t", "now": "SELECT clock_timestamp()"}
    assert query_files(line) == {"get_thing": "thing.sql", "all_things": "thing.sql", "now": "thing.sql"}


@pytest.mark.parametrize(("files", "message"), [
    ({"common/a.sql": "-- name: q\nSELECT 1;\n", "common/b.sql": "-- name: q\nSELECT 2;\n"},
     "'q' is defined in common/a.sql and common/b.sql; each query has one owner file"),
    ({"common/a.sql": "-- name: q\nSELECT 1;\n-- name: q\nSELECT 2;\n"}, "common/a.sql: query 'q' is defined twice"),
    ({"common/a.sql": "-- name: q\nSELECT 1;\n", "postgres/b.sql": "-- name: q\nSELECT 2;\n"},
     "postgres/b.sql: query 'q' overrides the block of common/a.sql; move the override to postgres/a.sql"),
    ({"postgres/a.sql": "-- name: q\nSELECT 2;\n"},
     "postgres/a.sql: query 'q' has no block in common/a.sql and none in sqlite/a.sql"),
    ({"postgres/a.sql": "-- name: q\nSELECT 2;\n", "sqlite/b.sql": "-- name: q\nSELECT 3;\n"},
     "has no block in common/"),
    ({"sqlite/a.sql": "-- name: q\nSELECT 2;\n", "sqlite/b.sql": "-- name: q\nSELECT 3;\n",
      "postgres/a.sql": "-- name: q\nSELECT 2;\n"}, "'q' is defined in sqlite/a.sql and sqlite/b.sql"),
])
def test_a_broken_layout_is_refused_with_the_file_the_query_and_the_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str], message: str) -> None:
    line = _line_in(tmp_path, monkeypatch, files)
    with pytest.raises(ValueError, match=re.escape(message)):
        line_queries("sqlite", line)
    with pytest.raises(ValueError, match=re.escape(message)):
        line_queries("postgres", line)

ALL_MIGRATIONS = [(line.name, v) for line in LINES for v, _, _ in load_migrations("sqlite", line)]


def test_the_engine_and_the_reminder_app_each_own_a_migration_line() -> None:
    assert [line.name for line in LINES] == ["engine", "reminders"]
    engine_sql = " ".join(sql for _, _, sql in load_migrations("sqlite", ENGINE))
    assert not {t for t in DOMAIN_TABLES if re.search(rf"\b{t}\b", engine_sql)}, "engine migrations name app tables"


@pytest.mark.parametrize("line", LINES, ids=lambda line: line.name)
def test_both_backends_number_their_migrations_the_same_way(line: SqlLine) -> None:
    sqlite = [(version, name) for version, name, _ in load_migrations("sqlite", line)]
    postgres = [(version, name) for version, name, _ in load_migrations("postgres", line)]
    assert sqlite == postgres
    assert [version for version, _ in sqlite] == list(range(1, len(sqlite) + 1)), "no gaps, no duplicates"


@pytest.mark.parametrize("line", LINES, ids=lambda line: line.name)
def test_each_migration_creates_the_same_tables_and_indexes_on_both_backends(line: SqlLine) -> None:
    earlier: set[str] = set()
    for (version, _, sqlite_sql), (_, _, pg_sql) in zip(load_migrations("sqlite", line),
                                                        load_migrations("postgres", line), strict=True):
        sqlite_objects = created_objects(sqlite_sql, frozenset(earlier))
        assert sqlite_objects == created_objects(pg_sql, frozenset(earlier)), f"{line.name} {version:04d} differs"
        earlier |= {entry.split()[-1] for entry in sqlite_objects}


def test_replaying_every_migration_on_fresh_databases_gives_the_same_schema(
        make_db_url: Callable[[], str]) -> None:
    with open_store(make_db_url()) as first, open_store(make_db_url()) as second:
        assert first.migrate() == second.migrate() == ALL_MIGRATIONS
        schema = first.table_columns()
        assert schema == second.table_columns()
        assert set(schema) == ENGINE_TABLES | DOMAIN_TABLES


def test_an_app_that_registers_no_line_gets_engine_tables_only(make_db_url: Callable[[], str]) -> None:
    with open_store(make_db_url()) as library:
        assert library.migrate(lines=(ENGINE,)) == [("engine", v) for v, _, _ in load_migrations("sqlite", ENGINE)]
        assert set(library.table_columns()) == ENGINE_TABLES
        assert library.schema_versions() == {"engine": [v for v, _, _ in load_migrations("sqlite", ENGINE)]}


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
    for line in LINES:
        versions = [v for v, _, _ in load_migrations("sqlite", line)]  # both backends number alike (tested above)
        earlier = LINES[:LINES.index(line)]
        for stop in versions[:-1]:
            with open_store(make_db_url()) as old:
                old.migrate(lines=earlier)
                assert old.migrate(target=stop, lines=(line,)) == [(line.name, v) for v in versions if v <= stop]
                applied_later = old.migrate()
                assert [(line.name, v) for v in versions if v > stop] == [a for a in applied_later if a[0] == line.name]
                assert old.table_columns() == expected


# oncebeat 0.1 numbered the engine's and the reminder app's migrations in one line: (version, name).
V01_MIGRATIONS = [(1, "engine"), (2, "reminders"), (3, "dashboard_indexes"), (4, "occurrence_reason"),
                  (5, "effects_job"), (6, "reminder_dashboard_indexes"), (7, "reminder_counts_indexes"),
                  (8, "invoice_paid_at"), (9, "stripe_events"), (10, "runtime_schedules"), (11, "effect_edges"),
                  (12, "overlap_policy")]  # 12: on main only, briefly, before the lines


def _as_v01(store: Store, versions: list[int]) -> None:
    """Rewrite ``schema_migrations`` as oncebeat 0.1 left it after applying ``versions`` of its single line."""
    names = dict(V01_MIGRATIONS)
    with store.transaction() as tx:
        tx.execute("DROP TABLE schema_migrations")
        tx.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                   "applied_at TIMESTAMPTZ NOT NULL)")
        mark = "?" if store.backend == "sqlite" else "%s"
        for v in versions:
            tx.execute(f"INSERT INTO schema_migrations (version, name, applied_at) VALUES ({mark}, {mark}, {mark})",
                       (v, names[v], "2026-01-05T00:00:00.000000Z" if store.backend == "sqlite"
                        else datetime(2026, 1, 5, tzinfo=UTC)))


def test_a_database_of_oncebeat_0_1_at_any_version_upgrades_to_the_same_schema(
        make_db_url: Callable[[], str]) -> None:
    with open_store(make_db_url()) as fresh:
        fresh.migrate()
        expected, expected_versions = fresh.table_columns(), fresh.schema_versions()
    to_line = {old: (line.name, new) for line in LINES for old, new in line.legacy}
    assert sorted(to_line) == [v for v, _ in V01_MIGRATIONS], "every 0.1 version belongs to one line"
    for stop in (2, 5, 9, 11, 12):  # 0.1 at migration 2 (first reminder tables) … at its last
        with open_store(make_db_url()) as old:
            done = [v for v, _ in V01_MIGRATIONS if v <= stop]
            for name, version in sorted(to_line[v] for v in done):  # the schema 0.1 had at `stop`
                old.migrate(target=version, lines=(next(x for x in LINES if x.name == name),))
            _as_v01(old, done)
            assert old.schema_versions() == {"": done}
            applied = old.migrate()
            assert sorted(applied) == sorted(set(ALL_MIGRATIONS) - {to_line[v] for v in done})
            assert old.schema_versions() == expected_versions
            assert old.table_columns() == expected


def test_a_library_app_migrating_a_0_1_database_first_leaves_the_reminder_versions_for_the_app(
        make_db_url: Callable[[], str]) -> None:
    with open_store(make_db_url()) as old:
        old.migrate(target=7, lines=(ENGINE,))  # the engine tables as 0.1 left them (line version 7)
        old.migrate(target=5, lines=(LINES[1],))  # the reminder tables as 0.1 left them (line version 5)
        _as_v01(old, [v for v, _ in V01_MIGRATIONS])
        # nothing re-applied: the engine claims 1, 3, 4, 5, 10, 11, 12 and applies only what came after 0.1
        engine = [v for v, _, _ in load_migrations("sqlite", ENGINE)]
        assert old.migrate(lines=(ENGINE,)) == [("engine", v) for v in engine if v > 7]
        assert old.schema_versions() == {"": [2, 6, 7, 8, 9], "engine": engine}
        # the app claims the rest, applies what is new
        reminders = [v for v, _, _ in load_migrations("sqlite", LINES[1])]
        assert old.migrate() == [("reminders", v) for v in reminders if v > 5]
        assert old.schema_versions() == {"engine": engine, "reminders": reminders}


def test_sqlite_spells_a_list_of_states_as_ors_with_the_same_truth_value() -> None:
    """Engine 0014's partial indexes on SQLite are written with ORs; the loader spells the queries alike."""
    sql = ("j.state IN ('available', 'scheduled', 'retryable') AND state in ('a','b','c','d') AND x.state NOT IN "
           "('a', 'b', 'c') AND state IN ('pending', 'in_doubt') AND mystate IN ('a', 'b', 'c') AND state IN (:s)")
    assert to_sqlite(sql) == (
        "(j.state = 'available' OR j.state = 'scheduled' OR j.state = 'retryable') AND (state = 'a' OR state = 'b' "
        "OR state = 'c' OR state = 'd') AND x.state NOT IN ('a', 'b', 'c') AND state IN ('pending', 'in_doubt') "
        "AND mystate IN ('a', 'b', 'c') AND state IN (:s)")
    conn = sqlite3.connect(":memory:")
    for state in (None, "available", "scheduled", "retryable", "running", ""):
        for form in ("state IN ('available', 'scheduled', 'retryable')", "NOT state IN ('available', 'scheduled', "
                     "'retryable')", "COALESCE(state IN ('available', 'scheduled', 'retryable'), -1)"):
            expected = conn.execute(f"SELECT {form} FROM (SELECT ? AS state)", (state,)).fetchone()
            assert conn.execute(f"SELECT {to_sqlite(form)} FROM (SELECT ? AS state)", (state,)).fetchone() == expected
    conn.close()


def test_every_engine_query_on_sqlite_spells_its_state_lists_as_ors() -> None:
    for name, sql in line_queries("sqlite", ENGINE).items():
        assert not re.search(r"(?<![\w.])(\w+\.)?state\s+IN\s*\(\s*'[^']*'\s*,\s*'[^']*'\s*,", sql, re.IGNORECASE), name
