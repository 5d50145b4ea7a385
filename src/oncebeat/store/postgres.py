"""PostgreSQL backend: psycopg 3 with a connection pool, claims with ``FOR UPDATE SKIP LOCKED``.

URL: ``postgresql://user:pass@host:port/db``; the extra query option
``schema=NAME`` puts every table in that schema (created on migrate), which
is how tests keep runs apart. ``pool_size`` sets the pool's maximum (default 10).
Migrations run under a transaction-scoped advisory lock, so any number of
processes may start at once.

Bounded stalls: a process cut off by a network partition in the middle of a
transaction must not block the others for long (a clock holding an uncommitted
occurrence row blocks every other clock's insert of that row). So every
connection, unless the URL says otherwise:

- detects a dead peer: ``keepalives=1``, ``keepalives_idle=10``,
  ``keepalives_interval=5``, ``keepalives_count=3`` (seconds: a silent server is
  found in about 25 s) and ``tcp_user_timeout=30000`` (ms: unacknowledged data);
  ``connect_timeout=10``;
- lets the **server** end a transaction its client abandoned:
  ``idle_in_transaction_session_timeout=20s`` (so the locks of a partitioned
  process are released within 20 s and the surviving clock fires within the
  60 s misfire grace);
- and bounds the clock's and the claim's transactions
  (``store.transaction(bounded=True)``): ``lock_timeout=5s`` and
  ``statement_timeout=15s`` (SET LOCAL: a report or a big scan is not cut short).

Each is a query option of the URL, e.g. ``?keepalives_idle=30&lock_timeout=2s``
(durations in PostgreSQL's units: ``500ms``, ``5s``, ``2min``; ``0`` turns one off).
Server settings may also be given as libpq ``options`` (``?options=-c%20work_mem%3D64MB``);
one set there wins over the default.

The claim's transaction (``store.transaction(generic_plans=True)``) also plans its prepared statements once per
connection (``plan_cache_mode = force_generic_plan``, ``enable_seqscan = off``, SET LOCAL; see
:meth:`Store.transaction`): planning each claim afresh took 0.3–0.4 ms of a 100-job claim's 1.3–1.5 ms.

Dropped connections: pooled connections are checked before each use (a dropped
one is replaced, never handed out) and, after an outage, the pool tries to
reconnect at least every ``RECONNECT_MAX_DELAY`` (2 s). The check is the
transaction's own ``BEGIN`` (with a bounded transaction's ``SET LOCAL`` statements in the
same round trip), so it costs no round trip of its own.
"""

from __future__ import annotations

import atexit
import json
import re
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, cast
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg.abc import Buffer
from psycopg.adapt import Loader
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool
from psycopg_pool.base import AttemptWithBackoff

from ..errors import MigrationError, QueryTimedOut, StoreError, TransientStoreError, UniqueConflict
from ..redact import remember_secrets, unencoded_password
from .base import Json, Store, Tx, clean_database_url, is_read_only, redact_url
from .migrations import apply_lines, now_utc, versions_by_line
from .sqlfiles import SqlLine, registered_lines

__all__ = ["PostgresStore"]

# Advisory lock for migrations: (this class, hash of the schema migrated). Processes migrating one schema take
# turns; migrations of different schemas (tenants, test schemas) of one database do not wait on each other.
_MIGRATION_LOCK = 0x0CE_BEA7
# libpq connection parameters set unless the URL sets them (see the module docstring).
CONNECTION_DEFAULTS = {"connect_timeout": "10", "keepalives": "1", "keepalives_idle": "10",
                       "keepalives_interval": "5", "keepalives_count": "3", "tcp_user_timeout": "30000"}
# oncebeat's own URL options: server settings (durations), session-wide or per bounded transaction.
SESSION_DEFAULTS = {"idle_in_transaction_session_timeout": "20s"}
BOUNDED_DEFAULTS = {"lock_timeout": "5s", "statement_timeout": "15s"}
BEGIN_TRIES = 3  # pooled connections tried before a transaction's BEGIN failure is raised (see _begin)
_DURATION = re.compile(r"(0|[1-9][0-9]{0,8})(us|ms|s|min|h|d)?")


