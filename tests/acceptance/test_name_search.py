"""The search by customer name reads stored folds and is never wrong (issue 27 item 5, reminders 0024).

``customers.name_folded`` is written with every name oncebeat writes; a name changed behind oncebeat's back loses
its fold (trigger) and is folded by the search itself until a backfill stores it again. Whatever the state of the
folds, the search finds exactly the customers whose folded name holds the folded query: accents, case, renamed
customers, ``%``/``_``/``\\`` taken literally, the customers limit, the what-if copy. Both backends (PostgreSQL
when the server answers); the trigram index and its fallback without pg_trgm on PostgreSQL.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import pytest
from click.testing import CliRunner
from reminder_harness import FIRST_FIRE, Harness, invoice, maildir_sink

from oncebeat.cli import cli
from oncebeat.reminders import tasks
from oncebeat.reminders.bookcopy import copy_book
from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.names import backfill_folded_names, fold_name, like_pattern, matching_customers
from oncebeat.reminders.policy import write_default_config
from oncebeat.reminders.runtime import Runtime, load_runtime
from oncebeat.store import Store, open_store
from oncebeat.timebase import SimulatedClock

PEOPLE = [("anna@example.de", "Anna Müller GmbH"), ("zoe@example.fr", "Zoë Martin"), ("bob@example.com", "Bob"),
          ("sale@example.com", "50% Off Ltd"), ("fifty@example.com", "5000 Off Ltd"), ("ab@example.com", "A_B GmbH"),
          ("axb@example.com", "AxB GmbH"), ("slash@example.com", "Back\\Slash Co"), ("strasse@example.de", "Straße AG"),
          ("istanbul@example.tr", "İstanbul Ltd")]


@pytest.fixture
def rt(db_url: str, tmp_path: Path) -> Iterator[Runtime]:
    write_default_config(tmp_path / "oncebeat.toml")
    runtime = load_runtime(database_url=db_url, config=tmp_path / "oncebeat.toml")
    try:
        runtime.service.upsert([Customer(email=e, name=n) for e, n in PEOPLE],
                               [Invoice(number=f"INV-{k}-{i}", customer_email=e, currency="EUR", amount_due=100 + k,
                                        issued_on=date(2026, 1, 1 + i), due_on=date(2026, 2, 1 + i))
                                for k, (e, _) in enumerate(PEOPLE) for i in range(2)])
        yield runtime
    finally:
        runtime.close()


def _sql(store: Store, text: str) -> str:
    return text.replace("?", "%s") if store.backend == "postgres" else text


def _emails(rt: Runtime, query: str, **kw: int) -> list[str]:
    """Emails of the customers whose invoices the search shows, in the order shown (each once)."""
    seen: list[str] = []
    for r in rt.service.search_invoices(query, **kw):
        email = next(e for k, (e, _) in enumerate(PEOPLE) if str(r["number"]).startswith(f"INV-{k}-"))
        if email not in seen:
            seen.append(email)
    return seen


def _folds(store: Store) -> dict[str, str | None]:
    """Each customer's stored fold by email."""
    with store.transaction() as tx:
        return {r["email"]: r["name_folded"] for r in tx.execute("SELECT email, name_folded FROM customers")}


def _check_search(rt: Runtime) -> None:
    assert _emails(rt, "muller") == ["anna@example.de"]
    assert _emails(rt, "MÜLLER") == ["anna@example.de"]
    assert _emails(rt, "zoe mar") == ["zoe@example.fr"]
    assert _emails(rt, "STRASSE") == ["strasse@example.de"]  # casefold: ß is ss
    assert _emails(rt, "istanbul") == ["istanbul@example.tr"]
    assert _emails(rt, "mueller") == []  # folding, not transliteration
    assert _emails(rt, "50%") == ["sale@example.com"]  # % is a character, not "anything"
    assert sorted(_emails(rt, "off ltd")) == ["fifty@example.com", "sale@example.com"]
    assert _emails(rt, "0 off") == ["fifty@example.com"]
    assert _emails(rt, "a_b") == ["ab@example.com"]  # _ is a character, not "any one"
    assert _emails(rt, "k\\s") == ["slash@example.com"]
    assert _emails(rt, "k\\") == ["slash@example.com"]
    assert _emails(rt, "%") == ["sale@example.com"]
    assert _emails(rt, "_") == ["ab@example.com"]


def test_names_are_found_without_case_or_accents_and_like_wildcards_stand_for_themselves(rt: Runtime) -> None:
    folds = _folds(rt.store)
    assert folds == {e: fold_name(n) for e, n in PEOPLE}  # every upsert stored its fold
    _check_search(rt)
    shown = rt.service.search_invoices("gmbh")
    assert {r["number"] for r in shown} == {"INV-0-0", "INV-0-1", "INV-5-0", "INV-5-1", "INV-6-0", "INV-6-1"}
    assert [r["id"] for r in shown] == sorted((r["id"] for r in shown), reverse=True)  # newest first


