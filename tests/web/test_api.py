# ruff: noqa: F811  (fixtures imported from the helpers are redefined as test arguments, as pytest intends)
"""The HTTP API's behaviour (issue 25 item 2), on both backends through the real application: idempotent writes
(a retry applied once, another body under the same key refused, a refused request storing nothing), problems named
by JSON pointer, bounded bodies (413) and batches, the paid-invoice rule, trigger/pause/resume, enqueue, the
reads with their filters and cursors, and the OpenAPI document checked against the routes and the server."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from api_helpers import API_TOKENS, READ, api_app, invoice, write_headers  # noqa: F401  (fixtures)
from starlette.routing import Route
from starlette.testclient import TestClient
from web_helpers import runtime  # noqa: F401  (fixtures)

from oncebeat import audit
from oncebeat.clock import ClockProcess
from oncebeat.reminders.runtime import Runtime
from oncebeat.schedule_admin import retire_schedule
from oncebeat.web.openapi import document
from oncebeat.web.security import MAX_API_BYTES
from oncebeat.worker import Worker

H = write_headers


def count(rt: Runtime, sql: str) -> int:
    """One number from the database (the test looks inside; the code under test never runs this)."""
    with rt.store.transaction() as tx:
        return int(tx.execute(sql)[0]["n"])


def invoice_row(rt: Runtime, number: str) -> dict[str, Any]:
    [row] = rt.store.read("invoice_by_number", number=number)
    return row


def test_a_retried_write_is_applied_once_and_answered_as_the_first_time(
        runtime: Runtime, api_app: Callable[..., TestClient]) -> None:
    client = api_app()
    body = {"invoices": [invoice("INV-1"), invoice("INV-2", amount_due="80.00")]}
    first = client.post("/api/v1/invoices", json=body, headers=H("key-1"))
    assert first.status_code == 200 and first.json() == {"customers": 1, "invoices": 2, "new": 2, "updated": 0,
                                                          "kept_paid": 0, "stale": 0}
    assert "idempotent-replayed" not in first.headers
    # Another write changes INV-1 meanwhile; the retry of the first one must not put the old amount back.
    changed = client.post("/api/v1/invoices", json={"invoices": [invoice("INV-1", amount_due="99.00")]},
                          headers=H("key-2"))
    assert changed.status_code == 200
    for _ in range(3):
        retry = client.post("/api/v1/invoices", json=body, headers=H("key-1"))
        assert retry.status_code == 200 and retry.headers["idempotent-replayed"] == "true"
        assert retry.content == first.content
    assert invoice_row(runtime, "INV-1")["amount_due"] == 9900
    assert count(runtime, "SELECT COUNT(*) AS n FROM invoices") == 2
    assert count(runtime, "SELECT COUNT(*) AS n FROM idempotency_keys") == 2
    writes = [e for e in audit.events_of(runtime.store, "api:billing") if e["kind"] == "api.write"]
    assert len(writes) == 2  # one per applied write, none for the replays
    assert writes[0]["detail"]["operator"] == {"via": "api", "user": "billing", "terminal": None}
    assert writes[0]["source_kind"] == "api"


def test_the_same_key_with_another_request_is_refused_and_applies_nothing(
        runtime: Runtime, api_app: Callable[..., TestClient]) -> None:
    client = api_app()
    assert client.post("/api/v1/invoices", json={"invoices": [invoice("INV-1")]}, headers=H("k")).status_code == 200
    other_body = client.post("/api/v1/invoices", json={"invoices": [invoice("INV-9")]}, headers=H("k"))
    assert other_body.status_code == 422
    error = other_body.json()["error"]
    assert error["type"] == "idempotency_key_reused" and "POST /api/v1/invoices" in error["message"]
    other_path = client.post("/api/v1/customers", json={"customers": [{"email": "a@example.com", "name": "A"}]},
                             headers=H("k"))
    assert other_path.status_code == 422 and other_path.json()["error"]["type"] == "idempotency_key_reused"
    assert count(runtime, "SELECT COUNT(*) AS n FROM invoices") == 1
    assert count(runtime, "SELECT COUNT(*) AS n FROM customers") == 1


def test_keys_are_per_client_and_every_write_needs_one(runtime: Runtime, api_app: Callable[..., TestClient]) -> None:
    second = "second:write:" + "s" * 32
    client = api_app(api_tokens=f"{API_TOKENS},{second}")
    missing = client.post("/api/v1/invoices", json={"invoices": [invoice("INV-1")]},
                          headers={"authorization": H()["authorization"]})
    assert missing.status_code == 400 and "Idempotency-Key" in missing.json()["error"]["message"]
    too_long = client.post("/api/v1/invoices", json={"invoices": [invoice("INV-1")]}, headers=H("x" * 256))
    assert too_long.status_code == 400
    assert client.post("/api/v1/invoices", json={"invoices": [invoice("INV-1")]}, headers=H("shared")).status_code \
        == 200
    theirs = client.post("/api/v1/invoices", json={"invoices": [invoice("INV-2")]},
                         headers={"authorization": "Bearer " + "s" * 32, "idempotency-key": "shared"})
    assert theirs.status_code == 200 and "idempotent-replayed" not in theirs.headers  # another client's key space
    assert count(runtime, "SELECT COUNT(*) AS n FROM invoices") == 2


def test_a_refused_request_stores_nothing_so_the_key_may_carry_the_fixed_request(
        runtime: Runtime, api_app: Callable[..., TestClient]) -> None:
    client = api_app()
    bad = client.post("/api/v1/invoices", json={"invoices": [invoice("INV-1", amount_due="12.345")]},
                      headers=H("fix-me"))
    assert bad.status_code == 422
    assert count(runtime, "SELECT COUNT(*) AS n FROM idempotency_keys") == 0
    unknown = client.post("/api/v1/payments", json={"payments": [{"invoice_number": "INV-1", "paid_on": "2026-02-01"}]},
                          headers=H("pay"))
    assert unknown.status_code == 422
    assert unknown.json()["error"]["problems"] == [{"pointer": "/payments/0/invoice_number", "field": "invoice_number",
                                                    "message": "unknown invoice number 'INV-1'"}]
    fixed = client.post("/api/v1/invoices", json={"invoices": [invoice("INV-1")]}, headers=H("fix-me"))
    assert fixed.status_code == 200 and "idempotent-replayed" not in fixed.headers
    paid = client.post("/api/v1/payments", json={"payments": [{"invoice_number": "INV-1", "paid_on": "2026-02-01"}]},
                       headers=H("pay"))
    assert paid.status_code == 200 and paid.json() == {"payments": 1, "marked_paid": 1, "already_closed": 0}


def test_every_problem_is_named_by_its_json_pointer_and_nothing_is_applied(
        runtime: Runtime, api_app: Callable[..., TestClient]) -> None:
    client = api_app()
    body = {"invoices": [invoice("INV-1"),
                         invoice("INV-2", amount_due="12.345"),
                         invoice("INV-3", due_on="2026-01-01"),
                         invoice("INV-1", amount_due=None),
                         {**invoice("INV-5"), "amount_due": 12, "colour": "red"},
                         invoice("INV-6", customer_email="zoe@example", customer_tz="Europe/Pariss"),
                         "not an object"],
            "extra": 1}
    response = client.post("/api/v1/invoices", json=body, headers=H())
    assert response.status_code == 422
    error = response.json()["error"]
    found = {(p["pointer"], p["field"]) for p in error["problems"]}
    assert {("/extra", "extra"), ("/invoices/1/amount_due", "amount_due"), ("/invoices/2/due_on", "due_on"),
            ("/invoices/0/invoice_number", "invoice_number"), ("/invoices/3/invoice_number", "invoice_number"),
            ("/invoices/3/amount_due", "amount_due"), ("/invoices/4/amount_due", "amount_due"),
            ("/invoices/4/colour", "colour"), ("/invoices/5/customer_email", "customer_email"),
            ("/invoices/5/customer_tz", "customer_tz"), ("/invoices/6", "")} <= found, found
    messages = {p["pointer"]: p["message"] for p in error["problems"]}
    assert "more decimals than EUR allows (2)" in messages["/invoices/1/amount_due"]
    assert "is before issued_on 2026-01-05" in messages["/invoices/2/due_on"]
    assert "item /invoices/0" in messages["/invoices/3/invoice_number"]  # the duplicate names the other item
    assert "never a JSON number" in messages["/invoices/4/amount_due"]
    assert "did you mean Europe/Paris" in messages["/invoices/5/customer_tz"]
    assert error["total"] == len(error["problems"]) and error["message"].endswith("nothing was applied")
    assert count(runtime, "SELECT COUNT(*) AS n FROM invoices") == 0
    customers = client.post("/api/v1/customers", json={"customers": [
        {"email": "a@example.com", "name": "A", "locale": "xx_YY"}, {"email": "A@example.com", "name": "B"},
        {"name": "\u202eevil"}]}, headers=H())
    pointers = [p["pointer"] for p in customers.json()["error"]["problems"]]
    assert pointers == ["/customers/0/locale", "/customers/1/email", "/customers/2/email", "/customers/2/name"]
    assert client.post("/api/v1/invoices", content=b"{not json", headers=H()).status_code == 400
    assert client.post("/api/v1/invoices", content=b"[" * 100_000, headers=H()).status_code == 400
    assert client.post("/api/v1/invoices", content=b'{"invoices": [NaN]}', headers=H()).status_code == 400
    huge = client.post("/api/v1/jobs", content=b'{"task": "reminders.send", "args": {"x": 1e999}}', headers=H())
    assert huge.status_code == 400 and "too large a number" in huge.json()["error"]["message"]


def test_a_body_past_1_mib_is_refused_413_and_a_large_batch_under_it_is_accepted(
        runtime: Runtime, api_app: Callable[..., TestClient]) -> None:
    client = api_app()
    declared = client.post("/api/v1/invoices", content=b" " * (MAX_API_BYTES + 1),
                           headers={**H(), "content-type": "application/json"})
    assert declared.status_code == 413 and declared.headers["connection"] == "close"
    assert declared.json()["error"]["type"] == "too_large"

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as the bytes arrive
        for _ in range(20):
            yield b" " * 65536

    streamed = client.post("/api/v1/invoices", content=chunks(), headers=H())
    assert streamed.status_code == 413
    batch = {"invoices": [invoice(f"INV-{n:05d}") for n in range(1000)]}
    size = len(json.dumps(batch).encode())
    assert 64 * 1024 < size < MAX_API_BYTES  # past the dashboard's form limit, within the API's
    accepted = client.post("/api/v1/invoices", json=batch, headers=H())
    assert accepted.status_code == 200 and accepted.json()["invoices"] == 1000
    too_many = client.post("/api/v1/invoices", json={"invoices": [invoice("X")] * 1001}, headers=H())
    assert too_many.status_code == 422 and "at most 1000" in too_many.json()["error"]["message"]
    assert count(runtime, "SELECT COUNT(*) AS n FROM invoices") == 1000


def test_a_stale_write_never_reopens_a_paid_invoice(runtime: Runtime, api_app: Callable[..., TestClient]) -> None:
    client = api_app()
    client.post("/api/v1/invoices", json={"invoices": [invoice("INV-1")]}, headers=H())
    client.post("/api/v1/payments", json={"payments": [{"invoice_number": "INV-1", "paid_on": "2026-02-10"}]},
                headers=H())
    stale = client.post("/api/v1/invoices", json={"invoices": [invoice("INV-1", status="open",
                                                                       status_on="2026-02-09")]}, headers=H())
    assert stale.json()["kept_paid"] == 1
    assert client.get("/api/v1/invoices/INV-1", headers=READ).json()["invoice"]["status"] == "paid"
    again = client.post("/api/v1/payments", json={"payments": [{"invoice_number": "INV-1", "paid_on": "2026-02-11"}]},
                        headers=H())
    assert again.json() == {"payments": 1, "marked_paid": 0, "already_closed": 1}
    newer = client.post("/api/v1/invoices", json={"invoices": [invoice("INV-1", status="open",
                                                                       status_on="2026-02-12")]}, headers=H())
    assert newer.json()["kept_paid"] == 0
    assert invoice_row(runtime, "INV-1")["status"] == "open"


def test_a_retried_trigger_makes_one_occurrence_and_one_job(runtime: Runtime,
                                                          api_app: Callable[..., TestClient]) -> None:
    client = api_app()
    answers = [client.post("/api/v1/schedules/reminders/trigger", headers=H("trigger-1")) for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert answers[0].json()["outcome"] == "manual" and answers[0].json()["job_id"] is not None
    assert answers[1].content == answers[0].content and answers[2].headers["idempotent-replayed"] == "true"
    assert count(runtime, "SELECT COUNT(*) AS n FROM occurrences") == 1
    assert count(runtime, "SELECT COUNT(*) AS n FROM jobs") == 1
    job = client.get(f"/api/v1/jobs/{answers[0].json()['job_id']}", headers=READ).json()
    assert job["source_kind"] == "api" and job["source_name"] == "oncebeat web api"
    assert client.post("/api/v1/schedules/nope/trigger", headers=H()).status_code == 404
    assert client.post("/api/v1/schedules/reminders/trigger", json={"x": 1}, headers=H()).status_code == 422
    retire_schedule(runtime.store, "reminders", clock=runtime.clock)
    late = client.post("/api/v1/schedules/reminders/trigger", headers=H("trigger-1"))
    assert late.headers["idempotent-replayed"] == "true" and late.content == answers[0].content  # the key holds
    refused = client.post("/api/v1/schedules/reminders/trigger", headers=H())
    assert refused.status_code == 409 and "retired" in refused.json()["error"]["message"]
    assert count(runtime, "SELECT COUNT(*) AS n FROM jobs") == 1


def test_pause_and_resume(runtime: Runtime, api_app: Callable[..., TestClient]) -> None:
    client = api_app()
    paused = client.post("/api/v1/schedules/reminders/pause", headers=H())
    assert paused.json() == {"schedule": "reminders", "state": "paused", "changed": True}
    assert client.post("/api/v1/schedules/reminders/pause", headers=H()).json()["changed"] is False
    assert client.get("/api/v1/schedules/reminders", headers=READ).json()["state"] == "paused"
    resumed = client.post("/api/v1/schedules/reminders/resume", headers=H())
    assert resumed.json() == {"schedule": "reminders", "state": "active", "changed": True}
    assert client.get("/api/v1/schedules", headers=READ).json()["schedules"][0]["state"] == "active"
    kinds = [e["kind"] for e in audit.events_of(runtime.store, "schedule:reminders")]
    assert "schedule.paused" in kinds and "schedule.resumed" in kinds


def test_enqueue_takes_registered_tasks_only(runtime: Runtime, api_app: Callable[..., TestClient]) -> None:
    client = api_app()
    unknown = client.post("/api/v1/jobs", json={"task": "rm -rf", "priority": "high", "run_at": "tomorrow"},
                          headers=H())
    assert unknown.status_code == 422
    pointers = {p["pointer"] for p in unknown.json()["error"]["problems"]}
    assert pointers == {"/task", "/priority", "/run_at"}
    assert "reminders.send" in unknown.json()["error"]["problems"][0]["message"]
    made = client.post("/api/v1/jobs", json={"task": "reminders.send", "args": {"reminder_id": 7},
                                             "unique_key": "only-one", "run_at": "2030-01-01T08:00:00-06:00"},
                       headers=H())
    assert made.status_code == 201
    job = client.get(made.json()["url"], headers=READ).json()
    assert job["state"] == "scheduled" and job["args"] == {"reminder_id": 7} and job["source_kind"] == "api"
    held = client.post("/api/v1/jobs", json={"task": "reminders.send", "args": {"reminder_id": 8},
                                             "unique_key": "only-one"}, headers=H())
    assert held.status_code == 409 and held.json()["error"]["type"] == "unique_key_held"
    assert count(runtime, "SELECT COUNT(*) AS n FROM jobs") == 1


def _with_reminders(runtime: Runtime, client: TestClient) -> None:
    """Two customers' overdue invoices, the scan run: reminders exist."""
    body = {"invoices": [invoice(f"INV-{n}", customer_email=f"c{n % 2}@example.com", customer_name=f"C{n % 2}")
                         for n in range(5)]}
    assert client.post("/api/v1/invoices", json=body, headers=H()).status_code == 200
    clock = ClockProcess(runtime.app, runtime.store, clock=runtime.clock)
    clock.sync()
    clock.trigger("reminders")
    Worker(runtime.app, runtime.store, clock=runtime.clock).drain(max_batches=1)


