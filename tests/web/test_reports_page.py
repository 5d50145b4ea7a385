# ruff: noqa: F811  (fixtures imported from web_helpers are redefined as test arguments, as pytest intends)
"""The Reports page on both backends: login needed, the hand-computed figures of tests/reports_book.py in its tables
and charts (one card per currency, never a sum across currencies), and a bad month named with status 400."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from starlette.testclient import TestClient
from web_helpers import dashboard_client, runtime  # noqa: F401  (fixtures)

from oncebeat.reminders.runtime import Runtime
from oncebeat.timebase import SimulatedClock
from reports_book import seed


def _on_as_of(runtime: Runtime) -> None:
    seed(runtime.service, runtime.store)
    runtime.clock = SimulatedClock(datetime(2026, 4, 10, 15, tzinfo=UTC))  # 10:00 in Chicago: as of 2026-04-10


def test_reports_page_shows_the_hand_computed_figures(runtime: Runtime,
                                                      dashboard_client: Callable[..., TestClient]) -> None:
    _on_as_of(runtime)
    assert dashboard_client(role=None).get("/reports").status_code in (302, 303, 401)
    page = dashboard_client().get("/reports?from=2026-01&to=2026-04")
    assert page.status_code == 200, page.text
    html = page.text
    cards = re.findall(r'data-currency="([A-Z]{3})"', html)
    assert cards == ["EUR", "JPY", "USD"]
    eur = html[html.index('data-currency="EUR"'):html.index('data-currency="JPY"')]
    # 155/7, 227/7, 391/9 days; CEI 100, 80, 60 %; April not over (tests/acceptance/test_reports.py).
    assert re.findall(r'class="num dso">([^<]*)<', eur) == ["22.1", "32.4", "43.4", "n/a"]
    assert re.findall(r'class="num cei">([^<]*)<', eur) == ["100.0 %", "80.0 %", "60.0 %", "n/a"]
    assert "month not over on 2026-04-10" in eur and "€5,000.00" in eur
    assert eur.count("<svg") == 2 and "<title>26-04: n/a, month not over on 2026-04-10</title>" not in eur
    jpy = html[html.index('data-currency="JPY"'):html.index('data-currency="USD"')]
    assert "1 paid JPY invoice(s) issued by 2026-02 have no payment date" in jpy
    assert "nothing was due to collect" in jpy
    # Stage effectiveness: reminded stage 1 paid within 3 days 2 of 5 (40.0%), baseline 0 of 3.
    assert "40.0%" in html and "paid within 14 days after the stage" in html
    assert "Promises" in html and "Disputes" in html and "€12,000.00" in html  # disputed in March


def test_reports_page_names_a_bad_month(runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    page = dashboard_client().get("/reports?from=2026-13")
    assert page.status_code == 400 and "from: &#39;2026-13&#39; is not a month" in page.text
    page = dashboard_client().get("/reports?currency=%3Cb%3E")
    assert page.status_code == 400 and "&lt;b&gt;" in page.text and "<b>" not in page.text.split("</nav>")[-1]


def test_reports_page_refuses_an_unknown_kind_and_shows_only_the_kind_asked(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    client = dashboard_client()
    bogus = client.get("/reports?kind=bogus")
    assert bogus.status_code == 400
    assert ("kind: &#39;bogus&#39; is not a report; use one of all, dso, cei, stages, aging, promises, disputes, "
            "holds") in bogus.text
    aging = client.get("/reports?kind=aging")
    assert aging.status_code == 200 and "<h2>Aging on" in aging.text and "Stage effectiveness" not in aging.text
    assert '<option selected>aging</option>' in aging.text
    every = client.get("/reports").text
    assert all(h in every for h in ("DSO and CEI per currency", "Stage effectiveness", "Promises to pay", "Aging on"))


def test_reports_page_computes_only_the_sections_it_shows(runtime: Runtime, dashboard_client: Callable[..., TestClient],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A section not asked is not computed: the real report functions run, counted by a pass-through wrapper."""
    import oncebeat.reminders.reports as reports
    import oncebeat.reminders.reports.runs as runs

    _on_as_of(runtime)
    calls: list[str] = []

    def counted(name: str, module: Any = reports, as_name: str | None = None) -> None:
        real = getattr(module, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls.append(as_name or name)
            return real(*args, **kwargs)
        monkeypatch.setattr(module, name, wrapper)

    for name in ("month_figures", "stage_effectiveness", "promises", "disputes", "fees_table", "_aging"):
        counted(name)
    # The page's stage effectiveness: live under a budget (reports.runs), the same SQL as stage_effectiveness.
    counted("stage_counts", runs, "stage_effectiveness")
    client = dashboard_client()
    page = client.get("/reports?kind=aging")
    assert page.status_code == 200 and "<h2>Aging on" in page.text
    assert calls == ["_aging"]
    calls.clear()
    page = client.get("/reports?kind=dso")
    assert page.status_code == 200 and "DSO and CEI per currency" in page.text and "Aging on" not in page.text
    assert calls == ["month_figures"]  # DSO and CEI: one read of the receivables, nothing else
    calls.clear()
    assert client.get("/reports?kind=stages").status_code == 200
    assert calls == ["stage_effectiveness"]
    calls.clear()
    assert client.get("/reports").status_code == 200
    assert sorted(calls) == sorted(["month_figures", "stage_effectiveness", "promises", "disputes", "fees_table",
                                    "_aging"])
