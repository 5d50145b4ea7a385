"""Reports: the collection reports (docs/reports.md) as server-rendered SVG charts and tables, one card per
currency for DSO and CEI, stage effectiveness against the not-yet-reminded baseline, promises, disputes, aging and
the late fees recorded (one per invoice and stage; the CSV to post them is ``oncebeat report fees --csv``).

Entry point only: reads ``?from=YYYY-MM&to=YYYY-MM&currency=EUR&kind=dso`` (all optional, as ``oncebeat report``;
``kind`` shows that report's section only, and only the reports that section shows are computed), calls
:func:`oncebeat.reminders.reports.build_many` off the event loop and renders; a bad month, currency or kind is the
library's error, shown as a 400 page naming the field (an unknown kind lists the kinds). A read: login needed (as
every page), no action, no CSRF.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ..errors import OncebeatError
from ..reminders.reports import Month, Table, build_many, cell_text, default_range
from ..reminders.reports.effectiveness import WINDOWS
from ..reminders.reports.tables import rounded
from .app import dashboard, render, route
from .charts import Chart, grouped_bars, stacked_bars

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
    built = await run_in_threadpool(build_many, rt.store, kinds, first=start, last=end, as_of=today,
                                    currency=currency)
    tables: dict[str, Table | None] = dict.fromkeys(("dso", "cei", "stages", "aging", "promises", "disputes",
                                                     "fees"))
    tables.update((t.name, t) for t in built)
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
    })


routes = [route("/reports", reports_page)]
