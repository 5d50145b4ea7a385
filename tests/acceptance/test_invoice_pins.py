"""The pin of an invoice is a row of ``invoice_pins`` (reminders migration 0021), on both backends: the migration
carries every existing pin over, the scan pins by inserting narrow rows without rewriting the invoice rows, and
a deleted invoice takes its pin with it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

from reminder_harness import invoice

from oncebeat.provenance import current_source
from oncebeat.reminders.model import Customer
from oncebeat.reminders.pinning import holdings
from oncebeat.reminders.policy import Policy
from oncebeat.reminders.service import ReminderService
from oncebeat.store import Store, open_store
from oncebeat.store.sqlfiles import registered_lines
from oncebeat.timebase import SimulatedClock

DUE = date(2026, 3, 1)
SCAN = current_source("clock")


def _sql(store: Store, sql: str) -> list[dict[str, Any]]:
    with store.transaction() as tx:
        return tx.execute(sql)


def _pins(store: Store) -> dict[str, int]:
    return {r["number"]: int(r["ladder_version_id"])
            for r in _sql(store, "SELECT i.number, p.ladder_version_id FROM invoice_pins p "
                                 "JOIN invoices i ON i.id = p.invoice_id")}


def test_migration_0021_moves_every_pin_into_invoice_pins(make_db_url: Callable[[], str]) -> None:
    engine, reminders = registered_lines()
    with open_store(make_db_url()) as store:
        store.migrate(lines=(engine,))
        store.migrate(20, lines=(reminders,))  # the pin still a column of invoices (reminders 0014)
        with store.transaction() as tx:
            tx.execute("INSERT INTO customers (email, name) VALUES ('a@example.test', 'A')")
            for v in (1, 2):
                tx.execute("INSERT INTO ladder_versions (name, version, content_hash, settings, created_at) VALUES "
                           f"('default', {v}, 'h{v}', '{{}}', '2026-03-01T00:00:00Z')")
            for number, status, version in (("OPEN-1", "open", 1), ("OPEN-2", "open", 2), ("PAID-1", "paid", 1),
                                            ("FRESH", "open", None)):
                pin = "NULL" if version is None else \
                    f"(SELECT id FROM ladder_versions WHERE version = {version})"
                tx.execute("INSERT INTO invoices (number, customer_id, currency, amount_due, issued_on, due_on, "
                           "status, updated_at, ladder_version_id) VALUES "
                           f"('{number}', (SELECT id FROM customers), 'USD', 100, '2026-02-01', '2026-03-01', "
                           f"'{status}', '2026-03-01T00:00:00Z', {pin})")
            ids = {int(r["version"]): int(r["id"]) for r in tx.execute("SELECT id, version FROM ladder_versions")}
        assert store.migrate(21, lines=(reminders,)) == [("reminders", 21)]
        assert _pins(store) == {"OPEN-1": ids[1], "OPEN-2": ids[2], "PAID-1": ids[1]}
        rows = {r["number"]: r for r in store.read("list_invoices")}
        assert {n: r["ladder_version_id"] for n, r in rows.items()} == {
            "OPEN-1": ids[1], "OPEN-2": ids[2], "PAID-1": ids[1], "FRESH": None}
        counts = {(h.version, h.open_invoices, h.invoices) for h in holdings(store, Policy())}
        assert counts == {(1, 1, 2), (2, 1, 1)}


def test_a_scan_pins_by_inserting_rows_and_leaves_the_invoice_rows_unwritten(store: Store) -> None:
    clock = SimulatedClock(datetime(2026, 3, 1, 15, tzinfo=UTC))
    service = ReminderService(store, Policy(), clock=clock)
    service.upsert([Customer(email="ana@example.com", name="Ana")],
                   [invoice("DUE", DUE - timedelta(days=10)), invoice("LATER", DUE + timedelta(days=30))])
    versions = "xmin" if store.backend == "postgres" else "rowid"  # PostgreSQL: a rewritten row has a new xmin
    before = {r["number"]: str(r["v"]) for r in _sql(store, f"SELECT number, {versions} AS v FROM invoices")}
    service.scan(occurrence_id=1, business_date=DUE, source=SCAN)
    pins = _pins(store)
    assert set(pins) == {"DUE"}  # LATER's first stage has not come: not in dunning, no pin
    after = {r["number"]: str(r["v"]) for r in _sql(store, f"SELECT number, {versions} AS v FROM invoices")}
    assert after == before
    assert [r["number"] for r in store.read("list_reminders")] == ["DUE"]
    # a second scan of the same day pins nothing again and creates nothing
    clock.set(datetime(2026, 3, 1, 16, tzinfo=UTC))
    service.scan(occurrence_id=2, business_date=DUE, source=SCAN)
    assert _pins(store) == pins and len(store.read("list_reminders")) == 1


def test_a_deleted_invoice_takes_its_pin_with_it(store: Store) -> None:
    service = ReminderService(store, Policy(), clock=SimulatedClock(datetime(2026, 3, 1, 15, tzinfo=UTC)))
    service.upsert([Customer(email="ana@example.com", name="Ana")], [invoice("GONE", DUE - timedelta(days=10))])
    service.scan(occurrence_id=1, business_date=DUE - timedelta(days=20), source=SCAN)  # records the version only
    vid = int(_sql(store, "SELECT id FROM ladder_versions")[0]["id"])
    with store.transaction() as tx:  # pinned, no reminder yet (as when a hold kept the scan away)
        tx.execute(f"INSERT INTO invoice_pins (invoice_id, ladder_version_id) "
                   f"SELECT id, {vid} FROM invoices WHERE number = 'GONE'")
    assert _pins(store) == {"GONE": vid}
    with store.transaction() as tx:
        tx.execute("DELETE FROM invoices WHERE number = 'GONE'")
    assert _pins(store) == {}
