"""Shared fixtures: one store per backend, a simulated clock, disarmed crash points.

- ``backend`` runs a test once on SQLite and once on PostgreSQL.
- ``db_url`` is a fresh, empty database for that backend: a file under
  ``tmp_path`` for SQLite, a schema of its own (``ob_t_<hex>``) for PostgreSQL,
  dropped afterwards (under ``store``: reset and reused, tests/pg_schemas.py).
  ``make_db_url()`` gives further fresh databases of the same backend; ``pg_db_url`` is a fresh PostgreSQL schema for tests that
  compare the two backends.
- ``store`` is ``open_store(db_url)`` already migrated.

PostgreSQL comes from ``ONCEBEAT_TEST_PG_URL`` (default
``postgresql://postgres@127.0.0.1:5432/test`` with ``synchronous_commit=off``, see ``DEFAULT_PG_URL``). When it
cannot be reached the
PostgreSQL half of the suite is skipped on a laptop and fails when ``CI=true``
(a CI run must never pass by skipping the backend it exists to test).
"""

from __future__ import annotations

import fcntl
import os
import resource
import secrets
import shutil
import time
from collections.abc import Callable, Generator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import pytest

import oncebeat.reminders  # noqa: F401 - registers the reminder app's SQL line: every test store has both lines
from oncebeat.crashpoints import crashpoints
from oncebeat.store import Store, open_store, redact_url
from oncebeat.timebase import SimulatedClock
from pg_schemas import LENT, SchemaPool
from worksteal_order import DURATIONS_FILE, expected_weights, read_durations, units_of, worksteal_order, write_durations

BACKENDS = ["sqlite", "postgres"]


def shared_data(name: str) -> Path:
    """A folder of the workplace's shared sample data (never copied into the repository).

    Looked up in ``$ONCEBEAT_SHARED_DATA``, then ``shared/data`` beside the repository, then
    ``/work/shared/data``; the first that exists wins (tests skip when none does).
    """
    candidates = [Path(os.environ["ONCEBEAT_SHARED_DATA"]) / name] if os.environ.get("ONCEBEAT_SHARED_DATA") else []
    candidates += [Path(__file__).resolve().parents[1].parent / "shared" / "data" / name,
                   Path("/work/shared/data") / name]
    return next((c for c in candidates if c.exists()), candidates[0])
# synchronous_commit=off for the test sessions only (libpq options, no space so every URL encoding keeps it): a COMMIT
# returns without waiting for its WAL flush. Atomicity, isolation and what other sessions see at commit are unchanged;
# only a crash of the PostgreSQL server or its host could lose the last commits, which no test does (tests kill
# oncebeat's processes, never the server). The flush wait was most of a PostgreSQL simulation's wall time on this
# machine (3,516 COMMITs, 13 of 31 s of SQL in test_send_time's half-hour-zones run); docs/benchmarks.md, "Round 3d:
# the suite". ONCEBEAT_TEST_PG_URL replaces the whole URL (then the server's own setting applies).
DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/test?options=-csynchronous_commit%3Doff"
SIM_START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

_pg_probe: dict[str, str | None] = {}
# Fixtures that migrate ``db_url`` before anything else reads it (so a reset migrated schema serves them as well
# as a new one): conftest's ``store``, the dashboard's ``runtime`` (tests/web/web_helpers.py, test_policies_page),
# test_reports' ``runtime_only``, test_browser's ``live`` (its seed migrates first).
MIGRATES_FIRST = frozenset({"store", "runtime", "runtime_only", "live"})


def flock_held_elsewhere(path: Path) -> bool:
    """True if another open file holds ``flock`` on ``path`` (probed without waiting, released at once).

    The SQLite writer lock's tests read the lock file this way (oncebeat.store.writelock).
    """
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the probe's own lock, if it took it
    return False


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("oncebeat")
    group.addoption("--record-durations", metavar="PATH", default=None,
                    help="write each test's set-up + call + tear-down wall seconds to PATH (tests/durations.txt "
                         "orders make test's processes: make test-durations)")
    group.addoption("--record-cpu", metavar="PATH", default=None,
                    help="write each test's CPU seconds (its process, and the subprocesses it waited for) to PATH, "
                         "in the same format")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "postgres: needs a PostgreSQL server")
    config.addinivalue_line("markers", "slow: real-process tests that take seconds")
    config.addinivalue_line("markers", "file_order: the file's tests run one after another in one process, in file "
                                       "order (a test reads what earlier ones left); tests/worksteal_order.py")
    wall_path, cpu_path = config.getoption("record_durations"), config.getoption("record_cpu")
    if (wall_path or cpu_path) and not hasattr(config, "workerinput"):  # the run's only or controlling process
        config.pluginmanager.register(_TimeRecorder(wall_path, cpu_path), "oncebeat-time-recorder")