def test_reminders_are_read_by_filter_a_page_at_a_time(runtime: Runtime,
                                                       api_app: Callable[..., TestClient]) -> None:
    client = api_app()
    _with_reminders(runtime, client)
    every = client.get("/api/v1/reminders", headers=READ).json()
    assert len(every["reminders"]) == 5 and every["next"] is None
    seen, after = [], ""
    while True:
        page = client.get(f"/api/v1/reminders?limit=2&after={after}", headers=READ).json()
        seen += [r["id"] for r in page["reminders"]]
        if page["next"] is None:
            break
        after = page["next"]
    assert seen == [r["id"] for r in every["reminders"]]
    mine = client.get("/api/v1/reminders?customer=C1@EXAMPLE.COM", headers=READ).json()["reminders"]
    assert {r["number"] for r in mine} == {"INV-1", "INV-3"} and {r["email"] for r in mine} == {"c1@example.com"}
    one = client.get("/api/v1/reminders?invoice=INV-4&state=pending", headers=READ).json()["reminders"]
    assert [r["number"] for r in one] == ["INV-4"]
    assert client.get("/api/v1/reminders?state=sent", headers=READ).json()["reminders"] == []
    for query, name in (("state=lost", "state"), ("limit=501", "limit"), ("after=x", "after"),
                        ("colour=red", "colour")):
        bad = client.get(f"/api/v1/reminders?{query}", headers=READ)
        assert bad.status_code == 400 and bad.json()["error"]["problems"][0]["field"] == name, query


