# ruff: noqa: F811  (fixtures imported from web_helpers are redefined as test arguments, as pytest intends)
"""Bounded input at the web layer (issue 21 item 2): the Stripe webhook counts body bytes while reading and
answers 413 past 1 MiB whatever the headers (memory of a real uvicorn process measured), a signed body of the
wrong shape answers 400 (a 500 makes Stripe retry for days), a 400-digit id in a URL answers 404, and a
schedule key holding ``/`` has reachable pages."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from web_helpers import LOOPBACK_CLIENT, csrf_of, dashboard_client, login, runtime  # noqa: F401  (fixtures)

from oncebeat import App
from oncebeat.clock import ClockProcess
from oncebeat.reminders.policy import write_default_config
from oncebeat.reminders.runtime import Runtime
from oncebeat.web import WebSettings, create_app
from oncebeat.web.security import MAX_FORM_BYTES
from oncebeat.web.webhooks import MAX_BODY

SECRET = "whsec_test_secret_for_the_limits"
HUGE = "9" * 400


def sign(payload: bytes, secret: str = SECRET) -> str:
    """The Stripe-Signature header Stripe sends: t=<unix>,v1=HMAC-SHA256(secret, "<t>.<payload>")."""
    t = int(time.time())
    return f"t={t},v1=" + hmac.new(secret.encode(), f"{t}.".encode() + payload, hashlib.sha256).hexdigest()


def event(**fields: Any) -> bytes:
    base: dict[str, Any] = {"id": "evt_shape", "object": "event", "type": "invoice.paid", "created": 1767225600,
                            "data": {"object": {"object": "invoice", "number": "S-1"}}}
    return json.dumps({**base, **fields}).encode()


@pytest.fixture
def hooks_client(runtime: Runtime, monkeypatch: pytest.MonkeyPatch,
                 dashboard_client: Callable[..., TestClient]) -> TestClient:
    monkeypatch.setenv("STRIPE_WEBHOOK_SECRET", SECRET)
    return dashboard_client(role=None)


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


WRONG_SHAPES = {
    "an array": (b"[1, 2]", "a list, not an object"),
    "a number": (b"5", "a int, not an object"),
    "a string": (b'"evt"', "a str, not an object"),
    "null": (b"null", "a NoneType, not an object"),
    "data a list": (event(data=[1]), "data.object is not an object"),
    "data.object a list": (event(data={"object": [1]}), "data.object is not an object"),
    "no data": (event(data=None), "data.object is not an object"),
    "id a number": (event(id=7), "no id or type"),
    "nested past the parser": (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    "an integer of 5000 digits": (b'{"id": "e", "type": "t", "n": ' + b"9" * 5000 + b"}", "not a JSON event"),
    "not UTF-8": (b"\xff\xfe{}", "not a JSON event"),
    "created past any date": (event(created=10**30), "created is not a Unix time"),
    "an id of 100 kB": (event(id="e" * 100_000), "id is not 1 to 255 printable characters"),
    "a NUL in the type": (event(type="invoice.paid\u0000"), "type is not 1 to 255 printable characters"),
}


@pytest.mark.parametrize("shape", list(WRONG_SHAPES))
def test_a_signed_body_of_the_wrong_shape_answers_400_with_the_reason(shape: str, hooks_client: TestClient,
                                                                      runtime: Runtime) -> None:
    body, reason = WRONG_SHAPES[shape]
    answer = hooks_client.post("/webhooks/stripe", content=body, headers={"stripe-signature": sign(body)})
    assert answer.status_code == 400 and reason in answer.json()["error"], answer.text
    assert runtime.store.read("list_stripe_events") == []  # nothing recorded


def test_a_signed_event_with_odd_invoice_fields_is_recorded_not_a_500(hooks_client: TestClient,
                                                                      runtime: Runtime) -> None:
    odd = {"object": "invoice", "number": "S-\u00002", "status": "open", "customer_email": "a@example.test",
           "currency": "usd", "amount_due": 10**30, "created": 10**30, "due_date": -1,
           "status_transitions": {"finalized_at": 10**30}, "deep": _nested(900)}
    for n, kind in enumerate(("invoice.finalized", "invoice.paid", "customer.created")):
        body = event(id=f"evt_odd_{n}", type=kind, data={"object": odd})
        answer = hooks_client.post("/webhooks/stripe", content=body, headers={"stripe-signature": sign(body)})
        assert answer.status_code == 200, answer.text
        assert answer.json()["outcome"] in ("invalid", "ignored"), answer.text


def test_a_body_past_the_limit_answers_413_whatever_the_headers(hooks_client: TestClient) -> None:
    def chunks(total: int) -> Iterator[bytes]:
        for _ in range(total // 65536):
            yield b"x" * 65536

    chunked = hooks_client.post("/webhooks/stripe", content=chunks(3 * MAX_BODY), headers={"stripe-signature": "t=1"})
    assert chunked.status_code == 413 and chunked.headers["connection"] == "close"
    declared = hooks_client.post("/webhooks/stripe", content=b"{}",
                                 headers={"content-length": str(MAX_BODY + 1), "stripe-signature": "t=1"})
    assert declared.status_code == 413
    # Just under the limit is read (and answered on its merits: here, a signature that does not match).
    body = b" " * (MAX_BODY - 2) + b"{}"
    under = hooks_client.post("/webhooks/stripe", content=body, headers={"stripe-signature": sign(b"other")})
    assert under.status_code == 400 and "signature" in under.json()["error"]


def test_a_form_past_64_kib_answers_413_before_it_is_parsed(runtime: Runtime,
                                                           dashboard_client: Callable[..., TestClient]) -> None:
    anonymous = dashboard_client(role=None)
    csrf = csrf_of(anonymous.get("/login").text)
    big = anonymous.post("/login", data={"csrf": csrf, "token": "x" * (MAX_FORM_BYTES + 1)})
    assert big.status_code == 413 and big.headers["connection"] == "close"

    def fields() -> Iterator[bytes]:  # a thousand fields of 1 kB, chunked: no Content-Length to look at
        yield f"csrf={csrf}".encode()
        for n in range(1000):
            yield f"&f{n}=".encode() + b"y" * 1000

    viewer = dashboard_client()
    chunked = viewer.post("/reminders/search", content=fields(),
                          headers={"content-type": "application/x-www-form-urlencoded"})
    assert chunked.status_code == 413
    assert anonymous.post("/login", data={"csrf": csrf, "token": "x" * 1000}).status_code == 401  # a form is fine


def _rss_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of ``pid`` in KiB: the resident memory now and its peak so far."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _send_chunked(port: int, total: int, path: str = "/webhooks/stripe") -> tuple[bytes, int]:
    """POST ``total`` bytes chunked to ``path`` over a raw socket; the answer's head, and bytes sent."""
    kind = b"application/json" if path.startswith("/webhooks") else b"application/x-www-form-urlencoded"
    head = (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
            b"Content-Type: " + kind + b"\r\nStripe-Signature: t=1,v1=00\r\n\r\n")
    answer = bytearray()
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)

    def read() -> None:  # read side by side: the answer comes while the body is still being sent
        try:
            while b"\r\n\r\n" not in answer:
                data = sock.recv(65536)
                if not data:
                    return
                answer.extend(data)
        except OSError:
            return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    sent = 0
    chunk = b"10000\r\n" + b"[" * 65536 + b"\r\n"
    try:
        sock.sendall(head)
        while sent < total:
            sock.sendall(chunk)
            sent += 65536
        sock.sendall(b"0\r\n\r\n")
    except OSError:
        pass  # the server answered and closed: the rest was never read
    reader.join(timeout=30)
    sock.close()
    return bytes(answer), sent


