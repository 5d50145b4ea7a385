"""A marker password, planted in every shape a URL can carry it, never reaches a screen, a log, JSON or the database.

Shapes: the userinfo of a well-formed URL; libpq's ``?password=``, ``?sslpassword=``, ``?passfile=``;
SQLite ``?key=`` / ``?token=``; and passwords holding an unencoded ``/ @ ? # space " '`` (which
URL parsers and drivers cut at the wrong place and quote in pieces: ``failed to resolve host
'…@127.0.0.1'``, ``invalid port``, ``unexpected path``). Every command that takes ``--db`` runs
with every shape, ``SMTP_URL`` carrying the marker too; short commands run in-process through
``oncebeat.cli.main`` (stdout, stderr and every log record checked), the long-running ``clock``,
``worker``, ``run`` and ``web`` as real processes stopped with SIGTERM once they registered or
listen (or failed); the dashboard's pages are read too. Afterwards every row of every table
(the audit trail) is searched.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.error import URLError
from urllib.parse import quote
from urllib.request import urlopen

import psycopg
import pytest
from conftest import drop_pg_schema, pg_base_url, require_postgres

from oncebeat import cli
from oncebeat.mail import MailSink
from oncebeat.redact import forget_secrets, redact_url

MARK = "Zq7Mark"
PIECES = ("Zq7", "Mark")  # the halves of a password split by a special character
SPECIALS = ("/", "@", "?", "#", " ", '"', "'")
ROOT = Path(__file__).resolve().parents[2]

INVOICES = ("invoice_number,customer_email,customer_name,currency,amount_due,issued_on,due_on\n"
            "INV-1,ana@example.test,Ana,USD,10.00,2026-01-01,2026-01-31\n")

SHORT_COMMANDS: list[list[str]] = [
    ["migrate"], ["import", "invoices.csv"], ["trigger", "reminders"],
    ["backfill", "reminders", "--from", "2026-01-01T00:00:00+00:00", "--until", "2026-01-02T00:00:00+00:00"],
    ["schedules"], ["schedules", "pause", "reminders"], ["schedules", "resume", "reminders"], ["jobs"],
    ["preview"], ["preview", "--policy", "new.toml", "--days", "1"], ["aging"], ["effects", "list"], ["effects", "resolve", "reminder:1", "done"],
    ["check"], ["doctor"], ["doctor", "--json"], ["simulate", "--days", "1", "--dir", "sim"],
    ["tick"], ["occurrences", "rerun", "1"], ["schedules", "set", "reminders", "--cron", "0 9 * * *", "--tz", "UTC"],
    ["schedules", "retire", "reminders"], ["schedules", "revert", "reminders"], ["schedules", "describe", "reminders"],
    ["reminders", "retry", "--failed"],
    ["prune"], ["prune", "--older-than", "1d", "--apply"],
    ["holds"], ["hold", "--invoice", "INV-1", "--reason", "manual"], ["release", "--invoice", "INV-1"],
    ["queues"], ["queues", "pause", "mail"], ["queues", "resume", "mail"], ["queues", "limit", "mail", "2"], ["sync"],
    ["sources"], ["jobs", "delete", "--state", "discarded", "--older-than", "7d"],
    ["report", "dso"],
    ["policies"], ["policies", "--ladder", "default"], ["policies", "apply", "--ladder", "default", "--apply-to-open"],
    ["evidence", "INV-1"], ["evidence", "INV-1", "--json"],
]
LONG_COMMANDS = ("clock", "worker", "run", "web")


def test_the_fuzz_covers_every_command_that_takes_a_database_url() -> None:
    import click

    def walk(command: click.Command, path: tuple[str, ...]) -> Iterator[str]:
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                yield from walk(sub, (*path, name))
        if any(p.name == "database_url" for p in command.params):
            yield " ".join(path)

    covered = {" ".join(c[:2] if c[0] in ("schedules", "effects", "occurrences", "reminders", "queues", "policies", "jobs") and len(c) > 1 and not c[1].startswith("-")
                        else c[:1]) for c in SHORT_COMMANDS} | set(LONG_COMMANDS)
    assert set(walk(cli.cli, ())) <= covered


def _pg_url(userinfo: str, query: str = "") -> str:
    base = pg_base_url().replace("postgresql://postgres@", f"postgresql://{userinfo}@", 1)
    return base + (("&" if "?" in base else "?") + query if query else "")


def _db_shapes(tmp_path: Path, schema: str) -> list[tuple[str, str]]:
    """(shape id, DATABASE_URL); the well-formed ones reach the test server (trust auth ignores passwords)."""
    shapes = [
        ("userinfo", _pg_url(f"postgres:{MARK}", f"schema={schema}")),
        ("query-password", _pg_url("postgres", f"password={MARK}&schema={schema}")),
        ("query-sslpassword", _pg_url("postgres", f"sslpassword={MARK}&schema={schema}")),
        ("query-passfile", _pg_url("postgres", f"passfile=/nonexistent/{MARK}&schema={schema}")),
        ("sqlite-key-token", f"sqlite:///{tmp_path / 'db.sqlite'}?key={MARK}&token={MARK}"),
        ("encoded-specials", _pg_url("postgres:" + quote(f"{PIECES[0]}/@?# {PIECES[1]}", safe=""),
                                     f"schema={schema}")),
    ]
    for n, special in enumerate(SPECIALS):  # (a shape libpq still accepts works in the test's schema)
        shapes.append((f"raw-{n}-split", _pg_url(f"postgres:{PIECES[0]}{special}{PIECES[1]}", f"schema={schema}")))
        shapes.append((f"raw-{n}-after", _pg_url(f"postgres:ab{special}{MARK}", f"schema={schema}")))
    return shapes


def _smtp_shapes(port: int) -> list[str]:
    shapes = [f"smtp://bob:{MARK}@127.0.0.1:{port}", f"smtp+starttls://bob:{MARK}@127.0.0.1:{port}?timeout=5"]
    shapes += [f"smtp://bob:{PIECES[0]}{s}{PIECES[1]}@127.0.0.1:{port}" for s in SPECIALS]
    return shapes


def assert_no_secret(text: str, where: str) -> None:
    for secret in (MARK, *PIECES):
        assert secret not in text, f"{secret!r} shown in {where}:\n{text}"


@pytest.fixture
def place(tmp_path: Path) -> Iterator[dict[str, Any]]:
    require_postgres()
    schema = f"secrets_{os.getpid()}_{time.monotonic_ns() % 10**9}"
    (tmp_path / "invoices.csv").write_text(INVOICES, encoding="utf-8")
    (tmp_path / "new.toml").write_text("[reminders]\nstages = [3, 10, 30]\n", encoding="utf-8")
    with MailSink(tmp_path / "maildir") as sink:
        yield {"schema": schema, "dbs": _db_shapes(tmp_path, schema), "smtps": _smtp_shapes(sink.port)}
    drop_pg_schema(pg_base_url() + ("&" if "?" in pg_base_url() else "?") + f"schema={schema}")


def _run_in_process(args: list[str], env: dict[str, str], cwd: Path, capsys: pytest.CaptureFixture[str],
                    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> str:
    forget_secrets()  # each command is its own process in real life: no secret learned by an earlier one
    monkeypatch.chdir(cwd)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", ["oncebeat", *args])
    caplog.clear()
    try:
        cli.main()
    except SystemExit:
        pass
    out, err = capsys.readouterr()
    return f"--- stdout\n{out}\n--- stderr\n{err}\n--- log\n{caplog.text}"


def test_no_short_command_shows_a_password_planted_in_any_url_shape(
        place: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    smtps = place["smtps"]
    n = 0
    for shape, db in place["dbs"]:
        for command in SHORT_COMMANDS:
            smtp = smtps[n % len(smtps)]
            n += 1
            via_env = n % 2 == 0  # half of the runs take the database from DATABASE_URL, half from --db
            args = command if via_env else [*command, "--db", db]
            env = {"SMTP_URL": smtp, **({"DATABASE_URL": db} if via_env else {})}
            if not via_env:
                monkeypatch.delenv("DATABASE_URL", raising=False)
            text = _run_in_process(args, env, tmp_path, capsys, caplog, monkeypatch)
            assert_no_secret(text, f"`oncebeat {' '.join(command)}` with {shape} and SMTP_URL {redact_url(smtp)}")
    assert_no_secret(_database_text(place["schema"], tmp_path / "db.sqlite"), "the database (audit trail)")


def _ready_or_exited(proc: subprocess.Popen[str], ready: Any, deadline: float) -> None:
    """Wait until ``proc`` is ready (registered, listening) or exits (it failed)."""
    while proc.poll() is None and time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.2)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def _pages(port: int) -> str:
    texts = []
    for path in ("/", "/schedules", "/jobs", "/effects", "/doctor", "/metrics"):
        try:
            with urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as response:
                texts.append(response.read().decode("utf-8", "replace"))
        except URLError as exc:  # an error page is checked too
            body = getattr(exc, "read", lambda: b"")()
            texts.append(f"{exc} {body.decode('utf-8', 'replace')}")
    return "\n".join(texts)


def _free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as s:
        return int(s.getsockname()[1])


def _registered(db: str, pid: int) -> bool:
    try:
        if db.startswith("sqlite:"):
            path = db.removeprefix("sqlite:///").partition("?")[0]
            with contextlib.closing(sqlite3.connect(path)) as conn:  # sqlite3's own `with` does not close
                return bool(conn.execute("SELECT 1 FROM processes WHERE pid = ?", (pid,)).fetchall())
        schema = db.rpartition("schema=")[2]
        with psycopg.connect(pg_base_url(), connect_timeout=5) as conn:
            return bool(conn.execute(f'SELECT 1 FROM "{schema}".processes WHERE pid = %s',
                                     (pid,)).fetchall())
    except (sqlite3.Error, psycopg.Error):
        return False  # not migrated yet


def test_clock_worker_run_and_web_never_show_a_planted_password(place: dict[str, Any], tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.pop("DATABASE_URL", None)
    smtps = place["smtps"]
    runs = []
    for i, (shape, db) in enumerate(place["dbs"]):
        reachable = i < 5  # the well-formed shapes: every long-running command; the others fail at start
        for command in LONG_COMMANDS if reachable else (LONG_COMMANDS[i % len(LONG_COMMANDS)],):
            runs.append((shape, db, command, smtps[len(runs) % len(smtps)]))
    runs.append(("userinfo", place["dbs"][0][1], "worker", smtps[0]))  # plain smtp://user:pass@: warned once
    with ThreadPoolExecutor(max_workers=4) as pool:  # the processes mostly wait: run a few side by side
        results = list(pool.map(lambda run: _run_long(*run, cwd=tmp_path, env=env), runs))
    for (shape, db, command, smtp), (out, err, pages) in zip(runs, results):
        assert_no_secret(f"{out}\n{err}\n{pages}",
                         f"`oncebeat {command}` with {shape} and SMTP_URL {redact_url(smtp)}")
    warned = results[-1][1]
    assert warned.count("logs in without TLS") == 1, warned
    assert_no_secret(_database_text(place["schema"], tmp_path / "db.sqlite"), "the database (audit trail)")


def _run_long(shape: str, db: str, command: str, smtp: str, *, cwd: Path,
              env: dict[str, str]) -> tuple[str, str, str]:
    """Start ``oncebeat COMMAND --db DB``, wait until it is ready (or failed), read the dashboard, SIGTERM it."""
    port = _free_port()
    extra = {"web": ["--port", str(port)], "worker": ["-c", "1"], "run": ["-c", "1"]}.get(command, [])
    proc = subprocess.Popen([sys.executable, "-m", "oncebeat.cli", command, "--db", db, *extra], cwd=cwd,
                            env={**env, "SMTP_URL": smtp}, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    pages = ""
    try:
        ready = (lambda: _listening(port)) if command == "web" else (lambda: _registered(db, proc.pid))
        _ready_or_exited(proc, ready, time.monotonic() + 60)
        if command == "web" and proc.poll() is None:
            pages = _pages(port)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return out, err, pages


def _database_text(schema: str, sqlite_path: Path) -> str:
    """Every row of every table, as text: the schema's on PostgreSQL and the SQLite file's."""
    parts = []
    with psycopg.connect(pg_base_url(), connect_timeout=5) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,))]
        for table in tables:
            parts += [str(r) for r in conn.execute(f'SELECT t::text FROM "{schema}"."{table}" t')]
    if sqlite_path.exists():
        with contextlib.closing(sqlite3.connect(sqlite_path)) as conn:
            for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
                parts += [str(r) for r in conn.execute(f'SELECT * FROM "{table}"')]
    assert len(parts) > 10, "the commands wrote to the databases"
    return "\n".join(parts)
