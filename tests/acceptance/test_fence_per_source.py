"""The payment-freshness fence per source (issue 23 item 5): a send waits on ITS invoice's payment source.

Both backends, the real clock, worker and SMTP sink (aiosmtpd) on simulated time; invoices enter through the real
writers (the bulk CSV import, Stripe webhooks, the API's upsert, a read of the team's database, a records-level
write without a source for a row from before reminders 0020). The invariant checker judges each run.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from reminder_harness import FIRST_FIRE, Harness, maildir_sink
from test_team_database_source import RAILS_SCHEMA, TeamDb, seed
from test_team_database_source import config as team_config

from oncebeat.doctor import run_doctor
from oncebeat.reminders.bulk import BulkOptions
from oncebeat.reminders.capfence import fence_status
from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.policy import Policy, load_policy
from oncebeat.reminders.records import write_customers, write_invoices
from oncebeat.reminders.service import ReminderService
from oncebeat.reminders.stripe import StripeWebhooks
from oncebeat.reminders.syncing import sync_source
from oncebeat.simulate.standalone import check_deployment
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock
from oncebeat.web.reminders import payment_freshness_banner

D0 = date(2026, 3, 2)  # the first scan (08:00 America/Chicago = 14:00 UTC); invoices due D0, stage 1 on D0 + 1
DAY = timedelta(days=1)
SCAN = datetime(2026, 3, 3, 14, 0, tzinfo=UTC)  # the scan that makes stage 1 of every invoice due
EMAIL = "ana@example.com"
HEAD = "invoice_number,customer_email,customer_name,currency,amount_due,issued_on,due_on\n"


def _unix(at: datetime) -> int:
    return int(at.timestamp())


def _stripe_invoice(number: str) -> dict[str, Any]:
    return {"object": "invoice", "id": f"in_{number}", "number": number, "status": "open",
            "customer_email": EMAIL, "customer_name": "Ana", "currency": "usd", "amount_due": 5_000,
            "created": _unix(datetime(2026, 2, 1, 16, tzinfo=UTC)),
            "due_date": _unix(datetime(2026, 3, 2, 16, tzinfo=UTC)),  # 10:00 in Chicago: due D0
            "status_transitions": {"finalized_at": _unix(datetime(2026, 2, 1, 16, tzinfo=UTC))}}


@pytest.fixture
def fenced(store: Store, tmp_path: Path) -> Iterator[Harness]:
    h = Harness(store=store, sink=maildir_sink(tmp_path), clock=SimulatedClock(FIRST_FIRE - timedelta(hours=1)),
                policy=Policy(stages=(1,), max_payment_staleness="6h"))
    try:
        yield h
    finally:
        h.close()
        h.sink.stop()


class _Sources:
    """The writers of one test: a CSV import, Stripe webhooks, a row without a source."""

    def __init__(self, h: Harness, tmp_path: Path) -> None:
        self.h, self.tmp_path, self.n = h, tmp_path, 0
        self.hooks = StripeWebhooks(h.store, clock=h.clock, secret="whsec_test", tz=h.policy.tz)  # apply(): verified

    def csv(self, *numbers: str) -> None:
        self.n += 1
        path = self.tmp_path / f"invoices-{self.n}.csv"
        path.write_text(HEAD + "".join(f"{n},{EMAIL},Ana,USD,4200,2026-02-01,2026-03-02\n" for n in numbers),
                        encoding="utf-8")
        self.h.service.import_invoices_csv(path, BulkOptions())

    def stripe(self, kind: str, obj: dict[str, Any]) -> None:
        self.n += 1
        out = self.hooks.apply({"id": f"evt_{self.n}", "object": "event", "type": kind, "data": {"object": obj}})
        assert out.outcome in ("applied", "ignored"), out

    def stripe_alive(self) -> None:
        """Any verified event refreshes Stripe's watermark (one oncebeat does not act on)."""
        self.stripe("customer.updated", {"object": "customer", "id": "cus_1"})

    def sourceless(self, number: str) -> None:
        """A row as written before reminders 0020: no payment source."""
        with self.h.store.transaction() as tx:
            write_customers(tx, [Customer(email=EMAIL, name="Ana")])
            write_invoices(tx, [Invoice(number=number, customer_email=EMAIL, currency="USD", amount_due=300,
                                        issued_on=date(2026, 2, 1), due_on=D0)], reopen=False, now=self.h.clock.now())