def test_an_invoice_is_read_with_the_history_the_dashboard_shows(runtime: Runtime,
                                                                 api_app: Callable[..., TestClient]) -> None:
    client = api_app()
    _with_reminders(runtime, client)
    story = client.get("/api/v1/invoices/INV-2", headers=READ).json()
    expected = runtime.service.invoice_story("INV-2")
    assert expected is not None
    assert [r["id"] for r in story["reminders"]] == [r["id"] for r in expected["reminders"]]
    assert story["customer"] == {"email": "c0@example.com", "name": "C0", "locale": "en_US", "tz": "",
                                 "country": "", "tags": ""}
    assert story["invoice"]["amount_due"] == 123450 and story["invoice"]["status"] == "open"
    assert client.get("/api/v1/invoices/NOPE", headers=READ).status_code == 404


def _route_paths(client: TestClient) -> set[tuple[str, str]]:
    out = set()
    for r in client.app.routes:  # type: ignore[attr-defined]
        if isinstance(r, Route) and r.path.startswith("/api/"):
            path = r.path.replace("{key:path}", "{key}").replace("{number:path}", "{number}").replace("{id:id}", "{id}")
            path = path.replace("{queue:path}", "{queue}")
            out |= {(path, m.lower()) for m in (r.methods or set()) - {"HEAD"}}
    return out


