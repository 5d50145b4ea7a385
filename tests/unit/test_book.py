"""Invoice books for the demo and the simulator: seeded generation, the Chinook conversion and ``load_book``."""

from __future__ import annotations

import subprocess
import sys
import zoneinfo
from collections import Counter
from datetime import date, timedelta
from pathlib import Path

import pytest
from conftest import shared_data
from babel import Locale

from oncebeat.errors import ConfigError, ImportRejected
from oncebeat.reminders.importing import read_invoices_csv, read_payments_csv
from oncebeat.sample import load_book
from oncebeat.sample.book import Book, chinook_book, generate_book, write_invoices_csv, write_payments_csv

START = date(2026, 3, 2)
REPO = Path(__file__).resolve().parents[2]
CHINOOK = shared_data("chinook")
needs_chinook = pytest.mark.skipif(
    not (CHINOOK / "csv" / "Invoice.csv").is_file(),
    reason=f"Chinook sample data not found at {CHINOOK.resolve()} (the shared/ folder beside the repository)",
)


def never_paid(book: Book) -> list[str]:
    coming = {p.number for p in book.payments}
    return [i.number for i in book.invoices if i.status == "open" and i.number not in coming]


def test_the_same_seed_gives_the_same_book() -> None:
    assert generate_book(seed=11, start=START) == generate_book(seed=11, start=START)


def test_another_seed_gives_another_book() -> None:
    assert generate_book(seed=11, start=START) != generate_book(seed=12, start=START)


def test_the_global_random_generator_is_neither_used_nor_disturbed() -> None:
    import random

    random.seed(123)
    expected = random.random()
    random.seed(123)
    generate_book(seed=1, start=START)
    assert random.random() == expected


def test_sizes_follow_the_arguments() -> None:
    book = generate_book(seed=3, start=START, customers=15, invoices=90, history_days=60)
    assert len(book.customers) == 15
    assert len(book.invoices) == 90
    assert len({i.number for i in book.invoices}) == 90
    assert len({c.email for c in book.customers}) == 15
    assert all(START - timedelta(days=63) <= i.issued_on < START for i in book.invoices)
    assert book.as_of == START


def test_a_generated_book_looks_like_real_receivables() -> None:
    book = generate_book(seed=7, start=START)
    currencies = Counter(i.currency for i in book.invoices)
    zones = {c.tz for c in book.customers}
    assert len(currencies) >= 6 and {"USD", "EUR", "JPY"} <= set(currencies)
    assert len(zones) >= 8
    assert {"America/Chicago", "Europe/Berlin", "Asia/Tokyo"} & zones
    for customer in book.customers:
        zoneinfo.ZoneInfo(customer.tz)
        Locale.parse(customer.locale)
        local, _, domain = customer.email.partition("@")
        assert domain in {"example.com", "example.org", "example.net"}
        assert local.isascii() and local == local.lower()
    assert any(not c.name.isascii() for c in book.customers)
    by_email = {c.email: c for c in book.customers}
    for inv in book.invoices:
        assert inv.customer_email in by_email
        assert inv.due_on > inv.issued_on
        assert (inv.due_on - inv.issued_on).days in {15, 30, 45}
        assert inv.amount_due > 0
        assert inv.number.startswith(f"INV-{inv.issued_on.year}-") and len(inv.number) == len("INV-2026-00042")
        if inv.status == "paid":
            assert inv.paid_on is not None and inv.issued_on <= inv.paid_on < START
        else:
            assert inv.paid_on is None
    statuses = Counter(i.status for i in book.invoices)
    assert statuses["paid"] > statuses["void"] > 0
    share_never = len(never_paid(book)) / len(book.invoices)
    assert 0.05 <= share_never <= 0.3
    # JPY amounts are whole yen, and nobody invoices ¥5 or $0.40
    assert all(i.amount_due >= 1000 for i in book.invoices if i.currency == "JPY")


def test_payments_still_to_come_are_sorted_and_belong_to_open_invoices() -> None:
    book = generate_book(seed=7, start=START)
    by_number = {i.number: i for i in book.invoices}
    assert book.payments
    assert book.payments == sorted(book.payments, key=lambda p: (p.paid_on, p.number))
    assert len({p.number for p in book.payments}) == len(book.payments)
    for payment in book.payments:
        invoice = by_number[payment.number]
        assert invoice.status == "open" and invoice.paid_on is None
        assert payment.paid_on >= START
    offsets = [(p.paid_on - by_number[p.number].due_on).days for p in book.payments]
    offsets += [(i.paid_on - i.due_on).days for i in book.invoices if i.paid_on]
    assert min(offsets) < 0 < max(offsets)  # some pay early, some late
    assert max(offsets) >= 7


def test_a_generated_book_survives_the_csv_round_trip(tmp_path: Path) -> None:
    book = generate_book(seed=5, start=START)
    path = tmp_path / "book.csv"
    write_invoices_csv(book, path)
    result = read_invoices_csv(path)
    assert result.problems == []
    assert result.invoices == book.invoices
    assert sorted(result.customers, key=lambda c: c.email) == sorted(
        (c for c in book.customers if any(i.customer_email == c.email for i in book.invoices)), key=lambda c: c.email
    )
    assert any(not c.name.isascii() for c in result.customers)


