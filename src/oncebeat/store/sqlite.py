"""SQLite backend: one file, WAL journal, several processes.

Every transaction starts with ``BEGIN IMMEDIATE`` so that writers queue on
the database lock (with ``busy_timeout``) instead of failing on upgrade from a
read lock; that is what makes claims and ledger inserts correct across
processes sharing one file. Around it each transaction holds a ``flock`` on the
side file ``<db>-lock`` (:mod:`oncebeat.store.writelock`): a waiting process is
woken the moment the lock is released instead of sleeping in SQLite's busy
handler, so a second worker process adds throughput. That lock is advisory and
released by the kernel when a process dies; SQLite's lock stays the one that
decides. The WAL is checkpointed by the store after a write transaction has
released that lock (a passive checkpoint copies pages while others write), not
inside ``COMMIT`` where SQLite's automatic checkpoint would hold every other
writer up; that one stays as a safety net at twice the size. ``synchronous=FULL`` by default: a committed job
survives power loss; ``?synchronous=normal`` (opt-in) keeps it across a process crash only, and takes the
fsync out of every ``COMMIT`` (the writer lock is held that much shorter, so a second process adds more).

Instants are stored as fixed-width UTC text (``2026-03-08T14:00:00.000000Z``)
so text order is time order; columns declared ``TIMESTAMPTZ``, ``DATE`` and
``JSON`` are converted back to Python values on read.
"""

from __future__ import annotations

import functools
import json
import logging
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..errors import MigrationError, StoreError, TransientStoreError, UniqueConflict
from .base import Json, Store, Tx, clean_database_url, instant_text, is_read_only, redact_url
from .migrations import apply_lines, now_utc, versions_by_line
from .sqlfiles import SqlLine, registered_lines
from .writelock import WriteLock

__all__ = ["SqliteStore"]

log = logging.getLogger("oncebeat.store")

_ts_to_text = instant_text

#: WAL frames (pages) a store lets accumulate between its own passive checkpoints: SQLite's default automatic
#: checkpoint size. SQLite's automatic checkpoint is set to twice this (_AUTOCHECKPOINT) as a safety net.
_CHECKPOINT_FRAMES = 1000
_AUTOCHECKPOINT = 2 * _CHECKPOINT_FRAMES
#: Bounds of the number of write transactions between two checkpoints (adapted to the frames each writes).
_CHECKPOINT_EVERY = (1, 256)


@functools.lru_cache(maxsize=4096)
def _convert_ts(raw: bytes) -> datetime:
    # Cached: a claimed batch shares its started_at and lease instants (and a bulk enqueue its run_at and
    # created_at), and datetimes are immutable. Stored text ends in Z, which parses to UTC already.
    value = datetime.fromisoformat(raw.decode())
    return value if value.tzinfo is UTC else value.astimezone(UTC)


def _convert_json(raw: bytes) -> Any:
    # Most job rows carry empty args and errors: skip the decoder for them (a new object each time).
    if raw == b"{}":
        return {}
    if raw == b"[]":
        return []
    return json.loads(raw)


sqlite3.register_converter("TIMESTAMPTZ", _convert_ts)
sqlite3.register_converter("DATE", lambda raw: date.fromisoformat(raw.decode()))
sqlite3.register_converter("JSON", _convert_json)


#: Parameter types SQLite takes as they are: looked up first by exact type (bool, a subclass of int, is not one),
#: so the common value costs one set lookup instead of five isinstance checks (an import of 60,000 invoices
#: adapts 3.3 million values).
_AS_IS = frozenset({str, int, float, bytes, type(None)})


def _adapt(value: Any) -> Any:
    if type(value) in _AS_IS:
        return value
    if isinstance(value, datetime):
        return _ts_to_text(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Json):
        return json.dumps(value.value, separators=(",", ":"), default=str)
    if isinstance(value, (list, tuple)):
        return json.dumps(list(value), default=str)
    if isinstance(value, bool):
        return int(value)
    return value


def _params(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _adapt(v) for k, v in params.items()}


#: The unique indexes as SQLite names them in a violation ("UNIQUE constraint failed: jobs.run_of"), by their
#: names in the migrations (PostgreSQL reports those): UniqueConflict.constraint is the same on both backends.
_UNIQUE_INDEXES = {"jobs.run_of": "jobs_one_run_per_occurrence", "jobs.unique_key": "jobs_unique_key"}