def _duration_option(options: dict[str, str], name: str, default: str, url: str) -> str:
    """Pop server setting ``name`` from the URL's options: a PostgreSQL duration (``5s``), else StoreError."""
    value = options.pop(name, default).strip()
    if not _DURATION.fullmatch(value):
        raise StoreError(f"DATABASE_URL {redact_url(url)!r}: {name} must be a duration such as 500ms, 5s or 2min "
                         f"(0 turns it off), not {value!r} (e.g. ?{name}={default})")
    return value


def _server_options(options: dict[str, str], schema: str | None, url: str) -> str:
    """libpq ``options`` for every session: the URL's own, then each default setting it does not name."""
    given = options.pop("options", "")
    parts = [given] if given.strip() else []
    for name, default in SESSION_DEFAULTS.items():
        value = _duration_option(options, name, default, url)
        if not re.search(rf"(-c\s*|--){name}=", given):
            parts.append(f"-c {name}={value}")
    if schema:
        parts.append(f"-c search_path={schema}")
    return " ".join(parts)


RECONNECT_MAX_DELAY = 2.0  # seconds between reconnect attempts after an outage, at most


class _CappedBackoff(AttemptWithBackoff):
    """psycopg_pool's reconnect backoff (1 s, doubling) capped at RECONNECT_MAX_DELAY: uncapped, one worker
    reconnected 64 s after the database came back; capped, within 2 s."""

    def update_delay(self, now: float) -> None:
        super().update_delay(now)
        self.delay = min(self.delay, RECONNECT_MAX_DELAY)


# Pools still open when the interpreter exits are closed by an atexit hook, while their threads can still run:
# left to the garbage collector during finalisation, each of the pool's threads is waited for 5 s in vain
# (a five-line script that never calls close() took 20 s to exit, with four warnings).
_OPEN_POOLS: weakref.WeakSet[ConnectionPool] = weakref.WeakSet()


@atexit.register
def _close_open_pools() -> None:
    for pool in list(_OPEN_POOLS):
        pool.close(timeout=1.0)


class _Pool(ConnectionPool):
    """The connection pool: after an outage, reconnect attempts are at most RECONNECT_MAX_DELAY apart.

    Checking a connection before it is handed out is :meth:`PostgresStore._begin`'s job (issue 9, item 8).
    """

    def _add_connection(self, attempt: AttemptWithBackoff | None, growing: bool = False) -> None:
        super()._add_connection(attempt or _CappedBackoff(timeout=self.reconnect_timeout), growing)


class _JsonLoader(Loader):
    """json/jsonb values (text format) decoded from a str: psycopg's own loader hands json.loads bytes, whose
    encoding json then detects in Python, ~1.3 us more per value (a claimed job's args: round 3b); an empty object
    or list (most jobs' args and errors) skips the decoder (a new object each time)."""

    def load(self, data: Buffer) -> Any:
        if data == b"{}":
            return {}
        if data == b"[]":
            return []
        return json.loads(str(data, "utf-8"))


def _configure(conn: psycopg.Connection[Any]) -> None:
    """Each pooled connection, once opened: its JSON loaders."""
    conn.adapters.register_loader("jsonb", _JsonLoader)
    conn.adapters.register_loader("json", _JsonLoader)


def _adapt(value: Any) -> Any:
    if isinstance(value, Json):
        return Jsonb(value.value)
    if isinstance(value, tuple):
        return list(value)
    return value


def _params(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _adapt(v) for k, v in params.items()}


def _has_rows(cur: psycopg.Cursor[Any]) -> bool:
    """Whether the statement just run returned columns to fetch (``SELECT``, ``… RETURNING``), exactly as
    ``bool(cur.description)``, which builds a ``Column`` object per column each time it is read (~25 µs for a
    send's 34-column read, issue 27): the result's column count says the same."""
    res = cur.pgresult
    return res is not None and res.nfields > 0


def _rollback(conn: psycopg.Connection[Any]) -> None:
    """End a failed transaction, if the connection still can (else the pool discards it on return)."""
    if conn.closed or conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        return
    try:
        conn.execute("ROLLBACK")
    except psycopg.Error:
        pass  # broken or busy: putconn discards it