def test_every_api_route_is_in_the_openapi_document_and_every_reference_resolves(
        api_app: Callable[..., TestClient]) -> None:
    client = api_app()
    served = client.get("/api/v1/openapi.json", headers=READ)
    assert served.status_code == 200 and served.json() == json.loads(json.dumps(document()))
    doc = served.json()
    assert doc["openapi"].startswith("3.1")
    documented = {(path, method) for path, ops in doc["paths"].items() for method in ops}
    assert _route_paths(client) == documented
    text = json.dumps(doc)
    for ref in set(__import__("re").findall(r'"\$ref": "#/components/(\w+)/(\w+)"', text)):
        assert ref[1] in doc["components"][ref[0]], ref
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            assert op["summary"] and op["responses"], (path, method)
            if method == "post":
                names = [p.get("$ref", p.get("name")) for p in op["parameters"]]
                assert "#/components/parameters/IdempotencyKey" in names, path


def test_the_documented_examples_are_accepted_by_the_server(runtime: Runtime,
                                                            api_app: Callable[..., TestClient]) -> None:
    client = api_app()
    doc = document()
    calls = 0
    for method in ("post", "get"):  # writes first (in document order), so the reads find what they name
        for path, ops in doc["paths"].items():
            op = ops.get(method)
            if op is None:
                continue
            url = path
            for p in op["parameters"]:
                if p.get("in") == "path":
                    url = url.replace("{" + p["name"] + "}", str(p["example"]))
            expected = int(next(s for s in op["responses"] if s.startswith("2")))
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("example")
            headers = H() if method == "post" else READ
            response = client.request(method.upper(), url, json=body, headers=headers)
            assert response.status_code == expected, (method, url, response.text)
            schema = op["responses"][str(expected)]["content"]["application/json"]["schema"]
            name = schema["$ref"].rsplit("/", 1)[-1]
            required = doc["components"]["schemas"][name].get("required", [])
            assert set(required) <= set(response.json()), (url, required)
            calls += 1
    assert calls == sum(len(ops) for ops in doc["paths"].values())


