"""Applying migration lines, shared by both backends (each passes its connection's ``execute``).

``schema_migrations(line, version, name, applied_at)`` records each applied migration of each SQL line
(:mod:`oncebeat.store.sqlfiles`). A database from oncebeat 0.1, whose ``schema_migrations`` had one
numbering for the engine and the reminder app together (no ``line`` column), is converted in place on the
first ``migrate``: its rows are kept under line ``""`` and each line claims its own old versions
(``SqlLine.legacy``) when it migrates, so the reminder app's tables are recognised as applied even if a
process that does not load the app migrates first.

Everything runs in the caller's transaction, under the caller's migration lock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from .sqlfiles import SqlLine, load_migrations, split_statements

__all__ = ["apply_lines", "versions_by_line", "now_utc", "Execute"]

#: ``execute(sql, params)`` with ``?`` placeholders (the caller adapts them): rows as dicts.
Execute = Callable[[str, Sequence[Any]], list[dict[str, Any]]]

_CREATE = ("CREATE TABLE IF NOT EXISTS schema_migrations (line TEXT NOT NULL, version INTEGER NOT NULL, "
           "name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL, PRIMARY KEY (line, version))")


def _convert_legacy(execute: Execute, columns: list[str]) -> None:
    """0.1's ``schema_migrations(version, name, applied_at)`` becomes the lined table, rows under line ''."""
    if not columns or "line" in columns:
        return
    execute("ALTER TABLE schema_migrations RENAME TO schema_migrations_v01", ())
    execute(_CREATE, ())
    execute("INSERT INTO schema_migrations (line, version, name, applied_at) "
            "SELECT '', version, name, applied_at FROM schema_migrations_v01", ())
    execute("DROP TABLE schema_migrations_v01", ())


def _claim_legacy(execute: Execute, line: SqlLine) -> None:
    for old, new in line.legacy:
        execute("INSERT INTO schema_migrations (line, version, name, applied_at) "
                "SELECT ?, ?, name, applied_at FROM schema_migrations WHERE line = '' AND version = ?",
                (line.name, new, old))
        execute("DELETE FROM schema_migrations WHERE line = '' AND version = ?", (old,))


def apply_lines(execute: Execute, *, backend: str, lines: Sequence[SqlLine], columns: list[str], now: Any,
                target: int | None = None, run_statement: Callable[[str], None] | None = None
                ) -> list[tuple[str, int]]:
    """Apply each line's missing migrations, in line order (engine first), oldest first.

    Args:
        columns: the columns of an existing ``schema_migrations`` (empty when there is none).
        now: the ``applied_at`` value in the backend's parameter form.
        target: apply only versions up to this one (tests of upgrades; meant with a single line).
        run_statement: how to run one migration statement (default: ``execute(statement, ())``).
    Returns:
        ``(line, version)`` of each migration applied.
    """
    _convert_legacy(execute, columns)
    execute(_CREATE, ())

    def run(statement: str) -> None:
        if run_statement is not None:
            run_statement(statement)
        else:
            execute(statement, ())

    applied: list[tuple[str, int]] = []
    for line in lines:
        if line.legacy:
            _claim_legacy(execute, line)
        done = {r["version"] for r in execute("SELECT version FROM schema_migrations WHERE line = ?", (line.name,))}
        for version, name, sql in load_migrations(backend, line):
            if version in done:
                continue
            if target is not None and version > target:
                break
            for statement in split_statements(sql):
                run(statement)
            execute("INSERT INTO schema_migrations (line, version, name, applied_at) VALUES (?, ?, ?, ?)",
                    (line.name, version, name, now))
            applied.append((line.name, version))
    return applied


def versions_by_line(rows: list[dict[str, Any]]) -> dict[str, list[int]]:
    """``{line: [versions…]}`` from ``SELECT line, version FROM schema_migrations`` rows (sorted)."""
    out: dict[str, list[int]] = {}
    for r in sorted(rows, key=lambda r: (r["line"], r["version"])):
        out.setdefault(r["line"], []).append(int(r["version"]))
    return out


def now_utc() -> datetime:
    """The wall clock for ``applied_at`` (a migration's timestamp is bookkeeping, not scheduling)."""
    return datetime.now(UTC)
