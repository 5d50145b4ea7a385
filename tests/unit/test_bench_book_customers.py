"""The bench's invoice books can spread over a million customers (issue 27 item 5), deterministically."""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path

import pytest

from conftest import shared_data

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root holds the bench package

from bench import invoices  # noqa: E402

RETAIL = shared_data("online_retail")
BUSINESS_DATE = date(2026, 3, 2)


@pytest.fixture(autouse=True)
def retail(monkeypatch: pytest.MonkeyPatch) -> None:
    if not (RETAIL / invoices.FILES[0]).exists():
        pytest.skip(f"the Online Retail data is not in {RETAIL}")
    monkeypatch.setattr(invoices, "RETAIL_DIR", RETAIL)
    invoices.retail_rows.cache_clear()
    invoices._real_customers.cache_clear()


def test_the_default_book_keeps_the_real_customers() -> None:
    real = invoices.customers()
    assert invoices.copies(None) == 1 and invoices.copies(len(real)) == 1
    assert all("+" not in email for email, _, _, _ in real)
    emails = {email for email, *_ in real}
    assert {row[1] for row in invoices.invoices(20_000, BUSINESS_DATE)} <= emails


def test_a_book_of_a_million_customers_has_them_all_and_uses_them() -> None:
    people = invoices.customers(1_000_000)
    emails = [email for email, *_ in people]
    assert len(people) >= 1_000_000 and len(set(emails)) == len(emails)
    assert len({name for _, name, _, _ in people}) == len(people)  # names tell copies apart (search by name)
    book = list(invoices.invoices(100_000, BUSINESS_DATE, 1_000_000))
    used = {row[1] for row in book}
    assert used <= set(emails)
    assert len(used) > 50_000  # 100k invoices spread over many copies, not piled on the real 6k
    assert len({row[0] for row in book}) == len(book)  # invoice numbers stay unique


def test_the_same_arguments_give_the_same_book() -> None:
    first = list(invoices.invoices(5_000, BUSINESS_DATE, 50_000))
    invoices.retail_rows.cache_clear()
    assert list(invoices.invoices(5_000, BUSINESS_DATE, 50_000)) == first
    # the copies change only who owns an invoice, not its number, amount, dates or status
    plain = list(invoices.invoices(5_000, BUSINESS_DATE))
    assert [r[:1] + r[2:] for r in first] == [r[:1] + r[2:] for r in plain]