_CPU_KEY = pytest.StashKey[float]()


def _cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and of the child processes it has waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """Measure the CPU of a test's set-up, call and tear-down only when a run records it (``--record-cpu``)."""
    if not item.config.getoption("record_cpu"):
        return (yield)
    item.stash[_CPU_KEY] = _cpu_seconds()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, object, object]:
    """Put the test's CPU seconds on its tear-down report (it reaches the controlling process with it)."""
    report = yield
    if call.when == "teardown" and _CPU_KEY in item.stash:
        assert isinstance(report, pytest.TestReport)
        report.user_properties.append(("cpu_seconds", _cpu_seconds() - item.stash[_CPU_KEY]))
    return report


class _TimeRecorder:
    """Adds up each test's phases' wall seconds (and CPU seconds, from its tear-down report); writes them at the end."""

    def __init__(self, wall_path: str | None, cpu_path: str | None) -> None:
        self.wall_path, self.cpu_path = wall_path, cpu_path
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.started = time.time()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.wall[report.nodeid] = self.wall.get(report.nodeid, 0.0) + report.duration
        for name, value in report.user_properties:
            if name == "cpu_seconds":
                self.cpu[report.nodeid] = float(value)  # type: ignore[arg-type]

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        ran = f"{len(self.wall)} tests, {time.time() - self.started:.0f} s, load {os.getloadavg()[0]:.1f} at the end"
        if self.wall_path:
            write_durations(Path(self.wall_path), self.wall,
                            f"seconds (set-up + call + tear-down, wall) and node id, from `make test-durations`: {ran}")
        if self.cpu_path:
            write_durations(Path(self.cpu_path), self.cpu, f"CPU seconds and node id (--record-cpu): {ran}")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Tell each xdist test process how the run distributes tests (a test process's own ``--dist`` is "no")."""
    node.workerinput["oncebeat_dist"] = node.config.getoption("dist")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--dist worksteal``, lay the collection out so each process runs its share longest first.

    tests/worksteal_order.py explains the layout; the durations come from tests/durations.txt. Every process
    computes the same order (xdist refuses a run whose processes collected differently). ``ONCEBEAT_TEST_ORDER=file``
    keeps the file order.
    """
    processes = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    workerinput = getattr(config, "workerinput", {})
    if (processes < 2 or workerinput.get("oncebeat_dist") != "worksteal"
            or os.environ.get("ONCEBEAT_TEST_ORDER") == "file"):
        return
    durations = read_durations(DURATIONS_FILE)
    if not durations:
        return
    keys = [item.nodeid for item in items]
    # A module- or class-scoped fixture is set up again whenever the next test is not in its scope: keep such files
    # whole.
    # A file marked ``file_order`` (a test reads what the file's earlier tests left) stays whole too.
    grouped = {item.nodeid.partition("::")[0] for item in items if isinstance(item, pytest.Function)
               and (item.get_closest_marker("file_order") is not None
                    or any(d.scope in ("module", "class", "package")
                           for defs in item._fixtureinfo.name2fixturedefs.values() for d in defs))}
    order = worksteal_order(expected_weights(keys, durations), units_of(keys, grouped), processes)
    items[:] = [items[i] for i in order]


def pg_base_url() -> str:
    return os.environ.get("ONCEBEAT_TEST_PG_URL", DEFAULT_PG_URL)


def _libpq_url(url: str) -> str:
    """``url`` without oncebeat's own query options (``schema``, ``pool_size``), for psycopg.connect."""
    parts = urlsplit(url)
    options = [(k, v) for k, v in parse_qsl(parts.query) if k not in ("schema", "pool_size")]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(options), parts.fragment))


def _with_schema(url: str, schema: str) -> str:
    parts = urlsplit(url)
    options = [(k, v) for k, v in parse_qsl(parts.query) if k != "schema"] + [("schema", schema)]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(options), parts.fragment))


def require_postgres() -> str:
    """The base PostgreSQL URL; skip (or fail under ``CI=true``) if the server is unreachable.

    The server is probed once per session.
    """
    base = pg_base_url()
    if base not in _pg_probe:
        try:
            with psycopg.connect(_libpq_url(base), connect_timeout=5) as conn:
                conn.execute("SELECT 1")
            _pg_probe[base] = None
        except psycopg.Error as exc:
            _pg_probe[base] = " ".join(str(exc).split()) or type(exc).__name__
    error = _pg_probe[base]
    if error is not None:
        message = f"PostgreSQL not reachable at {redact_url(base)}: {error}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{message} (CI=true: the PostgreSQL backend must be tested, not skipped)")
        pytest.skip(message)
    return base