def test_the_limits_bound_customers_and_invoices(rt: Runtime) -> None:
    assert len(_emails(rt, "gmbh", customers=2)) == 2
    assert len(_emails(rt, "gmbh", customers=1)) == 1
    assert len(rt.service.search_invoices("gmbh", limit=3)) == 3
    assert matching_customers(rt.store, "gmbh", limit=0) == []
    assert len(matching_customers(rt.store, "gmbh", limit=5)) == 3


def test_a_name_changed_behind_oncebeats_back_is_never_found_by_its_old_fold(rt: Runtime) -> None:
    store = rt.store
    with store.transaction() as tx:
        tx.execute(_sql(store, "UPDATE customers SET name = ? WHERE email = ?"), ("Zoltan Kiss", "anna@example.de"))
    assert _folds(store)["anna@example.de"] is None  # the trigger dropped the stale fold
    assert _emails(rt, "muller") == []
    assert _emails(rt, "ZOLTÁN") == ["anna@example.de"]  # folded by the search itself
    assert sorted(_emails(rt, "z")) == ["anna@example.de", "zoe@example.fr"]
    assert backfill_folded_names(store) == 1
    assert _folds(store)["anna@example.de"] == "zoltan kiss"
    assert _emails(rt, "zoltan") == ["anna@example.de"] and _emails(rt, "muller") == []
    # a rename through oncebeat keeps the fold current, also when the fold does not change ("Bob" -> "BOB")
    rt.service.upsert([Customer(email="zoe@example.fr", name="Zoë Dupont"), Customer(email="bob@example.com",
                                                                                       name="BOB")], [])
    assert _folds(store)["zoe@example.fr"] == "zoe dupont"
    assert _emails(rt, "martin") == [] and _emails(rt, "dupont") == ["zoe@example.fr"]
    assert _emails(rt, "bob") == ["bob@example.com"]
    rt.service.upsert([Customer(email="zoe@example.fr", name=None)], [])  # a source without names keeps them
    assert _folds(store)["zoe@example.fr"] == "zoe dupont"


def test_an_unfolded_book_is_searched_correctly_and_folded_in_batches(rt: Runtime) -> None:
    store = rt.store
    with store.transaction() as tx:  # a book as migration 0024 leaves it: no folds yet
        tx.execute("UPDATE customers SET name_folded = NULL")
    assert set(_folds(store).values()) == {None}
    _check_search(rt)
    assert backfill_folded_names(store, at_most=3, batch=2) == 3
    assert sum(v is None for v in _folds(store).values()) == len(PEOPLE) - 3
    _check_search(rt)  # half folded, half not: the same answers
    assert backfill_folded_names(store, batch=4) == len(PEOPLE) - 3
    assert _folds(store) == {e: fold_name(n) for e, n in PEOPLE}
    assert backfill_folded_names(store) == 0
    _check_search(rt)


def test_oncebeat_migrate_folds_every_unfolded_name(rt: Runtime, db_url: str) -> None:
    with rt.store.transaction() as tx:
        tx.execute("UPDATE customers SET name_folded = NULL")
    result = CliRunner().invoke(cli, ["migrate", "--db", db_url])
    assert result.exit_code == 0, result.output
    assert f"folded {len(PEOPLE)} customers' names" in result.output
    assert _folds(rt.store) == {e: fold_name(n) for e, n in PEOPLE}
    again = CliRunner().invoke(cli, ["migrate", "--db", db_url])
    assert again.exit_code == 0 and "folded" not in again.output


def test_the_scan_folds_a_bounded_share_of_the_unfolded_names(store: Store, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tasks, "SCAN_BACKFILL", 3)  # the share per scan (50,000 in production)
    h = Harness(store=store, sink=maildir_sink(tmp_path), clock=SimulatedClock(FIRST_FIRE - timedelta(hours=1)))
    try:
        h.add_invoices(invoice("INV-1", date(2026, 2, 20), email="anna@example.de"),
                       customers=tuple(Customer(email=e, name=n) for e, n in PEOPLE))
        with store.transaction() as tx:
            tx.execute("UPDATE customers SET name_folded = NULL")
        worker = h.new_worker()
        h.tick_to(FIRST_FIRE)
        worker.drain()
        assert h.reminders()  # the scan ran
        assert sum(v is None for v in _folds(store).values()) == len(PEOPLE) - 3
        h.tick_to(FIRST_FIRE + timedelta(days=1))
        worker.drain()
        assert sum(v is None for v in _folds(store).values()) == len(PEOPLE) - 6
    finally:
        h.close()
        h.sink.stop()


