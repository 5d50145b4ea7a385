"""The proof-of-notice download in a real browser (Debian's Chromium driven by Playwright) against a real
``oncebeat web`` server: a viewer clicks "PDF" on the invoice page and gets the PDF; without a session the same
URL lands on the login page with none of the customer's data. Both backends.

Set ``ONCEBEAT_SCREENSHOTS=docs/img`` to save the invoice page with its download links (docs/evidence.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_browser import VIEWER_TOKEN, Live, _log_in, _shot, browser, console_errors, live, page  # noqa: F401

pytestmark = pytest.mark.slow


def test_a_viewer_downloads_the_proof_of_notice_from_the_invoice_page(live: Live, page: object) -> None:  # noqa: F811
    pg = page
    number = live.seeded.invoice_number
    pg.goto(live.url + "/reminders/evidence/" + number)  # type: ignore[attr-defined]
    assert pg.url.startswith(live.url + "/login?next=")  # type: ignore[attr-defined]  # no session: log in first
    content = pg.content()  # type: ignore[attr-defined]
    assert live.seeded.customer_email not in content and "%PDF" not in content
    _log_in(pg, live, VIEWER_TOKEN)
    pg.goto(live.url + "/reminders/invoices/" + number)  # type: ignore[attr-defined]
    link = pg.locator("a:has-text('PDF')")  # type: ignore[attr-defined]
    link.scroll_into_view_if_needed()
    _shot(pg, "invoice-evidence")
    with pg.expect_download() as pdf_download:  # type: ignore[attr-defined]
        link.click()
    download = pdf_download.value
    assert download.suggested_filename == f"evidence-{number}.pdf"
    pdf = Path(download.path()).read_bytes()
    assert pdf.startswith(b"%PDF-")
    with pg.expect_download() as json_download:  # type: ignore[attr-defined]
        pg.click("a:has-text('JSON')")  # type: ignore[attr-defined]
    raw = Path(json_download.value.path()).read_bytes()
    record = json.loads(raw)
    assert record["invoice"]["number"] == number and record["stages"]
    assert any(s["state"] == "in_doubt" for s in record["stages"])  # the seeded invoice has a stage in doubt
