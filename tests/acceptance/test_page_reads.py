"""Dashboard pages read a bounded number of rows whatever the book (issue 27 item 5, docs/benchmarks.md round 3b).

The aging (Reminders page, aging report) comes from ``invoice_open_totals`` (reminders 0022), kept by triggers on
invoices: it must equal the aging computed from the invoices themselves after every kind of write (imports,
payments, voids, reopenings, changed amounts, due dates and currencies, deletes, the scan's daily fold), in every
currency and on several dates. The counts of the overview and the Reminders page stop at a cap and say so.
Both backends (PostgreSQL when the server answers).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.reminders.model import Customer, Invoice, Payment
from oncebeat.reminders.reports import Month, build
from oncebeat.reminders.runtime import Runtime
from oncebeat.reminders.service import compact_open_totals
from reports_book import AS_OF, seeded_runtime


@pytest.fixture
def rt(db_url: str, tmp_path: Path) -> Iterator[Runtime]:
    with seeded_runtime(db_url, tmp_path) as runtime:
        yield runtime


def _sql(rt: Runtime, text: str) -> str:
    return text.replace("?", "%s") if rt.store.backend == "postgres" else text


def _aging(rt: Runtime, name: str, as_of: date) -> list[tuple[str, str, int, int]]:
    return sorted((r["currency"], r["bucket"], int(r["invoices"]), int(r["amount"]))
                  for r in rt.store.read(name, as_of=as_of))


def _assert_same_aging(rt: Runtime) -> None:
    for as_of in (AS_OF, AS_OF - timedelta(days=45), AS_OF + timedelta(days=100), date(2025, 1, 1)):
        assert _aging(rt, "aging", as_of) == _aging(rt, "aging_from_invoices", as_of), as_of


def test_the_aging_summary_equals_the_aging_of_the_invoices_after_every_kind_of_write(rt: Runtime) -> None:
    _assert_same_aging(rt)
    assert _aging(rt, "aging", AS_OF)  # the book has open invoices in three currencies
    assert {c for c, *_ in _aging(rt, "aging", AS_OF)} == {"EUR", "JPY", "USD"}
    svc, store = rt.service, rt.store
    customers = [Customer(email=f"x{i}@example.test", name=f"Ｘ Müller {i}") for i in range(6)]
    rng = random.Random(27)
    invoices = [Invoice(number=f"X{i}", customer_email=f"x{i % 6}@example.test", currency=rng.choice(("EUR", "USD",
                        "JPY", "GBP")), amount_due=rng.randrange(0, 90_000), issued_on=date(2026, 1, 1) +
                        timedelta(days=rng.randrange(90)), due_on=date(2026, 2, 1) + timedelta(days=rng.randrange(120)),
                        status="open") for i in range(60)]
    svc.upsert(customers, invoices)  # an import of new open invoices
    _assert_same_aging(rt)
    svc.upsert(customers, invoices)  # the same rows again: nothing changes
    _assert_same_aging(rt)
    svc.apply_payments([Payment(number=f"X{i}", paid_on=date(2026, 4, 1)) for i in range(0, 60, 3)])
    _assert_same_aging(rt)
    # a re-import with changed amounts, due dates and currencies, and a void (a credit note cancelling it)
    changed = [Invoice(number=i.number, customer_email=i.customer_email, currency="CHF" if n % 4 == 0 else i.currency,
                       amount_due=i.amount_due + 1000 * n, issued_on=i.issued_on,
                       due_on=i.due_on + timedelta(days=n % 9), status="void" if n % 7 == 0 else i.status)
               for n, i in enumerate(invoices)]
    svc.upsert([], changed)
    _assert_same_aging(rt)
    svc.upsert([], [Invoice(number=i.number, customer_email=i.customer_email, currency=i.currency,
                            amount_due=i.amount_due, issued_on=i.issued_on, due_on=i.due_on, status="open")
                    for i in changed[:12]], reopen=True)  # payments undone: open again
    _assert_same_aging(rt)
    with store.transaction() as tx:  # what only SQL does: a status moved by hand, a delete, a whole-table update
        tx.execute(_sql(rt, "UPDATE invoices SET status = 'uncollectible' WHERE number IN (?, ?)"), ("X1", "X2"))
        tx.execute(_sql(rt, "DELETE FROM invoices WHERE number = ?"), ("X5",))
        tx.execute(_sql(rt, "UPDATE invoices SET amount_due = amount_due + 1 WHERE currency = ?"), ("USD",))
        tx.execute(_sql(rt, "UPDATE invoices SET updated_at = updated_at WHERE number LIKE ?"), ("X%",))
    _assert_same_aging(rt)
    before = _aging(rt, "aging", AS_OF)
    rows_before = _summary_rows(rt)
    with store.transaction() as tx:
        compact_open_totals(tx)
    assert _summary_rows(rt) < rows_before  # folded: one row per (currency, due date)
    assert _aging(rt, "aging", AS_OF) == before
    _assert_same_aging(rt)
    svc.apply_payments([Payment(number=f"X{i}", paid_on=date(2026, 4, 2)) for i in range(1, 60, 2) if i != 5])
    with store.transaction() as tx:
        compact_open_totals(tx)
    _assert_same_aging(rt)
    # the aging report reads the same rows
    report = build(store, "aging", first=Month(2026, 1), last=Month(2026, 4), as_of=AS_OF)[0]
    assert sorted((r["currency"], r["bucket"], r["invoices"], r["amount"]) for r in report.rows) == \
        _aging(rt, "aging_from_invoices", AS_OF)


def _summary_rows(rt: Runtime) -> int:
    with rt.store.transaction() as tx:
        return int(tx.execute("SELECT COUNT(*) AS n FROM invoice_open_totals", ())[0]["n"])


def test_the_scan_folds_the_summary_and_the_aging_stays_the_same(rt: Runtime) -> None:
    rt.service.upsert([Customer(email="y@example.test", name="Y")],
                      [Invoice(number=f"Y{i}", customer_email="y@example.test", currency="EUR", amount_due=100 + i,
                               issued_on=date(2026, 3, 1), due_on=date(2026, 3, 1 + i % 3), status="open")
                       for i in range(9)])
    rt.service.apply_payments([Payment(number="Y0", paid_on=date(2026, 4, 1))])
    before = _aging(rt, "aging_from_invoices", AS_OF)
    rt.service.scan(occurrence_id=1, business_date=AS_OF, source=current_source("worker"))
    assert _summary_rows(rt) == len({(c, d) for c, d in _open_groups(rt)})
    assert _aging(rt, "aging", AS_OF) == before == _aging(rt, "aging_from_invoices", AS_OF)


def _open_groups(rt: Runtime) -> list[tuple[Any, Any]]:
    with rt.store.transaction() as tx:
        return [(r["currency"], r["due_on"]) for r in tx.execute(
            "SELECT DISTINCT currency, due_on FROM invoices WHERE status = 'open'", ())]


def test_capped_counts_are_exact_below_the_cap_and_say_more_above_it(rt: Runtime) -> None:
    exact = {(int(r["stage"]), r["state"]): int(r["n"]) for r in rt.service.reminder_count_rows()}
    capped = rt.service.reminder_count_rows_capped(100)
    assert {(r["stage"], r["state"]): r["n"] for r in capped} == exact
    assert not any(r["capped"] for r in capped)
    tight = {(r["stage"], r["state"]): r for r in rt.service.reminder_count_rows_capped(1)}
    # stage 1 has five sent reminders: counted to two, shown as more than one; stage 7 two: the same
    assert tight[1, "sent"]["capped"] and tight[1, "sent"]["n"] == 2
    assert tight[7, "sent"]["capped"]
    with pytest.raises(ValueError):
        rt.service.reminder_count_rows_capped(0)

    queue = Queue(rt.store, clock=rt.clock, source=current_source("api"))
    for i in range(5):
        queue.enqueue("noop", {"i": i}, queue="q1")
    queue.enqueue("noop", {}, queue="q2", run_at=datetime(2030, 1, 1, tzinfo=UTC))
    exact_jobs = {(r["queue"], r["state"]): r["n"] for r in queue.counts_by_queue()}
    assert {(r["queue"], r["state"]): r["n"] for r in queue.counts_by_queue_capped(1000)} == exact_jobs
    for r in queue.counts_by_queue_capped(2):
        assert r["capped"] == (exact_jobs[r["queue"], r["state"]] > 2)
        assert r["n"] == min(exact_jobs[r["queue"], r["state"]], 3)


def test_the_ascii_shortcut_of_the_name_search_folds_as_unicode_does() -> None:
    from oncebeat.reminders.names import fold_name, fold_text

    names = ["Müller", "MULLER", "Straße", "ǅemal", "Ｘ Müller 3", "O'Brien & Co.", "ÅSA", "abc\tDEF", "", "İstanbul",
             "".join(chr(c) for c in range(1, 128))]
    for name in names:
        assert fold_name(name) == fold_text(name), name
