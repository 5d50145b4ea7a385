"""W2 scan: one reminder scan over 10k / 100k / 1M invoices, then a no-op repeat and the next day's scan.

For each size and backend, per repetition: a fresh database gets a book of
invoices (:mod:`bench.invoices`; PostgreSQL then runs ``ANALYZE`` on the
invoice and customer tables, as autovacuum would after an import); each
repetition starts from that book with no reminders and no jobs (``TRUNCATE``
between repetitions), then, timed one by one in this process with
:meth:`ReminderService.scan`:

1. **first scan** for business date B: creates the reminder rows and one
   send job per pending reminder, in one transaction. Each policy collapse
   mode of ``--scan-collapse`` (default both, interleaved per repetition):
   ``highest`` (the top due stage ``pending``, the lower ones recorded
   superseded) and ``next`` (the default policy: the lowest unsent stage);
2. **second scan** for the same date (a duplicate trigger): creates nothing;
3. **next-day scan** (B + 1): the daily incremental case.

Rates: invoices in the book per second of scan, and reminder rows written per second.
"""

from __future__ import annotations

import time
from datetime import date, timedelta
from typing import Any

from bench import invoices
from bench.common import FreshDb, Settings, fmt_stat, log, md_table, pg_connect
from bench.profiling import PROFILES, pyinstrument_to

BUSINESS_DATE = date(2026, 3, 2)


def _counts(db: FreshDb) -> tuple[int, int, int, int]:
    """(reminder rows, pending, superseded stages, send jobs): a superseded stage is a ``skipped`` row (before
    reminders migration 0007) or an entry of a row's ``superseded_stages`` (since)."""
    in_row = "0"
    if db.query("SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() "
                "AND table_name = 'reminders' AND column_name = 'superseded_stages'",
                "SELECT count(*) FROM pragma_table_info('reminders') WHERE name = 'superseded_stages'")[0][0]:
        in_row = "COALESCE(sum(cardinality(superseded_stages)), 0)"
    rows, pending, skipped, in_rows = db.query(
        "SELECT count(*), count(*) FILTER (WHERE state = 'pending'), "
        f"count(*) FILTER (WHERE state = 'skipped'), {in_row} FROM reminders",
        "SELECT count(*), count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'skipped'), "
        + ("COALESCE(sum(json_array_length(superseded_stages)), 0)" if in_row != "0" else "0") + " FROM reminders")[0]
    jobs = db.query("SELECT count(*) FROM jobs")[0][0]
    return int(rows), int(pending), int(skipped) + int(in_rows), int(jobs)


def _explain(db: FreshDb, store: Any, service: Any, business_date: date, name: str) -> None:
    """EXPLAIN (ANALYZE, BUFFERS) of both scan statements as the service runs them, rolled back (PostgreSQL)."""
    from psycopg.types.json import Jsonb

    from oncebeat.provenance import current_source
    from oncebeat.reminders.service import SEND_MAX_ATTEMPTS, SEND_TASK, stage_cutoffs

    stages = stage_cutoffs(service.policy.stages, business_date)
    now = service.clock.now()
    query = "scan_insert_next_reminders" if service.policy.collapse == "next" else "scan_insert_reminders"
    p1 = {"stages": Jsonb(stages), "max_cutoff": max(s["cutoff"] for s in stages), "occurrence_id": 99,
          "business_date": business_date, "now": now, "default_tz": service.policy.tz}
    p2 = {"queue": "default", "task": SEND_TASK, "max_attempts": SEND_MAX_ATTEMPTS, "priority": 0, "now": now,
          **current_source("worker").params()}
    out = []
    with pg_connect(db.schema) as c:
        with c.transaction(force_rollback=True):
            # the scan's second statement: the queue's enqueue_select over the app's pending_send_jobs
            enqueue = store.queries["enqueue_select"].replace("/*source*/", store.queries["pending_send_jobs"])
            for q, p in ((query, p1), ("scan_enqueue_sends", p2)):
                sql = store.queries[q] if q != "scan_enqueue_sends" else enqueue
                used = {k: v for k, v in p.items() if f"%({k})s" in sql}
                t = time.perf_counter()
                rows = c.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, used).fetchall()
                out.append(f"-- {q} ({time.perf_counter() - t:.2f} s with EXPLAIN ANALYZE)")
                out.extend(r[0] for r in rows)
                out.append("")
    PROFILES.mkdir(parents=True, exist_ok=True)
    (PROFILES / f"{name}.explain.txt").write_text("\n".join(out))


def _reset(db: FreshDb) -> None:
    """Forget every reminder and job (between repetitions on the same book)."""
    if db.backend == "postgres":
        with pg_connect(db.schema) as c:
            c.execute("TRUNCATE reminders, jobs RESTART IDENTITY CASCADE")
    else:
        import sqlite3

        c = sqlite3.connect(str(db.path), isolation_level=None)
        c.execute("DELETE FROM reminders")
        c.execute("DELETE FROM jobs")
        c.close()


