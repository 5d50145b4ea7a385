"""The HTTP API's collection reports and proofs of notice: ``GET /api/v1/reports`` and ``GET
/api/v1/evidence/{number}``, the same data as ``oncebeat report --json`` and ``oncebeat evidence --json|--pdf``.

Any token (read or write scope) may read. Reading a proof of notice is reading customer data: each one is audited
(``reminders.evidence_read`` on ``invoice:<number>``, with the token's name as the operator and the record's
SHA-256), as the dashboard's download and the CLI are. This module only parses, calls the library and answers.
"""

from __future__ import annotations

from datetime import date

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ..errors import OncebeatError
from ..reminders.reports import (
    EVERY,
    KINDS,
    Month,
    MonthError,
    ReportError,
    build_many,
    csv_text,
    default_range,
    report_document,
)
from ..store import redact_url
from .api import API_V1, api_source, client_of, json_response
from .api_auth import api_error
from .app import dashboard, route

__all__ = ["REPORT_PARAMS", "routes"]

#: The query parameters of ``GET /api/v1/reports`` (each optional), as ``oncebeat report``'s options.
REPORT_PARAMS = ("kind", "from", "to", "currency", "as_of", "format")
_EVIDENCE_FORMATS = {"json": "application/json", "pdf": "application/pdf"}


def _bad(name: str, message: str) -> Response:
    return api_error(400, "invalid_query", f"query parameter {name}: {message}",
                     problems=[{"pointer": "", "field": name, "message": message}])


async def get_reports(request: Request) -> Response:
    """``?kind=all|dso|cei|stages|aging|promises|disputes|holds`` (comma-separated allowed; default all),
    ``from``/``to`` (YYYY-MM), ``currency`` (ISO 4217), ``as_of`` (YYYY-MM-DD, default today in the policy's zone),
    ``format=json|csv`` (csv: one table). The JSON is ``oncebeat report --json``'s: amounts in minor units."""
    rt = dashboard(request).runtime
    q = request.query_params
    for name in q:
        if name not in REPORT_PARAMS:
            return _bad(name, f"unknown parameter; use {', '.join(REPORT_PARAMS)}")
    form = q.get("format") or "json"
    if form not in ("json", "csv"):
        return _bad("format", f"{form[:20]!r} is not a format; use json or csv")
    asked = [k.strip() for k in (q.get("kind") or "all").split(",") if k.strip()] or ["all"]
    unknown = [k for k in asked if k != "all" and k not in KINDS]
    if unknown:
        return _bad("kind", f"{unknown[0][:40]!r} is not a report; use all or one of {', '.join(KINDS)}")
    kinds = tuple(dict.fromkeys(k for a in asked for k in (EVERY if a == "all" else (a,))))
    if form == "csv" and (len(kinds) != 1 or kinds[0] == "holds"):
        return _bad("format", "csv writes one table: name one report (e.g. kind=dso&format=csv)")
    months: dict[str, Month | None] = {}
    for name in ("from", "to"):
        try:
            months[name] = Month.parse(q[name], name) if q.get(name) else None
        except MonthError as exc:
            return _bad(name, str(exc).removeprefix(f"{name}: "))
    as_of_text = q.get("as_of")
    try:
        today = date.fromisoformat(as_of_text) if as_of_text else rt.clock.now().astimezone(rt.policy.zone).date()
    except ValueError:
        return _bad("as_of", f"{(as_of_text or '')[:20]!r} is not a date; write YYYY-MM-DD")
    currency = q.get("currency") or None
    start, end = default_range(today, months["from"], months["to"])
    try:
        tables = await run_in_threadpool(build_many, rt.store, kinds, first=start, last=end, as_of=today,
                                         currency=currency)
    except ReportError as exc:  # the only one left: a malformed currency
        return _bad("currency", str(exc).removeprefix("--currency: "))
    except MonthError as exc:  # from after to, or too long a range
        return _bad("from", str(exc).replace("--from", "from").replace("--to", "to"))
    if form == "csv":
        return Response(csv_text(tables[0]), media_type="text/csv; charset=utf-8",
                        headers={"cache-control": "no-store"})
    return json_response(report_document(tables, as_of=today, first=start, last=end, currency=currency),
                         headers={"cache-control": "no-store"})


async def get_evidence(request: Request) -> Response:
    """``?format=json`` (default: the canonical record, as ``oncebeat evidence --json``) or ``format=pdf``; 404
    for an unknown invoice. Each answer carries ``X-Oncebeat-Record-SHA256`` and is audited as a read."""
    from ..reminders.notices.evidence import build_evidence, record_read  # a library app's API never loads it
    from ..reminders.notices.evidence_pdf import evidence_pdf, pdf_filename

    for name in request.query_params:
        if name != "format":
            return _bad(name, "unknown parameter; use format")
    form = request.query_params.get("format") or "json"
    if form not in _EVIDENCE_FORMATS:
        return _bad("format", f"{form[:20]!r} is not a format; use json or pdf")
    rt = dashboard(request).runtime
    number = request.path_params["number"]
    try:
        record = await run_in_threadpool(build_evidence, rt.service, number, database=redact_url(rt.store.url))
    except OncebeatError:
        return api_error(404, "not_found", f"no invoice {number[:64]!r}")
    body = await run_in_threadpool(evidence_pdf, record) if form == "pdf" else record.text.encode("utf-8")
    source = api_source(client_of(request))
    await run_in_threadpool(lambda: record_read(rt.store, clock=rt.clock, source=source, record=record, form=form))
    headers = {"cache-control": "no-store", "x-oncebeat-record-sha256": record.sha256}
    if form == "pdf":
        headers["content-disposition"] = f'attachment; filename="{pdf_filename(record, form)}"'
    return Response(body, media_type=_EVIDENCE_FORMATS[form], headers=headers)


routes = [
    route(f"{API_V1}/reports", get_reports, name="api_reports"),
    route(f"{API_V1}/evidence/{{number:path}}", get_evidence, name="api_evidence"),
]