def _states(h: Harness) -> dict[str, tuple[str, str | None]]:
    return {r["number"]: (r["state"], r["reason"]) for r in h.reminders()}


def _scan_and_send(h: Harness, at: datetime = SCAN) -> None:
    h.tick_to(at)
    h.new_worker().drain()


def _checked(h: Harness) -> None:
    report = check_deployment(h.store, h.app, h.policy, maildir=h.sink.maildir)
    assert report.passed, report.to_text()


def test_each_writer_records_itself_as_the_invoices_payment_source(fenced: Harness, tmp_path: Path) -> None:
    h, src = fenced, _Sources(fenced, tmp_path)
    src.csv("INV-C")
    src.stripe("invoice.finalized", _stripe_invoice("INV-S"))
    h.service.upsert([], [Invoice(number="INV-A", customer_email=EMAIL, currency="USD", amount_due=1,
                                  issued_on=date(2026, 2, 1), due_on=D0)])
    src.sourceless("INV-N")
    sources = {r["number"]: r["payment_source"] for r in h.store.read("list_invoices")}
    assert sources == {"INV-C": "csv", "INV-S": "stripe", "INV-A": "api", "INV-N": None}
    # The last writer wins: Stripe writing the CSV's invoice makes it Stripe's; a write without a source keeps it.
    src.stripe("invoice.finalized", _stripe_invoice("INV-C") | {"amount_due": 4_300})
    src.sourceless("INV-C")
    assert h.store.read("invoice_by_number", number="INV-C")[0]["payment_source"] == "stripe"


def test_a_csv_invoice_waits_while_only_stripe_is_fresh_and_a_stripe_invoice_goes_out(
        fenced: Harness, tmp_path: Path) -> None:
    h, src = fenced, _Sources(fenced, tmp_path)
    src.csv("INV-C")  # 13:00 UTC on 03-02: 25 h before the scan of 03-03
    src.stripe("invoice.finalized", _stripe_invoice("INV-S"))
    h.clock.set(SCAN - timedelta(minutes=10))
    src.stripe_alive()  # Stripe is fresh (10 min), the CSV is not
    _scan_and_send(h)
    states = _states(h)
    assert states["INV-S"] == ("sent", None)
    assert states["INV-C"] == ("pending", "waiting: payment data from csv import last refreshed 25h ago; reminders "
                                          "of its invoices wait until it is fresher than 6h")
    assert len(h.messages()) == 1
    fresh = fence_status(h.store, h.policy, clock=h.clock)
    assert not fresh.stale and fresh.source == "stripe"  # the freshest is fresh ...
    assert [f.source for f in fresh.stale_sources()] == ["csv"]  # ... the CSV is not
    (waiting,) = [f for f in run_doctor(h.store, now=h.clock.now()).findings if f.code == "waiting"]
    assert "payment data from csv import last refreshed 25h ago" in waiting.summary
    assert "waiting for fresher payment data from csv import: 1" in waiting.summary
    runtime = cast(Any, SimpleNamespace(store=h.store, policy=h.policy, clock=h.clock))
    (banner,) = payment_freshness_banner(runtime)
    assert banner.text == ("payment data from csv import last refreshed 25h ago; reminders of its invoices wait until "
                           "it is fresher than 6h (1 reminder waiting on csv import; a delay, not a failure)")
    # A new CSV import (nothing new in it for INV-C): its data is fresh again, the reminder goes out.
    h.clock.set(SCAN + timedelta(hours=2))
    src.csv("INV-C")
    assert payment_freshness_banner(runtime) == []  # the reminder goes at its next check
    h.clock.set(SCAN + timedelta(hours=2, minutes=15))  # its next check: within an eighth of the fence
    h.new_worker().drain()
    assert _states(h)["INV-C"] == ("sent", None)
    assert len(h.messages()) == 2
    _checked(h)