@pytest.mark.slow
def test_a_chunked_50_mb_body_gets_413_and_the_server_memory_stays_flat(tmp_path: Path) -> None:
    write_default_config(tmp_path / "oncebeat.toml")
    port = _free_port()
    env = {**os.environ, "STRIPE_WEBHOOK_SECRET": SECRET, "ONCEBEAT_WEB_TOKEN": "limits-token"}
    proc = subprocess.Popen([sys.executable, "-m", "oncebeat.cli", "web", "--port", str(port),
                             "--db", f"sqlite:///{tmp_path}/oncebeat.db", "--config", str(tmp_path / "oncebeat.toml")],
                            env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                    assert response.status == 200
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "oncebeat web did not start"
                time.sleep(0.2)
        before = _rss_kib(proc.pid)
        answer, sent = _send_chunked(port, 50 * 1024 * 1024)
        after = _rss_kib(proc.pid)
        again, _ = _send_chunked(port, 50 * 1024 * 1024)  # the server still serves, and still refuses
        after_two = _rss_kib(proc.pid)
        login, _ = _send_chunked(port, 50 * 1024 * 1024, "/login")  # an anonymous form, same rule
        after_login = _rss_kib(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        assert proc.stderr is not None
        proc.stderr.close()
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert again.startswith(b"HTTP/1.1 413"), again[:200]
    assert login.startswith(b"HTTP/1.1 413"), login[:200]
    grown_peak = max(after[1], after_two[1], after_login[1]) - before[1]
    print(f"\nchunked body: {sent / 2**20:.0f} MiB offered (50 MiB asked); VmRSS {before[0] / 1024:.1f} → "
          f"{after[0] / 1024:.1f} → {after_two[0] / 1024:.1f} MiB, after /login {after_login[0] / 1024:.1f} MiB; "
          f"peak VmHWM +{grown_peak / 1024:.1f} MiB")
    # The limit is 1 MiB: no copy of the 50 MB body (reading it whole raised the peak by 100 MiB).
    assert grown_peak < 16 * 1024, (before, after, after_two, after_login)


@pytest.mark.parametrize("url", [f"/jobs/{HUGE}", f"/reminders/{HUGE}/email.html", f"/doctor/explain/job/{HUGE}",
                                 f"/doctor/explain/occurrence/{HUGE}", "/jobs/9223372036854775808",
                                 "/jobs/99999999999999999999"])
def test_a_400_digit_id_in_a_url_answers_404(url: str, runtime: Runtime,
                                             dashboard_client: Callable[..., TestClient]) -> None:
    client = dashboard_client(role="admin")
    answer = client.get(url)
    assert answer.status_code == 404, (url, answer.text[:300])
    assert "Traceback" not in answer.text


@pytest.mark.parametrize("url", [f"/jobs/{HUGE}/retry", f"/jobs/{HUGE}/cancel", f"/occurrences/{HUGE}/rerun"])
def test_an_action_on_a_400_digit_id_answers_404(url: str, runtime: Runtime,
                                                 dashboard_client: Callable[..., TestClient]) -> None:
    client = dashboard_client(role="admin")
    answer = client.post(url, data={"csrf": csrf_of(client.get("/login").text)})
    assert answer.status_code == 404, (url, answer.text[:300])


def test_the_largest_id_is_looked_up_and_a_huge_before_is_a_400(runtime: Runtime,
                                                                dashboard_client: Callable[..., TestClient]) -> None:
    client = dashboard_client()
    assert client.get("/jobs/" + "9" * 18).status_code == 404  # looked up: no such job
    explained = client.get("/doctor/explain/job/" + "9" * 18)  # looked up too: answered with the reason
    assert explained.status_code == 400 and f"no job {'9' * 18}" in explained.text
    answer = client.get("/jobs", params={"before": HUGE})
    assert answer.status_code == 400 and "at most 18 digits" in answer.text


def test_a_schedule_key_with_a_slash_has_reachable_pages_and_actions(runtime: Runtime) -> None:
    app = App()

    @app.task("limits.noop")
    def noop(ctx: Any) -> None:
        return None

    app.schedule("billing/eu daily", "0 8 * * *", tz="Europe/Paris", task="limits.noop")
    ClockProcess(app, runtime.store, clock=runtime.clock).sync()
    custom = Runtime(store=runtime.store, policy=runtime.policy, service=runtime.service, app=app,
                     clock=runtime.clock, mailer=None)
    with TestClient(create_app(WebSettings(token="slash-token"), runtime=custom), base_url="http://127.0.0.1:8000",
                    follow_redirects=False, client=LOOPBACK_CLIENT) as client:
        login(client, "slash-token")
        listing = client.get("/schedules").text
        assert 'href="/schedules/billing/eu%20daily"' in listing
        page = client.get("/schedules/billing/eu%20daily")
        assert page.status_code == 200 and "Schedule billing/eu daily" in page.text
        assert 'action="/schedules/billing/eu%20daily/pause"' in page.text
        paused = client.post("/schedules/billing/eu%20daily/pause", data={"csrf": csrf_of(page.text)})
        assert paused.status_code == 303 and paused.headers["location"] == "/schedules/billing/eu%20daily"
        assert runtime.store.read("get_schedule", key="billing/eu daily")[0]["state"] == "paused"
        assert client.get("/schedules/billing").status_code == 404  # a prefix is not a schedule


EDGE_INSTANTS = ["0001-01-01T00:00", "9999-12-31T23:59", "0001-01-01T00:00+14:00", "9999-12-31T23:59:59-12:00"]


def test_instants_at_the_ends_of_the_calendar_and_odd_text_never_answer_500(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    ClockProcess(runtime.app, runtime.store, clock=runtime.clock).sync()
    client = dashboard_client(role="admin")
    csrf = csrf_of(client.get("/login").text)
    for edge in EDGE_INSTANTS:
        for path, params in [("/jobs", {"since": edge}), ("/jobs", {"until": edge}), ("/effects", {"after_at": edge}),
                             ("/schedules/reminders", {"before": edge}),
                             ("/schedules/reminders", {"from": edge, "until": "2020-01-01T00:00"})]:
            answer = client.get(path, params=params)
            assert answer.status_code == 400 and "outside the supported range 1900-01-01" in answer.text, (path, edge)
        answer = client.post("/schedules/reminders/backfill", data={"csrf": csrf, "from": edge, "until": edge})
        assert answer.status_code == 400, edge
    for odd in ("\x00", "x" * 5000, "%", HUGE, "１２"):
        for path, params in [("/jobs", {"task": odd, "queue": odd}), ("/effects", {"state": odd}),
                             ("/schedules", {"after": odd}), ("/jobs", {"before": odd})]:
            assert client.get(path, params=params).status_code in (200, 400), (path, odd)
        assert client.post("/reminders/search", data={"csrf": csrf, "q": odd}).status_code in (200, 400), odd