def test_a_field_left_out_keeps_the_stored_value_and_an_empty_one_clears_it(
        runtime: Runtime, api_app: Callable[..., TestClient]) -> None:
    """Issue 22 item 6 through the API: the rule of every source (reminders/records.py)."""
    client = api_app()

    def customer() -> dict[str, Any]:
        with runtime.store.transaction() as tx:  # the test looks inside
            [row] = tx.execute("SELECT name, locale, tz FROM customers WHERE email = 'a@example.com'")
        return dict(row)

    client.post("/api/v1/customers", json={"customers": [
        {"email": "a@example.com", "name": "A", "locale": "ja_JP", "tz": "Asia/Tokyo"}]}, headers=H("c1"))
    client.post("/api/v1/customers", json={"customers": [{"email": "a@example.com", "name": "A B"}]},
                headers=H("c2"))
    assert (customer()["name"], customer()["locale"], customer()["tz"]) == ("A B", "ja_JP", "Asia/Tokyo")
    body = {"invoices": [invoice("INV-7")]}
    body["invoices"][0]["customer_email"] = "a@example.com"
    body["invoices"][0]["customer_name"] = "A B"
    for key in ("customer_locale", "customer_tz"):
        body["invoices"][0].pop(key, None)
    assert client.post("/api/v1/invoices", json=body, headers=H("c3")).status_code == 200
    assert (customer()["locale"], customer()["tz"]) == ("ja_JP", "Asia/Tokyo")
    client.post("/api/v1/customers", json={"customers": [{"email": "a@example.com", "name": "A B", "tz": ""}]},
                headers=H("c4"))
    assert (customer()["locale"], customer()["tz"]) == ("ja_JP", "")


