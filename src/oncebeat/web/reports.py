"""Reports: the collection reports (docs/reports.md) as server-rendered SVG charts and tables, one card per
currency for DSO and CEI, stage effectiveness against the not-yet-reminded baseline, promises, disputes, aging and
the late fees recorded (one per invoice and stage; the CSV to post them is ``oncebeat report fees --csv``).

Entry point only: reads ``?from=YYYY-MM&to=YYYY-MM&currency=EUR&kind=dso`` (all optional, as ``oncebeat report``;
``kind`` shows that report's section only, and only the reports that section shows are computed), calls
:func:`oncebeat.reminders.reports.build_many` off the event loop and renders; a bad month, currency or kind is the
library's error, shown as a 400 page naming the field (an unknown kind lists the kinds). A read: login needed (as
every page), no action, no CSRF.

Stage effectiveness (docs/reports.md, "Stored runs"): on PostgreSQL it is first computed live in a read-only
snapshot under ``ONCEBEAT_REPORTS_LIVE_MS`` (default 200 ms; 0: never live); when that runs out the page shows the
newest stored run of the same parameters with the instant it is exact for (business zone, minutes ago) and asks
for a newer one (:func:`oncebeat.reminders.reports.runs.stage_report`), or, with none stored yet, says one is being
computed. Never a stored number without its instant. SQLite is always live. ``POST /reports/stages/recompute``
(an action: operator session and CSRF) asks for a run of the page's parameters.
"""

from __future__ import annotations

import os
from collections import defaultdict
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ..errors import OncebeatError
from ..reminders.reports import Month, Table, build_many, cell_text, check_currency, default_range, stages_table
from ..reminders.reports.effectiveness import WINDOWS
from ..reminders.reports.runs import RunParams, StageReport, request_run, stage_report
from ..reminders.reports.tables import rounded
from .app import action_form, dashboard, redirect_with, render, route
from .charts import Chart, grouped_bars, stacked_bars
from .schedules import operator_source

__all__ = ["routes"]

#: The report kinds each section of the page shows: a section not shown is not computed (stage effectiveness joins
#: every sent reminder with its invoice; a page asked for ``?kind=dso`` never pays for it).
SECTION_KINDS = {"dso_cei": ("dso", "cei"), "stages": ("stages",), "holds": ("holds",), "fees": ("fees",),
                 "aging": ("aging",)}
#: ``?kind=`` (as ``oncebeat report KIND``) → the page's sections it shows.
SECTIONS = {"all": ("dso_cei", "stages", "holds", "fees", "aging"), "dso": ("dso_cei",), "cei": ("dso_cei",),
            "stages": ("stages",), "aging": ("aging",), "promises": ("holds",), "disputes": ("holds",),
            "holds": ("holds",), "fees": ("fees",)}
OUTCOME_SERIES = ("kept", "broken", "pending", "unknown")
#: Milliseconds the live stage-effectiveness query may run on PostgreSQL before the page shows the stored run.
LIVE_MS_ENV = "ONCEBEAT_REPORTS_LIVE_MS"
LIVE_MS_DEFAULT = 200  # the page's other sections take 10-35 ms at 1M-10M invoices: a budget hit stays < 300 ms


def live_budget_ms() -> int:
    """``ONCEBEAT_REPORTS_LIVE_MS`` as a whole number of milliseconds >= 0 (0: never live); unset or empty: the default.

    Raises:
        OncebeatError: any other value (the page shows it naming the variable and the fix).
    """
    text = os.environ.get(LIVE_MS_ENV, "").strip()
    if not text:
        return LIVE_MS_DEFAULT
    if not (text.isascii() and text.isdigit() and len(text) < 8):
        raise OncebeatError(f"{LIVE_MS_ENV}={text[:20]!r} is not a whole number of milliseconds; set e.g. "
                            f"{LIVE_MS_ENV}={LIVE_MS_DEFAULT} (0: always show the stored run) or unset it")
    return int(text)


def _param(request: Request, name: str) -> str | None:
    value = request.query_params.get(name, "").strip()
    return value or None


def _per_currency(dso: Table, cei: Table) -> list[dict[str, Any]]:
    """One card per currency: a DSO chart (days) and a CEI chart (%) over the months, and their rows."""
    rows: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = defaultdict(list)
    for d, c in zip(dso.rows, cei.rows, strict=True):  # same months in the same order (one read)
        rows[d["currency"]].append((d, c))
    cards = []
    for currency, pairs in sorted(rows.items()):
        months = [d["month"] for d, _ in pairs]
        why = {(d["month"], "DSO"): f"{d['month']}: n/a, {d['note']}" for d, _ in pairs if d["dso"] is None}
        why_cei = {(c["month"], "CEI"): f"{c['month']}: n/a, {c['note']}" for _, c in pairs if c["cei"] is None}
        dso_chart = grouped_bars([(m[2:], {"DSO": float(rounded(d["dso"], "days")) if d["dso"] is not None else None})
                                  for m, (d, _) in zip(months, pairs, strict=True)], ["DSO"], width=420, height=150,
                                 unit=" d", title=f"DSO {currency}",
                                 value_text={(k[0][2:], k[1]): v for k, v in why.items()})
        cei_chart = grouped_bars([(m[2:], {"CEI": float(rounded(c["cei"], "percent")) if c["cei"] is not None
                                           else None}) for m, (_, c) in zip(months, pairs, strict=True)], ["CEI"],
                                 width=420, height=150, top=100.0, unit="%", title=f"CEI {currency}",
                                 value_text={(k[0][2:], k[1]): v for k, v in why_cei.items()})
        cards.append({"currency": currency, "dso_chart": dso_chart, "cei_chart": cei_chart, "rows": pairs})
    return cards


