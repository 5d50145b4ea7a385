"""The OpenAPI 3.1 document of ``/api/v1``, written as data and served at ``GET /api/v1/openapi.json``.

``tests/web/test_api.py`` checks that every ``/api/v1`` route of the app has its path and method here, and
sends every example request below to a real server, expecting the documented status.
"""

from __future__ import annotations

import copy
from typing import Any

from ..provenance import VERSION
from ..reminders.model import HOLD_REASONS, REMINDER_STATES
from ..reminders.sources.api import CUSTOMER_FIELDS, MAX_ITEMS, PAYMENT_FIELDS

__all__ = ["document"]

_STRING = {"type": ["string", "null"]}
_DATE = {"type": ["string", "null"], "format": "date", "examples": ["2026-03-01"]}


def _error(description: str) -> dict[str, Any]:
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}


_ERRORS = {
    "400": _error("Missing or malformed Idempotency-Key, or a body that is not JSON."),
    "401": _error("No bearer token, or not one of ONCEBEAT_API_TOKENS (the dashboard's login is not accepted)."),
    "403": _error("A read-scope token tried to write."),
    "413": _error("The body is larger than 1 MiB (counted while reading; the connection is closed)."),
    "422": _error("Invalid request: every problem named by a JSON pointer (nothing applied), or the "
                  "Idempotency-Key was first used for another request."),
    "503": _error("ONCEBEAT_API_TOKENS is not set: the API is off."),
}
_READ_ERRORS = {k: v for k, v in _ERRORS.items() if k in ("401", "503")}
_KEY = {"name": "Idempotency-Key", "in": "header", "required": True,
        "description": "A unique value per request (e.g. a UUID). A retry with the same key and body is applied "
                       "once and answered as the first time (Idempotent-Replayed: true); kept at least 24 hours.",
        "schema": {"type": "string", "minLength": 1, "maxLength": 255}}


def _write(summary: str, schema: str, example: dict[str, Any] | None, answer: str, *, status: str = "200",
           description: str = "", params: list[dict[str, Any]] | None = None, tag: str) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": summary, "description": description, "tags": [tag],
        "parameters": [*(params or []), {"$ref": "#/components/parameters/IdempotencyKey"}],
        "responses": {status: {"description": "Done (or replayed).",
                               "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{answer}"}}}},
                      **_ERRORS},
    }
    if example is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": {"$ref": f"#/components/schemas/{schema}"}, "example": example}}}
    return op


def _read(summary: str, answer: str, *, params: list[dict[str, Any]] | None = None, description: str = "",
          tag: str, not_found: bool = False) -> dict[str, Any]:
    responses: dict[str, Any] = {"200": {"description": "Found.", "content": {"application/json": {
        "schema": {"$ref": f"#/components/schemas/{answer}"}}}}, **_READ_ERRORS}
    if not_found:
        responses["404"] = _error("Not found.")
    if params and any(p.get("in") == "query" for p in params):
        responses["400"] = _error("A query parameter is unknown or malformed (named in the answer).")
    return {"summary": summary, "description": description, "tags": [tag], "parameters": params or [],
            "responses": responses}


def _path_param(name: str, example: str, description: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "description": description,
            "schema": {"type": "string"}, "example": example}


def _query(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "description": description, "schema": schema}


_INVOICE_EXAMPLE = {"invoices": [
    {"invoice_number": "INV-1001", "customer_email": "zoe@example.com", "customer_name": "Zoë Martin",
     "customer_locale": "fr_FR", "customer_tz": "Europe/Paris", "currency": "EUR", "amount_due": "1234.50",
     "issued_on": "2026-01-05", "due_on": "2026-02-04"},
    {"invoice_number": "INV-1002", "customer_email": "zoe@example.com", "customer_name": "Zoë Martin",
     "currency": "EUR", "amount_due": "80.00", "issued_on": "2026-01-10", "due_on": "2026-02-09",
     "status": "paid", "paid_on": "2026-02-01"}]}
