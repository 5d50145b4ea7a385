"""The scan's rows since reminders migration 0007 (issue 14 item 6), both backends.

- A stage superseded by a higher one is recorded in that row (``superseded_stages``), never as a row of its own,
  and is never sent later, whatever scans run after (duplicates, later dates, an earlier date late).
- ``UNIQUE (invoice_id, stage)`` still refuses a second row of any stage; a row planted for a superseded stage
  (which no key can see) is caught by ``check`` (``stage-recorded-once``).
- PostgreSQL has no ``reminders -> invoices`` foreign key any more: a trigger refuses to delete, renumber or
  truncate invoices that reminders refer to, and waits for a scan in flight first; SQLite keeps its foreign key.
  No path of the app (import, re-import, payments, Stripe) deletes or replaces an invoice's id.
- Migration 0007 folds the one-row-per-superseded-stage form of older databases into the superseding rows, and
  ``check`` passes before and after.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path

import pytest
from reminder_harness import FIRST_FIRE, Harness, invoice, maildir_sink

from oncebeat.doctor.explain import explain
from oncebeat.errors import StoreError
from oncebeat.provenance import current_source
from oncebeat.reminders.model import Payment, superseded_stages
from oncebeat.reminders.policy import Policy
from oncebeat.simulate.standalone import check_deployment
from oncebeat.store import Store, open_store
from oncebeat.timebase import SimulatedClock

DAY = timedelta(days=1)
FIRST_DAY = FIRST_FIRE.date()  # 2026-03-02, the first business date
ORPHANS = "SELECT COUNT(*) AS n FROM reminders r WHERE NOT EXISTS (SELECT 1 FROM invoices i WHERE i.id = r.invoice_id)"


@pytest.fixture
def harness(store: Store, tmp_path: Path) -> Iterator[Harness]:
    h = Harness(store=store, sink=maildir_sink(tmp_path), clock=SimulatedClock(FIRST_FIRE - timedelta(hours=1)),
                policy=Policy(collapse="highest"))
    try:
        yield h
    finally:
        h.close()
        h.sink.stop()


def _run_days(h: Harness, last: date, *, skip: tuple[date, date] | None = None) -> None:
    """Tick the clock at each day's fire (08:00 Chicago) from the first to ``last`` and drain the worker."""
    day, fire = FIRST_DAY, FIRST_FIRE
    worker = h.new_worker()
    while day <= last:
        if skip is None or not skip[0] <= day <= skip[1]:
            h.tick_to(fire + timedelta(minutes=1))
            worker.drain()
        day, fire = day + DAY, fire + DAY
        if day == date(2026, 3, 8):  # Chicago moves to CDT
            fire -= timedelta(hours=1)


def _rows(h: Harness, number: str) -> list[tuple[int, str, list[int]]]:
    return [(r["stage"], r["state"], superseded_stages(r)) for r in h.reminders() if r["number"] == number]


def _one(store: Store, sql: str) -> int:
    with store.transaction() as tx:
        return int(tx.execute(sql)[0]["n"])


def _checked(h: Harness) -> None:
    report = check_deployment(h.store, h.app, h.policy, maildir=h.sink.maildir)
    assert report.passed, report.to_text()


def test_superseded_stages_are_recorded_in_the_top_row_and_never_sent_later(harness: Harness) -> None:
    h = harness
    h.add_invoices(invoice("INV-LATE", FIRST_DAY - 20 * DAY),   # 1, 7 and 14 due at the first scan
                   invoice("INV-NEW", FIRST_DAY - 3 * DAY))     # only 1 due
    _run_days(h, date(2026, 4, 20))
    assert _rows(h, "INV-LATE") == [(14, "sent", [1, 7]), (30, "sent", [])]
    assert _rows(h, "INV-NEW") == [(1, "sent", []), (7, "sent", []), (14, "sent", []), (30, "sent", [])]
    sent = sorted((m.headers["X-Oncebeat-Invoice"], int(m.headers["X-Oncebeat-Stage"])) for m in h.messages())
    assert sent == [("INV-LATE", 14), ("INV-LATE", 30), ("INV-NEW", 1), ("INV-NEW", 7), ("INV-NEW", 14),
                    ("INV-NEW", 30)]
    # A scan for the first date again (a duplicate trigger), for an earlier date run late, for a later one:
    # nothing at or below a recorded stage is ever created, so the superseded 1 and 7 can never go out.
    occurrence = int(h.reminders()[0]["occurrence_id"])
    for day in (FIRST_DAY, FIRST_DAY - 10 * DAY, date(2026, 5, 1)):
        result = h.service.scan(occurrence_id=occurrence, business_date=day, source=current_source("api"))
        assert (result.pending, result.skipped) == (0, 0)
    assert len(h.reminders()) == 6
    assert h.service.reminder_counts() == {"sent": 6, "skipped": 2}  # the dashboard counts 1 and 7 as skipped
    story = h.service.invoice_story("INV-LATE")
    assert story is not None
    assert [(r["stage"], r["state"], r["reason"]) for r in story["reminders"]][:2] == [
        (1, "skipped", "superseded: stage 14 became due at the same time"),
        (7, "skipped", "superseded: stage 14 became due at the same time")]
    story_text = "\n".join(explain(h.store, "invoice", "INV-LATE"))  # oncebeat doctor explain invoice INV-LATE
    assert "stage 14: sent, Message-ID" in story_text and "stages 1, 7 skipped: superseded by this one" in story_text
    _checked(h)


