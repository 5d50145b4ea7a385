"""Reading the team's own database ([source] kind = "sql"): a Rails-shaped schema on a real PostgreSQL and on SQLite.

Each test runs on both oncebeat backends (``store``) and, where it matters, on both kinds of team database.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from conftest import require_postgres
from reminder_harness import FIRST_FIRE, Harness, maildir_sink

from oncebeat.cli import cli
from oncebeat.errors import ConfigError
from oncebeat.reminders.policy import Policy, policy_from_dict
from oncebeat.reminders.service import ReminderService
from oncebeat.reminders.sources import database as source_db
from oncebeat.reminders.sources.database import SourceRejected, SourceUnavailable, source_config
from oncebeat.reminders.syncing import last_good_read, recent_reads, sync_source
from oncebeat.reminders.tasks import SYNC_SCHEDULE_KEY, build_app
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock

SRC = Path(__file__).resolve().parents[2] / "src"
PASSWORD = "Tm-s3cret-pw9"
NOW = datetime(2026, 3, 10, 12, tzinfo=UTC)

RAILS_SCHEMA = """
CREATE TABLE customers (id INTEGER PRIMARY KEY, email TEXT NOT NULL, name TEXT, locale TEXT, time_zone TEXT);
CREATE TABLE invoices (id INTEGER PRIMARY KEY, number TEXT NOT NULL, customer_id INTEGER NOT NULL REFERENCES customers,
                       amount_cents BIGINT NOT NULL, currency TEXT NOT NULL, issued_on DATE NOT NULL,
                       due_date DATE NOT NULL, status TEXT NOT NULL DEFAULT 'open',
                       overdue_reminder_sent BOOLEAN NOT NULL DEFAULT FALSE, paid_at {ts});
CREATE TABLE payments (id INTEGER PRIMARY KEY, invoice_id INTEGER NOT NULL REFERENCES invoices, paid_on DATE NOT NULL);
"""


@dataclass
class TeamDb:
    """The team's Rails-shaped database: ``url`` as oncebeat reads it, ``run`` writes as the app does."""

    kind: str
    url: str
    connect: Any

    def run(self, *statements: tuple[str, tuple[Any, ...]]) -> None:
        conn = self.connect()
        try:
            for sql, params in statements:
                conn.execute(sql if self.kind == "sqlite" else sql.replace("?", "%s"), params)
            conn.commit()
        finally:
            conn.close()

    @property
    def paid_on(self) -> str:
        return "date(i.paid_at)" if self.kind == "sqlite" else "i.paid_at::date"


@pytest.fixture(params=["postgres", "sqlite"])
def team(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TeamDb]:
    if request.param == "sqlite":
        path = tmp_path / "rails.sqlite3"
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA journal_mode=WAL")  # Rails 7.1's default: readers and the writer side by side
        conn.executescript(RAILS_SCHEMA.format(ts="TEXT"))
        conn.close()
        yield TeamDb(kind="sqlite", url=f"sqlite:///{path}", connect=lambda: sqlite3.connect(path))
        return
    base = require_postgres()
    schema = f"team_{secrets.token_hex(4)}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"SET search_path = {schema}")
        for statement in RAILS_SCHEMA.format(ts="TIMESTAMPTZ").split(";"):
            if statement.strip():
                conn.execute(statement)
    host = base.split("@", 1)[1].split("?", 1)[0]  # 127.0.0.1:5432/test
    # trust auth ignores the password; it is there to prove it never reaches a screen or a log
    url = f"postgresql://postgres:{PASSWORD}@{host}?options=-csearch_path%3D{schema}"

    def connect() -> Any:
        conn = psycopg.connect(base)
        conn.execute(f"SET search_path = {schema}")
        return conn

    yield TeamDb(kind="postgres", url=url, connect=connect)
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


def seed(team: TeamDb) -> None:
    team.run(("INSERT INTO customers VALUES (1, 'Ana@Example.com', 'Ana Lima', 'pt_BR', 'America/Sao_Paulo')", ()),
             ("INSERT INTO customers VALUES (2, 'bo@example.com', 'Bo Chen', NULL, NULL)", ()),
             ("INSERT INTO invoices (id, number, customer_id, amount_cents, currency, issued_on, due_date, status) "
              "VALUES (1, 'INV-1', 1, 123450, 'USD', '2026-01-01', '2026-02-01', 'open')", ()),
             ("INSERT INTO invoices (id, number, customer_id, amount_cents, currency, issued_on, due_date, status) "
              "VALUES (2, 'INV-2', 1, 1200, 'JPY', '2026-01-05', '2026-02-05', 'open')", ()),
             ("INSERT INTO invoices (id, number, customer_id, amount_cents, currency, issued_on, due_date, status) "
              "VALUES (3, 'INV-3', 2, 849150, 'HUF', '2026-01-10', '2026-02-10', 'open')", ()),
             ("INSERT INTO payments VALUES (1, 2, '2026-02-20')", ()))


