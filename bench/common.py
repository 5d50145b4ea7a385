"""Shared plumbing: settings, fresh databases, worker child processes, statistics, tables, JSON.

A *child* is ``python -m bench.proc ROLE SPEC`` (see :mod:`bench.proc`). It
prints one JSON line ``{"event": "ready", …}`` when it has imported
everything and opened its connections, waits for ``go`` on stdin, works, and
stops on ``stop`` (or by itself for burst workers); its last line is
``{"event": "done", …}`` with its CPU time and peak RSS. So worker start-up is
never inside a measured interval, and several children start work together.
"""

from __future__ import annotations

import json
import os
import platform
import secrets
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
PG_BASE = os.environ.get("BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")


# --------------------------------------------------------------------------- settings


@dataclass(kw_only=True)
class Settings:
    reps: int = 3
    quick: bool = False
    jobs: int = 20_000  # W1 jobs per run for oncebeat and the raw loops
    peer_jobs: int = 2_000  # W1 jobs per run for Procrastinate, Celery and RQ (they drain at ~0.1–1.5k/s here)
    scan_sizes: tuple[int, ...] = (10_000, 100_000, 1_000_000)
    scan_collapse: tuple[str, ...] = ("highest", "next")  # W2: the policy's collapse modes to scan with
    e2e_reminders: int = 1_000
    e2e_sink: str = "discard"  # W3 SMTP sink per worker: "discard" (aiosmtpd, keeps nothing) or "maildir"
    e2e_workers: tuple[int, ...] = (1, 2)
    e2e_concurrency: tuple[int, ...] = (1,)  # W3 handler slots per worker (one SMTP connection each)
    clock_schedules: int = 10_000
    clock_seconds: float = 120.0
    clock_modes: tuple[str, ...] = ("burst", "spread")
    growth_sizes: tuple[int, ...] = (10_000, 100_000)
    backends: tuple[str, ...] = ("postgres", "sqlite")
    profile: bool = False
    only: tuple[str, ...] = ()  # W1 systems filter (debugging)
    tmp: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="oncebeat-bench-")))

    @classmethod
    def make(cls, *, reps: int | None, quick: bool, **over: Any) -> Settings:
        s = cls()
        if quick:
            s = cls(tmp=s.tmp, reps=1, quick=True, jobs=2_000, peer_jobs=500, scan_sizes=(10_000,), e2e_reminders=300,
                    clock_schedules=1_000, clock_seconds=65.0, clock_modes=("burst",), growth_sizes=(2_000, 10_000))
        if reps is not None:
            s.reps = reps
        for k, v in over.items():
            if v is not None:
                setattr(s, k, v)
        return s


def log(msg: str) -> None:
    print(f"[{datetime.now().strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- databases


def _with_query(url: str, **extra: str) -> str:
    parts = urlsplit(url)
    q = [(k, v) for k, v in parse_qsl(parts.query) if k not in extra] + list(extra.items())
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(q), parts.fragment))


def libpq_url(url: str) -> str:
    """``url`` without oncebeat's own options (``schema``, ``pool_size``)."""
    parts = urlsplit(url)
    q = [(k, v) for k, v in parse_qsl(parts.query) if k not in ("schema", "pool_size")]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(q), parts.fragment))


def new_schema(tag: str) -> str:
    return f"bench_{tag}_{secrets.token_hex(3)}"


def pg_url(schema: str) -> str:
    return _with_query(PG_BASE, schema=schema)


def pg_connect(schema: str | None = None, **kw: Any) -> Any:
    import psycopg

    options = {"options": f"-c search_path={schema}"} if schema else {}
    return psycopg.connect(libpq_url(PG_BASE), autocommit=True, **options, **kw)


def create_schema(schema: str) -> None:
    with pg_connect() as c:
        c.execute(f'CREATE SCHEMA "{schema}"')


def drop_schema(schema: str) -> None:
    with pg_connect() as c:
        c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def pg_backend_pids(store: Any) -> list[int]:
    """Process ids of the PostgreSQL backends serving this process's connections (found by client port).

    For :func:`pg_backend_cpu`; asks the server once (one short transaction), so call it outside what is timed.
    """
    import psutil

    ports = [c.laddr.port for c in psutil.Process().net_connections(kind="tcp") if c.raddr and c.raddr.port == 5432]
    with store.transaction() as tx:
        rows = tx.execute("SELECT pid FROM pg_stat_activity WHERE client_port = ANY(%s)", (ports,))
    return sorted(int(r["pid"]) for r in rows)


