# ruff: noqa: F811  (fixtures imported from web_helpers are redefined as test arguments, as pytest intends)
"""The aging report the Reminders page charts (per currency and days-past-due bucket), on both backends: its
SQL groups per due date first (docs/benchmarks.md, dashboard pages), so each bucket's edges are checked against
the same sums made in Python, and the page and the data read by two threads at once agree."""

from __future__ import annotations

import re

from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path

from starlette.testclient import TestClient
from web_helpers import dashboard_client, runtime  # noqa: F401  (fixtures)

from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.runtime import Runtime

AS_OF = date(2026, 3, 1)


def _bucket(days: int) -> str:
    return ("current" if days <= 0 else "1-30" if days <= 30 else "31-60" if days <= 60
            else "61-90" if days <= 90 else "90+")


def test_aging_sums_each_currency_and_bucket_at_its_edges(runtime: Runtime,
                                                           dashboard_client: Callable[..., TestClient]) -> None:
    offsets = [-5, 0, 1, 30, 31, 60, 61, 90, 91, 400]  # days past due on AS_OF: every bucket edge
    invoices = [Invoice(number=f"INV-{cur}-{i}-{k}", customer_email="ann@example.test", currency=cur,
                        amount_due=1000 * (i + 1) + (7 if cur == "JPY" else 0), issued_on=date(2024, 1, 1),
                        due_on=AS_OF - timedelta(days=days), status=status,
                        paid_on=AS_OF if status == "paid" else None)
                for cur in ("EUR", "JPY") for i, days in enumerate(offsets)
                for k, status in enumerate(("open", "open", "paid"))]
    runtime.service.upsert([Customer(email="ann@example.test", name="Ann")], invoices)
    expected: dict[tuple[str, str], list[int]] = {}
    for inv in invoices:
        if inv.status == "open":
            n_amount = expected.setdefault((inv.currency, _bucket((AS_OF - inv.due_on).days)), [0, 0])
            n_amount[0] += 1
            n_amount[1] += inv.amount_due
    got = {(r["currency"], r["bucket"]): [int(r["invoices"]), int(r["amount"])]
           for r in runtime.service.aging(AS_OF)}
    assert got == expected
    client = dashboard_client()
    page = client.get("/reminders")
    # one table, a row per currency; one chart, of the currency picked (default: the most open invoices; a tie
    # goes to the later code)
    assert page.status_code == 200 and 'id="aging-EUR"' in page.text and 'id="aging-JPY"' in page.text
    assert "aging JPY" in page.text and "aging EUR" not in page.text
    assert re.search(r'<option value="EUR"\s*>EUR \(20 open\)</option>', page.text), page.text
    picked = client.get("/reminders?currency=EUR").text
    assert "aging EUR" in picked and "aging JPY" not in picked
    assert "aging JPY" in client.get("/reminders?currency=XXX").text  # an unknown code: the default


def test_the_reminders_page_lists_what_was_sent_today(runtime: Runtime, dashboard_client: Callable[..., TestClient],
                                                      tmp_path: Path) -> None:
    from oncebeat.clock import ClockProcess
    from oncebeat.mail import Mailer, MailSink
    from oncebeat.reminders.service import ReminderService
    from oncebeat.reminders.tasks import build_app
    from oncebeat.worker import Worker

    today = runtime.clock.now().astimezone(runtime.policy.zone).date()
    sink = MailSink(tmp_path / "maildir").start()
    try:
        with Mailer(sink.url) as mailer:
            service = ReminderService(runtime.store, runtime.policy, clock=runtime.clock, mailer=mailer)
            app = build_app(service)
            service.upsert([Customer(email="ines.muller@example.test", name="Inès Müller")],
                           [Invoice(number="INV-TODAY-1", customer_email="ines.muller@example.test", currency="EUR",
                                    amount_due=12_345, issued_on=today - timedelta(days=40),
                                    due_on=today - timedelta(days=3))])
            ClockProcess(app, runtime.store, clock=runtime.clock).trigger("reminders")
            Worker(app, runtime.store, clock=runtime.clock).drain()
    finally:
        sink.stop()
    page = dashboard_client().get("/reminders").text
    sent = page.split("<h2>Sent today", 1)[1].split("</table>", 1)[0]
    assert 'href="/reminders/invoices/INV-TODAY-1"' in sent and "Inès Müller" in sent and "€123.45" in sent
    assert "ines.muller@example.test" not in sent  # the address is masked, as on the search page