def test_a_scan_after_a_gap_supersedes_only_the_stages_not_recorded_before(harness: Harness) -> None:
    h = harness
    h.add_invoices(invoice("INV-1", FIRST_DAY - 2 * DAY))  # stage 1 due at the first scan
    _run_days(h, date(2026, 4, 10), skip=(FIRST_DAY + DAY, date(2026, 3, 25)))  # no scan for 24 days
    assert _rows(h, "INV-1") == [(1, "sent", []), (14, "sent", [7]), (30, "sent", [])]
    _checked(h)


def test_the_unique_key_refuses_a_second_row_of_any_stage_and_check_sees_a_superseded_one(harness: Harness) -> None:
    h = harness
    h.add_invoices(invoice("INV-1", FIRST_DAY - 20 * DAY))
    _run_days(h, FIRST_DAY)
    (row,) = h.reminders()
    assert (row["stage"], superseded_stages(row)) == (14, [1, 7])
    insert = ("INSERT INTO reminders (invoice_id, stage, state, occurrence_id, business_date, created_at, "
              "updated_at) SELECT invoice_id, {stage}, 'pending', occurrence_id, business_date, created_at, "
              "updated_at FROM reminders WHERE id = " + str(row["id"]))
    with pytest.raises(StoreError, match="UniqueViolation|UNIQUE constraint failed"), h.store.transaction() as tx:
        tx.execute(insert.format(stage=14))
    _checked(h)
    with h.store.transaction() as tx:  # what no scan does: a row for a stage recorded superseded
        tx.execute(insert.format(stage=7))
    report = check_deployment(h.store, h.app, h.policy, maildir=h.sink.maildir)
    assert not report.invariants["stage-recorded-once"].passed
    assert "INV-1 stage 7 is recorded twice" in report.to_text()


def test_no_reminder_can_point_at_a_missing_invoice(harness: Harness) -> None:
    h = harness
    h.add_invoices(invoice("INV-1", FIRST_DAY - 20 * DAY), invoice("INV-2", FIRST_DAY + 40 * DAY))
    _run_days(h, FIRST_DAY)
    with h.store.transaction() as tx:
        (inv,) = tx.execute("SELECT id FROM invoices WHERE number = 'INV-1'")
    refused = "ForeignKeyViolation|FOREIGN KEY constraint failed"
    with pytest.raises(StoreError, match=refused), h.store.transaction() as tx:
        tx.execute("DELETE FROM invoices WHERE number = 'INV-1'")
    with pytest.raises(StoreError, match=refused), h.store.transaction() as tx:
        tx.execute("UPDATE invoices SET id = id + 1000 WHERE number = 'INV-1'")
    if h.store.backend == "postgres":
        with pytest.raises(StoreError, match=refused), h.store.transaction() as tx:
            tx.execute("TRUNCATE invoices CASCADE")
    # The app's own paths keep the id: a re-import (upsert by number, new amount and due date), a payment, and
    # Stripe's insert-if-absent of a number already known.
    h.service.upsert([], [invoice("INV-1", FIRST_DAY - 25 * DAY, amount=999)])
    h.service.upsert([], [invoice("INV-1", FIRST_DAY - 25 * DAY, amount=999)], reopen=True)
    with h.store.transaction() as tx:
        assert tx.run("insert_invoice_if_absent", number="INV-1", customer_email="ana@example.com",
                      currency="USD", amount_due=1, issued_on=FIRST_DAY, due_on=FIRST_DAY, status="open",
                      paid_on=None, paid_at=None, now=h.clock.now()) == []
        assert tx.execute("SELECT id FROM invoices WHERE number = 'INV-1'") == [inv]  # the same invoice
    h.service.apply_payments([Payment(number="INV-1", paid_on=FIRST_DAY + DAY)])
    with h.store.transaction() as tx:  # an invoice without reminders can still go
        tx.execute("DELETE FROM invoices WHERE number = 'INV-2'")
    assert _one(h.store, ORPHANS) == 0
    (reminder,) = h.reminders()
    assert reminder["number"] == "INV-1" and reminder["invoice_id"] == inv["id"]


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True)
def test_an_invoice_delete_waits_for_a_scan_in_flight_and_is_then_refused(harness: Harness, db_url: str) -> None:
    h = harness
    h.add_invoices(invoice("INV-1", FIRST_DAY - 20 * DAY))
    outcome: list[str] = []
    with open_store(db_url) as other:
        def delete() -> None:
            try:
                with other.transaction() as tx:
                    tx.execute("DELETE FROM invoices WHERE number = 'INV-1'")
                outcome.append("deleted")
            except StoreError as exc:
                outcome.append(str(exc))

        with h.store.transaction() as tx:
            result = h.service.scan(occurrence_id=1, business_date=FIRST_DAY, source=current_source("api"), tx=tx)
            assert result.pending == 1
            thread = threading.Thread(target=delete)
            thread.start()
            time.sleep(0.5)
            assert thread.is_alive() and outcome == []  # held off by the scan lock: it cannot see the row yet
        thread.join(10)
    assert len(outcome) == 1 and "ForeignKeyViolation" in outcome[0] and "INV-1" in outcome[0]
    assert _one(h.store, ORPHANS) == 0