def pg_backend_cpu(pids: list[int]) -> float:
    """CPU seconds (user + system, 10 ms ticks) the backends ``pids`` have used so far (``/proc/PID/stat``; a
    backend gone since is counted as 0). The server must run on this machine."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


class FreshDb:
    """A fresh, migrated oncebeat database: a PostgreSQL schema (dropped on exit) or a SQLite file."""

    def __init__(self, backend: str, tag: str, settings: Settings, *, migrate: bool = True) -> None:
        self.backend = backend
        self.schema: str | None = None
        self.path: Path | None = None
        if backend == "postgres":
            self.schema = new_schema(tag)
            self.url = pg_url(self.schema)
        else:
            d = settings.tmp / f"{tag}-{secrets.token_hex(3)}"
            d.mkdir(parents=True)
            self.path = d / "oncebeat.db"
            self.url = f"sqlite:///{self.path}"
        self._migrate = migrate

    def __enter__(self) -> FreshDb:
        if self._migrate:
            import oncebeat.reminders  # noqa: F401  (registers the reminders SQL line: W2/W3 need its tables)
            from oncebeat.store import open_store

            with open_store(self.url) as st:
                st.migrate()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.schema:
            drop_schema(self.schema)
        if self.path:
            shutil.rmtree(self.path.parent, ignore_errors=True)

    # Read-only helpers that never take SQLite's write lock (the store's transactions do).
    def query(self, sql_pg: str, sql_sqlite: str | None = None, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        if self.backend == "postgres":
            with pg_connect(self.schema) as c:
                return list(c.execute(sql_pg, params).fetchall())
        conn = sqlite3.connect(str(self.path), timeout=30)
        try:
            return list(conn.execute(sql_sqlite or sql_pg, params).fetchall())
        finally:
            conn.close()

    def jobs_unfinished(self) -> int:
        q = ("SELECT (SELECT count(*) FROM jobs WHERE state IN ('available','scheduled','retryable')) "
             "+ (SELECT count(*) FROM jobs WHERE state = 'running')")
        return int(self.query(q)[0][0])

    def job_span(self, where: str = "TRUE") -> tuple[int, float]:
        """(completed jobs, seconds from the first claim to the last completion) from the job rows."""
        if self.backend == "postgres":
            n, secs = self.query("SELECT count(*), EXTRACT(EPOCH FROM max(finished_at) - min(started_at)) "
                                 f"FROM jobs WHERE state = 'completed' AND {where}")[0]
            return int(n), float(secs or 0.0)
        n, a, b = self.query("SELECT count(*), min(started_at), max(finished_at) FROM jobs "
                             f"WHERE state = 'completed' AND {where.replace('TRUE', '1')}")[0]
        if not n:
            return 0, 0.0
        return int(n), (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds()


# --------------------------------------------------------------------------- children


class Child:
    """One ``python -m bench.proc ROLE SPEC`` process (see module docstring)."""

    def __init__(self, role: str, spec: dict[str, Any], *, env: dict[str, str] | None = None,
                 logdir: Path | None = None, argv: list[str] | None = None) -> None:
        self.role = role
        logdir = logdir or Path(tempfile.gettempdir())
        logdir.mkdir(parents=True, exist_ok=True)
        self.log_path = logdir / f"{role}-{secrets.token_hex(3)}.log"
        self._log = self.log_path.open("w")
        cmd = argv or [sys.executable, "-m", "bench.proc", role, json.dumps(spec)]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._log, text=True, bufsize=1, env={**os.environ, **(env or {})})
        self.ready_info: dict[str, Any] = {}
        self.done_info: dict[str, Any] = {}

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _line(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                self.proc.wait(timeout=10)
                raise RuntimeError(f"{self.role} child exited ({self.proc.returncode}); log {self.log_path}:\n"
                                   + self.log_path.read_text()[-3000:])
            line = line.strip()
            if line.startswith("{"):
                return dict(json.loads(line))

    def wait_ready(self) -> dict[str, Any]:
        info = self._line()
        if info.get("event") != "ready":
            raise RuntimeError(f"{self.role}: expected ready, got {info}")
        self.ready_info = info
        return info

    def send(self, word: str) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(word + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass

    def go(self) -> None:
        self.send("go")

    def stop(self) -> None:
        self.send("stop")

    def finish(self, timeout: float = 120.0) -> dict[str, Any]:
        info = self._line()
        while info.get("event") != "done":
            info = self._line()
        self.done_info = info
        self.proc.wait(timeout=timeout)
        self._log.close()
        return info

    def running(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def start_children(role: str, specs: Sequence[dict[str, Any]], *, env: dict[str, str] | None = None,
                   logdir: Path | None = None) -> list[Child]:
    children = [Child(role, s, env=env, logdir=logdir) for s in specs]
    try:
        for c in children:
            c.wait_ready()
    except BaseException:
        for c in children:
            c.kill()
        raise
    return children


def wait_until(cond: Callable[[], bool], *, timeout: float, interval: float = 0.02,
               children: Iterable[Child] = (), what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    kids = list(children)
    while not cond():
        for c in kids:
            if not c.running() and c.proc.returncode not in (0, None):
                raise RuntimeError(f"{c.role} child died ({c.proc.returncode}); log {c.log_path}:\n"
                                   + c.log_path.read_text()[-3000:])
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def probe_dir(settings: Settings) -> Path:
    d = settings.tmp / f"probe-{secrets.token_hex(4)}"
    d.mkdir(parents=True)
    return d


# --------------------------------------------------------------------------- statistics and output


def med(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def summary(values: Sequence[float]) -> dict[str, Any]:
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return {"median": None, "min": None, "max": None, "values": []}
    return {"median": med(vals), "min": min(vals), "max": max(vals), "values": vals}


def fmt_num(x: float | None, digits: int | None = None) -> str:
    if x is None or x != x:
        return "–"
    if digits is not None:
        return f"{x:,.{digits}f}"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:,.1f}"
    return f"{x:,.2f}"


def fmt_stat(values: Sequence[float] | None, digits: int | None = None) -> str:
    """``median [min–max]`` (just the value for one repetition)."""
    if not values:
        return "–"
    s = summary(values)
    if len(s["values"]) == 1:
        return fmt_num(s["median"], digits)
    return f"{fmt_num(s['median'], digits)} [{fmt_num(s['min'], digits)}–{fmt_num(s['max'], digits)}]"


def ratios(values: Sequence[float | None], baseline: Sequence[float | None]) -> list[float]:
    """Per-repetition ratios (value of rep i / baseline of rep i)."""
    return [v / b for v, b in zip(values, baseline) if v is not None and b]


def md_table(header: Sequence[str], rows: Iterable[Sequence[Any]], align: str | None = None) -> str:
    align = align or ("l" + "r" * (len(header) - 1))
    sep = ["---:" if a == "r" else "---" for a in align]
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["memory_gb"] = round(int(line.split()[1]) / 1024 / 1024, 1)
        info["load_avg"] = os.getloadavg()
    except OSError:
        pass
    try:
        with pg_connect() as c:
            info["postgres"] = c.execute("SELECT version()").fetchone()[0]
            info["postgres_settings"] = {
                k: c.execute(f"SHOW {k}").fetchone()[0]
                for k in ("fsync", "synchronous_commit", "wal_sync_method", "shared_buffers", "max_connections")
            }
    except Exception as exc:  # noqa: BLE001 - recorded, not fatal
        info["postgres"] = f"unreachable: {exc}"
    info["sqlite"] = sqlite3.sqlite_version
    try:
        import redis

        info["redis"] = redis.Redis.from_url(REDIS_URL).info("server").get("redis_version")
    except Exception as exc:  # noqa: BLE001
        info["redis"] = f"unreachable: {exc}"
    info["packages"] = {d: _version(d) for d in ("oncebeat", "psycopg", "psycopg-pool", "procrastinate", "pgqueuer",
                                                 "asyncpg", "dbos", "celery", "kombu", "redis", "rq", "psutil",
                                                 "pyinstrument", "aiosmtpd", "Jinja2", "babel", "cronsim")}
    try:
        info["oncebeat_commit"] = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                                 capture_output=True, text=True, check=False).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "src"],
                               capture_output=True, text=True, check=False).stdout.strip()
        info["oncebeat_src_dirty"] = bool(dirty)
    except OSError:
        pass
    return info


def engine_version() -> dict[str, Any]:
    """The oncebeat code being measured: HEAD, files of ``src/`` changed since, and a hash of ``src/oncebeat``.

    Other people commit while a long run goes on; each workload records this at its start and end.
    """
    import hashlib

    h = hashlib.sha1()
    for p in sorted((ROOT / "src" / "oncebeat").rglob("*")):
        if p.is_file() and p.suffix in (".py", ".sql", ".j2", ".txt", ".html"):
            h.update(str(p.relative_to(ROOT)).encode())
            h.update(p.read_bytes())
    git = ["git", "-C", str(ROOT)]
    head = subprocess.run([*git, "log", "-1", "--format=%h %cI %s"], capture_output=True, text=True,
                          check=False).stdout.strip()
    dirty = subprocess.run([*git, "status", "--porcelain", "src"], capture_output=True, text=True,
                           check=False).stdout.split("\n")
    return {"head": head, "src_changed": [d[3:] for d in dirty if d.strip()], "src_hash": h.hexdigest()[:12]}


def write_json(name: str, payload: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    path = RESULTS / f"{stamp}-{name}.json"
    path.write_text(json.dumps(payload, indent=2, default=str))
    return path


def fsync_probe(seconds: int = 2) -> dict[str, Any]:
    """pg_test_fsync's fdatasync rate (ops/s) on the temp dir: the ceiling for one-commit-per-job queues."""
    exe = shutil.which("pg_test_fsync") or next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_test_fsync"))), None)
    if not exe:
        return {}
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run([str(exe), "-s", str(seconds), "-f", f"{d}/fsync.test"], capture_output=True,
                             text=True, check=False).stdout
    res: dict[str, Any] = {}
    section = None
    for line in out.splitlines():
        if "Compare file sync methods using one" in line:
            section = "one"
        elif "Compare file sync methods using two" in line:
            section = None
        if section == "one" and ("fdatasync" in line and "open_datasync" not in line) and "ops/sec" in line:
            res["fdatasync_ops_per_s"] = float(line.split()[1].replace(",", ""))
    return res