def config(team: TeamDb, tmp_path: Path, *, url: str = "$TEAM_DATABASE_URL", extra: str = "") -> Path:
    path = tmp_path / "oncebeat.toml"
    path.write_text(f'''[source]
kind = "sql"
url = "{url}"
invoices = """
  SELECT i.number AS invoice_number, c.email AS customer_email, c.name AS customer_name,
         c.locale AS customer_locale, c.time_zone AS customer_tz, i.currency,
         i.amount_cents AS amount_due_minor, i.issued_on, i.due_date AS due_on,
         i.status, {team.paid_on} AS paid_on
  FROM invoices i JOIN customers c ON c.id = i.customer_id"""
payments = """
  SELECT i.number AS invoice_number, MAX(p.paid_on) AS paid_on
  FROM payments p JOIN invoices i ON i.id = p.invoice_id GROUP BY i.number"""
{extra}''', encoding="utf-8")
    return path


def service_for(store: Store, path: Path) -> ReminderService:
    from oncebeat.reminders.policy import load_policy

    return ReminderService(store, load_policy(path), clock=SimulatedClock(NOW))


def invoice(store: Store, number: str) -> dict[str, Any]:
    return store.read("invoice_by_number", number=number)[0]


@pytest.fixture
def team_env(team: TeamDb, monkeypatch: pytest.MonkeyPatch) -> TeamDb:
    monkeypatch.setenv("TEAM_DATABASE_URL", team.url)
    return team


def test_oncebeat_sync_imports_a_rails_shaped_database_and_records_the_watermark(
        store: Store, team_env: TeamDb, tmp_path: Path) -> None:
    seed(team_env)
    path = config(team_env, tmp_path)
    result = CliRunner().invoke(cli, ["sync", "--db", store.url, "--config", str(path)])
    assert result.exit_code == 0, result.output
    assert "rows: 4" in result.output and "new: 3" in result.output and "marked_paid: 1" in result.output
    assert PASSWORD not in result.output
    ana = invoice(store, "INV-1")
    assert (ana["email"], ana["name"], ana["locale"], ana["customer_tz"]) == \
        ("ana@example.com", "Ana Lima", "pt_BR", "America/Sao_Paulo")
    assert (ana["amount_due"], ana["currency"], ana["due_on"], ana["status"]) == (123450, "USD", date(2026, 2, 1),
                                                                                  "open")
    assert (invoice(store, "INV-2")["status"], invoice(store, "INV-2")["amount_due"]) == ("paid", 1200)
    assert invoice(store, "INV-3")["amount_due"] == 849150  # HUF 8491.50: ISO 4217 keeps the filler
    assert invoice(store, "INV-3")["customer_tz"] in ("", None)  # NULL time_zone: none of its own
    good = last_good_read(store, "$TEAM_DATABASE_URL")
    assert good is not None and good["rows"] == 4 and good["outcome"] == "ok"
    listing = CliRunner().invoke(cli, ["sources", "--db", store.url])
    assert listing.exit_code == 0, listing.output
    assert f"$TEAM_DATABASE_URL: last successful read {good['started_at'].isoformat()}" in listing.output
    assert " ok             4 rows  $TEAM_DATABASE_URL" in listing.output
    as_json = CliRunner().invoke(cli, ["sources", "--db", store.url, "--json"])
    data = json.loads(as_json.output)
    assert [(r["outcome"], r["rows"]) for r in data["reads"]] == [("ok", 4)]
    assert data["last_good"]["$TEAM_DATABASE_URL"]["rows"] == 4


def test_a_paid_invoice_read_stale_as_open_is_not_reopened(store: Store, team_env: TeamDb, tmp_path: Path) -> None:
    seed(team_env)
    service = service_for(store, config(team_env, tmp_path))
    assert service.policy.source is not None
    sync_source(service, service.policy.source)
    assert invoice(store, "INV-2")["status"] == "paid"
    # A stale read (a lagging replica, a restored backup): the payment is gone and the invoice says open.
    team_env.run(("DELETE FROM payments", ()), ("UPDATE invoices SET amount_cents = 1300 WHERE id = 2", ()))
    result = sync_source(service, service.policy.source)
    assert result["kept paid"] == 1
    assert (invoice(store, "INV-2")["status"], invoice(store, "INV-2")["amount_due"]) == ("paid", 1300)


