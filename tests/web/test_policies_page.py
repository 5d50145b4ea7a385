# ruff: noqa: F811  (fixtures imported from web_helpers are redefined as test arguments, as pytest intends)
"""The Policies page and the invoice page's ladder (issue 23 item 2): ladders in matching order with the invoices
each version holds, behind the login; on both backends (the ``db_url`` fixture), then in a real browser."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from datetime import date, timedelta
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from web_helpers import dashboard_client  # noqa: F401  (fixture)

from oncebeat.provenance import current_source
from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.runtime import Runtime, load_runtime

TOML = """[reminders]
stages = [1, 7, 14, 30]

[[ladders]]
name = "enterprise"
match = { currency = ["EUR", "CHF"], amount_min = 1000000 }
stages = [7, 21, 45]
spacing = "nominal"
from = "Accounts <ar@example.de>"

[[ladders]]
name = "eur"
match = { currency = "EUR" }
stages = [3, 10]
"""
DUE = date(2026, 3, 2)


def _book(rt: Runtime) -> None:
    def inv(number: str, currency: str, amount: int, due: date = DUE) -> Invoice:
        return Invoice(number=number, customer_email="ana@example.test", currency=currency, amount_due=amount,
                       issued_on=due - timedelta(days=30), due_on=due)

    rt.service.upsert([Customer(email="ana@example.test", name="Ana")],
                      [inv("BIG-1", "EUR", 2_500_000), inv("EUR-1", "EUR", 9_900), inv("EUR-2", "EUR", 100),
                       inv("USD-1", "USD", 12_345), inv("LATER-1", "USD", 500, DUE + timedelta(days=30))])
    rt.service.scan(occurrence_id=1, business_date=DUE + timedelta(days=8), source=current_source("clock"))


@pytest.fixture
def runtime(db_url: str, tmp_path: Path) -> Iterator[Runtime]:
    (tmp_path / "oncebeat.toml").write_text(TOML, encoding="utf-8")
    rt = load_runtime(database_url=db_url, config=tmp_path / "oncebeat.toml")
    try:
        _book(rt)
        yield rt
    finally:
        rt.close()


def test_the_policies_page_lists_ladders_with_the_invoices_each_version_holds(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    anonymous = dashboard_client(role=None).get("/policies")
    assert anonymous.status_code in (302, 303) and "/login" in anonymous.headers["location"]
    page = dashboard_client().get("/policies")
    assert page.status_code == 200
    text = page.text
    assert '<a href="/policies" aria-current="page">Policies</a>' in text
    order = [text.index(f'id="ladder-{n}"') for n in ("enterprise", "eur", "default")]
    assert order == sorted(order)  # matching order, default last
    assert "currency EUR/CHF, amount &gt;= 1000000" in text and "everything else" in text
    assert "v1: <b>1</b> / 1" in text.split('id="ladder-enterprise"')[1].split("</tr>")[0]
    assert "v1: <b>2</b> / 2" in text.split('id="ladder-eur"')[1].split("</tr>")[0]
    assert "v1: <b>1</b> / 1" in text.split('id="ladder-default"')[1].split("</tr>")[0]  # LATER-1: not yet
    listed = dashboard_client().get("/policies?ladder=eur").text
    assert ">EUR-1</a>" in listed and ">EUR-2</a>" in listed and "USD-1" not in listed
    assert dashboard_client().get("/policies?ladder=nope").status_code == 404


def test_the_invoice_page_shows_its_ladder_and_version(runtime: Runtime,
                                                       dashboard_client: Callable[..., TestClient]) -> None:
    client = dashboard_client()
    big = client.get("/reminders/invoices/BIG-1").text
    assert '<a href="/policies?ladder=enterprise">enterprise</a> version 1 · stages 7, 21, 45 · spacing nominal' in big
    later = client.get("/reminders/invoices/LATER-1").text
    assert "not in dunning yet" in later


playwright_sync = pytest.importorskip("playwright.sync_api")
CHROMIUM = "/usr/bin/chromium"
TOKEN = "browser-test-token"


@pytest.mark.slow
def test_an_operator_reads_the_ladders_in_a_real_browser(runtime: Runtime, db_url: str, tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing")
    with socket_port() as port:
        pass
    env = {**os.environ, "ONCEBEAT_WEB_TOKEN": TOKEN}
    proc = subprocess.Popen([sys.executable, "-m", "oncebeat.cli", "web", "--port", str(port), "--db", db_url,
                             "--config", str(tmp_path / "oncebeat.toml")], env=env, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url + "/metrics", timeout=5):
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "oncebeat web did not start"
                time.sleep(0.2)
        with playwright_sync.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                         args=["--headless", "--no-sandbox", "--disable-gpu"])
            pg = browser.new_page(viewport={"width": 1360, "height": 900})
            errors: list[str] = []
            pg.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
            pg.goto(url + "/policies")
            assert pg.url.startswith(url + "/login?next=")  # every page needs the login
            pg.fill("input[name=token]", TOKEN)
            pg.click("form.card button[type=submit]")
            pg.goto(url + "/policies")
            assert pg.inner_text("h1") == "Policies"
            assert "spacing" in pg.inner_text("table") and "enterprise" in pg.inner_text("table")
            pg.click("#ladder-eur a")
            assert "Invoices on ladder eur" in pg.inner_text("main")
            _shot(pg, "policies")
            pg.click("a:text-is(\"EUR-1\")")
            assert pg.inner_text("h1").startswith("Invoice EUR-1")
            assert "eur version 1" in pg.inner_text("main")
            browser.close()
        assert errors == []
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _shot(pg: object, name: str) -> None:
    folder = os.environ.get("ONCEBEAT_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(Path(folder) / f"dashboard-{name}.png"), full_page=True)  # type: ignore[attr-defined]


class socket_port:  # noqa: N801  (a context manager named for what it gives)
    """A free loopback port (bound, then released for the server to take)."""

    def __enter__(self) -> int:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        return int(self.sock.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        self.sock.close()