def _translate(exc: psycopg.Error, what: str, url: str) -> StoreError:
    if isinstance(exc, psycopg.errors.QueryCanceled):  # an OperationalError: still transient, and named
        return QueryTimedOut(redact_url(f"{what} on {url}: {type(exc).__name__}: {exc}"))
    if isinstance(exc, (psycopg.OperationalError, psycopg.errors.SerializationFailure,
                        psycopg.errors.DeadlockDetected, psycopg.errors.LockNotAvailable)):
        return TransientStoreError(redact_url(f"{what} on {url}: {type(exc).__name__}: {exc}"))
    if isinstance(exc, psycopg.errors.UniqueViolation):
        return UniqueConflict(redact_url(f"{what}: {type(exc).__name__}: {exc}"), exc.diag.constraint_name or "")
    return StoreError(redact_url(f"{what}: {type(exc).__name__}: {exc}"))


class _PgTx(Tx):
    backend = "postgres"

    def __init__(self, store: PostgresStore, conn: psycopg.Connection[dict[str, Any]]) -> None:
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
            cur = self._conn.execute(sql, _params(params))
            return cur.fetchall() if _has_rows(cur) else []
        except psycopg.Error as exc:
            raise _translate(exc, f"query {name}", self._store.url) from exc

    def many(self, name: str, rows: Iterable[Mapping[str, Any]], /) -> None:
        sql = self._store.query_sql(name)
        if self._store.before_statement is not None:
            self._store.before_statement(name)
        try:
            with self._conn.cursor() as cur:
                cur.executemany(sql, [_params(r) for r in rows])
        except psycopg.Error as exc:
            raise _translate(exc, f"query {name}", self._store.url) from exc

    def execute(self, sql: str, params: Mapping[str, Any] | tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        try:
            adapted = _params(params) if isinstance(params, Mapping) else tuple(_adapt(v) for v in params)
            cur = self._conn.execute(sql, adapted)
            return cur.fetchall() if _has_rows(cur) else []
        except psycopg.Error as exc:
            raise _translate(exc, "statement", self._store.url) from exc


class PostgresStore(Store):
    """PostgreSQL store (see module docstring for the URL options)."""

    backend = "postgres"

    def __init__(self, url: str) -> None:
        remember_secrets(url)  # every later message (driver errors too) masks this URL's password
        url = clean_database_url(url)
        problem = unencoded_password(url)
        if problem:
            raise StoreError(f"DATABASE_URL {redact_url(url)!r}: {problem}")
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - parses the port, raising ValueError when it is not a number
        except ValueError as exc:
            raise StoreError(redact_url(f"DATABASE_URL {redact_url(url)!r} is not a valid URL: {exc}")) from None
        options = dict(parse_qsl(parts.query))
        self.schema = options.pop("schema", None)
        if self.schema is not None and not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", self.schema):
            raise StoreError(f"{redact_url(url)}: schema must be a lower-case SQL identifier")
        pool_text = options.pop("pool_size", "10")
        if not pool_text.isascii() or not pool_text.isdigit() or not 1 <= int(pool_text) <= 1000:
            raise StoreError(f"DATABASE_URL {redact_url(url)!r}: pool_size must be a whole number of connections "
                             f"from 1 to 1000, not {pool_text!r} (e.g. ?pool_size=10)")
        pool_size = int(pool_text)
        self.url = redact_url(url)
        self.bounds = tuple(_duration_option(options, name, default, url) for name, default in BOUNDED_DEFAULTS.items())
        # SET LOCAL: ends with the transaction, the pooled connection keeps its defaults. The values are
        # durations checked by _duration_option (digits and a unit), so they are written into the statement:
        # one simple query, one round trip with the BEGIN.
        self._begin_bounded = "BEGIN; " + "; ".join(
            f"SET LOCAL {name} = '{value}'" for name, value in zip(BOUNDED_DEFAULTS, self.bounds, strict=True))
        options["options"] = _server_options(options, self.schema, url)
        options = CONNECTION_DEFAULTS | options  # the URL's own values win
        query = urlencode(options, quote_via=quote)  # %20, not '+': libpq decodes only %XX
        conninfo = urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))
        kwargs: dict[str, Any] = {"autocommit": True, "row_factory": dict_row}
        self._conninfo = conninfo
        self._kwargs = kwargs
        try:  # one direct connection first: its error says what is wrong (the pool's only says "timeout")
            psycopg.connect(conninfo, **kwargs).close()
        except psycopg.Error as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise StoreError(f"cannot connect to {self.url}: {redact_url(reason)}. Is the PostgreSQL server "
                             "running, and are the host, port, database and user in DATABASE_URL right?") from None
        self._pool = _Pool(conninfo, min_size=1, max_size=pool_size, kwargs=kwargs, open=False, name="oncebeat",
                           configure=_configure)
        try:
            self._pool.open(wait=True, timeout=10)
        except Exception as exc:  # psycopg_pool raises PoolTimeout with the connect error chained
            self._pool.close()
            raise StoreError(redact_url(
                f"cannot connect to {self.url}: {exc}. Is the PostgreSQL server running and DATABASE_URL right?"
            )) from None
        _OPEN_POOLS.add(self._pool)

    @contextmanager
    def transaction(self, *, bounded: bool = False, generic_plans: bool = False) -> Iterator[Tx]:
        begin = self._begin_bounded if bounded else "BEGIN"
        if generic_plans:  # in the BEGIN's round trip; ends with the transaction (see Store.transaction)
            begin += "; SET LOCAL plan_cache_mode = force_generic_plan; SET LOCAL enable_seqscan = off"
        try:
            conn = self._begin(begin)
        except psycopg.Error as exc:
            raise _translate(exc, "transaction", self.url) from exc
        try:
            yield _PgTx(self, cast("psycopg.Connection[dict[str, Any]]", conn))  # kwargs set dict_row
            conn.execute("COMMIT")
        except psycopg.Error as exc:
            _rollback(conn)
            raise _translate(exc, "transaction", self.url) from exc
        except BaseException:
            _rollback(conn)
            raise
        finally:
            self._pool.putconn(conn)

    @contextmanager
    def snapshot(self, *, timeout_ms: int | None = None) -> Iterator[Tx]:
        begin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        if timeout_ms is not None:  # an int written into the statement: one round trip with the BEGIN
            begin += f"; SET LOCAL statement_timeout = {max(1, int(timeout_ms))}"
        try:
            conn = self._begin(begin)
        except psycopg.Error as exc:
            raise _translate(exc, "snapshot", self.url) from exc
        try:
            yield _PgTx(self, cast("psycopg.Connection[dict[str, Any]]", conn))
        except psycopg.Error as exc:
            raise _translate(exc, "snapshot", self.url) from exc
        finally:
            _rollback(conn)  # read only: nothing to commit
            self._pool.putconn(conn)

    def read(self, name: str, /, **params: Any) -> list[dict[str, Any]]:
        """Run one named query and return its rows; a read-only query (:func:`~.base.is_read_only`) runs alone.

        A single statement outside a transaction block is its own transaction (autocommit) with one snapshot, as
        it would be between ``BEGIN`` and ``COMMIT`` at READ COMMITTED: one round trip instead of three (a send
        job reads before it writes; issue 27). A pooled connection found dead by the read is given back (the pool
        replaces it) and the read is tried on the next one, as :meth:`_begin` does for a ``BEGIN``: a read-only
        statement changes nothing, so running it again is safe. Any other query runs in a transaction as before.

        Raises:
            TransientStoreError: the server could not be reached on ``BEGIN_TRIES`` connections, or the query
                was cancelled (timeout) or failed to serialise; StoreError for any other failure.
        """
        sql = self.query_sql(name)
        if not is_read_only(sql):
            return super().read(name, **params)
        return self._alone(name, sql, params)

    def run_idempotent(self, name: str, /, **params: Any) -> list[dict[str, Any]]:
        """One idempotent named statement alone in autocommit, run again on the next pooled connection when the
        one it used is found dead (see :meth:`Store.run_idempotent`): one round trip instead of three."""
        return self._alone(name, self.query_sql(name), params)

    def run_alone(self, name: str, /, **params: Any) -> list[dict[str, Any]]:
        """One named statement alone in autocommit, never run again (see :meth:`Store.run_alone`): one round trip
        instead of three. A connection found dead is given back (the pool replaces it), the pool checks its idle
        ones, and the call raises ``TransientStoreError``: whether the statement committed is the caller's call."""
        return self._alone(name, self.query_sql(name), params, tries=1)

    def _alone(self, name: str, sql: str, params: Mapping[str, Any], *, tries: int = BEGIN_TRIES
               ) -> list[dict[str, Any]]:
        """Run ``sql`` alone in autocommit, on up to ``tries`` pooled connections: a statement safe to run again
        (a read, an idempotent write) is tried on the next one when the one it used is found dead; ``tries=1``
        for one that must never run twice (:meth:`run_alone`)."""
        adapted = _params(params)
        for attempt in range(tries):
            conn = self._pool.getconn()
            try:
                if self.before_statement is not None:
                    self.before_statement(name)
                cur = cast("psycopg.Connection[dict[str, Any]]", conn).execute(sql, adapted)
                return cur.fetchall() if _has_rows(cur) else []
            except psycopg.OperationalError as exc:
                dead = conn.closed or conn.broken
                if dead:
                    self._pool.check()  # its idle siblings usually died with it (a restart, a terminated backend)
                if not dead or attempt == tries - 1:
                    raise _translate(exc, f"query {name}", self.url) from exc
            except psycopg.Error as exc:
                raise _translate(exc, f"query {name}", self.url) from exc
            finally:
                self._pool.putconn(conn)
        raise AssertionError("unreachable")

    def _begin(self, begin: str) -> psycopg.Connection[Any]:
        """A pooled connection with its transaction begun: ``begin`` is the check that it is alive.

        One round trip, as the pool's own check (an empty query) would be, but it also starts the transaction.
        A connection that fails it is given back (the pool replaces a closed one) and the pool checks its idle
        ones, which usually died together (a server restart, ``pg_terminate_backend``, a network cut); the next
        one is tried, so the caller never meets a dead connection while the pool has or can open a live one.
        """
        for attempt in range(BEGIN_TRIES):
            conn = self._pool.getconn()
            try:
                conn.execute(begin)
                return conn
            except psycopg.OperationalError:
                self._pool.putconn(conn)
                if attempt == BEGIN_TRIES - 1:
                    raise
                self._pool.check()
        raise AssertionError("unreachable")

    def migrate(self, target: int | None = None, *, lines: tuple[SqlLine, ...] | None = None
                ) -> list[tuple[str, int]]:
        try:
            with psycopg.connect(self._conninfo, **self._kwargs) as conn, conn.transaction():

                def execute(sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
                    cur = conn.execute(sql.replace("?", "%s"), tuple(params))
                    return list(cur.fetchall()) if _has_rows(cur) else []

                def run_statement(statement: str) -> None:  # a migration's literal % is not a parameter
                    conn.execute(statement.replace("%", "%%"))

                conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(coalesce(%s, current_schema())))",
                             (_MIGRATION_LOCK, self.schema))
                # An existing schema is not created again: a role that owns its schema but may not create schemas
                # in the database (a tenant's) migrates it all the same.
                if self.schema and not conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s",
                                                    (self.schema,)).fetchall():
                    conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
                applied = apply_lines(execute, backend="postgres",
                                      lines=lines if lines is not None else registered_lines(),
                                      columns=self._migration_columns(conn), now=now_utc(), target=target,
                                      run_statement=run_statement)
        except psycopg.Error as exc:
            raise MigrationError(redact_url(f"migrating {self.url}: {exc}")) from exc
        return applied

    @staticmethod
    def _migration_columns(conn: psycopg.Connection[Any]) -> list[str]:
        rows = conn.execute("SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
                            "AND table_name = 'schema_migrations'").fetchall()
        return [r["column_name"] for r in rows]

    def schema_versions(self) -> dict[str, list[int]]:
        with self.transaction() as tx:
            columns = [r["column_name"] for r in tx.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
                "AND table_name = 'schema_migrations'")]
            if not columns:
                return {}
            if "line" not in columns:  # 0.1's single numbering, not converted yet
                return {"": [r["version"] for r in tx.execute("SELECT version FROM schema_migrations")]}
            return versions_by_line(tx.execute("SELECT line, version FROM schema_migrations"))

    def table_columns(self) -> dict[str, list[tuple[str, str]]]:
        with self.transaction() as tx:
            rows = tx.execute(
                "SELECT table_name, column_name, data_type FROM information_schema.columns "
                "WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position"
            )
        out: dict[str, list[tuple[str, str]]] = {}
        for r in rows:
            out.setdefault(r["table_name"], []).append((r["column_name"], r["data_type"]))
        return out

    def drop_schema(self) -> None:
        """Drop this store's schema and everything in it (tests only)."""
        if not self.schema:
            raise StoreError("drop_schema needs a URL with ?schema=NAME")
        with psycopg.connect(self._conninfo, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')

    def close(self) -> None:
        self._pool.close()
        _OPEN_POOLS.discard(self._pool)