def _stages_chart(stages: Table, window: int) -> Chart:
    """Reminded vs. baseline share paid within ``window`` days, per stage (percent)."""
    by_stage: dict[int, dict[str, float | None]] = defaultdict(dict)
    for r in stages.rows:
        share = r[f"paid_{window}d"]
        by_stage[r["stage"]][r["group"]] = float(rounded(share, "share")) * 100 if share is not None else None
    return grouped_bars([(f"stage {s}", v) for s, v in sorted(by_stage.items())], ["reminded", "baseline"],
                        width=420, height=150, top=100.0, unit="%",
                        title=f"paid within {window} days after the stage")


def _promises_chart(promises: Table) -> Chart:
    """Promises per month of the promised date, stacked by outcome (counts of every currency)."""
    months: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for r in promises.rows:
        for outcome in OUTCOME_SERIES:
            months[r["month"]][outcome] += r[outcome]
    return stacked_bars([(m[2:], dict(v)) for m, v in sorted(months.items())], list(OUTCOME_SERIES), width=420,
                        height=150, title="promises by outcome")


async def reports_page(request: Request) -> Response:
    rt = dashboard(request).runtime
    today = rt.clock.now().astimezone(rt.policy.zone).date()
    first_text, last_text, currency = _param(request, "from"), _param(request, "to"), _param(request, "currency")
    kind = _param(request, "kind") or "all"
    if kind not in SECTIONS:
        raise OncebeatError(f"kind: {kind[:40]!r} is not a report; use one of {', '.join(SECTIONS)} "
                            "(or leave it out for all)")
    first = Month.parse(first_text, "from") if first_text else None
    last = Month.parse(last_text, "to") if last_text else None
    start, end = default_range(today, first, last)
    kinds = tuple(k for section in SECTIONS[kind] for k in SECTION_KINDS[section])
    # Stage effectiveness apart: live under a budget, else a stored run with its instant (module docstring).
    built = await run_in_threadpool(build_many, rt.store, tuple(k for k in kinds if k != "stages"), first=start,
                                    last=end, as_of=today, currency=currency)
    tables: dict[str, Table | None] = dict.fromkeys(("dso", "cei", "stages", "aging", "promises", "disputes",
                                                     "fees"))
    tables.update((t.name, t) for t in built)
    params = RunParams(first=start, last=end, as_of=today, currency=currency)
    stage_view: StageReport | None = None
    if "stages" in kinds:
        stage_view = await run_in_threadpool(stage_report, rt.store, params, budget_ms=live_budget_ms(),
                                             clock=rt.clock, source=operator_source())
        rows = stage_view.live if stage_view.live is not None else stage_view.run.rows if stage_view.run else None
        tables["stages"] = stages_table(rows) if rows is not None else None
    dso, cei, stages, promises = tables["dso"], tables["cei"], tables["stages"], tables["promises"]
    locale = "en_US"

    def cell(table: Table, row: dict[str, Any], key: str) -> str:
        column = next(c for c in table.columns if c.key == key)
        return cell_text(row.get(key), column, row, locale)

    return render(request, "reports.html", {
        "title": "Reports", "today": today, "tz": rt.policy.tz, "start": start, "end": end,
        "q": {"from": first_text or "", "to": last_text or "", "currency": currency or ""},
        "kind": kind, "kinds": tuple(SECTIONS), "shown": SECTIONS[kind],
        "currencies": _per_currency(dso, cei) if dso is not None and cei is not None else [], **tables,
        "cell": cell, "windows": WINDOWS,
        "stage_charts": [_stages_chart(stages, n) for n in WINDOWS] if stages is not None and stages.rows else [],
        "promises_chart": _promises_chart(promises) if promises is not None and promises.rows else None,
        "stage_view": stage_view, "stage_as_of": _as_of_line(stage_view, rt.clock.now(), rt.policy.zone),
        "stage_query": urlencode({"from": str(start), "to": str(end), "currency": currency or ""}),
    })


def _as_of_line(view: StageReport | None, now: datetime, zone: Any) -> str | None:
    """"Stage effectiveness as of 2026-12-03 06:12 CST (25 minutes ago)" for a stored run; None when live."""
    if view is None or view.run is None:
        return None
    at = view.run.snapshot_at
    minutes = max(0, int((now - at).total_seconds() // 60))
    ago = "less than a minute ago" if minutes == 0 else f"{minutes} minute{'s' if minutes != 1 else ''} ago"
    return f"Stage effectiveness as of {at.astimezone(zone):%Y-%m-%d %H:%M %Z} ({ago})"


async def recompute_stages(request: Request) -> Response:
    """Ask for a stored run of the form's parameters (an action: operator session and CSRF)."""
    form = await action_form(request)
    rt = dashboard(request).runtime
    today = rt.clock.now().astimezone(rt.policy.zone).date()
    first_text, last_text = form.get("from", "").strip() or None, form.get("to", "").strip() or None
    currency = form.get("currency", "").strip() or None
    first = Month.parse(first_text, "from") if first_text else None
    last = Month.parse(last_text, "to") if last_text else None
    start, end = default_range(today, first, last)
    params = RunParams(first=start, last=end, as_of=today, currency=check_currency(currency))
    run_id = await run_in_threadpool(request_run, rt.store, params, clock=rt.clock, source=operator_source())
    message = (f"stage effectiveness: run {run_id} queued; a worker computes it" if run_id is not None else
               "stage effectiveness: a run of these parameters is already queued or running")
    query = urlencode({k: v for k, v in (("from", first_text), ("to", last_text), ("currency", currency)) if v})
    return redirect_with(request, message, "/reports" + (f"?{query}" if query else ""))


routes = [route("/reports", reports_page),
          route("/reports/stages/recompute", recompute_stages, methods=["POST"])]