def test_future_payments_survive_the_csv_round_trip(tmp_path: Path) -> None:
    book = generate_book(seed=5, start=START)
    path = tmp_path / "payments.csv"
    write_payments_csv(book.payments, path)
    payments, problems = read_payments_csv(path)
    assert problems == []
    assert payments == book.payments


@needs_chinook
def test_chinook_becomes_412_invoices_of_59_customers_due_30_days_after_issue() -> None:
    book, description = chinook_book(CHINOOK)
    assert len(book.invoices) == 412
    assert len(book.customers) == 59
    assert all(i.due_on == i.issued_on + timedelta(days=30) for i in book.invoices)
    assert all(i.currency == "USD" for i in book.invoices)
    first = book.invoices[0]
    assert (first.number, first.amount_due, first.issued_on) == ("CHINOOK-1", 198, date(2021, 1, 1))
    assert book.as_of == date(2026, 1, 11)
    assert max(i.issued_on for i in book.invoices) == date(2025, 12, 22)
    customer = next(c for c in book.customers if c.email == "luisg@example.com")
    assert (customer.name, customer.locale, customer.tz) == ("Luís Gonçalves", "pt_BR", "America/Sao_Paulo")
    assert "seed" in description.lower() or "Random(7)" in description
    assert "412" in description


@needs_chinook
def test_chinook_is_seeded_and_shifted_to_the_given_day() -> None:
    today = date(2026, 6, 1)
    book, description = chinook_book(CHINOOK, today=today)
    again, _ = chinook_book(CHINOOK, today=today)
    assert book == again
    assert chinook_book(CHINOOK, seed=8, today=today)[0] != book
    assert max(i.issued_on for i in book.invoices) == today - timedelta(days=20)
    assert book.as_of == today
    paid = [i for i in book.invoices if i.status == "paid"]
    assert 0.55 < (len(paid) + len(book.payments)) / len(book.invoices) < 0.85
    assert all(i.paid_on is not None and i.paid_on < today for i in paid)
    assert all(p.paid_on >= today for p in book.payments)
    assert book.payments == sorted(book.payments, key=lambda p: (p.paid_on, p.number))
    delays = [(i.paid_on - i.issued_on).days for i in paid if i.paid_on]
    assert min(delays) >= 0 and max(delays) <= 60
    assert "shifted" in description


@needs_chinook
def test_paid_share_decides_how_many_chinook_invoices_get_paid() -> None:
    nobody, _ = chinook_book(CHINOOK, paid_share=0.0)
    everybody, _ = chinook_book(CHINOOK, paid_share=1.0)
    assert all(i.status == "open" for i in nobody.invoices) and nobody.payments == []
    assert len(everybody.payments) + sum(i.status == "paid" for i in everybody.invoices) == 412


@needs_chinook
def test_chinook_survives_the_csv_round_trip_with_non_ascii_names(tmp_path: Path) -> None:
    book, _ = chinook_book(CHINOOK)
    path = tmp_path / "chinook.csv"
    write_invoices_csv(book, path)
    result = read_invoices_csv(path)
    assert result.problems == []
    assert result.invoices == book.invoices
    assert sorted(result.customers, key=lambda c: c.email) == sorted(book.customers, key=lambda c: c.email)
    assert any(c.name == "Stanisław Wójcik" for c in result.customers)


@needs_chinook
def test_the_module_script_writes_the_chinook_csv(tmp_path: Path) -> None:
    out = tmp_path / "chinook.csv"
    done = subprocess.run(
        [sys.executable, "-m", "oncebeat.sample.book", "chinook", str(out), "--data", str(CHINOOK)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "CHINOOK-<InvoiceId>" in done.stdout
    result = read_invoices_csv(out)
    assert result.problems == [] and len(result.invoices) == 412


def test_a_missing_chinook_folder_is_a_clear_config_error(tmp_path: Path) -> None:
    from oncebeat.errors import ConfigError

    with pytest.raises(ConfigError, match="Invoice.csv"):
        chinook_book(tmp_path / "nowhere")


def test_load_book_generates_by_default_one_customer_per_five_invoices() -> None:
    assert load_book(seed=9, start=START) == generate_book(seed=9, start=START, invoices=200, customers=40)
    small = load_book(seed=9, start=START, invoices=20)
    assert len(small.invoices) == 20 and len(small.customers) == 10  # at least 10 customers
    with pytest.raises(ConfigError, match="customers must be at least 1"):
        load_book(start=START, customers=0)


def test_load_book_reads_the_import_files_with_payments_sorted_by_date(tmp_path: Path) -> None:
    book = generate_book(seed=5, start=START)
    write_invoices_csv(book, tmp_path / "inv.csv")
    write_payments_csv(list(reversed(book.payments)), tmp_path / "pay.csv")
    loaded = load_book(seed=123, start=START, invoices_csv=tmp_path / "inv.csv", payments_csv=tmp_path / "pay.csv")
    assert loaded.invoices == book.invoices and loaded.as_of == START
    assert [p.paid_on for p in loaded.payments] == sorted(p.paid_on for p in book.payments)
    assert load_book(start=START, invoices_csv=tmp_path / "inv.csv").payments == []


def test_load_book_refuses_a_bad_file_naming_it_and_the_fix(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("invoice_number,customer_email\nINV-1,not-an-email\n", encoding="utf-8")
    with pytest.raises(ImportRejected) as caught:
        load_book(start=START, invoices_csv=bad)
    assert str(bad) in str(caught.value) and "nothing was imported" in str(caught.value)
