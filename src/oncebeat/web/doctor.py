"""Doctor: every finding with its evidence and fix; ``--explain`` of a job, occurrence or invoice one
click away (evidence about a job or an occurrence links to its story)."""

from __future__ import annotations

import time
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ..doctor import EXPLAIN_KINDS, DoctorReport, explain, run_doctor
from .app import Dashboard, dashboard, render, route

__all__ = ["doctor_summary", "routes"]

SUMMARY_SECONDS = 60.0  # the overview shows a doctor summary at most this old (the doctor reads a lot)


def _run(d: Dashboard) -> DoctorReport:
    rt = d.runtime
    report = run_doctor(rt.store, now=rt.clock.now(), definitions=rt.app)
    d.cache["doctor"] = (time.monotonic(), report)
    return report


def doctor_summary(d: Dashboard) -> DoctorReport:
    """The latest doctor report, re-run when older than :data:`SUMMARY_SECONDS`."""
    cached: tuple[float, DoctorReport] | None = d.cache.get("doctor")
    if cached is not None and time.monotonic() - cached[0] < SUMMARY_SECONDS:
        return cached[1]
    return _run(d)


def _link(evidence: Any) -> str | None:
    ident = evidence.data.get("id")
    if evidence.kind in ("job", "occurrence") and ident is not None:
        return f"/doctor/explain/{evidence.kind}/{ident}"
    if evidence.kind == "effect" and evidence.data.get("job_id") is not None:
        return f"/doctor/explain/job/{evidence.data['job_id']}"
    return None


def doctor_page(request: Request) -> Response:
    report = _run(dashboard(request))
    findings = [{"f": f, "links": [_link(e) for e in f.evidence]} for f in report.findings]
    return render(request, "doctor.html", {"title": "Doctor", "report": report, "findings": findings,
                                           "counts": report.counts()})


def explain_page(request: Request) -> Response:
    kind, ident = request.path_params["kind"], request.path_params["ident"]
    if kind not in EXPLAIN_KINDS:
        raise HTTPException(404, f"explain knows {', '.join(EXPLAIN_KINDS)}, not {kind!r}")
    if kind != "invoice" and not ident.isdigit():
        raise HTTPException(404, f"{kind} ids are whole numbers, not {ident!r}")
    lines = explain(dashboard(request).runtime.store, kind, ident if kind == "invoice" else int(ident))
    return render(request, "explain.html", {"title": f"Explain {kind} {ident}", "kind": kind, "ident": ident,
                                            "lines": lines})


routes = [route("/doctor", doctor_page), route("/doctor/explain/{kind}/{ident:path}", explain_page)]
