# ruff: noqa: F811  (fixtures imported from test_browser are redefined as test arguments, as pytest intends)
"""The Reports page in a real browser (Debian's Chromium via Playwright) against a real ``oncebeat web`` on each
backend, on the hand-computed book (tests/reports_book.py). ``ONCEBEAT_SCREENSHOTS=docs/img`` saves
``dashboard-reports.png`` (docs/dashboard.md)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from test_browser import TOKEN, VIEWER_TOKEN, _shot, browser, console_errors, page  # noqa: F401
from web_helpers import serve_web

from oncebeat.reminders.policy import write_default_config
from oncebeat.reminders.runtime import load_runtime
from reports_book import seed

pytestmark = pytest.mark.slow


@pytest.fixture
def reports_url(db_url: str, tmp_path: Path) -> Iterator[str]:
    """A real ``oncebeat web`` on the book; the server's clock is the real one (today is after April 2026, so
    January to April are over and their figures are fixed)."""
    config = tmp_path / "oncebeat.toml"
    write_default_config(config)
    rt = load_runtime(database_url=db_url, config=config)
    try:
        seed(rt.service, rt.store)
    finally:
        rt.close()
    with serve_web(db_url, config, tmp_path, ONCEBEAT_WEB_TOKEN=TOKEN, ONCEBEAT_WEB_VIEWER_TOKEN=VIEWER_TOKEN) as url:
        yield url


def test_a_viewer_reads_the_collection_reports_in_a_browser(reports_url: str, page: object) -> None:
    pg: object = page
    pg.goto(reports_url + "/reports")  # type: ignore[attr-defined]
    assert "/login" in pg.url  # type: ignore[attr-defined]  # login needed
    pg.fill("input[name=token]", VIEWER_TOKEN)  # type: ignore[attr-defined]
    pg.click("form.card button[type=submit]")  # type: ignore[attr-defined]
    pg.click("nav a[href='/reports']")  # type: ignore[attr-defined]
    pg.fill("input[name=from]", "2025-12")  # type: ignore[attr-defined]
    pg.fill("input[name=to]", "2026-04")  # type: ignore[attr-defined]
    pg.click("form.filters button[type=submit]")  # type: ignore[attr-defined]
    assert "from=2025-12" in pg.url  # type: ignore[attr-defined]
    eur = pg.locator(".report-currency[data-currency=EUR]")  # type: ignore[attr-defined]
    # December: before the first EUR invoice; January to March: 155/7, 227/7, 391/9 days; CEI 100, 80, 60 %.
    assert eur.locator("td.dso").all_inner_texts()[:4] == ["n/a", "22.1", "32.4", "43.4"]
    assert eur.locator("td.cei").all_inner_texts()[:4] == ["n/a", "100.0 %", "80.0 %", "60.0 %"]
    assert "no EUR invoice before 2026-01" in eur.inner_text()
    assert eur.locator("svg.chart").count() == 2 and eur.locator("svg.chart rect").count() >= 7
    assert pg.locator(".report-currency").count() == 3  # type: ignore[attr-defined]  # EUR, JPY, USD apart
    assert pg.get_by_text("paid within 14 days after the stage").count() >= 1  # type: ignore[attr-defined]
    _shot(pg, "reports")