def scans(settings: Settings, db: FreshDb, backend: str, n: int, rep: int, collapse: str) -> dict[str, Any]:
    from oncebeat.provenance import current_source
    from oncebeat.reminders.policy import Policy
    from oncebeat.reminders.service import ReminderService
    from oncebeat.store import open_store
    from oncebeat.timebase import SystemClock

    src = current_source("worker")
    prof = settings.profile and rep == 0 and n == max(settings.scan_sizes)
    tag = f"w2-{backend}-{collapse}-{n}"
    with open_store(db.url) as store:
        service = ReminderService(store, Policy(collapse=collapse), clock=SystemClock())
        if prof and backend == "postgres":
            _explain(db, store, service, BUSINESS_DATE, f"{tag}-first-scan")
        with pyinstrument_to(f"{tag}-first-scan", prof):
            t = time.perf_counter()
            r1 = service.scan(occurrence_id=1, business_date=BUSINESS_DATE, source=src)
            first = time.perf_counter() - t
        rows, pending, superseded, jobs = _counts(db)
        if prof and backend == "postgres":
            _explain(db, store, service, BUSINESS_DATE, f"{tag}-second-scan")
        with pyinstrument_to(f"{tag}-second-scan", prof):
            t = time.perf_counter()
            r2 = service.scan(occurrence_id=2, business_date=BUSINESS_DATE, source=src)
            second = time.perf_counter() - t
        _, _, _, jobs2 = _counts(db)
        t = time.perf_counter()
        r3 = service.scan(occurrence_id=3, business_date=BUSINESS_DATE + timedelta(days=1), source=src)
        nextday = time.perf_counter() - t
    if r2.pending or r2.skipped or jobs2 != jobs:
        raise RuntimeError(f"second scan was not a no-op: {r2}, jobs {jobs} -> {jobs2}")
    if r1.pending != pending or jobs != pending:
        raise RuntimeError(f"scan result {r1} but {pending} pending rows and {jobs} jobs")
    return {"invoices": n, "collapse": collapse, "first_s": first, "second_s": second, "nextday_s": nextday,
            "rows": rows, "pending": pending, "skipped": superseded, "jobs": jobs, "nextday_pending": r3.pending,
            "nextday_skipped": r3.skipped}


def run(settings: Settings) -> dict[str, Any]:
    results: dict[str, dict[int, list[dict[str, Any]]]] = {}
    loads: dict[str, dict[int, float]] = {}
    for n in settings.scan_sizes:
        for backend in settings.backends:
            with FreshDb(backend, "w2", settings) as db:
                t = time.perf_counter()
                invoices.load(db, n, BUSINESS_DATE)
                loads.setdefault(backend, {})[n] = time.perf_counter() - t
                for rep in range(settings.reps):
                    for collapse in settings.scan_collapse:  # interleaved: machine noise hits both modes alike
                        _reset(db)
                        r = scans(settings, db, backend, n, rep, collapse)
                        log(f"W2 {backend} {collapse} {n:,} invoices rep {rep + 1}: first scan {r['first_s']:.2f} s "
                            f"({r['pending']:,} pending + {r['skipped']:,} superseded stages in {r['rows']:,} rows, "
                            f"{r['jobs']:,} jobs); second {r['second_s']:.3f} s; next day {r['nextday_s']:.3f} s")
                        results.setdefault(f"{backend} {collapse}", {}).setdefault(n, []).append(r)
    return {"business_date": BUSINESS_DATE.isoformat(), "load_seconds": loads, "results": results,
            "tables": tables(results)}


def tables(results: dict[str, dict[int, list[dict[str, Any]]]]) -> dict[str, str]:
    rows = []
    growth_rows = []
    for backend, by_n in results.items():
        prev: tuple[int, float] | None = None
        for n, reps in sorted(by_n.items()):
            first = [r["first_s"] for r in reps]
            written = [r.get("rows", r["pending"] + r["skipped"]) + r["jobs"] for r in reps]
            rows.append([backend, f"{n:,}", f"{reps[0]['pending']:,} / {reps[0]['skipped']:,} / {reps[0]['jobs']:,}",
                         f"{reps[0].get('rows', 0):,}", fmt_stat(first, 2), fmt_stat([n / f for f in first]),
                         fmt_stat([w / f for w, f in zip(written, first, strict=True)]),
                         fmt_stat([r["second_s"] for r in reps], 3),
                         fmt_stat([r["nextday_s"] for r in reps], 3),
                         f"{reps[0]['nextday_pending']:,} / {reps[0]['nextday_skipped']:,}"])
            m = sorted(first)[len(first) // 2]
            if prev is not None:
                growth_rows.append([backend, f"{prev[0]:,} → {n:,}", f"{n / prev[0]:.0f}×", f"{m / prev[1]:.1f}×"])
            prev = (n, m)
    scan = md_table(["backend, collapse", "invoices", "reminders pending / superseded stages / send jobs",
                     "reminder rows", "first scan s", "invoices/s", "rows written/s", "second (no-op) scan s",
                     "next-day scan s", "next day pending / superseded"], rows)
    growth = md_table(["backend, collapse", "invoices", "size ×", "first-scan time ×"], growth_rows)
    return {"scan": scan, "growth": growth}
