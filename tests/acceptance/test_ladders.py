"""Several ladders on both backends: matching, the pin, a ladder edit with and without --apply-to-open, spacing,
and the send with the pinned ladder's sender and company (a real SMTP sink)."""

from __future__ import annotations

import email
import email.policy
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from reminder_harness import FIRST_FIRE, Harness, invoice, maildir_sink

from oncebeat import audit
from oncebeat.errors import OncebeatError
from oncebeat.provenance import current_source
from oncebeat.reminders.ladders import ladder_defs
from oncebeat.reminders.model import Customer
from oncebeat.reminders.pinning import apply_to_open, holdings, ladder_invoices
from oncebeat.reminders.policy import Policy
from oncebeat.reminders.service import ReminderService
from oncebeat.simulate.standalone import check_deployment
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock

DUE = date(2026, 3, 1)
T0 = datetime(2026, 3, 1, 15, tzinfo=UTC)
SCAN = current_source("clock")
OPERATOR = current_source("cli", name="ops")


def _ladders(*tables: dict[str, Any]) -> tuple[Any, ...]:
    return ladder_defs(list(tables))


class Books:
    """Direct scans of one store under a policy that can change between scans (a file edit)."""

    def __init__(self, store: Store, policy: Policy) -> None:
        self.store = store
        self.clock = SimulatedClock(T0)
        self.occurrence = 0
        self.use(policy)

    def use(self, policy: Policy) -> None:
        self.policy = policy
        self.service = ReminderService(self.store, policy, clock=self.clock)

    def add(self, *invoices: Any, customers: tuple[Customer, ...] = ()) -> None:
        self.service.upsert(list(customers) or [Customer(email="ana@example.com", name="Ana")], list(invoices))

    def scan_until(self, last: date, *, first: date | None = None, skip: tuple[date, ...] = ()) -> None:
        day = first or DUE
        while day <= last:
            if day not in skip:
                self.occurrence += 1
                self.clock.set(datetime.combine(day, datetime.min.time(), tzinfo=UTC) + timedelta(hours=15))
                self.service.scan(occurrence_id=self.occurrence, business_date=day, source=SCAN)
            day += timedelta(days=1)

    def stages(self, number: str) -> list[tuple[int, int]]:
        """(stage, days after DUE of its business date) of invoice ``number``, in stage order."""
        return sorted((int(r["stage"]), (r["business_date"] - DUE).days) for r in self.store.read("list_reminders")
                      if r["number"] == number)


@pytest.fixture
def books(store: Store) -> Books:
    return Books(store, Policy())


def test_each_invoice_follows_the_first_ladder_that_matches_it(books: Books) -> None:
    books.use(Policy(ladders=_ladders(
        {"name": "big-eur", "match": {"currency": "EUR", "amount_min": 100_000}, "stages": [3, 10]},
        {"name": "eur", "match": {"currency": "EUR"}, "stages": [2, 5]})))
    books.add(invoice("BIG", DUE, currency="EUR", amount=250_000), invoice("SMALL", DUE, currency="EUR", amount=500),
              invoice("USD", DUE))
    books.scan_until(DUE + timedelta(days=15))
    assert books.stages("BIG") == [(3, 3), (10, 10)]
    assert books.stages("SMALL") == [(2, 2), (5, 5)]
    assert books.stages("USD") == [(1, 1), (7, 7), (14, 14)]
    counts = {(h.name, h.version): h.open_invoices for h in holdings(books.store, books.policy)}
    assert counts == {("big-eur", 1): 1, ("eur", 1): 1, ("default", 1): 1}
    assert [r["number"] for r in ladder_invoices(books.store, "eur")] == ["SMALL"]


def test_an_invoice_is_pinned_only_when_its_first_stage_comes(books: Books) -> None:
    books.add(invoice("LATER", DUE + timedelta(days=5)))
    books.scan_until(DUE + timedelta(days=3))
    assert ladder_invoices(books.store, "default") == []  # not in dunning yet: a ladder edit now still applies
    books.scan_until(DUE + timedelta(days=6), first=DUE + timedelta(days=4))
    assert [(r["number"], r["version"]) for r in ladder_invoices(books.store, "default")] == [("LATER", 1)]


def test_a_customer_moving_to_another_segment_keeps_the_ladder_it_started_with(books: Books) -> None:
    books.use(Policy(ladders=_ladders({"name": "austria", "stages": [2, 5, 9],
                                       "match": {"column": {"name": "customer_locale", "equals": "de_AT"}}})))
    at = Customer(email="ana@example.com", name="Ana", locale="de_AT")
    books.add(invoice("INV-1", DUE), customers=(at,))
    books.scan_until(DUE + timedelta(days=3))
    books.add(customers=(Customer(email="ana@example.com", name="Ana", locale="en_US"),))  # now default's segment
    books.add(invoice("INV-2", DUE + timedelta(days=3)))  # a new invoice of the same customer: the new segment
    books.scan_until(DUE + timedelta(days=20), first=DUE + timedelta(days=4))
    assert books.stages("INV-1") == [(2, 2), (5, 5), (9, 9)]
    assert books.stages("INV-2") == [(1, 4), (7, 10), (14, 17)]