def test_the_backfill_never_stores_the_fold_of_a_name_changed_meanwhile(rt: Runtime) -> None:
    store = rt.store
    with store.transaction() as tx:
        tx.execute("UPDATE customers SET name_folded = NULL")
        row = tx.execute(_sql(store, "SELECT id FROM customers WHERE email = ?"), ("bob@example.com",))[0]
    with store.transaction() as tx:  # the fold of an old name arrives after a rename: not stored
        tx.run("store_folded_name", id=row["id"], name="Somebody Else", name_folded="somebody else")
    assert _folds(store)["bob@example.com"] is None


def test_the_what_if_copy_carries_the_folds(rt: Runtime, tmp_path: Path) -> None:
    with rt.store.transaction() as tx:  # the live book half unfolded: the copy folds every name itself
        tx.execute(_sql(rt.store, "UPDATE customers SET name_folded = NULL WHERE email IN (?, ?)"),
                   ("anna@example.de", "zoe@example.fr"))
    with open_store(f"sqlite:///{tmp_path}/copy.db") as target:
        target.migrate()
        copy_book(rt.store, target, start=date(2026, 3, 1), before=datetime(2026, 3, 1, tzinfo=UTC))
        assert _folds(target) == {e: fold_name(n) for e, n in PEOPLE}
        assert target.read("customers_unfolded_after", after_id=0, limit=10) == []
        ids = matching_customers(target, "muller", limit=5)
        assert [r["email"] for r in target.read("whatif_customers_page", after_id=0, limit=100)
                if r["id"] in ids] == ["anna@example.de"]


def test_like_pattern_escapes_its_wildcards_and_escape_character() -> None:
    assert like_pattern("muller") == "%muller%"
    assert like_pattern("50%_\\") == "%50\\%\\_\\\\%"


# --- PostgreSQL: the trigram index, and the migration without pg_trgm ---------------------------------------------


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_postgresql_searches_the_folds_through_the_trigram_index(rt: Runtime) -> None:
    store = rt.store
    with store.transaction() as tx:
        indexes = {r["indexname"] for r in tx.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'customers'")}
        assert {"customers_name_trigram", "customers_unfolded"} <= indexes
        tx.execute("SET LOCAL enable_seqscan = off")
        plan = "\n".join(str(r["QUERY PLAN"]) for r in tx.execute(
            "EXPLAIN " + store.query_sql("customers_named_like"), {"pattern": "%muller%", "limit": 20}))
    assert "customers_name_trigram" in plan, plan


def _base_conninfo(url: str) -> str:
    parts = urlsplit(url)
    options = [(k, v) for k, v in parse_qsl(parts.query) if k not in ("schema", "pool_size")]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(options), parts.fragment))


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_without_pg_trgm_the_migration_goes_on_and_the_search_scans(db_url: str, tmp_path: Path) -> None:
    """A database where the extension cannot be created (a role that owns its schema but has no CREATE on the
    database, as a tenant's role may): 0024 applies without the trigram index and the search finds the same
    customers."""
    admin = _base_conninfo(db_url)
    suffix = secrets.token_hex(4)
    database, role = f"ob_t_notrgm_{suffix}", f"ob_t_notrgm_{suffix}"
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{database}"')
        c.execute(f'CREATE ROLE "{role}" LOGIN')
    try:
        parts = urlsplit(admin)
        db_admin = urlunsplit((parts.scheme, parts.netloc, f"/{database}", parts.query, ""))
        with psycopg.connect(db_admin, autocommit=True) as c:  # the role owns its schema, nothing more
            c.execute(f'CREATE SCHEMA app AUTHORIZATION "{role}"')
        host = parts.netloc.rsplit("@", 1)[-1]
        url = urlunsplit((parts.scheme, f"{role}@{host}", f"/{database}", "schema=app", ""))
        write_default_config(tmp_path / "oncebeat.toml")
        runtime = load_runtime(database_url=url, config=tmp_path / "oncebeat.toml")
        try:
            with runtime.store.transaction() as tx:
                assert tx.execute("SELECT extname FROM pg_extension WHERE extname = 'pg_trgm'") == []
                assert [r["indexname"] for r in tx.execute(
                    "SELECT indexname FROM pg_indexes WHERE schemaname = 'app' AND indexname = 'customers_name_trigram'"
                )] == []
            assert 24 in runtime.store.applied_migrations("reminders")
            runtime.service.upsert([Customer(email=e, name=n) for e, n in PEOPLE],
                                   [Invoice(number=f"INV-{k}-0", customer_email=e, currency="EUR", amount_due=100,
                                            issued_on=date(2026, 1, 1), due_on=date(2026, 2, 1))
                                    for k, (e, _) in enumerate(PEOPLE)])
            _check_search(runtime)
        finally:
            runtime.close()
    finally:
        with psycopg.connect(admin, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            c.execute(f'DROP ROLE IF EXISTS "{role}"')