_SCHEDULE = _path_param("key", "reminders", "A schedule key (it may hold '/').")
_QUEUE = _path_param("queue", "default", "A queue name (it may hold '/').")
_LADDER = _path_param("name", "default", "A ladder's name ([[ladders]] name, or default).")
_LADDER_SCHEMA = {"type": "object", "required": ["name", "in_file", "rule", "match", "settings", "versions",
                                                 "open_invoices", "apply"],
                  "properties": {
                      "name": {"type": "string"}, "in_file": {"type": "boolean"}, "rule": {"type": "string"},
                      "match": {"type": ["object", "null"], "description": "The file's match keys (currency, "
                                "amount_min, amount_max in minor units, country, tags_any, column); null: default."},
                      "settings": {"type": ["object", "null"]},
                      "versions": {"type": "array", "items": {"type": "object", "required": [
                          "version", "id", "created_at", "current", "open_invoices", "invoices"]}},
                      "open_invoices": {"type": "integer"},
                      "apply": {"type": ["object", "null"], "required": ["to_version", "recorded", "moves", "total"],
                                "description": "What an apply would do now: the version open invoices move to and "
                                               "how many move from each other version; null for a ladder no "
                                               "longer in the file."}}}
_PAGE = [_query("after", "The previous page's next value.", {"type": "string"}),
         _query("limit", "Rows per page (default 100).", {"type": "integer", "minimum": 1, "maximum": 500})]