def test_a_ladder_edit_leaves_open_invoices_on_their_version_until_applied(books: Books) -> None:
    books.add(invoice("OLD", DUE))
    books.scan_until(DUE + timedelta(days=2))  # stage 1 under version 1
    books.use(Policy(stages=(1, 3, 10)))  # the file is edited
    books.add(invoice("NEW", DUE + timedelta(days=2)))
    books.scan_until(DUE + timedelta(days=8), first=DUE + timedelta(days=3))
    assert books.stages("OLD") == [(1, 1), (7, 7)]  # still version 1's ladder: no stage 3
    assert books.stages("NEW") == [(1, 3), (3, 5)]  # started under version 2
    versions = {(h.name, h.version): (h.open_invoices, h.current) for h in holdings(books.store, books.policy)}
    assert versions == {("default", 1): (1, False), ("default", 2): (1, True)}
    versions_ids = {h.version: h.id for h in holdings(books.store, books.policy)}

    moved = apply_to_open(books.store, books.policy, "default", now=books.clock.now(), source=OPERATOR)
    assert moved == {"ladder": "default", "version": 2, "moved": 1, "from_versions": {1: 1}}
    books.scan_until(DUE + timedelta(days=20), first=DUE + timedelta(days=9))
    assert books.stages("OLD") == [(1, 1), (7, 7), (10, 10)]  # continues above stage 7: never 3, never twice
    assert books.stages("NEW") == [(1, 3), (3, 5), (10, 12)]
    events = audit.list_events(books.store, since=T0 - timedelta(days=1))
    kinds = [(e["kind"], e["subject"]) for e in events]
    assert kinds.count(("ladders.version", "ladder:default")) == 2
    (applied,) = [e for e in events if e["kind"] == "ladders.applied"]
    assert applied["detail"]["invoices"] == ["OLD"] and applied["detail"]["moves"] == [["OLD", versions_ids[1]]]


def test_apply_never_creates_a_stage_at_or_below_one_the_invoice_has(books: Books) -> None:
    books.add(invoice("INV-1", DUE))
    books.scan_until(DUE + timedelta(days=15))
    assert books.stages("INV-1") == [(1, 1), (7, 7), (14, 14)]
    books.use(Policy(stages=(1, 3, 5, 10, 12, 21), collapse="highest"))
    apply_to_open(books.store, books.policy, "default", now=books.clock.now(), source=OPERATOR)
    books.scan_until(DUE + timedelta(days=30), first=DUE + timedelta(days=16))
    assert books.stages("INV-1") == [(1, 1), (7, 7), (14, 14), (21, 21)]


def test_applying_an_unknown_ladder_is_refused_and_changes_nothing(books: Books) -> None:
    with pytest.raises(OncebeatError, match="no ladder named 'vip'.*ladders: default"):
        apply_to_open(books.store, books.policy, "vip", now=books.clock.now(), source=OPERATOR)
    assert holdings(books.store, books.policy) == []


@pytest.mark.parametrize(("spacing", "stage_7_on"), [("from_sent", 12), ("nominal", 7)])
def test_after_a_late_stage_spacing_decides_when_the_next_one_goes(books: Books, spacing: str,
                                                                  stage_7_on: int) -> None:
    books.use(Policy(ladders=_ladders({"name": "eur", "match": {"currency": "EUR"}, "spacing": spacing})))
    books.add(invoice("INV-1", DUE, currency="EUR"))
    outage = tuple(DUE + timedelta(days=n) for n in range(1, 6))  # stage 1 goes out on day 6, not 1
    books.scan_until(DUE + timedelta(days=20), skip=outage)
    assert books.stages("INV-1") == [(1, 6), (7, stage_7_on), (14, stage_7_on + 7)]


@pytest.mark.parametrize("spacing", ["from_sent", "nominal"])
def test_a_second_scan_of_one_business_day_never_sends_a_second_stage(books: Books, spacing: str) -> None:
    """A backlog invoice (every stage's date long past): a leftover trigger or a manual run scanning the same
    business date again must not send the next stage that day, whatever the spacing (found by a simulated year
    with ladder-edit: stages 10 and 21 sent on one day under "nominal")."""
    books.use(Policy(ladders=_ladders({"name": "eur", "match": {"currency": "EUR"}, "spacing": spacing})))
    books.add(invoice("INV-1", DUE - timedelta(days=60), currency="EUR"))
    day = DUE
    for _ in range(3):  # the day's scan, then two more scans of the same business date
        books.scan_until(day, first=day)
    books.scan_until(DUE + timedelta(days=1), first=DUE + timedelta(days=1))
    # the next day: "nominal" sends stage 7 (its date is long past), "from_sent" waits out the gap after stage 1
    assert books.stages("INV-1") == ([(1, 0), (7, 1)] if spacing == "nominal" else [(1, 0)])