def drop_pg_schema(url: str) -> None:
    """Drop the ``?schema=`` of ``url`` and everything in it."""
    schema = dict(parse_qsl(urlsplit(url).query))["schema"]
    with psycopg.connect(_libpq_url(url), autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=[pytest.param("sqlite", id="sqlite"),
                        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    """The backend under test: "sqlite" or "postgres"."""
    return str(request.param)


@pytest.fixture
def make_db_url(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], str]]:
    """Factory of fresh, empty databases of ``backend``; PostgreSQL schemas are dropped at teardown."""
    made: list[str] = []
    base = require_postgres() if backend == "postgres" else ""

    def make() -> str:
        if backend == "sqlite":
            url = f"sqlite:///{tmp_path_factory.mktemp('db')}/oncebeat.db"
        else:
            url = _with_schema(base, f"ob_t_{secrets.token_hex(6)}")
        made.append(url)
        return url

    yield make
    for url in made:
        if url.startswith("postgres"):
            drop_pg_schema(url)


@pytest.fixture
def pg_db_url() -> Iterator[str]:
    """A fresh PostgreSQL schema URL whatever ``backend`` is (for tests that compare the backends)."""
    url = _with_schema(require_postgres(), f"ob_t_{secrets.token_hex(6)}")
    yield url
    drop_pg_schema(url)


@pytest.fixture(scope="session")
def _pg_schema_pool() -> Iterator[SchemaPool]:
    """This test process's reused migrated PostgreSQL schemas (tests/pg_schemas.py); dropped at the end."""
    pool = SchemaPool(require_postgres(), _with_schema, _libpq_url)
    yield pool
    pool.close(drop_pg_schema)


@pytest.fixture
def db_url(backend: str, tmp_path: Path, make_db_url: Callable[[], str],
           request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, empty database URL: ``sqlite:///{tmp_path}/oncebeat.db`` or a PostgreSQL schema ``ob_t_<hex>``.

    A PostgreSQL test that uses ``store`` (or another fixture of ``MIGRATES_FIRST``) gets a schema another test
    of this process used, reset to what ``migrate()`` leaves (tests/pg_schemas.py), or a new one that the
    fixture migrates: either way the test starts on exactly the migrated schema with no rows of its own.
    """
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path}/oncebeat.db"
        return
    migrates_first = MIGRATES_FIRST.intersection(request.fixturenames)
    pool: SchemaPool | None = request.getfixturevalue("_pg_schema_pool") if migrates_first else None
    url = pool.take() if pool is not None else None
    if pool is None or url is None:
        yield make_db_url()
        return
    try:
        yield url
    finally:
        pool.give_back(url, drop_pg_schema)


@pytest.fixture(scope="session")
def _migrated_sqlite_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated once per test process (every registered line), closed: the ``store`` fixture copies it.

    Copying a file takes a fraction of a millisecond where migrating takes tens; each test still gets a file
    of its own.
    """
    path = tmp_path_factory.mktemp("migrated") / "oncebeat.db"
    with open_store(f"sqlite:///{path}") as template:
        template.migrate()
    # Closing the last connection checkpoints the WAL into the file and removes it: the file alone is the database.
    assert not Path(f"{path}-wal").exists(), "the migrated template kept a WAL file"
    return path


@pytest.fixture
def store(db_url: str, request: pytest.FixtureRequest) -> Iterator[Store]:
    """The store for ``db_url``, migrated; closed (and its PostgreSQL schema dropped) afterwards.

    A new SQLite file starts as a copy of a file migrated once per test process, and a PostgreSQL schema is
    often one a test of this process used, reset (``db_url``): ``migrate()`` then finds nothing to apply, and
    applies what a test registered since.
    """
    if db_url.startswith("sqlite:///"):
        path = Path(urlsplit(db_url).path[1:])
        if path.name != ":memory:" and not path.exists():
            shutil.copyfile(request.getfixturevalue("_migrated_sqlite_file"), path)
    opened = open_store(db_url)
    try:
        opened.migrate()
        yield opened
    finally:
        opened.close()
        drop_schema = getattr(opened, "drop_schema", None)
        if drop_schema is not None and db_url not in LENT:  # a reused schema is reset by ``db_url`` instead
            drop_schema()


@pytest.fixture
def sim_clock() -> SimulatedClock:
    """Simulated time starting at 2026-03-01 12:00 UTC; moves only when told to."""
    return SimulatedClock(SIM_START)


@pytest.fixture(autouse=True)
def _disarm_crashpoints() -> Iterator[None]:
    yield
    crashpoints.disarm()
