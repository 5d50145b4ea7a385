"""Addresses that can never be delivered are refused at import, by the rule every send applies; a relay's 5xx is final."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path

import pytest
from reminder_harness import FIRST_FIRE, Harness, invoice, maildir_sink

from oncebeat.mail import address_problem
from oncebeat.reminders.model import Customer
from oncebeat.store import Store, open_store
from oncebeat.timebase import SimulatedClock

ROOT = Path(__file__).resolve().parents[2]
UNDELIVERABLE = ['"a,b"@example.test', "bob@-example-.test", "bob@exa_mple.test", "x" * 300 + "@example.test",
                 "=?utf-8?q?a=0D=0AX-Injected:_1?=@example.test"]


@pytest.mark.parametrize("address", UNDELIVERABLE)
def test_the_shared_rule_refuses_addresses_no_relay_delivers(address: str) -> None:
    assert address_problem(address)


@pytest.mark.parametrize("address", ["ana@example.test", "jürgen@example.test", "zoe@bücher.example",
                                     "a.b+c@mail.example.co.uk"])
def test_the_shared_rule_accepts_ordinary_and_international_addresses(address: str) -> None:
    assert address_problem(address) is None


def test_import_refuses_each_undeliverable_address_with_its_line_and_column(tmp_path: Path, db_url: str) -> None:
    rows = "".join(f'INV-{n},"{a.replace(chr(34), chr(34) * 2)}",Bob,USD,10.00,2026-01-01,2026-01-31\n'
                   for n, a in enumerate(UNDELIVERABLE))
    (tmp_path / "invoices.csv").write_text(
        "invoice_number,customer_email,customer_name,currency,amount_due,issued_on,due_on\n" + rows, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    result = subprocess.run([sys.executable, "-m", "oncebeat.cli", "import", "invoices.csv", "--db", db_url],
                            cwd=tmp_path, env=env, text=True, capture_output=True, timeout=300)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    for line in range(2, 2 + len(UNDELIVERABLE)):
        assert f"invoices.csv:{line}: column customer_email:" in result.stderr, result.stderr
    assert result.stderr.count("is not a deliverable email address") >= 3  # the rest fail the earlier bare-address check
    with open_store(db_url) as store:
        assert store.read("list_invoices") == []


@pytest.fixture
def harness(store: Store, tmp_path: Path) -> Iterator[Harness]:
    sink = maildir_sink(tmp_path)
    h = Harness(store=store, sink=sink, clock=SimulatedClock(FIRST_FIRE - timedelta(hours=1)))
    yield h
    h.close()
    sink.stop()


def test_a_recipient_the_relay_refuses_permanently_fails_at_once_with_the_reply_kept(harness: Harness) -> None:
    harness.sink.faults.reject_recipient("gone@example.test", code=550, text="5.1.1 no such user")
    customer = Customer(email="gone@example.test", name="Gone", locale="en_US", tz="America/Chicago")
    harness.add_invoices(invoice("INV-1", date(2026, 3, 1), email="gone@example.test"), customers=(customer,))
    harness.tick_to(FIRST_FIRE)
    harness.new_worker().drain()
    [reminder] = harness.reminders()
    assert reminder["state"] == "failed"
    assert "550" in reminder["reason"] and "5.1.1 no such user" in reminder["reason"]
    [job] = harness.store.read("list_jobs", state=None, task="reminders.send", limit=10)
    assert job["attempt"] == 1 and job["state"] == "completed"
    assert harness.messages() == []


def test_an_undeliverable_address_already_stored_fails_at_once_instead_of_retrying(harness: Harness) -> None:
    customer = Customer(email="bob@exa_mple.test", name="Bob", locale="en_US", tz="America/Chicago")
    harness.add_invoices(invoice("INV-2", date(2026, 3, 1), email="bob@exa_mple.test"), customers=(customer,))
    harness.tick_to(FIRST_FIRE)
    harness.new_worker().drain()
    [reminder] = harness.reminders()
    assert reminder["state"] == "failed"
    assert "undeliverable address 'bob@exa_mple.test'" in reminder["reason"] and "'_'" in reminder["reason"]
    [job] = harness.store.read("list_jobs", state=None, task="reminders.send", limit=10)
    assert job["attempt"] == 1 and job["state"] == "completed"
