"""Load named SQL blocks from the per-backend ``.sql`` files.

Each file holds blocks introduced by ``-- name: query_name``; the text up to
the next ``-- name:`` line is the statement. Parameters are written ``:name``
in both backends; for PostgreSQL the loader rewrites them to psycopg's
``%(name)s`` (``::type`` casts are left alone).
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

__all__ = ["load_queries", "load_migrations", "BACKENDS"]

BACKENDS = ("sqlite", "postgres")
_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)
_PARAM = re.compile(r"(?<![:\w]):(\w+)")


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


@cache
def load_queries(backend: str) -> dict[str, str]:
    """Every named query of ``backend`` ("sqlite" or "postgres"), engine and domain files together.

    Returns a dict name → SQL text in the backend's parameter style.
    Raises ValueError if a name is defined twice.
    """
    folder = resources.files("oncebeat.store") / "sql" / backend
    queries: dict[str, str] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            for name, sql in _split(entry.read_text(encoding="utf-8"), f"{backend}/{entry.name}").items():
                if name in queries:
                    raise ValueError(f"{backend}/{entry.name}: query {name!r} is defined twice")
                queries[name] = to_pyformat(sql) if backend == "postgres" else sql
    return queries


@cache
def load_migrations(backend: str) -> tuple[tuple[int, str, str], ...]:
    """The migrations of ``backend`` as ``(version, name, sql)``, oldest first.

    Files are named ``NNNN_description.sql``; both backends use the same numbers
    for the same change.
    """
    folder = resources.files("oncebeat.store") / "sql" / backend / "migrations"
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