def test_a_bad_row_names_query_row_and_column_and_nothing_is_applied(
        store: Store, team_env: TeamDb, tmp_path: Path) -> None:
    seed(team_env)
    team_env.run(("UPDATE invoices SET due_date = '2025-12-01' WHERE id = 3", ()),
                 ("UPDATE invoices SET currency = 'XQQ' WHERE id = 1", ()))
    path = config(team_env, tmp_path)
    result = CliRunner().invoke(cli, ["sync", "--db", store.url, "--config", str(path)])
    assert result.exit_code == 2, result.output
    assert "source query invoices, row invoice_number='INV-3', column due_on: '2025-12-01' is before issued_on " \
           "2026-01-10" in result.output
    assert "source query invoices, row invoice_number='INV-1', column currency: 'XQQ'" in result.output
    assert "nothing was applied" in result.output
    assert store.read("list_invoices") == []
    reads = recent_reads(store)
    assert [(r["outcome"], r["rows"]) for r in reads] == [("rejected", 4)]
    assert last_good_read(store, "$TEAM_DATABASE_URL") is None


def test_a_query_without_a_required_column_says_which_and_how(store: Store, team_env: TeamDb,
                                                              tmp_path: Path) -> None:
    seed(team_env)
    path = tmp_path / "oncebeat.toml"
    path.write_text('[source]\nurl = "$TEAM_DATABASE_URL"\ninvoices = "SELECT number AS invoice_number, currency '
                    'FROM invoices"\n', encoding="utf-8")
    service = service_for(store, path)
    assert service.policy.source is not None
    with pytest.raises(SourceRejected) as caught:
        sync_source(service, service.policy.source)
    shown = [str(p) for p in caught.value.problems]
    assert "source query invoices, column due_on: the query has no column due_on; name it in the SELECT, e.g. … " \
           "AS due_on" in shown


