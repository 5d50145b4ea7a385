# ruff: noqa: F811  (fixtures imported from web_helpers are redefined as test arguments, as pytest intends)
"""The Policies page's apply button (issue 23 item 2): after a ladder edit the page says how many open invoices
move from which version to which, an admin's click (CSRF, session) moves them, audited with the operator; a viewer
is refused; a count that changed meanwhile moves nothing. On both backends, then in Chromium."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from web_helpers import csrf_of, dashboard_client  # noqa: F401  (fixture)

from oncebeat import audit
from oncebeat.provenance import current_source
from oncebeat.reminders.model import Customer, Invoice
from oncebeat.errors import ConfigError
from oncebeat.reminders.pinning import all_versions, holdings
from oncebeat.reminders.runtime import Runtime, load_runtime

TOML = """[reminders]
stages = [1, 7, 14, 30]

[[ladders]]
name = "eur"
match = { currency = "EUR" }
stages = [3, 10]
"""
EDITED = TOML.replace("stages = [3, 10]", "stages = [3, 12]")
DUE = date(2026, 3, 2)


def _book(db_url: str, config: Path) -> None:
    config.write_text(TOML, encoding="utf-8")
    rt = load_runtime(database_url=db_url, config=config)
    try:
        rt.service.upsert([Customer(email="ana@example.test", name="Ana")],
                          [Invoice(number=n, customer_email="ana@example.test", currency=c, amount_due=10_000,
                                   issued_on=DUE - timedelta(days=30), due_on=DUE)
                           for n, c in (("EUR-1", "EUR"), ("EUR-2", "EUR"), ("USD-1", "USD"))])
        rt.service.scan(occurrence_id=1, business_date=DUE + timedelta(days=4), source=current_source("clock"))
    finally:
        rt.close()
    config.write_text(EDITED, encoding="utf-8")


@pytest.fixture
def runtime(db_url: str, tmp_path: Path) -> Iterator[Runtime]:
    _book(db_url, tmp_path / "oncebeat.toml")
    rt = load_runtime(database_url=db_url, config=tmp_path / "oncebeat.toml")
    try:
        yield rt
    finally:
        rt.close()


def _row(html: str, name: str) -> str:
    return html.split(f'id="ladder-{name}"')[1].split("</tr>")[0]


def test_an_admin_applies_the_edit_with_the_count_shown_and_a_viewer_is_refused(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    viewer = dashboard_client()
    page = viewer.get("/policies").text
    assert "2 open invoices move from v1 to v2" in _row(page, "eur")
    assert "nothing to move" in _row(page, "default")
    refused = viewer.post("/policies/eur/apply", data={"csrf": csrf_of(page), "expected": "2"})
    assert refused.status_code == 403 and "you are logged in as viewer" in refused.text
    anonymous = dashboard_client(role=None)
    assert anonymous.post("/policies/eur/apply", data={"csrf": csrf_of(anonymous.get("/login").text),
                                                       "expected": "2"}).status_code in (303, 401)

    admin = dashboard_client(role="admin")
    page = admin.get("/policies").text
    form = re.search(r'<form method="post" action="/policies/eur/apply".*?</form>', page, re.S)
    assert form is not None and 'name="expected" value="2"' in form.group(0)
    stale = admin.post("/policies/eur/apply", data={"csrf": csrf_of(page), "expected": "3"})
    assert stale.status_code == 400 and "not the 3 confirmed" in stale.text and "nothing was moved" in stale.text
    assert [h.version for h in holdings(runtime.store, runtime.policy) if h.name == "eur"] == [1]
    assert admin.post("/policies/eur/apply", data={"expected": "2"}).status_code == 403  # no CSRF field

    done = admin.post("/policies/eur/apply", data={"csrf": csrf_of(page), "expected": "2"})
    assert done.status_code == 303 and done.headers["location"] == "/policies"
    after = admin.get("/policies").text
    assert "ladder eur: 2 open invoice(s) moved to version 2" in after
    assert "nothing to move" in _row(after, "eur")
    eur = [(h.version, h.open_invoices, h.current) for h in holdings(runtime.store, runtime.policy) if h.name == "eur"]
    assert eur == [(1, 0, False), (2, 2, True)]
    [event] = audit.list_events(runtime.store, since=datetime(1970, 1, 1, tzinfo=UTC), kind="ladders.applied")
    assert event["source_kind"] == "manual" and event["detail"]["operator"]["via"] == "dashboard"
    assert sorted(event["detail"]["invoices"]) == ["EUR-1", "EUR-2"]


def test_an_edit_after_the_dashboard_started_is_what_it_shows_and_applies_and_a_worker_agrees(
        runtime: Runtime, dashboard_client: Callable[..., TestClient], tmp_path: Path) -> None:
    """Found by a fresh-eyes test: a dashboard started before an edit applied the settings it had read at start,
    recording them as the newest version, and each process then recorded its own view in turn. Every process
    now reads oncebeat.toml as it is on disk (the page, the apply, a worker's next scan)."""
    config = tmp_path / "oncebeat.toml"
    worker = load_runtime(database_url=runtime.store.url, config=config)  # started, like the web, before the edit
    try:
        config.write_text(TOML.replace("stages = [3, 10]", "stages = [3, 14]"), encoding="utf-8")
        admin = dashboard_client(role="admin")
        page = admin.get("/policies").text
        assert "2 open invoices move from v1 to v2" in _row(page, "eur")
        done = admin.post("/policies/eur/apply", data={"csrf": csrf_of(page), "expected": "2"})
        assert done.status_code == 303
        eur = {v.version: v.settings.stages for v in all_versions(runtime.store).values() if v.name == "eur"}
        assert eur == {1: (3, 10), 2: (3, 14)}  # the file on disk, not the [3, 12] the dashboard read at start
        worker.service.scan(occurrence_id=2, business_date=DUE + timedelta(days=5), source=current_source("clock"))
        eur = {v.version: v.settings.stages for v in all_versions(runtime.store).values() if v.name == "eur"}
        assert eur == {1: (3, 10), 2: (3, 14)}  # the worker's scan recorded no version of a stale file
        current = [(h.name, h.version) for h in holdings(runtime.store, runtime.fresh_policy()) if h.current]
        assert ("eur", 2) in current and ("eur", 1) not in current

        config.write_text("[reminders]\nstages = 7\n", encoding="utf-8")  # a broken edit: refused, nothing moves
        broken = admin.get("/policies")
        assert broken.status_code == 400 and "stages" in broken.text
        api_like = admin.post("/policies/eur/apply", data={"csrf": csrf_of(page), "expected": "0"})
        assert api_like.status_code == 400
        with pytest.raises(ConfigError):
            worker.service.current_policy()
        # the worker's scan goes on under the settings it had (logged), recording no version of the broken file
        worker.service.scan(occurrence_id=3, business_date=DUE + timedelta(days=6), source=current_source("clock"))
        eur = {v.version: v.settings.stages for v in all_versions(runtime.store).values() if v.name == "eur"}
        assert eur == {1: (3, 10), 2: (3, 14)}
    finally:
        worker.close()


playwright_sync = pytest.importorskip("playwright.sync_api")
CHROMIUM = "/usr/bin/chromium"
TOKEN = "browser-apply-token"
VIEWER = "browser-apply-viewer"


@pytest.mark.slow
def test_an_operator_applies_a_ladder_edit_in_a_real_browser(runtime: Runtime, db_url: str, tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing")
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    env = {**os.environ, "ONCEBEAT_WEB_TOKEN": TOKEN, "ONCEBEAT_WEB_VIEWER_TOKEN": VIEWER}
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
            errors: list[str] = []
            anonymous = browser.new_page()
            anonymous.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
            anonymous.goto(url + "/policies")
            assert anonymous.url.startswith(url + "/login?next=")  # an anonymous browser gets nothing
            assert "EUR-1" not in anonymous.content() and "move from" not in anonymous.content()
            anonymous.close()

            pg = browser.new_page(viewport={"width": 1360, "height": 760})
            pg.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
            pg.goto(url + "/login")
            pg.fill("input[name=token]", VIEWER)
            pg.click("form.card button[type=submit]")
            pg.goto(url + "/policies")
            assert pg.is_disabled("#ladder-eur form button")  # a viewer's button: disabled, the reason as title
            assert "read-only" in (pg.get_attribute("#ladder-eur form button", "title") or "")
            pg.context.clear_cookies()

            pg.goto(url + "/login")
            pg.fill("input[name=token]", TOKEN)
            pg.click("form.card button[type=submit]")
            pg.goto(url + "/policies")
            assert pg.inner_text("#ladder-eur .apply-count") == "2 open invoices move from v1 to v2"
            _shot(pg, "policies-apply")
            pg.click("#ladder-eur form button")
            assert pg.url == url + "/policies"
            assert "ladder eur: 2 open invoice(s) moved to version 2" in pg.inner_text("main")
            assert "nothing to move" in pg.inner_text("#ladder-eur")
            _shot(pg, "policies-applied")
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
