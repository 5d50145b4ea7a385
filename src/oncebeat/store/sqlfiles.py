"""Load named SQL blocks and migrations from the per-backend ``.sql`` files of each SQL line.

A **SQL line** is a package that owns SQL: ``sql/<backend>/*.sql`` holds its named queries and
``sql/<backend>/migrations/NNNN_name.sql`` its migrations, numbered 0001, 0002, … without gaps, the same
numbers on both backends. The engine's line (:data:`ENGINE`, package ``oncebeat.store``) is always
there; an app registers its own line with :func:`register_line` when it is imported (the reminder app:
``oncebeat.reminders``), so a library user's app that never imports it gets engine tables and queries only.

Each query file holds blocks introduced by ``-- name: query_name``; the text up to the next
``-- name:`` line is the statement. Parameters are written ``:name`` in both backends; for PostgreSQL
the loader rewrites them to psycopg's ``%(name)s`` (``::type`` casts are left alone). A query name is
unique across all lines.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from functools import cache
from importlib import resources

__all__ = ["SqlLine", "ENGINE", "register_line", "registered_lines", "load_queries", "load_migrations",
           "split_statements", "BACKENDS"]

BACKENDS = ("sqlite", "postgres")
_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)
_PARAM = re.compile(r"(?<![:\w]):(\w+)")


@dataclass(frozen=True, slots=True)
class SqlLine:
    """A package's SQL: its queries and its own migration line.

    Attributes:
        name: the line's name in ``schema_migrations.line`` ("engine", "reminders"); a lower-case word.
        package: the importable package holding ``sql/<backend>/``.
        legacy: ``(old_version, version)`` pairs: which versions of oncebeat 0.1's single migration numbering
            are this line's migrations (a 0.1 database is converted in place; see ``store.migrations``).
    """

    name: str
    package: str
    legacy: tuple[tuple[int, int], ...] = ()


#: The engine's line: schedules, occurrences, jobs, effects, processes, events.
ENGINE = SqlLine("engine", "oncebeat.store",
                 legacy=((1, 1), (3, 2), (4, 3), (5, 4), (10, 5), (11, 6), (12, 7)))

_lock = threading.Lock()
_lines: tuple[SqlLine, ...] = (ENGINE,)


def register_line(line: SqlLine) -> None:
    """Add an app's SQL line (idempotent): stores opened before or after see its queries; ``migrate`` applies it.

    Raises:
        ValueError: another line already uses that name or package.
    """
    global _lines
    with _lock:
        if line in _lines:
            return
        clash = [x for x in _lines if x.name == line.name or x.package == line.package]
        if clash:
            raise ValueError(f"SQL line {line.name!r} ({line.package}) clashes with {clash[0].name!r} "
                             f"({clash[0].package})")
        _lines = (*_lines, line)


def registered_lines() -> tuple[SqlLine, ...]:
    """The engine's line first, then every registered app line in registration order."""
    return _lines


def _split(text: str, source: str) -> dict[str, str]:
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"{source}: query {name!r} is defined twice")
        queries[name] = body.strip().rstrip(";").strip()
    return queries


def to_pyformat(sql: str) -> str:
    """Rewrite ``:name`` parameters to ``%(name)s`` and escape literal ``%``."""
    return _PARAM.sub(r"%(\1)s", sql.replace("%", "%%"))


def _folder(line: SqlLine, backend: str) -> resources.abc.Traversable:
    return resources.files(line.package) / "sql" / backend


@cache
def line_queries(backend: str, line: SqlLine) -> dict[str, str]:
    """The named queries of one line: name -> SQL text in the backend's parameter style.

    Raises:
        ValueError: a name is defined twice in the line.
    """
    queries: dict[str, str] = {}
    for entry in sorted(_folder(line, backend).iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            for name, sql in _split(entry.read_text(encoding="utf-8"), f"{backend}/{entry.name}").items():
                if name in queries:
                    raise ValueError(f"{line.package} {backend}/{entry.name}: query {name!r} is defined twice")
                queries[name] = to_pyformat(sql) if backend == "postgres" else sql
    return queries


@cache
def load_queries(backend: str, lines: tuple[SqlLine, ...] | None = None) -> dict[str, str]:
    """Every named query of ``backend`` ("sqlite" or "postgres") in ``lines`` (default: the registered ones).

    Returns a dict name → SQL text in the backend's parameter style.
    Raises ValueError if a name is defined twice (within or across lines).
    """
    queries: dict[str, str] = {}
    for line in lines if lines is not None else registered_lines():
        for name, sql in line_queries(backend, line).items():
            if name in queries:
                raise ValueError(f"{line.package}: query {name!r} is also defined by another SQL line")
            queries[name] = sql
    return queries


@cache
def load_migrations(backend: str, line: SqlLine = ENGINE) -> tuple[tuple[int, str, str], ...]:
    """The migrations of one line on ``backend`` as ``(version, name, sql)``, oldest first.

    Files are named ``NNNN_description.sql``; both backends use the same numbers for the same change.
    """
    folder = _folder(line, backend) / "migrations"
    found = []
    for entry in folder.iterdir():
        match = re.fullmatch(r"(\d{4})_(\w+)\.sql", entry.name)
        if match:
            found.append((int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8")))
    return tuple(sorted(found))


def split_statements(sql: str) -> list[str]:
    """Split a migration into statements at ``;`` that ends a line (our files keep to that)."""
    statements = []
    for chunk in re.split(r";\s*$", sql, flags=re.MULTILINE):
        lines = [ln for ln in chunk.splitlines() if not ln.strip().startswith("--")]
        text = "\n".join(lines).strip()
        if text:
            statements.append(text)
    return statements
