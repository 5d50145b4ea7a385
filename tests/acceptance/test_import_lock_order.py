"""Imports write a customer's invoices in id order (``records._in_lock_order``), so two writers of the same invoices
never deadlock on PostgreSQL's row locks: one waits for the other. PostgreSQL only (SQLite has one writer)."""

from __future__ import annotations

import dataclasses
import threading
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from oncebeat.reminders.model import Customer, Invoice, Payment
from oncebeat.reminders.policy import write_default_config
from oncebeat.reminders.runtime import load_runtime
from oncebeat.store import open_store


@pytest.mark.postgres
@pytest.mark.parametrize("import_kind", ["payments", "invoices"])
def test_an_import_listing_a_customers_invoices_out_of_id_order_waits_instead_of_deadlocking(
        pg_db_url: str, tmp_path: Path, import_kind: str) -> None:
    """Another writer holds the first of a customer's two invoices and will take the second (as every import now
    does: invoice id order); an import of payments or of invoices whose file lists the two the other way round used
    to lock the second first and then wait for the first, and the other writer, wanting the second, closed the
    cycle: PostgreSQL aborted one of them (``deadlock detected``). Imports write in invoice id order, so two of
    them over overlapping files, or an import beside an API batch, wait for each other instead."""
    write_default_config(tmp_path / "oncebeat.toml")
    runtime = load_runtime(database_url=pg_db_url, config=tmp_path / "oncebeat.toml")
    try:
        svc, store = runtime.service, runtime.store
        first, second = (Invoice(number=f"D{n}", customer_email="x@example.test", currency="EUR", amount_due=1_000,
                                 issued_on=date(2026, 1, 5), due_on=date(2026, 2, 4), status="open", paid_on=None)
                         for n in (1, 2))
        svc.upsert([Customer(email="x@example.test", name="X")], [first, second])
        ids = {r["number"]: int(r["id"]) for r in store.read("invoice_states", numbers=[first.number, second.number])}
        assert ids[first.number] < ids[second.number]
        errors: list[BaseException] = []

        def importer() -> None:  # the file lists the higher id first
            try:
                if import_kind == "payments":
                    svc.apply_payments([Payment(number=i.number, paid_on=i.due_on) for i in (second, first)])
                else:
                    svc.upsert([], [dataclasses.replace(i, amount_due=i.amount_due + 1) for i in (second, first)])
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        with store.transaction() as other:  # the other writer: its locks, taken in id order
            other_pid = int(other.execute("SELECT pg_backend_pid() AS pid", ())[0]["pid"])
            lock = "SELECT id FROM invoices WHERE id = %s FOR NO KEY UPDATE"
            other.execute(lock, (ids[first.number],))
            thread = threading.Thread(target=importer)
            thread.start()
            deadline = datetime.now(UTC) + timedelta(seconds=30)
            with open_store(pg_db_url) as probe:  # until the import waits on the first lock
                while True:
                    with probe.transaction() as tx:
                        if tx.execute("SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
                                      (other_pid,)):
                            break
                    assert datetime.now(UTC) < deadline and thread.is_alive() and not errors, errors
                    time.sleep(0.01)
            other.execute(lock, (ids[second.number],))  # the deadlock, if the import held the second one
        thread.join(30)
        assert not thread.is_alive() and not errors, errors
        if import_kind == "payments":
            assert {r["status"] for r in store.read("invoice_states", numbers=[first.number, second.number])} == \
                {"paid"}
    finally:
        runtime.close()