def test_the_pay_now_link_through_the_api_is_https_only_and_kept_when_left_out(
        runtime: Runtime, api_app: Callable[..., TestClient]) -> None:
    client = api_app()
    bad = client.post("/api/v1/invoices", json={"invoices": [invoice("INV-8", payment_url="http://pay.test/8")]},
                      headers=H("p1"))
    assert bad.status_code in (400, 422)
    assert [p["pointer"] for p in bad.json()["error"]["problems"]] == ["/invoices/0/payment_url"]
    url = "https://pay.example.com/i/INV-8"
    assert client.post("/api/v1/invoices", json={"invoices": [invoice("INV-8", payment_url=url)]},
                       headers=H("p2")).status_code == 200
    assert client.post("/api/v1/invoices", json={"invoices": [invoice("INV-8", amount_due="99.00")]},
                       headers=H("p3")).status_code == 200
    assert invoice_row(runtime, "INV-8")["payment_url"] == url  # left out: kept


def test_a_status_dated_in_the_future_is_refused_and_never_reopens_a_paid_invoice(
        runtime: Runtime, api_app: Callable[..., TestClient]) -> None:
    client = api_app()
    client.post("/api/v1/invoices", json={"invoices": [invoice("INV-9")]}, headers=H("f1"))
    client.post("/api/v1/payments", json={"payments": [{"invoice_number": "INV-9", "paid_on": "2026-02-10"}]},
                headers=H("f2"))
    typo = client.post("/api/v1/invoices", json={"invoices": [invoice("INV-9", status="open",
                                                                      status_on="2099-01-01")]}, headers=H("f3"))
    assert typo.status_code in (400, 422)
    problems = typo.json()["error"]["problems"]
    assert [p["pointer"] for p in problems] == ["/invoices/0/status_on"] and "future" in problems[0]["message"]
    assert invoice_row(runtime, "INV-9")["status"] == "paid"
