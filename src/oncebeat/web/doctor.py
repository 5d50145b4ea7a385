"""Doctor: every finding with its evidence and fix; ``--explain`` of a job, an occurrence (or an app's kind,
such as the reminder app's invoices) one click away (evidence about a job or an occurrence links to its story)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ..doctor import DoctorReport, explain, explain_kinds, numeric_kind, run_doctor
from ..errors import OncebeatError
from .app import MAX_ID_DIGITS, Dashboard, dashboard, render, route

__all__ = ["DoctorRuns", "doctor_runs", "routes"]

REFRESH_SECONDS = 300.0  # a report older than this is recomputed in the background on the next visit


@dataclass(slots=True)
class DoctorRuns:
    """The latest doctor report of this web process and the run in progress, if any.

    The doctor reads the whole audit trail, which takes seconds to minutes on a large history, so no
    page waits for it: a page shows the latest report (with its age) and starts a run in a background
    thread when the report is missing or older than :data:`REFRESH_SECONDS` (one run at a time).
    """

    report: DoctorReport | None = None
    finished_at: datetime | None = None
    running_since: datetime | None = None
    error: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    thread: threading.Thread | None = None

    def latest(self, d: Dashboard, *, refresh: bool = False) -> DoctorRuns:
        now = d.runtime.clock.now()
        with self.lock:
            stale = self.finished_at is None or (now - self.finished_at).total_seconds() > REFRESH_SECONDS
            if (stale or refresh) and self.running_since is None:
                self.running_since = now
                self.thread = threading.Thread(target=self._run, args=(d,), name="oncebeat-web-doctor", daemon=True)
                self.thread.start()
        return self

    def wait(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for a run in progress (before the store closes)."""
        thread = self.thread
        if thread is not None:
            thread.join(timeout)

    def _run(self, d: Dashboard) -> None:
        rt = d.runtime
        try:
            report = run_doctor(rt.store, now=rt.clock.now(), definitions=rt.app)
            error = None
        except Exception as exc:  # noqa: BLE001 - e.g. the database went away: say so on the page, retry later
            report, error = None, str(exc) if isinstance(exc, OncebeatError) else f"{type(exc).__name__}: {exc}"
        with self.lock:
            if report is not None:
                self.report = report
            self.error = error
            self.finished_at = rt.clock.now()
            self.running_since = None


def doctor_runs(d: Dashboard, *, refresh: bool = False, start: bool = True) -> DoctorRuns:
    """The dashboard's :class:`DoctorRuns`; with ``start``, a background run begins if one is due.

    The overview's page load passes ``start=False``: it shows the latest report but never starts the doctor, whose
    run competes with page rendering for this process's CPU; the Doctor page and the overview's doctor card
    refresh (``/?part=doctor``, every few seconds while live) do, so at most one run every
    :data:`REFRESH_SECONDS` whatever the number of open pages.
    """
    runs: DoctorRuns = d.cache.setdefault("doctor", DoctorRuns())
    return runs.latest(d, refresh=refresh) if start else runs


def _link(evidence: Any) -> str | None:
    ident = evidence.data.get("id")
    if evidence.kind in ("job", "occurrence") and ident is not None:
        return f"/doctor/explain/{evidence.kind}/{ident}"
    if evidence.kind == "effect" and evidence.data.get("job_id") is not None:
        return f"/doctor/explain/job/{evidence.data['job_id']}"
    return None


def doctor_page(request: Request) -> Response:
    runs = doctor_runs(dashboard(request), refresh=request.query_params.get("refresh") == "1")
    report = runs.report
    findings = [{"f": f, "links": [_link(e) for e in f.evidence]} for f in report.findings] if report else []
    return render(request, "doctor.html", {"title": "Doctor", "report": report, "findings": findings, "runs": runs,
                                           "counts": report.counts() if report else None})


def explain_page(request: Request) -> Response:
    kind, ident = request.path_params["kind"], request.path_params["ident"]
    if kind not in explain_kinds():
        raise HTTPException(404, f"explain knows {', '.join(explain_kinds())}, not {kind!r}")
    if numeric_kind(kind) and not (ident.isascii() and ident.isdigit() and len(ident) <= MAX_ID_DIGITS):
        raise HTTPException(404, f"{kind} ids are whole numbers of at most {MAX_ID_DIGITS} digits, not {ident[:40]!r}")
    lines = explain(dashboard(request).runtime.store, kind, ident)
    return render(request, "explain.html", {"title": f"Explain {kind} {ident}", "kind": kind, "ident": ident,
                                            "lines": lines})


routes = [route("/doctor", doctor_page), route("/doctor/explain/{kind}/{ident:path}", explain_page)]
