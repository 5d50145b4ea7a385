"""Issue 23 item 2: a customer's country and tags, on both backends, filled by every source (CSV, Stripe, the HTTP
API's readers, the team's SQL database) under the merge rule (a source without the field keeps the stored value,
an explicit empty one clears it), and the ``[[ladders]]`` rules ``country`` and ``tags_any`` that pin on them."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from reminder_harness import invoice

from oncebeat.errors import ConfigError, ImportRejected
from oncebeat.provenance import current_source
from oncebeat.reminders.bulk import BulkOptions, import_invoices
from oncebeat.reminders.ladders import ladder_defs, ladders_of, match_ladder
from oncebeat.reminders.model import Customer
from oncebeat.reminders.pinning import ladder_invoices
from oncebeat.reminders.policy import Policy, load_policy
from oncebeat.reminders.service import ReminderService
from oncebeat.reminders.sources.api import RequestRejected, read_customers, read_invoices
from oncebeat.reminders.sources.database import SourceRejected, read_source, source_config
from oncebeat.reminders.stripe import read_stripe_invoices
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock

NOW = datetime(2026, 3, 10, 12, tzinfo=UTC)
HEAD = "invoice_number,customer_email,customer_name,currency,amount_due,issued_on,due_on"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def segment(store: Store, number: str) -> tuple[str, str]:
    row = store.read("invoice_by_number", number=number)[0]
    return row["customer_country"], row["customer_tags"]


def test_a_csv_sets_country_and_tags_a_file_without_the_columns_keeps_them_and_empty_clears(
        store: Store, tmp_path: Path) -> None:
    full = write(tmp_path, "full.csv", HEAD + ",customer_country,customer_tags\n"
                 "T-1,ana@example.test,Ana,USD,12.00,2026-03-01,2026-03-31,us,VIP; enterprise;vip\n"
                 "T-2,ana@example.test,Ana,USD,13.00,2026-03-01,2026-03-31,,\n")
    import_invoices(store, full, BulkOptions(), now=NOW)
    assert segment(store, "T-1") == ("US", "enterprise;vip")  # upper-cased code; tags lower-cased, sorted, once

    bare = write(tmp_path, "bare.csv", HEAD + "\nT-3,ana@example.test,Ana,USD,14.00,2026-03-01,2026-03-31\n")
    import_invoices(store, bare, BulkOptions(), now=NOW)
    assert segment(store, "T-3") == ("US", "enterprise;vip")  # G6: a source without the columns keeps them

    cleared = write(tmp_path, "cleared.csv", HEAD + ",customer_country,customer_tags\n"
                    "T-1,ana@example.test,Ana,USD,12.00,2026-03-01,2026-03-31,,\n")
    import_invoices(store, cleared, BulkOptions(), now=NOW)
    assert segment(store, "T-1") == ("", "")


def test_a_bad_country_or_tag_or_a_conflict_is_a_row_error_naming_line_column_and_fix(
        store: Store, tmp_path: Path) -> None:
    bad = write(tmp_path, "bad.csv", HEAD + ",customer_country,customer_tags\n"
                "B-1,bo@example.test,Bo,USD,12.00,2026-03-01,2026-03-31,USA,\n"
                "B-2,cy@example.test,Cy,USD,12.00,2026-03-01,2026-03-31,Germany,\n"
                "B-3,di@example.test,Di,USD,12.00,2026-03-01,2026-03-31,EU,a b\n"
                "B-4,ed@example.test,Ed,USD,12.00,2026-03-01,2026-03-31,FR,x\n"
                "B-5,ed@example.test,Ed,USD,12.00,2026-03-01,2026-03-31,BE,x\n")
    with pytest.raises(ImportRejected) as caught:
        import_invoices(store, bad, BulkOptions(), now=NOW)
    text = "\n".join(caught.value.problems)
    assert "bad.csv:2: column customer_country: 'USA' is not an ISO 3166-1 alpha-2 country code (two letters, " \
        "e.g. US, DE, JP)" in text
    assert "bad.csv:3: column customer_country: 'Germany' is a country name, not its code; write DE" in text
    assert "bad.csv:4: column customer_country: 'EU' is not an ISO 3166-1 alpha-2" in text  # a region
    assert "bad.csv:4: column customer_tags: 'a b' holds the tag 'a b'" in text
    assert "bad.csv:6: column customer_country: 'BE' conflicts with 'FR' on line 5" in text
    assert store.read("invoice_by_number", number="B-4") == []  # nothing imported


def test_the_api_readers_carry_country_and_tags_and_a_left_out_key_keeps_the_stored_value(store: Store) -> None:
    service = ReminderService(store, Policy(), clock=SimulatedClock(NOW))
    customers = read_customers({"customers": [{"email": "Ana@example.test", "name": "Ana", "country": "de",
                                               "tags": "Enterprise"}]})
    assert customers == [Customer(email="ana@example.test", name="Ana", country="DE", tags="enterprise")]
    invoices, named = read_invoices({"invoices": [{
        "invoice_number": "A-1", "customer_email": "ana@example.test", "customer_name": "Ana", "currency": "EUR",
        "amount_due": "10.00", "issued_on": "2026-03-01", "due_on": "2026-03-31"}]}, today=NOW.date())
    service.upsert(customers, [])
    service.upsert(named, invoices)  # neither key given: kept
    assert segment(store, "A-1") == ("DE", "enterprise")
    service.upsert(read_customers({"customers": [{"email": "ana@example.test", "name": "Ana", "tags": ""}]}), [])
    assert segment(store, "A-1") == ("DE", "")
    with pytest.raises(RequestRejected) as caught:
        read_customers({"customers": [{"email": "bo@example.test", "name": "Bo", "country": "XX", "tags": "ok;n o"}]})
    pointers = {p.pointer: p.message for p in caught.value.problems}
    assert "not an ISO 3166-1 alpha-2" in pointers["/customers/0/country"]
    assert "tag 'n o'" in pointers["/customers/0/tags"]


def test_stripe_gives_the_address_country_and_the_expanded_customers_tags(store: Store, tmp_path: Path) -> None:
    def stripe(number: str, **extra: Any) -> dict[str, Any]:
        return {"object": "invoice", "number": number, "status": "open", "customer_email": "ana@example.test",
                "customer_name": "Ana", "currency": "usd", "amount_due": 1000, "id": f"in_{number}",
                "created": int(datetime(2026, 3, 1, 10, tzinfo=UTC).timestamp()),
                "due_date": int(datetime(2026, 3, 5, 10, tzinfo=UTC).timestamp()), **extra}

    path = write(tmp_path, "s.json", json.dumps([
        stripe("S-1", customer_address={"country": "CA", "city": "Toronto"},
               customer={"id": "cus_1", "metadata": {"oncebeat_tags": "enterprise"}})]))
    found = read_stripe_invoices(path, tz="UTC").data
    assert not found.problems
    ReminderService(store, Policy(), clock=SimulatedClock(NOW)).upsert(found.customers, found.invoices)
    assert segment(store, "S-1") == ("CA", "enterprise")
    plain = read_stripe_invoices(write(tmp_path, "p.json", json.dumps([stripe("S-2", customer="cus_1")])),
                                 tz="UTC").data
    ReminderService(store, Policy(), clock=SimulatedClock(NOW)).upsert(plain.customers, plain.invoices)
    assert segment(store, "S-2") == ("CA", "enterprise")  # no address, customer not expanded: kept
    bad = read_stripe_invoices(write(tmp_path, "b.json", json.dumps([stripe("S-3", customer_address={
        "country": "Canada"})])), tz="UTC").data
    assert [(p.column, p.reason) for p in bad.problems] == [
        ("customer_address.country", "is a country name, not its code; write CA")]


def test_the_team_database_maps_country_and_tags_columns(tmp_path: Path) -> None:
    team = tmp_path / "team.db"
    with closing(sqlite3.connect(team)) as conn, conn:
        conn.executescript("""
            CREATE TABLE customers (id INTEGER PRIMARY KEY, email TEXT, name TEXT, cc TEXT, segments TEXT);
            CREATE TABLE invoices (id INTEGER PRIMARY KEY, number TEXT, customer_id INTEGER, cents INTEGER,
                                   due DATE);
            INSERT INTO customers VALUES (1, 'ana@example.test', 'Ana', 'jp', 'vip;reseller'),
                                         (2, 'bo@example.test', 'Bo', NULL, NULL),
                                         (3, 'cy@example.test', 'Cy', 'Japan', NULL);
            INSERT INTO invoices VALUES (1, 'D-1', 1, 500, '2026-03-01'), (2, 'D-2', 2, 700, '2026-03-01');
        """)
    query = ("SELECT i.number AS invoice_number, c.email AS customer_email, c.name AS customer_name, "
             "'JPY' AS currency, i.cents AS amount_due_minor, i.due AS issued_on, i.due AS due_on, "
             "c.cc AS customer_country, c.segments AS customer_tags FROM invoices i JOIN customers c "
             "ON c.id = i.customer_id")
    config = source_config({"kind": "sql", "url": f"sqlite:///{team}", "invoices": query}, source="oncebeat.toml")
    read = read_source(config, today=date(2026, 3, 10))
    by_email = {c.email: (c.country, c.tags) for c in read.customers}
    assert by_email == {"ana@example.test": ("JP", "reseller;vip"), "bo@example.test": ("", "")}  # NULL clears
    with closing(sqlite3.connect(team)) as conn, conn:
        conn.execute("INSERT INTO invoices VALUES (3, 'D-3', 3, 900, '2026-03-01')")
    with pytest.raises(SourceRejected) as caught:
        read_source(config, today=date(2026, 3, 10))
    assert "row invoice_number='D-3'" in str(caught.value) and "customer_country" in str(caught.value) \
        and "write JP" in str(caught.value)


LADDERS = [{"name": "na-vip", "match": {"country": ["us", "CA"], "tags_any": "vip"}, "stages": [2, 9]},
           {"name": "enterprise", "match": {"tags_any": ["enterprise", "key-account"]}, "stages": [3, 10]},
           {"name": "japan", "match": {"country": "JP"}, "stages": [4]}]


def test_ladders_match_country_and_tags_and_pin_invoices_in_the_scan(store: Store) -> None:
    clock = SimulatedClock(datetime(2026, 2, 20, tzinfo=UTC))
    policy = Policy(ladders=ladder_defs(LADDERS))
    service = ReminderService(store, policy, clock=clock)
    due = date(2026, 3, 1)
    service.upsert([Customer(email="us-vip@example.test", name="A", country="US", tags="enterprise;vip"),
                    Customer(email="de-ent@example.test", name="B", country="DE", tags="key-account"),
                    Customer(email="jp@example.test", name="C", country="JP", tags=""),
                    Customer(email="none@example.test", name="D")],
                   [invoice("N-1", due, email="us-vip@example.test"), invoice("N-2", due, email="de-ent@example.test"),
                    invoice("N-3", due, email="jp@example.test"), invoice("N-4", due, email="none@example.test")])
    for n in range(6):
        day = due + timedelta(days=n)
        clock.set(datetime.combine(day, datetime.min.time(), tzinfo=UTC) + timedelta(hours=15))
        service.scan(occurrence_id=n + 1, business_date=day, source=current_source("clock"))
    pinned = {name: [r["number"] for r in ladder_invoices(store, name)]
              for name in ("na-vip", "enterprise", "japan", "default")}
    assert pinned == {"na-vip": ["N-1"], "enterprise": ["N-2"], "japan": ["N-3"], "default": ["N-4"]}


def test_match_rules_in_words_and_a_bad_rule_names_the_key() -> None:
    ladders = ladders_of(Policy(ladders=ladder_defs(LADDERS)))
    assert [rule.describe() for _, rule in ladders if rule] == [
        "country US/CA, tagged vip", "tagged enterprise or key-account", "country JP"]
    assert match_ladder(ladders, {"customer_country": "CA", "customer_tags": "vip"}) == "na-vip"
    assert match_ladder(ladders, {"customer_country": "MX", "customer_tags": "vip"}) == "default"
    with pytest.raises(ConfigError, match=r"match.country = \[\"USA\"\] holds 'USA', which is not an ISO 3166-1"):
        ladder_defs([{"name": "a", "match": {"country": ["USA"]}}])
    with pytest.raises(ConfigError, match=r"match.tag is not a known key. Did you mean 'tags_any'\?"):
        ladder_defs([{"name": "a", "match": {"tag": "vip"}}])


BAD_FILE = """\
[reminders]
stages = [1, 7]

