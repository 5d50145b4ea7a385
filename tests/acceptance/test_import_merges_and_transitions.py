"""Issue 22 items 6-8, on both backends: an import never erases what it does not carry; one status transition
rule for the CSV and Stripe imports, the payments import and the webhook (a processor's automatic status never
undoes a recorded payment); amounts in ISO 4217 minor units (HUF 8,491.50 is neither refused nor rounded)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from oncebeat.reminders.bulk import BulkOptions, import_invoices, import_payments
from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.records import move_status, write_customers, write_invoices
from oncebeat.reminders.render import Renderer, format_money
from oncebeat.reminders.stripe import StripeWebhooks
from oncebeat.store import Store, open_store
from oncebeat.store.sqlfiles import registered_lines
from oncebeat.timebase import SimulatedClock

SRC = Path(__file__).resolve().parents[2] / "src"
NOW = datetime(2026, 3, 10, 12, tzinfo=UTC)
HEAD = "invoice_number,customer_email,customer_name,currency,amount_due,issued_on,due_on"


def oncebeat(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-m", "oncebeat.cli", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=300)


def unix(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


def stripe_invoice(number: str, status: str = "open", *, currency: str = "usd", amount: int = 12345,
                   **transitions: str) -> dict[str, Any]:
    """A Stripe invoice object with the fields oncebeat reads (customer zone and language: Stripe has none)."""
    return {"object": "invoice", "id": f"in_{number}", "number": number, "status": status,
            "customer_email": "ana@example.test", "customer_name": "Ana", "currency": currency,
            "amount_due": amount, "created": unix("2026-03-01T10:00:00"), "due_date": unix("2026-03-05T10:00:00"),
            "status_transitions": {"finalized_at": unix("2026-03-01T10:00:00"),
                                   **{k: unix(v) for k, v in transitions.items()}}}


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def customer_of(store: Store, number: str) -> tuple[str, str, str]:
    row = store.read("invoice_by_number", number=number)[0]
    return row["name"], row["locale"], row["customer_tz"]


def invoice_of(store: Store, number: str) -> dict[str, Any]:
    return store.read("invoice_by_number", number=number)[0]


def hooks(store: Store) -> StripeWebhooks:
    return StripeWebhooks(store, clock=SimulatedClock(NOW), secret="whsec_test", tz="UTC")


def event(event_id: str, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    return {"id": event_id, "object": "event", "type": kind, "created": unix("2026-03-10T12:00:00"),
            "data": {"object": obj}}


# --------------------------------------------------------------------------- item 6: merges


def test_a_csv_without_zone_or_language_columns_keeps_them_and_an_explicit_empty_value_clears_them(
        store: Store, tmp_path: Path) -> None:
    full = write(tmp_path, "full.csv", HEAD + ",customer_locale,customer_tz\n"
                 "T-1,ana@example.test,Ana,JPY,1200,2026-03-01,2026-03-31,ja_JP,Asia/Tokyo\n")
    import_invoices(store, full, BulkOptions(), now=NOW)
    assert customer_of(store, "T-1") == ("Ana", "ja_JP", "Asia/Tokyo")

    bare = write(tmp_path, "bare.csv", HEAD + "\nT-1,ana@example.test,Ana Sato,JPY,1300,2026-03-01,2026-03-31\n"
                 "T-2,ana@example.test,Ana Sato,JPY,500,2026-03-02,2026-04-01\n")
    import_invoices(store, bare, BulkOptions(), now=NOW)
    assert customer_of(store, "T-2") == ("Ana Sato", "ja_JP", "Asia/Tokyo")  # the name is carried; the rest kept

    # A column present: a value on one row and empty cells on the others is that value, not a conflict.
    mixed = write(tmp_path, "mixed.csv", HEAD + ",customer_locale,customer_tz\n"
                  "T-1,ana@example.test,Ana Sato,JPY,1300,2026-03-01,2026-03-31,,\n"
                  "T-2,ana@example.test,Ana Sato,JPY,500,2026-03-02,2026-04-01,de_DE,\n")
    import_invoices(store, mixed, BulkOptions(), now=NOW)
    assert customer_of(store, "T-1") == ("Ana Sato", "de_DE", "")  # tz: empty on every row, so cleared

    cleared = write(tmp_path, "cleared.csv", HEAD + ",customer_locale,customer_tz\n"
                    "T-1,ana@example.test,Ana Sato,JPY,1300,2026-03-01,2026-03-31,,\n")
    import_invoices(store, cleared, BulkOptions(), now=NOW)
    assert customer_of(store, "T-1") == ("Ana Sato", "en_US", "")


def test_a_stripe_import_and_a_webhook_for_a_known_customer_keep_its_zone_and_language(
        db_url: str, tmp_path: Path) -> None:
    write(tmp_path, "inv.csv", HEAD + ",customer_locale,customer_tz\n"
          "T-1,ana@example.test,Ana,USD,10.00,2026-03-01,2026-03-31,ja_JP,Asia/Tokyo\n")
    assert oncebeat("import", "inv.csv", "--db", db_url, cwd=tmp_path).returncode == 0
    nameless = stripe_invoice("S-2")
    del nameless["customer_name"]
    write(tmp_path, "stripe.json", json.dumps({"object": "list", "data": [stripe_invoice("S-1"), nameless]}))
    done = oncebeat("import", "--stripe", "stripe.json", "--db", db_url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    with open_store(db_url) as store:
        assert customer_of(store, "S-1") == ("Ana", "ja_JP", "Asia/Tokyo")
        outcome = hooks(store).apply(event("evt_1", "invoice.finalized", stripe_invoice("S-3")))
        assert outcome.outcome == "applied"
        assert customer_of(store, "S-3") == ("Ana", "ja_JP", "Asia/Tokyo")
        no_name = stripe_invoice("S-4")
        del no_name["customer_name"]
        assert hooks(store).apply(event("evt_2", "invoice.finalized", no_name)).outcome == "applied"
        assert customer_of(store, "S-4") == ("Ana", "ja_JP", "Asia/Tokyo")  # a missing name is not erased either


# --------------------------------------------------------------------------- item 7: one transition rule


def test_a_processors_later_uncollectible_never_undoes_a_payment_by_import_or_by_webhook_alike(
        db_url: str, tmp_path: Path) -> None:
    """import --stripe (open), import --payments (paid yesterday), then Stripe marks it uncollectible now."""
    write(tmp_path, "open.json", json.dumps([stripe_invoice("S-1")]))
    write(tmp_path, "pay.csv", "invoice_number,paid_on\nS-1,2026-03-09\nS-2,2026-03-09\n")
    write(tmp_path, "late.json", json.dumps([stripe_invoice("S-1", "uncollectible",
                                                            marked_uncollectible_at="2026-03-10T12:00:00")]))
    assert oncebeat("import", "--stripe", "open.json", "--db", db_url, cwd=tmp_path).returncode == 0
    with open_store(db_url) as store:  # the webhook path's invoice, opened by its own event
        assert hooks(store).apply(event("evt_1", "invoice.finalized", stripe_invoice("S-2"))).outcome == "applied"
    paid = oncebeat("import", "--payments", "pay.csv", "--db", db_url, cwd=tmp_path)
    assert paid.returncode == 0 and "marked_paid: 2" in paid.stdout, paid.stdout + paid.stderr

    again = oncebeat("import", "--stripe", "late.json", "--db", db_url, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "kept paid: 1" in again.stdout and "stale: 1" in again.stdout, again.stdout
    with open_store(db_url) as store:
        late = stripe_invoice("S-2", "uncollectible", marked_uncollectible_at="2026-03-10T12:00:00")
        outcome = hooks(store).apply(event("evt_2", "invoice.marked_uncollectible", late))
        assert outcome.outcome == "stale"
        by_import, by_webhook = invoice_of(store, "S-1"), invoice_of(store, "S-2")
        for row in (by_import, by_webhook):
            assert (row["status"], row["paid_on"]) == ("paid", date(2026, 3, 9))
        assert by_import["paid_at"] is not None and by_webhook["paid_at"] is not None
        assert {e["id"]: e["outcome"] for e in store.read("list_stripe_events")}["evt_2"] == "stale"

    # The explicit reopen still moves it: the operator says the processor is right.
    reopened = oncebeat("import", "--stripe", "late.json", "--reopen", "--db", db_url, cwd=tmp_path)
    assert reopened.returncode == 0 and "kept paid: 0" in reopened.stdout, reopened.stdout
    with open_store(db_url) as store:
        row = invoice_of(store, "S-1")
        assert (row["status"], row["paid_on"], row["paid_at"]) == ("uncollectible", None, None)


def test_the_rule_is_forward_only_for_every_source_and_a_payment_settles_an_uncollectible_invoice(
        store: Store, tmp_path: Path) -> None:
    rows = ("V-1,ana@example.test,Ana,USD,10.00,2026-03-01,2026-03-31,void,2026-03-02\n"
            "U-1,ana@example.test,Ana,USD,10.00,2026-03-01,2026-03-31,uncollectible,2026-03-02\n"
            "P-1,ana@example.test,Ana,USD,10.00,2026-03-01,2026-03-31,open,\n")
    first = write(tmp_path, "first.csv", HEAD + ",status,status_on\n" + rows)
    assert import_invoices(store, first, BulkOptions(), now=NOW)["new"] == 3
    pay = write(tmp_path, "pay.csv", "invoice_number,paid_on\nU-1,2026-03-05\nP-1,2026-03-05\n")
    assert import_payments(store, pay, BulkOptions(), now=NOW)["marked_paid"] == 2  # uncollectible -> paid too
    # An old export saying open everywhere (a later export marking P-1 void after its payment, too).
    old = write(tmp_path, "old.csv", HEAD + ",status,status_on\n"
                "V-1,ana@example.test,Ana,USD,10.00,2026-03-01,2026-03-31,open,\n"
                "U-1,ana@example.test,Ana,USD,10.00,2026-03-01,2026-03-31,open,2026-03-01\n"
                "P-1,ana@example.test,Ana,USD,10.00,2026-03-01,2026-03-31,void,2026-03-08\n")
    counts = import_invoices(store, old, BulkOptions(), now=NOW)
    assert (counts["stale"], counts["kept paid"]) == (3, 2)
    assert [invoice_of(store, n)["status"] for n in ("V-1", "U-1", "P-1")] == ["void", "paid", "paid"]
    # A dated reopening (a chargeback after the payment) is explicit in the books; --reopen is explicit anyway.
    charged_back = write(tmp_path, "cb.csv", HEAD + ",status,status_on\n"
                         "P-1,ana@example.test,Ana,USD,10.00,2026-03-01,2026-03-31,open,2026-03-08\n")
    assert import_invoices(store, charged_back, BulkOptions(), now=NOW)["stale"] == 0
    assert invoice_of(store, "P-1")["status"] == "open"
    assert import_invoices(store, old, BulkOptions(reopen=True), now=NOW)["stale"] == 0
    assert [invoice_of(store, n)["status"] for n in ("V-1", "U-1", "P-1")] == ["open", "open", "void"]


# --------------------------------------------------------------------------- item 8: ISO 4217 minor units


def test_huf_amounts_keep_their_filler_from_stripe_and_csv_and_render_unrounded(
        db_url: str, tmp_path: Path) -> None:
    write(tmp_path, "huf.json", json.dumps([stripe_invoice("H-1", currency="huf", amount=849150)]))
    write(tmp_path, "huf.csv", HEAD + "\nH-2,bela@example.test,Béla,HUF,8491.50,2026-03-01,2026-03-31\n"
          "H-3,bela@example.test,Béla,HUF,8491,2026-03-01,2026-03-31\n"
          "J-1,bela@example.test,Béla,JPY,1200,2026-03-01,2026-03-31\n"
          "K-1,bela@example.test,Béla,KWD,12.345,2026-03-01,2026-03-31\n")
    stripe_done = oncebeat("import", "--stripe", "huf.json", "--db", db_url, cwd=tmp_path)
    assert stripe_done.returncode == 0, stripe_done.stdout + stripe_done.stderr
    csv_done = oncebeat("import", "huf.csv", "--db", db_url, cwd=tmp_path)
    assert csv_done.returncode == 0, csv_done.stdout + csv_done.stderr
    with open_store(db_url) as store:
        amounts = {n: invoice_of(store, n)["amount_due"] for n in ("H-1", "H-2", "H-3", "J-1", "K-1")}
    assert amounts == {"H-1": 849150, "H-2": 849150, "H-3": 849100, "J-1": 1200, "K-1": 12345}
    assert format_money(849150, "HUF", "en_US") == "HUF8,491.50"
    assert format_money(849150, "HUF", "hu_HU") == "8\xa0491,50\xa0Ft"
    assert format_money(849100, "HUF", "en_US") == "HUF8,491"  # CLDR's display digits where nothing is lost
    assert format_money(1200, "JPY", "en_US") == "¥1,200" and format_money(12345, "KWD", "en_US") == "KWD12.345"
    email = Renderer().render(invoice_number="H-1", customer_name="Béla", customer_locale="en_US", currency="HUF",
                              amount_due=849150, due_on=date(2026, 3, 5), issued_on=date(2026, 3, 1), stage=7,
                              days_past_due=7)
    assert "HUF8,491.50" in email.text and "8,492" not in email.text


def test_migration_0010_rescales_amounts_stored_in_cldr_digits(make_db_url: Callable[[], str]) -> None:
    engine, reminders = registered_lines()
    with open_store(make_db_url()) as store:
        store.migrate(lines=(engine,))
        store.migrate(8, lines=(reminders,))
        with store.transaction() as tx:
            tx.execute("INSERT INTO customers (email, name) VALUES ('a@example.test', 'A')")
            for number, currency, amount in (("A-1", "ALL", 1200), ("Q-1", "IQD", 5), ("U-1", "USD", 1050),
                                             ("H-1", "HUF", 8491)):
                tx.execute("INSERT INTO invoices (number, customer_id, currency, amount_due, issued_on, due_on, "
                           "status, updated_at) VALUES "
                           f"('{number}', (SELECT id FROM customers), '{currency}', {amount}, '2026-03-01', "
                           "'2026-03-31', 'open', '2026-03-01T00:00:00Z')")
        assert store.migrate()[0] == ("reminders", 10)
        amounts = {r["number"]: r["amount_due"] for r in store.read("list_invoices")}
    # ALL 1,200 lek -> 120000; IQD 5 dinars -> 5000 fils; USD untouched; HUF (Babel 2.14 stored 2 digits) untouched.
    assert amounts == {"A-1": 120000, "Q-1": 5000, "U-1": 1050, "H-1": 8491}


FORWARD = {("open", "paid"), ("open", "void"), ("open", "uncollectible"), ("uncollectible", "paid"),
           ("uncollectible", "void")}
STATUSES = ("open", "paid", "void", "uncollectible")


def test_the_transition_rule_moves_forward_only_and_back_only_on_an_explicit_reopen(store: Store) -> None:
    def start(tx: Any, number: str, status: str) -> None:
        write_invoices(tx, [Invoice(number=number, customer_email="ana@example.test", currency="USD",
                                    amount_due=1000, issued_on=date(2026, 3, 1), due_on=date(2026, 3, 31),
                                    status=status, paid_on=date(2026, 3, 5) if status == "paid" else None)],
                       reopen=False, now=NOW)

    with store.transaction() as tx:
        write_customers(tx, [Customer(email="ana@example.test", name="Ana")])
        for stored in STATUSES:
            for target in STATUSES:
                start(tx, f"{stored}-{target}", stored)
                moved = move_status(tx, f"{stored}-{target}", target, paid_on=date(2026, 3, 6),
                                    status_on=date(2026, 3, 9), now=NOW)
                dated_reopening = (stored, target) == ("paid", "open")  # status_on 9 March is after the payment
                assert moved == ((stored, target) in FORWARD or dated_reopening), (stored, target)
                start(tx, f"r-{stored}-{target}", stored)
                assert move_status(tx, f"r-{stored}-{target}", target, paid_on=date(2026, 3, 6), reopen=True,
                                   now=NOW) == (stored != target)
        start(tx, "old-news", "paid")
        assert not move_status(tx, "old-news", "open", status_on=date(2026, 3, 5), now=NOW)  # not after the payment
        assert not move_status(tx, "nobody", "paid", paid_on=date(2026, 3, 6), now=NOW)