def _back_to_0006(store: Store) -> None:
    """Rewrite a database at reminders 0007 as 0006 left it: one skipped row per superseded stage, no column."""
    pg = store.backend == "postgres"
    with store.transaction() as tx:
        expand = ("unnest(r.superseded_stages) AS s (stage)" if pg else "json_each(r.superseded_stages) AS s")
        stage = "s.stage" if pg else "CAST(s.value AS INTEGER)"
        tx.execute("INSERT INTO reminders (invoice_id, stage, state, reason, occurrence_id, business_date, "
                   f"created_at, updated_at) SELECT r.invoice_id, {stage}, 'skipped', 'superseded: stage ' || r.stage "
                   "|| ' became due at the same time', r.occurrence_id, r.business_date, r.created_at, r.created_at "
                   f"FROM reminders r, {expand} WHERE r.superseded_stages IS NOT NULL")
        tx.execute("DROP INDEX reminders_superseded")  # reminders 0022's, on the column (SQLite refuses the drop)
        tx.execute("ALTER TABLE reminders DROP COLUMN superseded_stages")
        if pg:
            tx.execute("DROP TRIGGER invoices_keep_reminders ON invoices")
            tx.execute("DROP TRIGGER invoices_keep_reminders_truncate ON invoices")
            tx.execute("DROP FUNCTION reminders_invoice_guard()")
            tx.execute("ALTER TABLE reminders ADD CONSTRAINT reminders_invoice_id_fkey FOREIGN KEY (invoice_id) "
                       "REFERENCES invoices (id)")
        tx.execute("DELETE FROM schema_migrations WHERE line = 'reminders' AND version = 7")


def test_migration_0007_folds_the_superseded_rows_of_an_older_database_and_check_still_passes(
        harness: Harness) -> None:
    h = harness
    h.add_invoices(*(invoice(f"INV-{n}", FIRST_DAY - n * DAY) for n in range(0, 45, 4)))
    _run_days(h, date(2026, 3, 20), skip=(FIRST_DAY + DAY, date(2026, 3, 12)))
    expected = sorted((r["number"], r["stage"], r["state"], tuple(superseded_stages(r))) for r in h.reminders())
    assert sum(len(s) for *_, s in expected) >= 10
    fresh_columns = h.store.table_columns()

    _back_to_0006(h.store)
    old = h.reminders()
    assert "superseded_stages" not in old[0]
    assert sum(1 for r in old if r["state"] == "skipped") == sum(len(s) for *_, s in expected)
    _checked(h)  # the old form passes as it did

    assert h.store.migrate() == [("reminders", 7)]
    after = sorted((r["number"], r["stage"], r["state"], tuple(superseded_stages(r))) for r in h.reminders())
    assert after == expected
    # the same columns (order aside: this rewrite re-adds superseded_stages after the columns of later migrations)
    assert {t: sorted(c) for t, c in h.store.table_columns().items()} == {t: sorted(c) for t, c in
                                                                          fresh_columns.items()}
    _checked(h)
    _run_days(h, date(2026, 4, 30), skip=(FIRST_DAY, date(2026, 3, 20)))  # the ladder goes on from the new rows
    _checked(h)
    assert all(r["state"] == "sent" for r in h.reminders())
