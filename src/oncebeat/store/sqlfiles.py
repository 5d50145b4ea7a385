"""Load named SQL blocks and migrations from the per-backend ``.sql`` files of each SQL line.

A **SQL line** is a package that owns SQL: ``sql/common/*.sql`` holds its named queries written once for
every backend, ``sql/<backend>/*.sql`` only the blocks that differ on that backend, and
``sql/<backend>/migrations/NNNN_name.sql`` its migrations (per backend: DDL differs), numbered 0001, 0002, …
without gaps, the same numbers on both backends. The engine's line (:data:`ENGINE`, package ``oncebeat.store``)
is always there; an app registers its own line with :func:`register_line` when it is imported (the reminder
app: ``oncebeat.reminders``), so a library user's app that never imports it gets engine tables and queries only.

Each query file holds blocks introduced by ``-- name: query_name``; the text up to the next ``-- name:`` line
is the statement. A block in ``<backend>/<file>.sql`` overrides the block of the same name in
``common/<file>.sql``; a block with no common block must be written for every backend (a dialect pair). Files
are named for the module that runs their queries (``queue.sql`` ← ``oncebeat.queue``), one owner per query
(``tests/unit/test_query_ownership.py``). Parameters are written ``:name``; for PostgreSQL the loader rewrites
them to psycopg's ``%(name)s`` (``::type`` casts are left alone). A parameter that may be NULL is written
``CAST(:name AS text)`` (or ``bigint``/``integer``) in a common block: PostgreSQL must know its type and SQLite
reads it the same; never ``AS timestamptz`` there (SQLite would read an instant's text as a number). A query name
is unique across all lines.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from functools import cache
from importlib import resources

__all__ = ["SqlLine", "Block", "ENGINE", "register_line", "registered_lines", "load_queries", "load_migrations",
           "line_blocks", "query_files", "split_statements", "to_sqlite", "BACKENDS"]

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


_STATE_LIST = re.compile(r"(?<![\w.])((?:\w+\.)?state)\s+IN\s*\(\s*('[^']*'(?:\s*,\s*'[^']*'){2,})\s*\)",
                         re.IGNORECASE)


def to_sqlite(sql: str) -> str:
    """Spell each ``state IN ('a', 'b', 'c', …)`` (optionally ``alias.state``) as ``(state = 'a' OR state = 'b' …)``.

    Only lists of three or more string literals are rewritten, in their order (not ``NOT IN``, not a subquery or
    parameter; a list of one or two SQLite already evaluates as comparisons). Why (engine migration 0014, whose
    SQLite partial indexes on ``jobs.state`` are written as such ORs): SQLite uses a partial index only when it can
    prove that the query's WHERE implies the index's, and it proves an OR from the same OR or from any one of its
    terms (``state = 'running'``), never from an IN list unless the index has the same list. Same truth value for
    every input, NULL included.
    """
    return _STATE_LIST.sub(
        lambda m: "(" + " OR ".join(f"{m.group(1)} = {v}" for v in re.findall(r"'[^']*'", m.group(2))) + ")", sql)


def _folder(line: SqlLine, backend: str) -> resources.abc.Traversable:
    return resources.files(line.package) / "sql" / backend


@dataclass(frozen=True, slots=True)
class Block:
    """One named query as written in a file of a line.

    Attributes:
        name: the query's name.
        file: the file's name (``queue.sql``); the same in ``common/`` and in each backend folder.
        folder: ``"common"`` or a backend name.
        sql: the statement with its comments, parameters written ``:name``.
    """

    name: str
    file: str
    folder: str
    sql: str


def _read_folder(line: SqlLine, folder: str) -> dict[str, dict[str, str]]:
    """file name -> {query name -> text} of ``sql/<folder>/*.sql`` ({} when the folder does not exist)."""
    where = _folder(line, folder)
    if not where.is_dir():
        return {}
    return {entry.name: _split(entry.read_text(encoding="utf-8"), f"{line.package} {folder}/{entry.name}")
            for entry in sorted(where.iterdir(), key=lambda e: e.name) if entry.name.endswith(".sql")}


@cache
def line_blocks(line: SqlLine) -> tuple[Block, ...]:
    """Every named block of one line, checked: ``common/`` first, then each backend's overrides.

    The rules (each broken one raises ``ValueError`` naming the file, the query and the fix):

    * a name is defined once in ``common/`` (in one file: one owner per query);
    * a block in ``<backend>/<file>.sql`` overrides the common block of the same name, which must be in
      ``common/<file>.sql`` (the override lives next to what it overrides);
    * a block with no common block is a dialect pair: every backend defines it, in files of the same name.
    """
    common = _read_folder(line, "common")
    backends = {backend: _read_folder(line, backend) for backend in BACKENDS}
    owner: dict[str, str] = {}
    for file, queries in common.items():
        for name in queries:
            if name in owner:
                raise ValueError(f"{line.package}: query {name!r} is defined in common/{owner[name]} and "
                                 f"common/{file}; each query has one owner file")
            owner[name] = file
    blocks = [Block(name, file, "common", sql) for file, queries in common.items() for name, sql in queries.items()]
    for backend, files in backends.items():
        seen: dict[str, str] = {}
        for file, queries in files.items():
            for name, sql in queries.items():
                if name in seen:
                    raise ValueError(f"{line.package}: query {name!r} is defined in {backend}/{seen[name]} and "
                                     f"{backend}/{file}; each query has one owner file")
                seen[name] = file
                if name in owner and owner[name] != file:
                    raise ValueError(f"{line.package} {backend}/{file}: query {name!r} overrides the block of "
                                     f"common/{owner[name]}; move the override to {backend}/{owner[name]}")
                if name not in owner:
                    missing = [b for b in BACKENDS if name not in backends[b].get(file, {})]
                    if missing:
                        raise ValueError(
                            f"{line.package} {backend}/{file}: query {name!r} has no block in common/{file} and "
                            f"none in {', '.join(f'{b}/{file}' for b in missing)}; write it once in common/{file} "
                            f"(and keep only real differences in the backend files), or give every backend its "
                            "own version")
                blocks.append(Block(name, file, backend, sql))
    return tuple(blocks)


@cache
def line_queries(backend: str, line: SqlLine) -> dict[str, str]:
    """The named queries of one line: name -> SQL text in the backend's parameter style.

    A backend's block replaces the common block of the same name (see :func:`line_blocks`). On SQLite a
    literal list of states is spelled as ORs (:func:`to_sqlite`).

    Raises:
        ValueError: the line's files break a rule of :func:`line_blocks`, or ``backend`` is unknown.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown SQL backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    queries: dict[str, str] = {}
    for block in line_blocks(line):
        if block.folder in ("common", backend):
            queries[block.name] = (to_pyformat(block.sql) if backend == "postgres"
                                   else to_sqlite(block.sql))
    return queries


def query_files(line: SqlLine) -> dict[str, str]:
    """Which file of ``line`` holds each query: name -> file name (``"queue.sql"``), the same on every backend."""
    return {block.name: block.file for block in line_blocks(line)}


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
