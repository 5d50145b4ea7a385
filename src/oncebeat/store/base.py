"""The store contract: transactions that run named queries, and migrations.

A :class:`Store` is opened from a URL (``sqlite:///path.db`` or
``postgresql://…``) by :func:`oncebeat.store.open_store`. Work happens inside
``with store.transaction() as tx:``; ``tx.run(name, **params)`` executes one
named query from the backend's ``.sql`` files and returns rows as dicts with
Python values: instants are aware UTC datetimes, dates are ``date``, JSON
columns are decoded. Wrap JSON parameters in :class:`Json`; pass lists for
``ids``/``queues``-style parameters.

``tx.execute(sql, params)`` runs caller-written SQL in the same transaction,
so a library user's business writes and the jobs they enqueue commit together.
"""

from __future__ import annotations

import functools
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..errors import StoreError
from ..redact import redact_url, unencoded_password
from .sqlfiles import SqlLine, load_queries, registered_lines

__all__ = ["Json", "Store", "Tx", "redact_url", "instant_text", "clean_database_url", "is_read_only"]


def clean_database_url(url: str) -> str:
    """``url`` without surrounding whitespace, checked for what a database URL never holds.

    A trailing newline (``DATABASE_URL`` read from a file with ``$(cat …)`` keeps none, an ``.env`` line or a
    secret store may keep one) is stripped, so it never becomes part of a file name or a connection option.

    Raises:
        StoreError: the URL is empty, holds a control character inside (e.g. a second line), or has
            a ``#fragment`` (which a URL parser would cut off, or libpq append to the last option); the message
            masks the password and says what to change.
    """
    text = str(url).strip()
    if not text:
        raise StoreError("DATABASE_URL is empty; use e.g. sqlite:///oncebeat.db or postgresql://user@host/db")
    if unencoded_password(text):  # the store's own check names the characters to encode
        return text
    shown = redact_url(text)
    bad = next((ch for ch in text if not ch.isprintable()), None)
    if bad is not None:
        raise StoreError(f"DATABASE_URL {shown!r} holds the control character U+{ord(bad):04X} inside it; a database "
                         "URL is one line of printable characters (check how the variable was set)")
    if "#" in text:
        raise StoreError(f"DATABASE_URL {shown!r} has a '#fragment', which means nothing to a database (and would "
                         "otherwise end up in a connection option); remove it, or percent-encode a '#' that is part "
                         "of a name or password as %23")
    return text

_INSTANT_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
# Words of a statement that writes, locks, or has an effect outside its own snapshot, on either backend (SQLite's
# verbs and pragmas; PostgreSQL's row locks FOR UPDATE / FOR SHARE, sequences, advisory locks, NOTIFY, settings).
_WRITE_WORD = re.compile(r"\b(INSERT|UPDATE|DELETE|REPLACE|CREATE|DROP|ALTER|PRAGMA|ATTACH|VACUUM|MERGE|TRUNCATE|"
                         r"LOCK|COPY|INTO|SHARE|NEXTVAL|SETVAL|PG_ADVISORY\w*|PG_TRY_ADVISORY\w*|PG_NOTIFY|"
                         r"SET_CONFIG)\b", re.IGNORECASE)
_COMMENT = re.compile(r"--[^\n]*")


@functools.lru_cache(maxsize=1024)
def is_read_only(sql: str) -> bool:
    """True for a statement that only reads: it starts with SELECT (or WITH … SELECT) and names no word that
    writes, locks a row or has an effect of its own (``_WRITE_WORD``). Such a statement can run alone, outside
    any transaction block, and be run again after a dead connection without changing anything.

    Conservative: a column or string containing such a word makes it a write, which only costs a transaction.
    """
    text = _COMMENT.sub(" ", sql).strip()
    first = text.split(None, 1)[0].upper() if text else ""
    return first in ("SELECT", "WITH") and not _WRITE_WORD.search(text)


