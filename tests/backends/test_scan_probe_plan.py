"""The first scan after ``VACUUM ANALYZE`` of an empty ``reminders`` table stays linear (PostgreSQL; found at ten
million invoices, docs/scaling.md).

Each scan insert probes ``reminders`` per invoice (its highest stage, a deferred stage) while it fills that table.
Trusting statistics of an analyzed-empty table, the planner probed by a sequential scan, or by walking the
``(stage, state)`` index with a filter, so every probe read every row inserted so far: 300,000 invoices took 50 s
instead of 2. The scan now turns sequential scans off around its inserts and groups the probe by invoice, so
only the ``(invoice_id, stage)`` index serves it. This test reads the plans the scan's inserts run with (EXPLAIN,
inside the scan's own transaction) and fails on any probe that is not that index.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import psycopg
import pytest
from conftest import _libpq_url
from psycopg import sql

import oncebeat.store.postgres as pg
from oncebeat.provenance import current_source
from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.policy import policy_from_dict
from oncebeat.reminders.service import ReminderService
from oncebeat.store import Store, open_store
from oncebeat.timebase import SimulatedClock

BUSINESS_DATE = date(2026, 3, 2)


@pytest.fixture
def pg_store(pg_db_url: str) -> Iterator[Store]:
    store = open_store(pg_db_url)
    try:
        store.migrate()
        yield store
    finally:
        store.close()


def _plans_of_scan_inserts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    plans: list[str] = []
    run = pg._PgTx._run

    def explaining(self: Any, name: str, sql: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        if name.startswith("scan_insert"):
            rows = run(self, name, "EXPLAIN (COSTS OFF) " + sql, params)
            plans.append("\n".join(str(next(iter(r.values()))) for r in rows))
        return run(self, name, sql, params)

    monkeypatch.setattr(pg._PgTx, "_run", explaining)
    return plans


@pytest.mark.parametrize("collapse", ["next", "highest"])
def test_the_scan_probes_reminders_by_invoice_index_after_an_analyze_of_the_empty_table(
        pg_store: Store, monkeypatch: pytest.MonkeyPatch, collapse: str) -> None:
    clock = SimulatedClock(datetime(2026, 3, 2, 14, tzinfo=UTC))
    service = ReminderService(pg_store, policy_from_dict({"reminders": {"collapse": collapse}}), clock=clock)
    customers = [Customer(email=f"c{k}@example.com", name=f"C{k}") for k in range(20)]
    invoices = [Invoice(number=f"P-{n}", customer_email=f"c{n % 20}@example.com", currency="EUR", amount_due=1000 + n,
                        issued_on=BUSINESS_DATE - timedelta(days=40 + n % 30),
                        due_on=BUSINESS_DATE - timedelta(days=10 + n % 30)) for n in range(300)]
    service.upsert(customers, invoices)
    _analyze_empty_reminders(pg_store)  # the trap: statistics saying reminders is empty (as after a bulk load)
    plans = _plans_of_scan_inserts(monkeypatch)

    result = service.scan(occurrence_id=1, business_date=BUSINESS_DATE, source=current_source("cli"))

    assert result.pending > 100
    assert plans, "the scan ran no insert"
    for plan in plans:
        lines = plan.splitlines()
        probes = [(k, line) for k, line in enumerate(lines)
                  if re.search(r"\bon reminders\b", line) and "Insert on reminders" not in line]
        assert probes, plan
        for k, line in probes:
            once = lines[k - 1].strip().endswith("Hash")  # a hash join's build side: one pass before any insert
            assert "reminders_invoice_id_stage_key" in line or once, f"a probe per invoice that is not the index: " \
                f"{line.strip()}\n{plan}"
    # the setting does not outlive the inserts: the rest of the transaction plans as usual
    with pg_store.transaction() as tx:
        assert tx.one("scan_probe_plan", on=True) == {"enable_seqscan": "on"}


def _analyze_empty_reminders(store: Store) -> None:
    schema = dict(parse_qsl(urlsplit(store.url).query))["schema"]
    with psycopg.connect(_libpq_url(store.url), autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        assert conn.execute("SELECT count(*) FROM reminders").fetchone() == (0,)
        conn.execute("VACUUM ANALYZE reminders")