[[ladders]]
name = "good"
match = { currency = "EUR" }

# the second ladder
[[ladders]]
name = "vip"
stages = [3, 1]
match = { country = "US", tags_any = "v i p" }

[[ladders]]
name = "japan"

[ladders.match]
currency = "JPY"
country = "Nippon"

[[ladders]]
name = "Bad Name"
match = { currency = "USD" }

[sender]
from = "a@example.com"
"""


def test_ladder_errors_name_the_line_of_the_offending_table_and_key(tmp_path: Path) -> None:
    path = write(tmp_path, "oncebeat.toml", BAD_FILE)
    with pytest.raises(ConfigError) as caught:
        load_policy(path)
    text = str(caught.value)
    assert "line 11: [[ladders]][2] (vip) stages" in text
    assert "line 12: [[ladders]][2] (vip) match.tags_any" in text
    assert "line 19: [[ladders]][3] (japan) match.country" in text
    assert "line 22: [[ladders]][4] name = \"Bad Name\"" in text


def test_the_sample_books_csv_carries_country_and_tags_only_when_a_customer_has_them(tmp_path: Path) -> None:
    from dataclasses import replace

    from oncebeat.reminders.importing import read_invoices_csv
    from oncebeat.sample.book import generate_book, write_invoices_csv

    book = generate_book(seed=5, start=date(2026, 3, 2), customers=6, invoices=20)
    write_invoices_csv(book, tmp_path / "plain.csv")
    header = (tmp_path / "plain.csv").read_text(encoding="utf-8").splitlines()[0]
    assert "customer_country" not in header and "customer_tags" not in header  # an empty column would clear them
    tagged = replace(book, customers=[replace(c, country="JP" if n % 2 else "", tags="vip;enterprise" if n % 3 else "")
                                      for n, c in enumerate(book.customers)])
    write_invoices_csv(tagged, tmp_path / "tagged.csv")
    back = read_invoices_csv(tmp_path / "tagged.csv")
    assert back.problems == []
    got = {c.email: (c.country, c.tags) for c in back.customers}
    want = {c.email: (c.country, "enterprise;vip" if c.tags else "") for c in tagged.customers if c.email in got}
    assert got == want and any(country for country, _ in got.values())


def test_the_checker_judges_country_and_tag_ladders_by_each_invoices_pin(store: Store, tmp_path: Path) -> None:
    """The simulator's checker (check_deployment) on a run where ladders match country and tags: each reminder
    on its invoice's pinned ladder, nothing lost or duplicated; and a customer whose tags change mid-run keeps
    the ladder its invoice in dunning started with."""
    from reminder_harness import FIRST_FIRE, Harness, maildir_sink

    from oncebeat.simulate.standalone import check_deployment

    policy = Policy(ladders=ladder_defs(LADDERS))
    h = Harness(store=store, sink=maildir_sink(tmp_path), clock=SimulatedClock(FIRST_FIRE - timedelta(hours=1)),
                policy=policy)
    try:
        due = date(2026, 3, 1)
        h.add_invoices(invoice("N-1", due, email="us-vip@example.test"), invoice("N-2", due, email="de@example.test"),
                       invoice("N-3", due, email="jp@example.test"),
                       customers=(Customer(email="us-vip@example.test", name="A", country="US", tags="vip"),
                                  Customer(email="de@example.test", name="B", country="DE", tags="enterprise"),
                                  Customer(email="jp@example.test", name="C", country="JP")))
        worker = h.new_worker()
        for n in range(12):
            if n == 5:  # the VIP customer loses the tag: N-1 stays on na-vip; a new invoice takes the default
                h.service.upsert([Customer(email="us-vip@example.test", name="A", tags="")],
                                 [invoice("N-4", due + timedelta(days=5), email="us-vip@example.test")])
            h.tick_to(FIRST_FIRE + timedelta(days=n, minutes=1))
            worker.drain()
        pinned = {name: [r["number"] for r in ladder_invoices(store, name)]
                  for name in ("na-vip", "enterprise", "japan", "default")}
        assert pinned == {"na-vip": ["N-1"], "enterprise": ["N-2"], "japan": ["N-3"], "default": ["N-4"]}
        report = check_deployment(store, h.app, policy, maildir=h.sink.maildir)
        assert report.passed, report.to_text()
        assert report.summary["duplicates"] == 0 and report.summary["lost"] == 0
        assert report.invariants["reminder-on-pinned-ladder"].checked >= 5  # na-vip 2, 9; enterprise 3, 10; japan 4
    finally:
        h.close()
        h.sink.stop()