def test_an_invoice_from_before_0020_keeps_the_freshest_sources_rule(fenced: Harness, tmp_path: Path) -> None:
    h, src = fenced, _Sources(fenced, tmp_path)
    src.sourceless("INV-N1")
    src.csv("INV-C")
    h.clock.set(SCAN - timedelta(hours=1))
    src.stripe_alive()
    _scan_and_send(h)
    states = _states(h)
    assert states["INV-N1"] == ("sent", None)  # the freshest source (Stripe) is fresh
    assert states["INV-C"][0] == "pending"
    # A day later nothing is fresh: a sourceless invoice waits, with the freshest source's sentence.
    h.clock.set(SCAN + timedelta(hours=1))
    src.sourceless("INV-N2")  # due 03-02 as well: its stage 1 comes due at the next scan
    _scan_and_send(h, SCAN + DAY)
    states = _states(h)
    assert states["INV-N2"] == ("pending", "waiting: payment data last refreshed 25h ago by Stripe webhook or "
                                           "sync; reminders wait until it is fresher than 6h")
    assert states["INV-C"][0] == "pending"
    _checked(h)


def test_a_grouped_notice_waits_while_any_listed_invoices_source_is_stale(store: Store, tmp_path: Path) -> None:
    h = Harness(store=store, sink=maildir_sink(tmp_path), clock=SimulatedClock(FIRST_FIRE - timedelta(hours=1)),
                policy=Policy(stages=(1,), group="customer", max_payment_staleness="6h"))
    try:
        src = _Sources(h, tmp_path)
        src.csv("INV-C")
        src.stripe("invoice.finalized", _stripe_invoice("INV-S"))
        h.clock.set(SCAN - timedelta(minutes=10))
        src.stripe_alive()
        _scan_and_send(h)
        assert h.messages() == []
        notice_id = {r["notice_id"] for r in h.store.read("notices_all")}.pop()
        (notice,) = h.store.read("notice_get", id=notice_id)
        assert notice["state"] == "pending"
        assert notice["reason"].startswith("waiting: payment data from csv import last refreshed 25h ago")
        h.clock.set(SCAN + timedelta(hours=1))
        src.csv("INV-C")
        h.clock.set(SCAN + timedelta(hours=1, minutes=15))
        h.new_worker().drain()
        (notice,) = h.store.read("notice_get", id=notice_id)
        assert notice["state"] == "sent" and len(h.messages()) == 1
        assert {s for s, _ in _states(h).values()} == {"sent"}
        _checked(h)
    finally:
        h.close()
        h.sink.stop()


def test_an_invoice_read_from_the_teams_database_waits_on_that_sources_last_good_read(
        store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "rails.sqlite3"
    conn = sqlite3.connect(path)
    conn.executescript(RAILS_SCHEMA.format(ts="TEXT"))
    conn.close()
    team = TeamDb(kind="sqlite", url=f"sqlite:///{path}", connect=lambda: sqlite3.connect(path))
    monkeypatch.setenv("TEAM_DATABASE_URL", team.url)
    seed(team)
    policy = load_policy(team_config(team, tmp_path, extra="[reminders]\nmax_payment_staleness = \"6h\"\n"))
    assert policy.source is not None
    clock = SimulatedClock(datetime(2026, 3, 10, 12, tzinfo=UTC))
    service = ReminderService(store, policy, clock=clock)
    sync_source(service, policy.source)
    name = "sql $TEAM_DATABASE_URL"
    assert {r["number"]: r["payment_source"] for r in store.read("list_invoices")} == \
        {"INV-1": name, "INV-2": name, "INV-3": name}
    clock.set(datetime(2026, 3, 10, 21, tzinfo=UTC))
    service.apply_payments([])  # the API is fresh: no help to the SQL source's invoices
    fresh = fence_status(store, policy, clock=clock)
    assert fresh.source == "api" and not fresh.stale
    own = fresh.of(name)
    assert own.stale and own.sentence() == ("payment data from SQL source $TEAM_DATABASE_URL last refreshed 9h ago; "
                                            "reminders of its invoices wait until it is fresher than 6h")
    assert fresh.of("sql another").sentence().startswith("no payment data from SQL source another recorded yet")
    sync_source(service, policy.source)  # a new good read: fresh again
    assert not fence_status(store, policy, clock=clock).of(name).stale
