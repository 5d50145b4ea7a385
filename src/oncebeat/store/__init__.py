"""The database layer: every SQL statement oncebeat runs lives under ``store/sql``.

``open_store(url)`` picks the backend from the URL scheme:

- ``sqlite:///oncebeat.db`` (embedded default, one host, several processes)
- ``postgresql://user@host:5432/db`` (many hosts; ``?schema=NAME`` to isolate)
"""

from __future__ import annotations

from ..errors import ConfigError
from ..redact import remember_secrets
from .base import Json, Store, Tx, clean_database_url, redact_url

__all__ = ["Json", "Store", "Tx", "clean_database_url", "open_store", "redact_url"]


def open_store(url: str, *, create: bool = True) -> Store:
    """Open the store for ``url``.

    Args:
        create: when False, a SQLite file that does not exist is an error (read-only commands must
            not create an empty database because of a typo in the path).

    Surrounding whitespace (a trailing newline) is stripped; a ``#fragment`` or whitespace inside is refused
    (:func:`~oncebeat.store.base.clean_database_url`).

    Raises:
        ConfigError: unknown scheme.
        StoreError: the database cannot be opened or reached (message names the URL, password masked).
    """
    remember_secrets(url)
    url = clean_database_url(url)
    if url.startswith("sqlite:"):
        from .sqlite import SqliteStore

        return SqliteStore(url, create=create)
    if url.startswith(("postgresql:", "postgres:")):
        from .postgres import PostgresStore

        return PostgresStore(url)
    raise ConfigError(
        f"DATABASE_URL {redact_url(url)!r} has an unknown scheme; use sqlite:///oncebeat.db or "
        "postgresql://user@host/db"
    )