_DOCUMENT: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "oncebeat HTTP API", "version": VERSION,
             "description": "Upsert customers, invoices and payments, place and release holds, read reminders and an "
                            "invoice's history, "
                            "trigger, pause and resume schedules, enqueue jobs, read, pause, resume and limit "
                            "queues. Every request needs "
                            "Authorization: Bearer <token> (ONCEBEAT_API_TOKENS, NAME:read|write:TOKEN); every "
                            "write an Idempotency-Key. Bodies are JSON, at most 1 MiB and "
                            f"{MAX_ITEMS} objects per array. Dates are YYYY-MM-DD, instants ISO 8601 with "
                            "their UTC offset, amounts decimal strings in major units (\"1234.50\")."},
    "servers": [{"url": "/"}],
    "security": [{"bearer": []}],
    "tags": [{"name": "billing data"}, {"name": "holds"}, {"name": "ladders"}, {"name": "reminders"},
             {"name": "reports"}, {"name": "schedules"}, {"name": "jobs"}, {"name": "queues"}, {"name": "meta"}],
    "paths": {
        "/api/v1/openapi.json": {"get": _read("This document.", "Document", tag="meta")},
        "/api/v1/customers": {"post": _write(
            "Insert or update customers by email.", "CustomersRequest",
            {"customers": [{"email": "zoe@example.com", "name": "Zoë Martin", "locale": "fr_FR",
                            "tz": "Europe/Paris", "country": "FR", "tags": "enterprise;vip"}]},
            "CustomersAnswer", tag="billing data",
            description="Each email once per request; locale defaults to en_US, tz to none (the schedule's zone). "
            "country: ISO 3166-1 alpha-2; tags: words joined by ';' ([[ladders]] match both). A field left out "
            "keeps the stored value; \"\" clears it.")},
        "/api/v1/invoices": {"post": _write(
            "Insert or update invoices by number (with their customers).", "InvoicesRequest", _INVOICE_EXAMPLE,
            "InvoicesAnswer", tag="billing data",
            description="Fields and rules of the invoice CSV (oncebeat import). A paid invoice stays paid unless "
                        "the row's status_on is after its payment: a stale write never reopens it (kept_paid).")},
        "/api/v1/payments": {"post": _write(
            "Mark invoices paid.", "PaymentsRequest",
            {"payments": [{"invoice_number": "INV-1001", "paid_on": "2026-02-20"}]}, "PaymentsAnswer",
            tag="billing data",
            description="Each names a known invoice once; an invoice already closed is counted already_closed.")},
        "/api/v1/holds": {
            "post": _write(
                "Hold an invoice or every invoice of a customer: a dispute, a promise to pay until a date, or manual.",
                "HoldRequest", {"invoice_number": "INV-1001", "reason": "promise", "until": "2099-03-20",
                                "note": "Paying by wire on Friday"},
                "HoldPlaced", status="201", tag="holds",
                description="A held invoice gets no reminder: each stage that comes due while held is recorded held "
                            "with the hold's id. A promise resumes the ladder on the business day after until, with "
                            "the next due stage only. external_ref (e.g. a dispute id) places one hold however "
                            "often it is sent: a second request with it answers 200 with the hold placed first."),
            "get": _read("Every hold, oldest first.", "HoldList", tag="holds",
                         params=[_query("active_on", "Only holds covering this business date (YYYY-MM-DD, or today "
                                                     "in the schedule's zone).", {"type": "string"})])},
        "/api/v1/holds/release": {"post": _write(
            "Release holds: one by id, or every unreleased hold of an invoice, a customer or an external_ref.",
            "ReleaseRequest", {"invoice_number": "INV-1001", "note": "Dispute settled"}, "HoldsReleased",
            tag="holds",
            description="A released hold stops covering on the next business day, when the ladder resumes with "
                        "the next due stage only. released is empty when nothing was unreleased (a replay).")},
        "/api/v1/holds/{id}": {"get": _read(
            "One hold.", "HoldAnswer", tag="holds", not_found=True,
            params=[{"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}, "example": 1}])},
        "/api/v1/invoices/{number}": {"get": _read(
            "An invoice, its customer and its reminders (each stage's history with its effect).", "InvoiceStory",
            params=[_path_param("number", "INV-1001", "The invoice number (it may hold '/').")],
            tag="reminders", not_found=True)},
        "/api/v1/reminders": {"get": _read(
            "Reminders, oldest first, a page at a time.", "ReminderPage", tag="reminders",
            params=[_query("invoice", "Only this invoice number.", {"type": "string"}),
                    _query("customer", "Only this customer's email.", {"type": "string"}),
                    _query("state", "Only this state.", {"enum": list(REMINDER_STATES)}),
                    *_PAGE])},
        "/api/v1/reports": {"get": _read(
            "Collection reports per currency and month (oncebeat report --json).", "ReportDocument", tag="reports",
            params=[_query("kind", "all (default) or reports, comma-separated.",
                           {"type": "string", "examples": ["dso,cei"]}),
                    _query("from", "First month, YYYY-MM (default: 11 months before to).", {"type": "string"}),
                    _query("to", "Last month, YYYY-MM (default: the month of as_of).", {"type": "string"}),
                    _query("currency", "One ISO 4217 code (default: each, apart).", {"type": "string"}),
                    _query("as_of", "Today for the report, YYYY-MM-DD (default: today in the policy's zone).",
                           {"type": "string", "format": "date"}),
                    _query("format", "json (default) or csv (one report: amounts in major units).",
                           {"enum": ["json", "csv"]})],
            description="Formulas in docs/reports.md. JSON amounts are minor units; a figure the data cannot give "
                        "is null with the reason in the row's note.")},
        "/api/v1/evidence/{number}": {"get": _read(
            "The proof of notice of one invoice (oncebeat evidence --json), or its PDF.", "Evidence",
            tag="reminders", not_found=True,
            params=[_path_param("number", "INV-1001", "The invoice number (it may hold '/')."),
                    _query("format", "json (default) or pdf.", {"enum": ["json", "pdf"]})],
            description="Each read is audited (reminders.evidence_read, the token's name as operator). The answer "
                        "carries X-Oncebeat-Record-SHA256, the SHA-256 of the canonical JSON record.")},
        "/api/v1/schedules": {"get": _read("Schedules with their next fires, in key order.", "SchedulePage",
                                           params=_PAGE, tag="schedules")},
        "/api/v1/schedules/{key}": {"get": _read("One schedule with its recent occurrences.", "Schedule",
                                                 params=[_SCHEDULE], tag="schedules", not_found=True)},
        "/api/v1/schedules/{key}/trigger": {"post": _write(
            "Fire a schedule now (an occurrence recorded manual, kind api).", "Empty", None, "Fire",
            params=[_SCHEDULE], tag="schedules",
            description="No body. The overlap policy applies. 404: unknown schedule; 409: retired.")},
        "/api/v1/schedules/{key}/pause": {"post": _write(
            "Pause a schedule (its occurrences are recorded paused).", "Empty", None, "ScheduleState",
            params=[_SCHEDULE], tag="schedules", description="No body. changed is false when already paused.")},
        "/api/v1/schedules/{key}/resume": {"post": _write(
            "Resume a schedule from now (no burst).", "Empty", None, "ScheduleState", params=[_SCHEDULE],
            tag="schedules", description="No body. changed is false when it was not paused.")},
        "/api/v1/jobs": {"post": _write(
            "Enqueue a job of a task registered in the app.", "JobRequest",
            {"task": "reminders.send", "args": {"reminder_id": 42}, "priority": 5}, "Enqueued",
            status="201", tag="jobs",
            description="Tasks of the app oncebeat web runs (--app: your own). 409 when unique_key is held by an "
                        "unfinished job (nothing enqueued).")},
        "/api/v1/queues": {"get": _read(
            "Every queue: depth, latency, throughput of the last hour, pause and concurrency limit.", "QueueList",
            tag="queues", description="The dashboard's Queues page as data: available (due now), scheduled (due "
                                      "later), running, held (by a pause), latency_seconds (the oldest available "
                                      "job's age; null when none), completed / discarded / cancelled in the last "
                                      "throughput_window_seconds, limit (null: none).")},
        "/api/v1/queues/{queue}/pause": {"post": _write(
            "Pause a queue: no worker claims its jobs until it is resumed (running jobs finish).", "Empty", None,
            "QueueState", params=[_QUEUE], tag="queues",
            description="No body. changed is false when it was already paused. Audited queue.paused.")},
        "/api/v1/queues/{queue}/resume": {"post": _write(
            "Resume a queue: its held jobs are claimable again, each runs once.", "Empty", None, "QueueState",
            params=[_QUEUE], tag="queues",
            description="No body. changed is false when it was not paused. Audited queue.resumed.")},
        "/api/v1/queues/{queue}/limit": {"post": _write(
            "Set (or lift, with null) how many of a queue's jobs run at once over every worker.", "QueueLimitRequest",
            {"limit": 3}, "QueueLimit", params=[_QUEUE], tag="queues",
            description="limit: a whole number from 1 to 100000, or null for no limit. Lowering it stops no running "
                        "job. changed is false when it already was so. Audited queue.limited / queue.unlimited.")},
        "/api/v1/ladders": {"get": _read(
            "The ladders of the policy file in matching order (then those only recorded), each with its match "
            "rule, settings, recorded versions with the invoices each holds, and what an apply would move.",
            "LadderList", tag="ladders")},
        "/api/v1/ladders/{name}": {"get": _read(
            "One ladder, with the invoices pinned to it (open first, at most 1000) and the version each is on.",
            "LadderAnswer", params=[_LADDER], tag="ladders", not_found=True)},
        "/api/v1/ladders/{name}/apply": {"post": _write(
            "Move the open invoices of a ladder to its newest settings (oncebeat policies apply --apply-to-open).",
            "ApplyRequest", {"expected": 0}, "Applied", params=[_LADDER], tag="ladders",
            description="Records the file's settings as a new version if they changed; stages an invoice already "
                        "has stay recorded and it continues above its highest one (never a stage twice). Audited "
                        "ladders.applied. Optional expected: the count the caller saw (apply.total of the GET); "
                        "409 count_changed when another count would move (nothing moved). 404: no such ladder in "
                        "the policy file.")},
        "/api/v1/jobs/{id}": {"get": _read(
            "A job: state, attempts, errors, provenance.", "Job", tag="jobs", not_found=True,
            params=[{"name": "id", "in": "path", "required": True, "schema": {"type": "integer"},
                     "example": 1}])},
    },
    "components": {
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                       "description": "A token of ONCEBEAT_API_TOKENS; read scope: GET only."}},
        "parameters": {"IdempotencyKey": _KEY},
        "schemas": {
            "Error": {"type": "object", "required": ["error"], "properties": {"error": {
                "type": "object", "required": ["type", "message"],
                "properties": {"type": {"type": "string"}, "message": {"type": "string"},
                               "total": {"type": "integer"},
                               "problems": {"type": "array", "items": {"$ref": "#/components/schemas/Problem"}}}}}},
            "Problem": {"type": "object", "required": ["pointer", "field", "message"],
                        "properties": {"pointer": {"type": "string", "description": "RFC 6901, e.g. "
                                                   "/invoices/3/amount_due"},
                                       "field": {"type": "string"}, "message": {"type": "string"}}},
            "Empty": {"type": "object", "maxProperties": 0},
            "Document": {"type": "object", "required": ["openapi", "paths"]},
            "Customer": {"type": "object", "required": ["email", "name"], "additionalProperties": False,
                         "properties": {name: _STRING for name in CUSTOMER_FIELDS}},
            "CustomersRequest": {"type": "object", "required": ["customers"], "additionalProperties": False,
                                 "properties": {"customers": {"type": "array", "minItems": 1, "maxItems": MAX_ITEMS,
                                                              "items": {"$ref": "#/components/schemas/Customer"}}}},
            "CustomersAnswer": {"type": "object", "required": ["customers"],
                                "properties": {"customers": {"type": "integer"}}},
            "Invoice": {"type": "object", "additionalProperties": False,
                        "required": ["invoice_number", "customer_email", "customer_name", "currency", "amount_due",
                                     "issued_on", "due_on"],
                        "properties": {
                            "invoice_number": {"type": "string", "maxLength": 64},
                            "customer_email": {"type": "string"}, "customer_name": {"type": "string"},
                            "customer_locale": _STRING, "customer_tz": _STRING, "customer_country": _STRING,
                            "customer_tags": _STRING,
                            "currency": {"type": "string", "examples": ["EUR"]},
                            "amount_due": {"type": "string", "examples": ["1234.50"],
                                           "description": "Major units, never more decimals than the currency has."},
                            "issued_on": _DATE, "due_on": _DATE,
                            "status": {"enum": ["open", "paid", "void", "uncollectible", None]},
                            "paid_on": _DATE, "status_on": _DATE}},
            "InvoicesRequest": {"type": "object", "required": ["invoices"], "additionalProperties": False,
                                "properties": {"invoices": {"type": "array", "minItems": 1, "maxItems": MAX_ITEMS,
                                                            "items": {"$ref": "#/components/schemas/Invoice"}}}},
            "InvoicesAnswer": {"type": "object",
                               "required": ["customers", "invoices", "new", "updated", "kept_paid", "stale"],
                               "properties": {k: {"type": "integer"} for k in ("customers", "invoices", "new",
                                                                               "updated", "kept_paid", "stale")}},
            "Payment": {"type": "object", "required": ["invoice_number", "paid_on"], "additionalProperties": False,
                        "properties": {name: (_DATE if name == "paid_on" else _STRING) for name in PAYMENT_FIELDS}},
            "PaymentsRequest": {"type": "object", "required": ["payments"], "additionalProperties": False,
                                "properties": {"payments": {"type": "array", "minItems": 1, "maxItems": MAX_ITEMS,
                                                            "items": {"$ref": "#/components/schemas/Payment"}}}},
            "PaymentsAnswer": {"type": "object", "required": ["payments", "marked_paid", "already_closed"],
                               "properties": {k: {"type": "integer"} for k in ("payments", "marked_paid",
                                                                               "already_closed")}},
            "HoldRequest": {"type": "object", "required": ["reason"], "additionalProperties": False, "properties": {
                "invoice_number": {"type": "string", "maxLength": 64}, "customer_email": {"type": "string"},
                "reason": {"enum": list(HOLD_REASONS)},
                "until": {**_DATE, "description": "promise only: the last day of the promise (on or after today)."},
                "note": _STRING, "external_ref": _STRING}},
            "ReleaseRequest": {"type": "object", "additionalProperties": False, "properties": {
                "hold_id": {"type": "integer"}, "invoice_number": {"type": "string"},
                "customer_email": {"type": "string"}, "external_ref": {"type": "string"}, "note": _STRING}},
            "Hold": {"type": "object", "required": ["id", "reason", "created_by", "created_at"], "properties": {
                "id": {"type": "integer"}, "invoice": _STRING, "customer": _STRING, "email": _STRING,
                "reason": {"enum": list(HOLD_REASONS)}, "promise_until": _DATE,
                "resumes_on": {**_DATE, "description": "The first business date the hold no longer covers."},
                "note": _STRING, "external_ref": _STRING, "created_by": {"type": "string"},
                "created_at": {"type": "string"}, "released_at": _STRING, "released_by": _STRING,
                "release_note": _STRING}},
            "HoldPlaced": {"type": "object", "required": ["hold", "placed"],
                           "properties": {"hold": {"$ref": "#/components/schemas/Hold"},
                                          "placed": {"type": "boolean"}}},
            "HoldAnswer": {"type": "object", "required": ["hold"],
                           "properties": {"hold": {"$ref": "#/components/schemas/Hold"}}},
            "HoldList": {"type": "object", "required": ["holds"], "properties": {
                "holds": {"type": "array", "items": {"$ref": "#/components/schemas/Hold"}}}},
            "HoldsReleased": {"type": "object", "required": ["released"], "properties": {
                "released": {"type": "array", "items": {"$ref": "#/components/schemas/Hold"}}}},
            "InvoiceStory": {"type": "object", "required": ["invoice", "customer", "reminders"],
                             "properties": {"invoice": {"type": "object"}, "customer": {"type": "object"},
                                            "reminders": {"type": "array", "items": {"type": "object"}}}},
            "ReminderPage": {"type": "object", "required": ["reminders", "next"],
                             "properties": {"reminders": {"type": "array", "items": {"type": "object"}},
                                            "next": _STRING}},
            "ReportDocument": {"type": "object", "required": ["as_of", "from", "to", "currency", "reports"],
                               "properties": {"as_of": _DATE, "from": {"type": "string"}, "to": {"type": "string"},
                                              "currency": _STRING,
                                              "reports": {"type": "array", "items": {"type": "object", "required": [
                                                  "report", "title", "columns", "rows", "notes"]}}}},
            "Evidence": {"type": "object", "required": ["invoice", "stages"]},
            "SchedulePage": {"type": "object", "required": ["schedules", "next"],
                             "properties": {"schedules": {"type": "array", "items": {"type": "object"}},
                                            "next": _STRING}},
            "Schedule": {"type": "object", "required": ["key", "state", "occurrences"]},
            "Fire": {"type": "object", "required": ["schedule", "occurrence_id", "job_id", "outcome"],
                     "properties": {"schedule": {"type": "string"}, "occurrence_id": {"type": ["integer", "null"]},
                                    "job_id": {"type": ["integer", "null"]}, "outcome": {"type": "string"},
                                    "fire_at": {"type": "string"}, "description": {"type": "string"}}},
            "Ladder": _LADDER_SCHEMA,
            "LadderList": {"type": "object", "required": ["ladders"], "properties": {
                "ladders": {"type": "array", "items": {"$ref": "#/components/schemas/Ladder"}}}},
            "LadderAnswer": {"type": "object", "required": ["ladder"], "properties": {
                "ladder": {"$ref": "#/components/schemas/Ladder"}}},
            "ApplyRequest": {"type": "object", "additionalProperties": False, "properties": {
                "expected": {"type": ["integer", "null"], "minimum": 0}}},
            "Applied": {"type": "object", "required": ["ladder", "version", "moved", "from_versions"], "properties": {
                "ladder": {"type": "string"}, "version": {"type": "integer"}, "moved": {"type": "integer"},
                "from_versions": {"type": "object", "additionalProperties": {"type": "integer"}}}},
            "ScheduleState": {"type": "object", "required": ["schedule", "state", "changed"],
                              "properties": {"schedule": {"type": "string"}, "state": {"enum": ["paused", "active"]},
                                             "changed": {"type": "boolean"}}},
            "JobRequest": {"type": "object", "required": ["task"], "additionalProperties": False, "properties": {
                "task": {"type": "string"}, "args": {"type": "object"}, "queue": {"type": "string"},
                "priority": {"type": "integer"}, "max_attempts": {"type": "integer", "minimum": 1, "maximum": 1000},
                "run_at": {"type": "string", "format": "date-time"}, "unique_key": {"type": "string"}}},
            "Enqueued": {"type": "object", "required": ["job_id", "task", "url"],
                         "properties": {"job_id": {"type": "integer"}, "task": {"type": "string"},
                                        "url": {"type": "string"}}},
            "Job": {"type": "object", "required": ["id", "task", "state", "attempt"]},
            "Queue": {"type": "object", "required": ["queue", "paused", "available", "latency_seconds", "limit"],
                      "properties": {
                          "queue": {"type": "string"}, "paused": {"type": "boolean"}, "paused_at": _STRING,
                          "paused_by": _STRING, "available": {"type": "integer"}, "scheduled": {"type": "integer"},
                          "running": {"type": "integer"}, "held": {"type": "integer"},
                          "latency_seconds": {"type": ["number", "null"]}, "completed": {"type": "integer"},
                          "discarded": {"type": "integer"}, "cancelled": {"type": "integer"},
                          "throughput_window_seconds": {"type": "integer"},
                          "limit": {"type": ["integer", "null"]}}},
            "QueueList": {"type": "object", "required": ["queues"], "properties": {
                "queues": {"type": "array", "items": {"$ref": "#/components/schemas/Queue"}}}},
            "QueueState": {"type": "object", "required": ["queue", "state", "changed"],
                           "properties": {"queue": {"type": "string"}, "state": {"enum": ["paused", "active"]},
                                          "changed": {"type": "boolean"}}},
            "QueueLimitRequest": {"type": "object", "required": ["limit"], "additionalProperties": False,
                                  "properties": {"limit": {"type": ["integer", "null"], "minimum": 1,
                                                           "maximum": 100_000}}},
            "QueueLimit": {"type": "object", "required": ["queue", "limit", "before", "changed"],
                           "properties": {"queue": {"type": "string"}, "limit": {"type": ["integer", "null"]},
                                          "before": {"type": ["integer", "null"]}, "changed": {"type": "boolean"}}},
        },
    },
}


def document() -> dict[str, Any]:
    """A copy of the OpenAPI 3.1 document (callers may change theirs)."""
    return copy.deepcopy(_DOCUMENT)