def test_a_read_is_one_snapshot_while_the_app_writes(store: Store, team_env: TeamDb, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The app commits a new invoice and its payment between oncebeat's invoices and payments queries: a torn read
    would see the payment without its invoice (and refuse the read); the snapshot sees neither."""
    seed(team_env)
    service = service_for(store, config(team_env, tmp_path))
    assert service.policy.source is not None
    real_rows = source_db._Reader.rows

    def app_writes() -> None:
        team_env.run(("INSERT INTO invoices (id, number, customer_id, amount_cents, currency, issued_on, due_date, "
                      "status) VALUES (4, 'INV-4', 2, 500, 'EUR', '2026-02-01', '2026-03-01', 'open')", ()),
                     ("INSERT INTO payments VALUES (2, 4, '2026-03-02')", ()))

    def rows_with_a_concurrent_writer(self: Any, name: str, sql: str) -> Any:
        if name == "payments":
            writer = threading.Thread(target=app_writes)  # another connection, committing while the read is open
            writer.start()
            writer.join(timeout=30)
            assert not writer.is_alive()
        return real_rows(self, name, sql)

    monkeypatch.setattr(source_db._Reader, "rows", rows_with_a_concurrent_writer)
    result = sync_source(service, service.policy.source)
    assert (result["rows"], result["invoices"], result["payments"]) == (4, 3, 1)
    assert store.read("invoice_by_number", number="INV-4") == []
    monkeypatch.setattr(source_db._Reader, "rows", real_rows)
    again = sync_source(service, service.policy.source)  # the next read sees the whole write
    assert (again["rows"], again["new"]) == (6, 1)
    assert invoice(store, "INV-4")["status"] == "paid"


def test_a_read_under_a_busy_writer_applies_only_whole_transactions(store: Store, team_env: TeamDb,
                                                                    tmp_path: Path) -> None:
    """A writer thread keeps adding (invoice, payment) pairs in one transaction each while oncebeat reads in
    chunks: every read is accepted (no payment ever arrives without its invoice)."""
    seed(team_env)
    service = service_for(store, config(team_env, tmp_path))
    assert service.policy.source is not None
    stop = threading.Event()
    written = []

    def writer() -> None:
        n = 10
        while not stop.is_set() and n < 3000:
            team_env.run(("INSERT INTO invoices (id, number, customer_id, amount_cents, currency, issued_on, "
                          "due_date, status) VALUES (?, ?, 1, 100, 'USD', '2026-01-01', '2026-02-01', 'open')",
                          (n, f"W-{n}")), ("INSERT INTO payments VALUES (?, ?, '2026-02-02')", (n, n)))
            written.append(n)
            n += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(5):
            sync_source(service, service.policy.source)  # raises SourceRejected on a torn read
    finally:
        stop.set()
        thread.join(timeout=60)
    assert written, "the writer never ran"
    assert all(r["outcome"] == "ok" for r in recent_reads(store))


def oncebeat(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **env, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-m", "oncebeat.cli", *args], cwd=cwd, env=full, text=True,
                          capture_output=True, timeout=300)


def test_a_source_that_is_down_records_a_failed_read_without_the_password_and_the_scan_still_runs(
        store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    base = require_postgres()
    host = base.split("@", 1)[1].split(":", 1)[0]
    down = f"postgresql://postgres:{PASSWORD}@{host}:1/test"  # nothing listens on port 1
    team = TeamDb(kind="postgres", url=down, connect=None)
    path = config(team, tmp_path)
    done = oncebeat("--log-level", "info", "sync", "--db", store.url, "--config", str(path), cwd=tmp_path,
                    env={"TEAM_DATABASE_URL": down})
    assert done.returncode == 2, done.stderr
    assert "cannot connect to the team's database postgresql://postgres:***@" in done.stderr
    assert "nothing was applied" in done.stderr
    assert PASSWORD not in done.stdout + done.stderr
    failed = recent_reads(store)
    assert [r["outcome"] for r in failed] == ["failed"] and PASSWORD not in (failed[0]["error"] or "")

    # The scan reads the source first; with it down the scan logs, records and goes on with what it has.
    caplog.set_level(logging.INFO, logger="oncebeat")
    os.environ["TEAM_DATABASE_URL"] = down
    try:
        policy = policy_from_dict({"source": {"url": "$TEAM_DATABASE_URL", "invoices": "invoices_view"}})
        h = Harness(store=store, sink=maildir_sink(tmp_path), clock=SimulatedClock(FIRST_FIRE - timedelta(hours=1)),
                    policy=policy)
        from reminder_harness import invoice as an_invoice

        h.add_invoices(an_invoice("INV-KNOWN", date(2026, 3, 1)))
        h.tick_to(FIRST_FIRE)
        h.new_worker().drain()
        assert [(r["number"], r["state"]) for r in h.reminders()] == [("INV-KNOWN", "sent")]
        h.close()
    finally:
        del os.environ["TEAM_DATABASE_URL"]
    assert [r["outcome"] for r in recent_reads(store)] == ["failed", "failed"]
    assert any("not read: cannot connect" in r.getMessage() for r in caplog.records)
    assert PASSWORD not in caplog.text


def test_a_missing_sqlite_team_database_is_a_failed_read(store: Store, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.sqlite3"
    cfg = source_config({"url": f"sqlite:///{missing}", "invoices": "invoices"}, source="t")
    service = ReminderService(store, Policy(source=cfg), clock=SimulatedClock(NOW))
    with pytest.raises(SourceUnavailable, match="does not exist"):
        sync_source(service, cfg)
    assert [r["outcome"] for r in recent_reads(store)] == ["failed"]


def test_the_source_section_refuses_a_literal_password_and_bad_queries() -> None:
    with pytest.raises(ConfigError) as caught:
        policy_from_dict({"source": {"url": f"postgresql://app:{PASSWORD}@db.example.test/app",
                                     "invoices": "DELETE FROM invoices", "every": "5s", "colour": 1}},
                         "oncebeat.toml")
    text = str(caught.value)
    assert PASSWORD not in text
    assert "[source] url = 'postgresql://app:***@db.example.test/app' holds a password" in text
    assert 'write url = "$TEAM_DATABASE_URL"' in text
    assert "[source] invoices = 'DELETE FROM invoices' is neither one SELECT" in text
    assert "[source] every = '5s' must be a duration of at least 1 minute" in text
    assert "[source] colour is not a known key" in text
    ok = policy_from_dict({"source": {"url": "sqlite:///app.db", "invoices": "overdue_invoices", "every": "15m"}})
    assert ok.source is not None and ok.source.invoices == "SELECT * FROM overdue_invoices"


def test_every_adds_a_sync_schedule_of_its_own(store: Store) -> None:
    policy = policy_from_dict({"source": {"url": "$TEAM_DATABASE_URL", "invoices": "invoices", "every": "15m"}})
    app = build_app(ReminderService(store, policy, clock=SimulatedClock(NOW)))
    assert app.schedules[SYNC_SCHEDULE_KEY].expression == "every 900s"
    assert SYNC_SCHEDULE_KEY not in build_app(ReminderService(store, Policy(), clock=SimulatedClock(NOW))).schedules


def test_the_readmes_rails_example_reads_a_rails_database(store: Store, team_env: TeamDb, tmp_path: Path) -> None:
    if team_env.kind != "postgres":
        pytest.skip("the README's example is written for PostgreSQL (i.paid_at::date)")
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Read your own database", 1)[1]
    toml = section.split("```toml\n", 1)[1].split("```", 1)[0]
    seed(team_env)
    team_env.run(("UPDATE invoices SET status = 'paid', paid_at = '2026-02-21 10:00+00' WHERE id = 2", ()),
                 ("INSERT INTO invoices (id, number, customer_id, amount_cents, currency, issued_on, due_date, status)"
                  " VALUES (9, 'DRAFT-9', 2, 1, 'USD', '2026-03-01', '2026-03-31', 'draft')", ()))
    path = tmp_path / "oncebeat.toml"
    path.write_text(toml, encoding="utf-8")
    service = service_for(store, path)
    assert service.policy.source is not None and service.policy.source.every == 900
    result = sync_source(service, service.policy.source)
    assert (result["invoices"], result["new"], result["payments"]) == (3, 3, 1)
    assert (invoice(store, "INV-2")["status"], invoice(store, "INV-2")["paid_on"]) == ("paid", date(2026, 2, 21))
    assert store.read("invoice_by_number", number="DRAFT-9") == []


def test_a_payment_for_an_invoice_the_read_does_not_carry_refuses_the_whole_read(
        store: Store, team_env: TeamDb, tmp_path: Path) -> None:
    seed(team_env)
    path = config(team_env, tmp_path)
    text = path.read_text(encoding="utf-8").replace("FROM invoices i JOIN customers c ON c.id = i.customer_id",
                                                    "FROM invoices i JOIN customers c ON c.id = i.customer_id "
                                                    "WHERE i.id <> 2")
    path.write_text(text, encoding="utf-8")
    service = service_for(store, path)
    assert service.policy.source is not None
    with pytest.raises(SourceRejected) as caught:
        sync_source(service, service.policy.source)
    assert [str(p) for p in caught.value.problems] == ["source query payments: unknown invoice number 'INV-2'"]
    assert store.read("list_invoices") == []  # the invoices of the same read are not applied either
    assert [r["outcome"] for r in recent_reads(store)] == ["rejected"]


def test_a_read_over_max_rows_is_refused_whole(store: Store, team_env: TeamDb, tmp_path: Path) -> None:
    seed(team_env)
    service = service_for(store, config(team_env, tmp_path, extra="max_rows = 2\n"))
    assert service.policy.source is not None
    with pytest.raises(SourceRejected, match="more than max_rows = 2 rows"):
        sync_source(service, service.policy.source)
    assert store.read("list_invoices") == []


def test_every_reads_the_source_on_its_own_schedule(store: Store, team_env: TeamDb, tmp_path: Path) -> None:
    seed(team_env)
    from oncebeat.reminders.policy import load_policy

    policy = load_policy(config(team_env, tmp_path, extra='every = "15m"\n'))
    start = FIRST_FIRE - timedelta(hours=1)
    h = Harness(store=store, sink=maildir_sink(tmp_path), clock=SimulatedClock(start), policy=policy)
    try:
        h.tick_to(start + timedelta(minutes=15))
        h.new_worker().drain()
        assert [r["outcome"] for r in recent_reads(store)] == ["ok"]
        assert invoice(store, "INV-1")["status"] == "open" and h.reminders() == []  # read, not scanned
    finally:
        h.close()


def test_a_query_the_database_refuses_is_a_failed_read_naming_the_query(store: Store, team_env: TeamDb,
                                                                         tmp_path: Path) -> None:
    path = tmp_path / "oncebeat.toml"
    path.write_text('[source]\nurl = "$TEAM_DATABASE_URL"\ninvoices = "invoices_typo"\n', encoding="utf-8")
    service = service_for(store, path)
    assert service.policy.source is not None
    with pytest.raises(SourceUnavailable, match="source query invoices failed: .*invoices_typo") as caught:
        sync_source(service, service.policy.source)
    assert "\n" not in str(caught.value) and PASSWORD not in str(caught.value)
    assert [r["outcome"] for r in recent_reads(store)] == ["failed"]
