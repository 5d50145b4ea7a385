# ruff: noqa: F811  (fixtures imported from web_helpers are redefined as test arguments, as pytest intends)
"""The dashboard's invoice search by customer name (issue 26 item 5), case- and accent-blind, on both backends:
"muller" finds Müller, "zoe" finds Zoë; a number or an email still finds what it did; nothing else is found."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from datetime import date

from starlette.testclient import TestClient
from web_helpers import csrf_of, dashboard_client, runtime  # noqa: F401  (fixtures)

from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.runtime import Runtime


def _numbers(page: str) -> list[str]:
    return re.findall(r'<a href="/reminders/invoices/([^"]+)">', page)


def test_a_customer_is_found_by_name_without_case_or_accents(runtime: Runtime,
                                                             dashboard_client: Callable[..., TestClient]) -> None:
    people = [("anna@example.de", "Anna Müller GmbH"), ("zoe@example.fr", "Zoë Martin"), ("bob@example.com", "Bob")]
    runtime.service.upsert([Customer(email=e, name=n) for e, n in people],
                           [Invoice(number=f"INV-{k}", customer_email=e, currency="EUR", amount_due=1000 + k,
                                    issued_on=date(2026, 1, 1), due_on=date(2026, 2, 1))
                            for k, (e, _) in enumerate(people)])
    client = dashboard_client()
    csrf = csrf_of(client.get("/reminders").text)

    def search(q: str) -> str:
        answer = client.post("/reminders/search", data={"csrf": csrf, "q": q})
        assert answer.status_code == 200
        return answer.text

    assert _numbers(search("muller")) == ["INV-0"]
    assert _numbers(search("MÜLLER")) == ["INV-0"]
    assert _numbers(search("zoe mar")) == ["INV-1"]
    assert _numbers(search("INV-2")) == ["INV-2"]  # a number finds its invoice, not a name holding it
    assert _numbers(search("zoe@example.fr")) == ["INV-1"]
    nothing = search("mueller")
    assert _numbers(nothing) == [] and "no customer with that email or name" in html.unescape(nothing)
