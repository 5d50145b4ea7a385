"""The proof of notice of one invoice as a download (PDF, or the JSON record): ``GET
/reminders/evidence/{number}?format=pdf|json``, linked from the invoice page (docs/evidence.md).

Like every page it needs a login (an anonymous request is sent to the login page and gets no customer data);
each download is audited as a read of customer data (``reminders.evidence_read`` on ``invoice:<number>``, with
the operator and the record's SHA-256). The record and the PDF come from
:mod:`oncebeat.reminders.notices.evidence`; this module only parses, calls and answers.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ..errors import OncebeatError
from ..store import redact_url
from .app import dashboard, route
from .schedules import operator_source

__all__ = ["routes"]

FORMATS = {"pdf": "application/pdf", "json": "application/json; charset=utf-8"}


async def evidence_download(request: Request) -> Response:
    from ..reminders.notices.evidence import build_evidence, record_read  # a library app's dashboard never loads it
    from ..reminders.notices.evidence_pdf import evidence_pdf, pdf_filename

    form = request.query_params.get("format", "pdf")
    if form not in FORMATS:
        raise HTTPException(404, f"no evidence format {form[:20]!r}; use format=pdf or format=json")
    rt = dashboard(request).runtime
    number = request.path_params["number"]
    try:
        record = await run_in_threadpool(build_evidence, rt.service, number, database=redact_url(rt.store.url))
    except OncebeatError as exc:
        raise HTTPException(404, f"no invoice {number[:100]!r}") from exc
    body = await run_in_threadpool(evidence_pdf, record) if form == "pdf" else record.text.encode("utf-8")
    await run_in_threadpool(lambda: record_read(rt.store, clock=rt.clock, source=operator_source(), record=record,
                                                form=form))
    return Response(body, media_type=FORMATS[form], headers={
        "content-disposition": f'attachment; filename="{pdf_filename(record, form)}"',
        "cache-control": "no-store",  # customer data: no copy in a shared cache or the browser's
        "x-oncebeat-record-sha256": record.sha256})


routes = [route("/reminders/evidence/{number:path}", evidence_download)]