def _translate(exc: sqlite3.Error, what: str) -> StoreError:
    text = str(exc)
    if isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text):
        return TransientStoreError(f"{what}: database is locked (another process holds the write lock): {text}")
    if isinstance(exc, sqlite3.IntegrityError) and text.startswith("UNIQUE constraint failed: "):
        columns = text.removeprefix("UNIQUE constraint failed: ")
        return UniqueConflict(f"{what}: {type(exc).__name__}: {text}", _UNIQUE_INDEXES.get(columns, columns))
    return StoreError(f"{what}: {type(exc).__name__}: {text}")


class _SqliteTx(Tx):
    backend = "sqlite"

    def __init__(self, store: SqliteStore, conn: sqlite3.Connection) -> None:
        self._store = store
        self._conn = conn

    def run(self, name: str, /, **params: Any) -> list[dict[str, Any]]:
        return self._run(name, self._store.query_sql(name), params)

    def run_with(self, name: str, source: str, /, **params: Any) -> list[dict[str, Any]]:
        sql = self._store.query_sql(name).replace("/*source*/", self._store.query_sql(source))
        return self._run(name, sql, params)

    def _run(self, name: str, sql: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        if self._store.before_statement is not None:
            self._store.before_statement(name)
        try:
            cur = self._conn.cursor()
            cur.row_factory = None  # tuples, made dicts below with the column names looked up once
            rows = cur.execute(sql, _params(params)).fetchall()
        except sqlite3.Error as exc:
            raise _translate(exc, f"query {name}") from exc
        if not rows:
            return []
        names = [col[0] for col in cur.description]
        return [dict(zip(names, row, strict=True)) for row in rows]

    def many(self, name: str, rows: Iterable[Mapping[str, Any]], /) -> None:
        sql = self._store.query_sql(name)
        if self._store.before_statement is not None:
            self._store.before_statement(name)
        try:
            self._conn.executemany(sql, (_params(r) for r in rows))
        except sqlite3.Error as exc:
            raise _translate(exc, f"query {name}") from exc

    def execute(self, sql: str, params: Mapping[str, Any] | tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        try:
            adapted = _params(params) if isinstance(params, Mapping) else tuple(_adapt(v) for v in params)
            return self._conn.execute(sql, adapted).fetchall()
        except sqlite3.Error as exc:
            raise _translate(exc, "statement") from exc


def _close_all(connections: list[sqlite3.Connection], lock: threading.Lock) -> None:
    with lock:
        for conn in connections:
            conn.close()
        connections.clear()


def _dict_row(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> dict[str, Any]:
    return {col[0]: value for col, value in zip(cursor.description, row, strict=True)}


def _busy_timeout(text: str, url: str) -> float:
    """``busy_timeout`` seconds from the URL: a finite number from 0 to 3600, else a clear StoreError."""
    try:
        seconds = float(text) if text.strip().isascii() else float("nan")
    except ValueError:
        seconds = float("nan")
    if not 0 <= seconds <= 3600:  # also false for NaN
        raise StoreError(f"{url}: busy_timeout must be seconds from 0 to 3600, not {text!r} (e.g. ?busy_timeout=30)")
    return seconds


#: ``?synchronous=`` values accepted, as SQLite's PRAGMA names them. OFF is left out on purpose: it can lose
#: committed transactions on an OS crash *and* corrupt the file; NORMAL in WAL mode only loses the newest ones.
_SYNCHRONOUS = ("FULL", "NORMAL", "EXTRA")


def _synchronous(text: str, url: str) -> str:
    """The ``synchronous`` URL option as its PRAGMA value (``FULL``, ``NORMAL``, ``EXTRA``), else a clear StoreError."""
    value = text.strip().upper()
    if value not in _SYNCHRONOUS:
        raise StoreError(f"{url}: synchronous must be full (the default: a committed transaction survives a power "
                         "loss or OS crash), normal (WAL: it survives a crash of the process, but the last "
                         f"transactions before a power loss or OS crash may be lost) or extra, not {text!r}")
    return value


class SqliteStore(Store):
    """SQLite store for ``sqlite:///relative/path.db``, ``sqlite:////abs/path.db`` or ``sqlite:///:memory:``.

    Query options: ``busy_timeout`` (seconds from 0 to 3600, default 30), ``synchronous`` (``full``, the
    default; ``normal``; ``extra``; case-insensitive), applied as ``PRAGMA synchronous`` to every connection.
    In WAL mode ``normal`` leaves the fsync out of ``COMMIT`` (the WAL is synced at checkpoints): a committed
    transaction survives a crash of any process, but the last ones before a power loss or an OS crash can be
    lost (never the file's integrity).

    Raises:
        StoreError: no file in the URL, a bad option value, or (``create=False``) no database at the path.
    """

    backend = "sqlite"

    def __init__(self, url: str, *, create: bool = True) -> None:
        url = clean_database_url(url)
        self.url = redact_url(url)  # a ?key= or ?token= option never reaches a message
        parts = urlsplit(url)
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        if not path:
            raise StoreError(f"{self.url}: no database file in the URL; use sqlite:///oncebeat.db")
        # Blank values kept: ``?synchronous=`` is refused like any other bad value, not read as the default.
        options = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        self.path = path
        self.busy_timeout = _busy_timeout(options.get("busy_timeout", "30"), url)
        self.synchronous = _synchronous(options.get("synchronous", "full"), self.url)
        if path != ":memory:":
            if not create and not Path(path).is_file():
                raise StoreError(f"no database at {path!r} ({self.url}); check DATABASE_URL / --db, or create it "
                                 "with `oncebeat migrate`")
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._writers = WriteLock(f"{path}-lock") if path != ":memory:" else None
        # Write transactions since this store's last checkpoint, and how many to let pass between two (adapted
        # so that each checkpoint copies about _CHECKPOINT_FRAMES frames). Shared by threads: a lost count only
        # moves a checkpoint by one transaction.
        self._writes = 0
        self._checkpoint_every = 16
        # The store owns its per-thread connections: one dropped without close() closes them when collected
        # (Python 3.13 warns about every sqlite3 connection left for the garbage collector).
        weakref.finalize(self, _close_all, self._all, self._lock)
        if self._writers is not None:
            weakref.finalize(self, self._writers.close)

    def _connect(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=self.busy_timeout,
                isolation_level=None,
                detect_types=sqlite3.PARSE_DECLTYPES | sqlite3.PARSE_COLNAMES,
                check_same_thread=False,
            )
            conn.row_factory = _dict_row
            self._set_wal(conn)
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            conn.execute(f"PRAGMA wal_autocheckpoint={_AUTOCHECKPOINT}")
            conn.execute("PRAGMA foreign_keys=ON")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite database {self.path!r}: {exc}. Check the path in "
                             "DATABASE_URL.") from exc
        self._local.conn = conn
        with self._lock:
            self._all.append(conn)
        return conn

    def _set_wal(self, conn: sqlite3.Connection) -> None:
        # Switching a new file to WAL upgrades a lock; while another process opening the same new
        # file holds one, SQLite can report "database is locked" at once instead of waiting in the
        # busy handler. Retry within busy_timeout (several processes starting together).
        deadline = time.monotonic() + self.busy_timeout
        while True:
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)

    @contextmanager
    def transaction(self, *, bounded: bool = False, generic_plans: bool = False) -> Iterator[Tx]:
        # bounded: every wait is already bounded by busy_timeout; generic_plans: the statement cache plans once
        conn = self._connect()
        held = self._take_writer_lock()
        committed = False
        try:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise _translate(exc, "begin transaction") from exc
            try:
                yield _SqliteTx(self, conn)
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise _translate(exc, "commit") from exc
            committed = True
        finally:
            if held is not None:
                held.release()
        if committed and held is not None:
            self._checkpoint_now_and_then(conn)

    def _checkpoint_now_and_then(self, conn: sqlite3.Connection) -> None:
        """After a committed write, once the lock is released: a passive checkpoint every few transactions.

        Why here: SQLite's automatic checkpoint runs inside ``COMMIT``, while this process still holds the writer
        lock, so every other writer waits for its page copies and fsyncs (milliseconds, every ~1,000 frames); a
        passive checkpoint needs no writer lock and runs beside the next writer's transaction. Durability is
        unchanged: a transaction is durable in the WAL at its ``COMMIT`` (``synchronous``), before any checkpoint.
        A checkpoint that fails (another one running, the disk) is left to the next one, or to SQLite's own at
        ``_AUTOCHECKPOINT`` frames.
        """
        self._writes += 1
        if self._writes < self._checkpoint_every:
            return
        self._writes = 0
        try:
            row = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as exc:
            log.debug("passive checkpoint of %s skipped: %s", self.path, exc, extra={"event": "store.checkpoint"})
            return
        frames = int(row["log"]) if row and row["log"] is not None else -1  # frames in the WAL; -1: not in WAL mode
        every = self._checkpoint_every
        every = every * 2 if frames <= 0 else round(every * _CHECKPOINT_FRAMES / frames)
        self._checkpoint_every = min(max(every, _CHECKPOINT_EVERY[0]), _CHECKPOINT_EVERY[1])

    @contextmanager
    def snapshot(self, *, timeout_ms: int | None = None) -> Iterator[Tx]:
        # timeout_ms: SQLite has no statement timeout (see Store.snapshot); its books are small
        conn = self._connect()
        if conn.in_transaction:
            raise StoreError("snapshot inside this thread's open transaction: SQLite nests no BEGIN")
        try:
            conn.execute("BEGIN DEFERRED")  # no lock yet: the first read of a table fixes the WAL snapshot
        except sqlite3.Error as exc:
            raise _translate(exc, "begin snapshot") from exc
        try:
            yield _SqliteTx(self, conn)
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")  # read only: nothing to commit

    def read(self, name: str, /, **params: Any) -> list[dict[str, Any]]:
        """Run one named query and return its rows; a read-only query takes no write lock.

        In WAL mode a lone SELECT reads a consistent snapshot in autocommit (its own implicit read transaction)
        and neither waits for nor blocks a writer, so dashboards, the doctor and idle workers polling for due
        jobs never queue behind the writer lock. A query that writes (a ``read`` verb used for an UPDATE …
        RETURNING) still runs in a write transaction.
        """
        if not is_read_only(self.query_sql(name)):
            return super().read(name, **params)
        conn = self._connect()
        if conn.in_transaction:  # inside this thread's own transaction: SQLite would refuse a nested BEGIN anyway
            return super().read(name, **params)
        return _SqliteTx(self, conn).run(name, **params)

    def write_waited(self) -> bool:
        """True if this thread's last write transaction found ``<db>-lock`` held by another process and waited."""
        return bool(getattr(self._local, "waited", False))

    def _take_writer_lock(self) -> WriteLock | None:
        """Queue on ``<db>-lock`` within ``busy_timeout``; the lock taken, or None (in memory, unwritable dir, nested).

        Raises:
            TransientStoreError: another oncebeat process held it for all of ``busy_timeout``.
        """
        writers = self._writers  # read once: another thread may drop it (below) meanwhile
        if writers is None or writers.held_here():  # nested: SQLite refuses it at once, as before
            return None
        try:
            got = writers.acquire(self.busy_timeout)
        except OSError as exc:  # e.g. a read-only directory: SQLite's busy handler alone still orders writers
            log.warning("no writer lock file %s (%s); waits for the write lock poll", writers.path, exc,
                        extra={"event": "store.no_writer_lock"})
            self._writers = None
            return None
        if not got:
            raise TransientStoreError(f"begin transaction: database is locked (another process held the writer "
                                      f"lock {writers.path} for {self.busy_timeout:g} s)")
        self._local.waited = writers.waited
        return writers

    def migrate(self, target: int | None = None, *, lines: tuple[SqlLine, ...] | None = None
                ) -> list[tuple[str, int]]:
        conn = self._connect()

        def execute(sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
            return list(conn.execute(sql, tuple(params)).fetchall())

        try:
            conn.execute("BEGIN IMMEDIATE")
            columns = [r["name"] for r in conn.execute("PRAGMA table_info(schema_migrations)")]
            applied = apply_lines(execute, backend="sqlite", lines=lines if lines is not None else registered_lines(),
                                  columns=columns,
                                  now=_ts_to_text(now_utc()), target=target)
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise MigrationError(f"migrating {self.path}: {exc}") from exc
        return applied

    def schema_versions(self) -> dict[str, list[int]]:
        conn = self._connect()
        try:
            columns = [r["name"] for r in conn.execute("PRAGMA table_info(schema_migrations)")]
            if columns and "line" not in columns:  # 0.1's single numbering, not converted yet
                return {"": [r["version"] for r in conn.execute("SELECT version FROM schema_migrations")]}
            return versions_by_line(conn.execute("SELECT line, version FROM schema_migrations").fetchall())
        except sqlite3.OperationalError:
            return {}

    def table_columns(self) -> dict[str, list[tuple[str, str]]]:
        conn = self._connect()
        tables = [r["name"] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        return {t: [(c["name"], c["type"]) for c in conn.execute(f'PRAGMA table_info("{t}")')] for t in tables}

    def close(self) -> None:
        _close_all(self._all, self._lock)
        self._local = threading.local()
        if self._writers is not None:
            self._writers.close()