def instant_text(value: datetime) -> str:
    """An aware instant as fixed-width UTC text (``2026-03-08T14:00:00.000000Z``).

    Both backends parse it; SQLite stores instants this way, so text order is time order.
    Raises ValueError for a naive datetime.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"naive datetime {value.isoformat()} passed to the store; use an aware UTC instant")
    utc = value.astimezone(UTC)
    if utc.year < 1000:  # strftime writes such a year unpadded ("5-01-01…"): keep the text it always gave
        return utc.strftime(_INSTANT_FORMAT)
    # The same text as strftime(_INSTANT_FORMAT), from the C isoformat: a third of the CPU (SQLite writes every
    # instant through here: an import of 60,000 invoices 120,000 times).
    return utc.isoformat(timespec="microseconds")[:-6] + "Z"


@dataclass(frozen=True, slots=True)
class Json:
    """Marks a parameter to be stored as JSON (any json-serialisable value)."""

    value: Any


class Tx(ABC):
    """One open transaction. Not thread-safe; use it from the thread that opened it."""

    backend: str

    @abstractmethod
    def run(self, name: str, /, **params: Any) -> list[dict[str, Any]]:
        """Execute named query ``name``; return its rows (empty list when it returns none)."""

    def one(self, name: str, /, **params: Any) -> dict[str, Any] | None:
        """Execute ``name``; return its first row or None."""
        rows = self.run(name, **params)
        return rows[0] if rows else None

    def read(self, name: str, /, **params: Any) -> list[dict[str, Any]]:
        """Execute ``name`` in this transaction; return its rows. The same as :meth:`run`, named like
        :meth:`Store.read` so that a read verb can take either a ``Store`` or an open ``Tx``."""
        return self.run(name, **params)

    @abstractmethod
    def run_with(self, name: str, source: str, /, **params: Any) -> list[dict[str, Any]]:
        """Execute named query ``name`` with its ``/*source*/`` slot replaced by named query ``source``.

        This is how a layer's statement reads rows another layer's query selects without either writing
        the other's SQL: e.g. the queue's ``enqueue_select`` inserts one job per row of an app's SELECT.
        """

    @abstractmethod
    def many(self, name: str, rows: Iterable[Mapping[str, Any]], /) -> None:
        """Execute ``name`` once per parameter mapping in ``rows`` (executemany)."""

    @abstractmethod
    def execute(self, sql: str, params: Mapping[str, Any] | tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """Run caller-written SQL (in the backend's own parameter style) in this transaction."""


class Store(ABC):
    """A database holding schedules, the occurrence ledger, jobs, effects and the domain tables.

    Attributes:
        backend: "sqlite" or "postgres".
        url: the URL with any password masked (safe to log).
        before_statement: optional hook called with each query name before it
            runs; the simulator uses it to inject ``TransientStoreError``.
    """

    backend: str
    url: str
    before_statement: Callable[[str], None] | None = None

    @property
    def queries(self) -> dict[str, str]:
        """Every named query of the registered SQL lines (the engine's, and each imported app's)."""
        return load_queries(self.backend, registered_lines())

    def query_sql(self, name: str) -> str:
        """The SQL text of named query ``name``.

        Raises:
            StoreError: no registered SQL line defines ``name`` (its app was not imported).
        """
        try:
            return self.queries[name]
        except KeyError:
            lines = ", ".join(line.name for line in registered_lines())
            raise StoreError(f"no query named {name!r} in the SQL lines loaded ({lines}); the app that owns it "
                             "registers its line when imported") from None

    @abstractmethod
    def transaction(self, *, bounded: bool = False, generic_plans: bool = False) -> AbstractContextManager[Tx]:
        """Open a write transaction (SQLite: ``BEGIN IMMEDIATE``); commit on success, roll back on error.

        ``bounded``: a transaction others wait for and that must never stall for long (the clock's fire,
        the worker's claim). PostgreSQL applies the URL's ``lock_timeout`` and ``statement_timeout`` to it
        (default 5 s and 15 s); SQLite already bounds every wait by ``busy_timeout``.

        ``generic_plans``: the transaction's statements run many times a second, each read by an index whatever
        its parameters' values (the claim: ``jobs_fetch`` walked in order, rows updated by address). PostgreSQL
        then plans a prepared statement once per connection (``plan_cache_mode = force_generic_plan``, set with
        the ``BEGIN``) instead of at every run: its cost model never picks the generic plan of a ``LIMIT :n``
        statement by itself. As a generic plan is kept until a table's statistics change, one made while the
        table was nearly empty would keep a sequential scan after it grew: ``enable_seqscan = off`` too. SQLite
        ignores it (its statement cache already plans once).

        Raises:
            TransientStoreError: lock timeout, dropped connection (safe to retry).
            StoreError: any other database failure.
        """

    @abstractmethod
    def snapshot(self, *, timeout_ms: int | None = None) -> AbstractContextManager[Tx]:
        """Open a read-only transaction whose every statement reads one snapshot of the database.

        PostgreSQL: ``REPEATABLE READ READ ONLY`` (the snapshot is taken by its first statement; a write raises
        StoreError); ``timeout_ms`` sets ``statement_timeout`` for it (SET LOCAL, in the ``BEGIN``'s round trip).
        SQLite: a deferred ``BEGIN`` on this thread's connection; in WAL mode its first read of a table fixes the
        snapshot, it takes no write lock and no writer waits for it; ``timeout_ms`` is ignored (SQLite has no
        statement timeout). Either way it ends with a rollback: nothing can have been written.

        Raises:
            QueryTimedOut: a statement ran past ``timeout_ms`` (PostgreSQL) and was cancelled.
            TransientStoreError, StoreError: as :meth:`transaction`.
        """

    def write_waited(self) -> bool:
        """True if this thread's last write transaction had to wait for another process's writer to finish.

        SQLite serialises every writer of a file (one lock), so a True here means another process is writing
        too: the worker then claims a larger batch (fewer commits, each with its fsync, per job). PostgreSQL
        writers do not queue on one lock: always False there.
        """
        return False

    @abstractmethod
    def migrate(self, target: int | None = None, *, lines: tuple[SqlLine, ...] | None = None
                ) -> list[tuple[str, int]]:
        """Apply the missing migrations of ``lines`` (default: every registered SQL line, the engine's first).

        Args:
            target: apply only versions up to this one (upgrade tests; meant with a single line).
        Returns:
            ``(line, version)`` of each migration applied, in order.
        Raises:
            MigrationError: a statement failed (nothing of this call is applied).

        Safe when many processes start at once.
        """

    @abstractmethod
    def schema_versions(self) -> dict[str, list[int]]:
        """The versions recorded in ``schema_migrations``, per line: ``{"engine": [1, 2, …], …}`` ({} if none)."""

    def applied_migrations(self, line: str = "engine") -> list[int]:
        """The versions of one line recorded in ``schema_migrations`` (empty for a database never migrated)."""
        return self.schema_versions().get(line, [])

    @abstractmethod
    def table_columns(self) -> dict[str, list[tuple[str, str]]]:
        """Introspected schema: table → [(column, type)], for migration tests and the doctor."""

    @abstractmethod
    def close(self) -> None:
        """Release connections."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read(self, name: str, /, **params: Any) -> list[dict[str, Any]]:
        """Run one named query in its own transaction and return its rows."""
        with self.transaction() as tx:
            return tx.run(name, **params)

    def run_idempotent(self, name: str, /, **params: Any) -> list[dict[str, Any]]:
        """Run one named statement as its own transaction and return its rows (e.g. ``[{"key": "r:1"}]``, or
        ``[]`` when its ``WHERE`` matched nothing); for a statement that is **idempotent**: run twice, it leaves
        the data and returns the rows it did run once (``UPDATE … SET x = :v WHERE … RETURNING …``).

        That lets the store run it again when it cannot tell whether a first run committed: PostgreSQL sends it
        alone in autocommit (one round trip instead of ``BEGIN``, statement, ``COMMIT``) and, on a pooled
        connection found dead, runs it on the next one, as :meth:`read` does for a read. Here (and on SQLite): one
        write transaction, as ``with store.transaction() as tx: tx.run(name, **params)``.

        Raises:
            TransientStoreError: as :meth:`transaction` (PostgreSQL: no live connection in ``BEGIN_TRIES``).
            StoreError: any other failure.
        """
        with self.transaction() as tx:
            return tx.run(name, **params)

    def run_alone(self, name: str, /, **params: Any) -> list[dict[str, Any]]:
        """Run one named statement as its own transaction and return its rows; **never run again** by the store.

        For a single statement that must not be repeated blindly (an ``INSERT … ON CONFLICT DO NOTHING`` claim:
        a second run returns nothing). PostgreSQL sends it alone in autocommit (one round trip instead of
        ``BEGIN``, statement, ``COMMIT``); a pooled connection found dead makes the pool check its idle ones and
        the call raise ``TransientStoreError`` — the caller cannot tell whether it committed, as with a
        ``COMMIT`` whose reply was lost, and decides (e.g. falls back to a transaction that reads what is there).
        Here (and on SQLite): one write transaction, as ``with store.transaction() as tx: tx.run(name, **params)``.

        Raises:
            TransientStoreError: the connection died, or the statement was cancelled (timeout) or failed to
                serialise.
            StoreError: any other failure.
        """
        with self.transaction() as tx:
            return tx.run(name, **params)

    def iter_chunks(self, items: list[Any], size: int) -> Iterator[list[Any]]:
        for start in range(0, len(items), size):
            yield items[start : start + size]