def test_preview_shows_each_invoice_on_its_own_ladder_and_writes_nothing(books: Books) -> None:
    books.use(Policy(ladders=_ladders({"name": "eur", "match": {"currency": "EUR"}, "stages": [3]})))
    books.add(invoice("EUR-1", DUE, currency="EUR"), invoice("USD-1", DUE))
    rows = books.service.preview(DUE + timedelta(days=3))
    assert sorted((r["number"], r["stage"]) for r in rows) == [("EUR-1", 3), ("USD-1", 1)]
    assert holdings(books.store, books.policy) == [] and ladder_invoices(books.store, "eur") == []


@pytest.fixture
def harness(store: Store, tmp_path: Path) -> Iterator[Harness]:
    policy = Policy(company="Example Co", ladders=_ladders(
        {"name": "eur", "match": {"currency": "EUR"}, "from": "Buchhaltung <ar@example.de>",
         "reply_to": "zahlung@example.de", "company": "Beispiel GmbH"}))
    h = Harness(store=store, sink=maildir_sink(tmp_path), clock=SimulatedClock(FIRST_FIRE - timedelta(hours=1)),
                policy=policy)
    try:
        yield h
    finally:
        h.close()
        h.sink.stop()


def test_the_send_uses_the_pinned_ladders_sender_and_company(harness: Harness) -> None:
    harness.add_invoices(invoice("EUR-1", date(2026, 3, 1), currency="EUR"), invoice("USD-1", date(2026, 3, 1)))
    harness.tick_to(FIRST_FIRE + timedelta(minutes=1))
    harness.new_worker().drain()
    by_invoice = {}
    for path in sorted((harness.sink.maildir / "new").glob("*")):
        msg = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
        body = msg.get_body(("plain",))
        assert body is not None
        by_invoice[str(msg["X-Oncebeat-Invoice"])] = (msg, body.get_content())
    eur, eur_text = by_invoice["EUR-1"]
    usd, usd_text = by_invoice["USD-1"]
    assert str(eur["From"]) == "Buchhaltung <ar@example.de>" and str(eur["Reply-To"]) == "zahlung@example.de"
    assert "Beispiel GmbH" in eur_text
    assert str(usd["From"]) == "Billing <billing@example.com>"
    assert "Example Co" in usd_text and "Beispiel" not in usd_text
    assert check_deployment(harness.store, harness.app, harness.policy, maildir=harness.sink.maildir).passed


def test_the_checker_judges_each_invoice_by_its_pinned_ladder_and_sees_a_stage_off_it(store: Store,
                                                                                        tmp_path: Path) -> None:
    policy = Policy(ladders=_ladders({"name": "eur", "match": {"currency": "EUR"}, "stages": [3, 10]}))
    h = Harness(store=store, sink=maildir_sink(tmp_path), clock=SimulatedClock(FIRST_FIRE - timedelta(hours=1)),
                policy=policy)
    try:
        h.add_invoices(invoice("EUR-1", date(2026, 3, 1), currency="EUR"), invoice("USD-1", date(2026, 3, 1)))
        worker = h.new_worker()
        for n in range(12):
            h.tick_to(FIRST_FIRE + timedelta(days=n, minutes=1))
            worker.drain()
        report = check_deployment(store, h.app, policy, maildir=h.sink.maildir)
        assert report.passed and report.summary["due"] == 4, report.to_text()  # EUR 3, 10; USD 1, 7
        assert report.invariants["reminder-on-pinned-ladder"].checked == 4
        # A scan that ignored the pin (here: the row rewritten to the default ladder's version) is caught.
        default_id = next(x.id for x in holdings(store, policy) if x.name == "default")
        (row,) = store.read("invoice_by_number", number="EUR-1")
        with store.transaction() as tx:
            tx.run("repin_invoice", id=row["id"], from_id=row["ladder_version_id"], version_id=default_id)
        report = check_deployment(store, h.app, policy, maildir=h.sink.maildir)
        assert not report.invariants["reminder-on-pinned-ladder"].passed
        assert not report.invariants["no-unexpected-reminders"].passed  # 3 and 10 were never due on default
        assert not report.invariants["due-reminders-terminal"].passed  # and default's 1 and 7 were lost
    finally:
        h.close()
        h.sink.stop()
