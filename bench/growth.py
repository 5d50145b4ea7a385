"""Growth: how the W1 drain time grows with the backlog (10k → 100k jobs by default).

oncebeat with 2 worker processes, batch 100 (and, on PostgreSQL, the raw
100-per-statement loop as a reference that should stay linear), one run per
size; the backlog is enqueued with ``enqueue_many`` (1,000 per call, also
timed). A drain time that grows faster than the backlog means the claim's
cost depends on the backlog (the plan sorts or scans it). W2's growth
(10k → 100k → 1M invoices) is in the W2 table.
"""

from __future__ import annotations

from typing import Any

from bench.common import FreshDb, Settings, fmt_num, log, md_table
from bench.w1_queue import RawDb, oncebeat_drain, oncebeat_enqueue


def run(settings: Settings) -> dict[str, Any]:
    res: list[dict[str, Any]] = []
    for n in settings.growth_sizes:
        for backend in settings.backends:
            with FreshDb(backend, "growth", settings) as db:
                enq = oncebeat_enqueue(db, n, per_call=1000)
                d = oncebeat_drain(db, n, settings, workers=2)
            res.append({"system": f"oncebeat {backend}", "jobs": n, "enqueue_rate": enq, **d.as_dict()})
            log(f"growth: oncebeat {backend} {n:,}: enqueue_many {enq:,.0f}/s, drain {d.seconds:.1f} s "
                f"({d.rate:,.0f} jobs/s)")
        with RawDb("postgres", settings) as raw:
            enq = raw.enqueue(n, per_call=1000)
            d = raw.drain(n, workers=2, batch=100)
        res.append({"system": "raw psycopg, 100 per statement", "jobs": n, "enqueue_rate": enq, **d.as_dict()})
        log(f"growth: raw pg {n:,}: drain {d.seconds:.1f} s ({d.rate:,.0f} jobs/s)")
    return {"results": res, "tables": tables(res)}


def tables(res: list[dict[str, Any]]) -> dict[str, str]:
    rows = []
    by: dict[str, list[dict[str, Any]]] = {}
    for r in res:
        by.setdefault(r["system"], []).append(r)
    for system, rs in by.items():
        rs.sort(key=lambda r: r["jobs"])
        base = rs[0]
        for r in rs:
            rows.append([system, f"{r['jobs']:,}", fmt_num(r.get("enqueue_rate")), f"{r['seconds']:.2f}",
                         fmt_num(r["rate"]), f"{r['jobs'] / base['jobs']:.0f}×",
                         f"{r['seconds'] / base['seconds']:.1f}×"])
    return {"growth": md_table(["system", "jobs", "enqueue_many jobs/s", "drain s (2 workers)", "jobs/s",
                                "size ×", "drain time ×"], rows)}
