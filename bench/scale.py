"""Ten million invoices (issue 27 item 5): one big book kept in a schema, then the scan, pages and drain at size.

Every step runs against ``BENCH_PG_URL`` (point it at a database of your own: the book is kept between steps
in ``--schema`` and dropped only by ``drop``), and logs the load average beside each figure:

    python -m bench.scale build --schema S [--invoices 10000000] [--customers 1000000]
    python -m bench.scale scan --schema S [--collapse next]      # first, duplicate and next-day scan, timed
    python -m bench.scale pages --schema S [--reps 10] [--only reports,api]   # dashboard pages over the book
    python -m bench.scale compare --schema S --before DIR [--only reports] [--reps 5] [--rounds 3]
    python -m bench.scale triggers --schema S [--rows 20000] [--rounds 3]   # what invoices' triggers cost writers
    python -m bench.scale drain [--finished 10000000] [--jobs 20000] [--reps 2]
    python -m bench.scale remind --schema S                     # sent reminders of stages 1, 7, 14 (round 3c's B)
    python -m bench.scale runs --schema S [--reps 5]            # stored stage-effectiveness runs: compute, pages
    python -m bench.scale drop --schema S

``build`` migrates the schema and loads the book with ``COPY`` (:mod:`bench.invoices`, ``n_customers``), timed
per table, then ``VACUUM ANALYZE``. ``scan`` is W2's three scans from no reminders and no jobs, each with the
CPU of this process and of its PostgreSQL backend (on a shared machine, the work itself). ``drain`` compares
``pages --only`` times some kinds of page only (``overview``, ``reminders``, ``search``, ``names``: searches by
one and two letters that match no name (the search's worst case: every name is read), ``invoice``, ``jobs``,
``metrics``, ``reports``: the Reports page whole and per section, ``api``: ``GET /api/v1/reports``). ``compare``
runs ``pages`` in a child process per round and side (B A, A B, B A, …), alternating an export of another tree
(``--before``: its ``src`` comes first on ``PYTHONPATH``, this harness runs it) and this one, and prints
after/before ratios per round and page. ``triggers`` inserts ``--rows`` invoices (copies of existing ones) and
pays as many open ones, in
a transaction rolled back, once with the receivable-moves triggers (reminders 0023) and once with them disabled,
interleaved per round: the difference per row is what the triggers cost a writer. ``drain`` compares W1's drain
(2 worker processes, batch 100) of ``--jobs`` no-op jobs in a schema with no history and in one
holding ``--finished`` completed jobs (one ``INSERT … SELECT generate_series``), interleaved per repetition.
``remind`` adds the sent reminders of round 3c's book B in SQL (two invoices in five that were unpaid on the stage's
day, stages 1, 7 and 14, anchors 2025-12-01 to the business date; 113k at 1M invoices, 1.35M at 10M), then
``VACUUM ANALYZE reminders``. ``runs`` (reminders 0025) times, for the Reports page's default range: a run's compute
(:func:`oncebeat.reminders.reports.runs.compute_run`: the report in one REPEATABLE READ snapshot, then one row
stored) with its PostgreSQL backend's CPU, the read of the newest run, and the page ``/reports`` and
``/reports?kind=stages`` (a) with no run stored and the live read cut by its budget (``ONCEBEAT_REPORTS_LIVE_MS``
250), (b) with a run stored whose compute took longer than the budget (no live read), (c) budget 0.
JSON of each step goes to ``bench/results/``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench import invoices
from bench.common import FreshDb, Settings, create_schema, drop_schema, log, pg_connect, pg_url, write_json

BUSINESS_DATE = invoices.date(2026, 3, 2)


def load_avg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _kept(schema: str) -> FreshDb:
    """A :class:`FreshDb` view of an existing schema (never used as a context manager: nothing is dropped)."""
    db = FreshDb("postgres", "scale", Settings(), migrate=False)
    db.schema, db.url = schema, pg_url(schema)
    return db


def build(schema: str, n_invoices: int, n_customers: int) -> dict[str, Any]:
    import oncebeat.reminders  # noqa: F401  (registers the reminders SQL line)
    from oncebeat.store import open_store

    create_schema(schema)
    with open_store(pg_url(schema)) as store:
        store.migrate()
    out: dict[str, Any] = {"schema": schema, "invoices": n_invoices, "customers_asked": n_customers,
                           "load_before": load_avg()}
    now = invoices.datetime.now(invoices.UTC)
    with pg_connect(schema) as c:
        t = time.perf_counter()
        with c.cursor().copy("COPY customers (email, name, locale, tz) FROM STDIN") as cp:
            for row in invoices.customers(n_customers):
                cp.write_row(row)
        out["customers_copy_s"] = time.perf_counter() - t
        ids = dict(c.execute("SELECT email, id FROM customers").fetchall())
        out["customers"] = len(ids)
        log(f"customers: {len(ids):,} in {out['customers_copy_s']:.1f} s (load {load_avg()})")
        t = time.perf_counter()
        with c.cursor().copy("COPY invoices (number, customer_id, currency, amount_due, issued_on, due_on, status, "
                             "paid_on, updated_at) FROM STDIN") as cp:
            for i, (num, email, cur, amt, iss, due, st, paid) in enumerate(
                    invoices.invoices(n_invoices, BUSINESS_DATE, n_customers)):
                cp.write_row((num, ids[email], cur, amt, iss, due, st, paid, now))
                if i and i % 1_000_000 == 0:
                    log(f"  {i:,} invoices, {time.perf_counter() - t:.0f} s (load {load_avg()})")
        out["invoices_copy_s"] = time.perf_counter() - t
        log(f"invoices: {n_invoices:,} in {out['invoices_copy_s']:.1f} s (load {load_avg()})")
        t = time.perf_counter()
        c.execute("VACUUM ANALYZE customers")
        c.execute("VACUUM ANALYZE invoices")
        out["vacuum_analyze_s"] = time.perf_counter() - t
        out["sizes"] = {r[0]: int(r[1]) for r in c.execute(
            "SELECT relname, pg_total_relation_size(oid) FROM pg_class WHERE relname IN ('invoices', 'customers') "
            "AND relnamespace = %s::regnamespace", (schema,)).fetchall()}
        out["open"] = c.execute("SELECT count(*) FROM invoices WHERE status = 'open'").fetchone()[0]
    out["load_after"] = load_avg()
    log(f"built: {out}")
    return out


def _empty(schema: str) -> None:
    """No reminders and no jobs, as after an install. ``TRUNCATE`` only: an ``ANALYZE`` of the empty ``reminders``
    makes the planner trust 0 rows and plan the scan's per-invoice probe as a sequential scan of the table the
    scan is filling (quadratic; docs/scaling.md)."""
    with pg_connect(schema) as c:
        c.execute("TRUNCATE reminders, jobs RESTART IDENTITY CASCADE")


def server_cpu() -> float:
    """CPU seconds (user + system) so far of the PostgreSQL backends serving this process's connections.

    On a shared machine wall time measures the queue for the CPU as much as the work; this is the work. The
    backends are found by this process's TCP ports in ``pg_stat_activity`` and read in ``/proc`` (same host)."""
    import psutil

    ports = [c.laddr.port for c in psutil.Process().net_connections("tcp") if c.raddr and c.raddr.port == 5432]
    with pg_connect() as c:
        pids = [r[0] for r in c.execute("SELECT pid FROM pg_stat_activity WHERE client_port = ANY(%s) "
                                        "AND pid <> pg_backend_pid()", (ports,)).fetchall()]
    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total


def scan(schema: str, collapse: str) -> dict[str, Any]:
    """W2's three scans (first, duplicate, next day) from no reminders and no jobs, each timed (wall), with this
    process's CPU and its PostgreSQL backends' CPU; no EXPLAIN in front (a rolled-back insert would leave dead
    index entries)."""
    from oncebeat.provenance import current_source
    from oncebeat.reminders.policy import Policy
    from oncebeat.reminders.service import ReminderService
    from oncebeat.store import open_store
    from oncebeat.timebase import SystemClock

    db = _kept(schema)
    n = int(db.query("SELECT count(*) FROM invoices")[0][0])
    _empty(schema)
    src = current_source("worker")
    out: dict[str, Any] = {"invoices": n, "collapse": collapse}
    with open_store(db.url + "&pool_size=1") as store:
        service = ReminderService(store, Policy(collapse=collapse), clock=SystemClock())
        for label, occurrence, day in (("first", 1, BUSINESS_DATE), ("second", 2, BUSINESS_DATE),
                                       ("nextday", 3, BUSINESS_DATE + timedelta(days=1))):
            before, cpu0, srv0 = load_avg(), time.process_time(), server_cpu()
            t = time.perf_counter()
            r = service.scan(occurrence_id=occurrence, business_date=day, source=src)
            wall = time.perf_counter() - t
            out[label] = {"wall_s": wall, "client_cpu_s": time.process_time() - cpu0,
                          "server_cpu_s": server_cpu() - srv0, "pending": r.pending, "skipped": r.skipped,
                          "load_before": before, "load_after": load_avg()}
            log(f"scan {collapse} {n:,} {label}: {wall:.1f} s wall, server CPU {out[label]['server_cpu_s']:.1f} s, "
                f"client CPU {out[label]['client_cpu_s']:.1f} s; {r.pending:,} pending; load {before} → {load_avg()}")
    out["jobs"] = int(db.query("SELECT count(*) FROM jobs")[0][0])
    out["reminders"] = int(db.query("SELECT count(*) FROM reminders")[0][0])
    if out["second"]["pending"] or out["jobs"] != out["first"]["pending"] + out["nextday"]["pending"]:
        raise RuntimeError(f"the duplicate scan was not a no-op, or jobs do not match: {out}")
    return out


def _time(call: Callable[[], Any], reps: int) -> dict[str, float]:
    t = time.perf_counter()
    call()  # warm (timed: a page over 2 s is then timed only twice more, one over 10 s not again)
    first_ms = (time.perf_counter() - t) * 1000
    if first_ms > 10_000:  # minutes of a shared machine for a figure already far over any page budget
        return {"median_ms": first_ms, "p95_ms": first_ms, "max_ms": first_ms, "first_ms": first_ms, "n": 1}
    samples = []
    for _ in range(reps if first_ms < 2000 else 2):
        t = time.perf_counter()
        call()
        samples.append((time.perf_counter() - t) * 1000)
    samples.sort()
    return {"median_ms": statistics.median(samples), "p95_ms": samples[max(0, int(len(samples) * 0.95) - 1)],
            "max_ms": samples[-1], "first_ms": first_ms, "n": len(samples)}


#: ``pages --only`` keys: every page kind the bench times.
PAGE_KINDS = ("overview", "reminders", "search", "names", "invoice", "jobs", "metrics", "reports", "api")


def pages(schema: str, reps: int, only: tuple[str, ...] = PAGE_KINDS) -> list[dict[str, Any]]:
    import re

    from starlette.testclient import TestClient

    from oncebeat.web import WebSettings, create_app

    db = _kept(schema)
    number, name, email = db.query(
        "SELECT i.number, c.name, c.email FROM invoices i JOIN customers c ON c.id = i.customer_id "
        "WHERE i.id = (SELECT max(id) / 2 FROM invoices)")[0]
    app = create_app(WebSettings(database_url=db.url, token="bench", migrate=False,
                                 api_tokens="bench:read:" + "b" * 40))
    api = {"Authorization": "Bearer " + "b" * 40}
    out = []
    with TestClient(app, base_url="http://127.0.0.1:8000", follow_redirects=False) as client:
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', client.get("/login").text)
        assert csrf is not None
        login = client.post("/login", data={"csrf": csrf.group(1), "token": "bench", "next": "/"})
        if login.status_code != 303:
            raise RuntimeError(f"login refused: {login.status_code}")
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', client.get("/reminders").text)
        assert csrf is not None
        token = csrf.group(1)
        cases: list[tuple[str, str, Callable[[], Any]]] = [
            ("overview", "/ (overview)", lambda: client.get("/")),
            ("reminders", "/reminders (counts, aging charts)", lambda: client.get("/reminders")),
            ("search", "POST /reminders/search (invoice number)",
             lambda: client.post("/reminders/search", data={"csrf": token, "q": number})),
            ("search", "POST /reminders/search (customer name)",
             lambda: client.post("/reminders/search", data={"csrf": token, "q": name})),
            ("names", "POST /reminders/search (one letter, no name holds it)",
             lambda: client.post("/reminders/search", data={"csrf": token, "q": "x"})),
            ("names", "POST /reminders/search (two letters, no name holds them)",
             lambda: client.post("/reminders/search", data={"csrf": token, "q": "qz"})),
            ("search", "POST /reminders/search (email)",
             lambda: client.post("/reminders/search", data={"csrf": token, "q": email})),
            ("invoice", "/reminders/invoices/NUMBER", lambda: client.get(f"/reminders/invoices/{number}")),
            ("jobs", "/jobs", lambda: client.get("/jobs")),
            ("metrics", "/metrics (scrape)", lambda: client.get("/metrics")),
            ("reports", "/reports (collection reports)", lambda: client.get("/reports")),
            *[("reports", f"/reports?kind={k}", lambda k=k: client.get(f"/reports?kind={k}"))
              for k in ("dso", "stages", "holds", "aging", "fees")],
            ("api", "GET /api/v1/reports?kind=dso,cei", lambda: client.get("/api/v1/reports?kind=dso,cei",
                                                                            headers=api)),
            ("api", "GET /api/v1/reports (all)", lambda: client.get("/api/v1/reports", headers=api)),
        ]
        for kind, label, call in cases:
            if kind not in only:
                continue
            status = call().status_code
            timing = _time(call, reps)
            out.append({"page": label, "status": status, **timing, "load": load_avg()})
            log(f"  {label}: {status}, median {timing['median_ms']:.1f} ms, p95 {timing['p95_ms']:.1f} ms "
                f"(load {load_avg()})")
    return out


def compare(schema: str, before: Path, only: tuple[str, ...], reps: int, rounds: int) -> dict[str, Any]:
    """``pages`` of the tree at ``before`` and of this one, alternating per round in child processes; the
    after/before ratio of each page's median per round."""
    here = Path(__file__).resolve().parents[1]
    runs: list[dict[str, Any]] = []
    for n in range(rounds):
        sides = (("before", before / "src"), ("after", here / "src"))
        for side, src in sides if n % 2 == 0 else sides[::-1]:  # B A, A B, B A: neither side always goes first
            env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{here}"}
            load = load_avg()
            child = subprocess.run([sys.executable, "-m", "bench.scale", "pages", "--schema", schema, "--reps",
                                    str(reps), "--only", ",".join(only), "--print-only"],
                                   env=env, cwd=here, check=True, capture_output=True, text=True)
            result = json.loads(child.stdout.strip().splitlines()[-1])
            runs.append({"round": n + 1, "side": side, "load_start": load, "load_end": load_avg(),
                         "pages": result})
            log(f"round {n + 1} {side}: load {load} -> {load_avg()}")
    ratios: list[dict[str, Any]] = []
    for n in range(rounds):
        b, a = (next(r for r in runs if r["round"] == n + 1 and r["side"] == s) for s in ("before", "after"))
        for pb, pa in zip(b["pages"], a["pages"], strict=True):
            ratios.append({"round": n + 1, "page": pa["page"], "before_ms": pb["median_ms"],
                           "after_ms": pa["median_ms"], "ratio": pa["median_ms"] / pb["median_ms"],
                           "status": (pb["status"], pa["status"]), "load": (b["load_start"], a["load_end"])})
            log(f"  round {n + 1} {pa['page']}: {pb['median_ms']:.1f} -> {pa['median_ms']:.1f} ms, "
                f"ratio {pa['median_ms'] / pb['median_ms']:.3f}")
    return {"runs": runs, "ratios": ratios}


def remind(schema: str) -> dict[str, Any]:
    """Sent reminders of stages 1, 7 and 14 added in SQL (see the module's docstring), timed."""
    out: dict[str, Any] = {"load_before": load_avg()}
    with pg_connect(schema) as c:
        top = int(c.execute("SELECT max(id) FROM invoices").fetchone()[0])
        t = time.perf_counter()
        for low in range(0, top, 100_000):
            with c.transaction():
                c.execute("INSERT INTO reminders (invoice_id, stage, state, business_date, created_at, updated_at, "
                          "sent_at) SELECT i.id, s.stage, 'sent', i.due_on + s.stage, now(), now(), now() "
                          "FROM invoices i CROSS JOIN (VALUES (1), (7), (14)) AS s (stage) "
                          "WHERE i.id > %s AND i.id <= %s AND i.id %% 5 < 2 AND i.status <> 'void' "
                          "AND i.due_on + s.stage BETWEEN DATE '2025-12-01' AND %s "
                          "AND NOT (i.status = 'paid' AND i.paid_on IS NOT NULL AND i.paid_on < i.due_on + s.stage) "
                          "ON CONFLICT DO NOTHING", (low, low + 100_000, BUSINESS_DATE))
        out["insert_s"] = time.perf_counter() - t
        out["sent"] = int(c.execute("SELECT count(*) FROM reminders WHERE state = 'sent'").fetchone()[0])
        c.execute("VACUUM ANALYZE reminders")
    out["load_after"] = load_avg()
    log(f"remind: {out['sent']:,} sent reminders in {out['insert_s']:.1f} s (load {load_avg()})")
    return out


def runs(schema: str, reps: int) -> dict[str, Any]:
    """Stored stage-effectiveness runs at size (see the module's docstring)."""
    import oncebeat.reminders  # noqa: F401  (registers the reminders SQL line)
    from oncebeat.provenance import current_source
    from oncebeat.reminders.reports import default_range
    from oncebeat.reminders.reports.runs import RunParams, compute_run, newest_run, request_run
    from oncebeat.reminders.runtime import load_runtime

    db = _kept(schema)
    rt = load_runtime(database_url=db.url, migrate=False)
    today = rt.clock.now().astimezone(rt.policy.zone).date()
    first, last = default_range(today, None, None)
    params = RunParams(first=first, last=last, as_of=today)
    out: dict[str, Any] = {"params": params.key, "compute": [], "load_before": load_avg()}

    def clear() -> None:
        with pg_connect(schema) as c:
            c.execute("DELETE FROM report_runs")
            c.execute("DELETE FROM jobs WHERE task = 'reminders.report_run'")

    try:
        clear()
        for n in range(reps):
            run_id = request_run(rt.store, params, clock=rt.clock, source=current_source("cli"))
            assert run_id is not None
            cpu0, t = server_cpu(), time.perf_counter()
            done = compute_run(rt.store, run_id, clock=rt.clock)
            wall, cpu = time.perf_counter() - t, server_cpu() - cpu0
            assert done is not None
            with pg_connect(schema) as c:  # its job, never claimed here: finished by hand so the next may queue
                c.execute("DELETE FROM jobs WHERE task = 'reminders.report_run'")
            out["compute"].append({"rep": n + 1, "wall_ms": wall * 1000, "server_cpu_ms": cpu * 1000,
                                   "load": load_avg()})
            log(f"  run {n + 1}: computed and stored in {wall * 1000:.0f} ms, server CPU {cpu * 1000:.0f} ms "
                f"(load {load_avg()})")
        out["newest_read"] = _time(lambda: newest_run(rt.store, params), max(reps, 10))
        log(f"  newest run read: median {out['newest_read']['median_ms']:.2f} ms")
        cases: list[tuple[str, str, bool]] = [("budget 250 ms, no run stored (the live read runs into it)", "250",
                                               True),
                                              ("budget 250 ms, a run stored (computed in more than 250 ms)", "250",
                                               False),
                                              ("budget 0 (never live), a run stored", "0", False)]
        out["pages"] = []
        for label, budget, empty in cases:
            if empty:
                clear()
            os.environ["ONCEBEAT_REPORTS_LIVE_MS"] = budget
            for page in pages(schema, reps, ("reports",)):
                if page["page"] in ("/reports (collection reports)", "/reports?kind=stages"):
                    out["pages"].append({"case": label, **page})
                    log(f"  {label}: {page['page']} median {page['median_ms']:.1f} ms")
            if empty:  # the page asked for a run: compute it for the next case
                with pg_connect(schema) as c:
                    c.execute("DELETE FROM jobs WHERE task = 'reminders.report_run'")
                    c.execute("DELETE FROM report_runs")
                run_id = request_run(rt.store, params, clock=rt.clock, source=current_source("cli"))
                assert run_id is not None and compute_run(rt.store, run_id, clock=rt.clock) is not None
    finally:
        os.environ.pop("ONCEBEAT_REPORTS_LIVE_MS", None)
        rt.close()
    out["load_after"] = load_avg()
    return out


_MOVES_TRIGGERS = ("receivable_moves_insert", "receivable_moves_update", "receivable_moves_delete")


def triggers(schema: str, rows: int, rounds: int) -> list[dict[str, Any]]:
    """Per round, with the receivable-moves triggers on and then off (each in a transaction rolled back): insert
    ``rows`` copies of existing invoices, then pay ``rows`` open invoices; seconds each and the cost per row."""
    out = []
    with pg_connect(schema) as c:
        for n in range(rounds):
            timing: dict[str, dict[str, float]] = {}
            for mode in ("on", "off"):
                with c.transaction(force_rollback=True):
                    if mode == "off":
                        for name in _MOVES_TRIGGERS:
                            c.execute(f"ALTER TABLE invoices DISABLE TRIGGER {name}")
                    t = time.perf_counter()
                    c.execute("INSERT INTO invoices (number, customer_id, currency, amount_due, issued_on, due_on, "
                              "status, paid_on, updated_at) SELECT 'T' || number, customer_id, currency, amount_due, "
                              "issued_on, due_on, status, paid_on, updated_at FROM invoices WHERE id <= %s", (rows,))
                    inserted = time.perf_counter() - t
                    t = time.perf_counter()
                    c.execute("UPDATE invoices SET status = 'paid', paid_on = due_on + 3, paid_at = now() WHERE id IN "
                              "(SELECT id FROM invoices WHERE status = 'open' AND number NOT LIKE 'T%%' ORDER BY id "
                              "LIMIT %s)", (rows,))
                    paid = time.perf_counter() - t
                timing[mode] = {"insert_s": inserted, "pay_s": paid}
            row = {"round": n + 1, **{f"{m}_{k}": v for m, t in timing.items() for k, v in t.items()},
                   "insert_us_per_row": (timing["on"]["insert_s"] - timing["off"]["insert_s"]) / rows * 1e6,
                   "pay_us_per_row": (timing["on"]["pay_s"] - timing["off"]["pay_s"]) / rows * 1e6,
                   "insert_ratio": timing["on"]["insert_s"] / timing["off"]["insert_s"],
                   "pay_ratio": timing["on"]["pay_s"] / timing["off"]["pay_s"], "load": load_avg()}
            out.append(row)
            log(f"round {n + 1}: {row}")
    return out


def _fill_finished(schema: str, n: int) -> None:
    with pg_connect(schema) as c:
        c.execute(
            "INSERT INTO jobs (queue, task, state, run_at, source_kind, source_host, source_pid, source_name, "
            "source_version, created_at, started_at, finished_at, attempt) "
            "SELECT 'default', 'old', 'completed', now() - interval '10 days', 'bench', 'h', 1, 'n', 'v', "
            "now() - interval '10 days', now() - interval '10 days', now() - interval '10 days', 1 "
            "FROM generate_series(1, %s)", (n,))
        c.execute("VACUUM ANALYZE jobs")


class _Noop(FreshDb):
    """Counts only the bench's no-op jobs, so the drain's span ignores the history."""

    def job_span(self, where: str = "TRUE") -> tuple[int, float]:
        return super().job_span(f"task = 'noop' AND ({where})")


def drain(finished: int, n_jobs: int, reps: int) -> dict[str, Any]:
    from bench.w1_queue import oncebeat_drain, oncebeat_enqueue

    settings = Settings()
    res: dict[str, list[dict[str, Any]]] = {"0": [], str(finished): []}
    dbs = {"0": _Noop("postgres", "scale0", settings), str(finished): _Noop("postgres", "scalebig", settings)}
    try:
        for db in dbs.values():
            db.__enter__()
        t = time.perf_counter()
        _fill_finished(dbs[str(finished)].schema or "", finished)
        fill_s = time.perf_counter() - t
        log(f"{finished:,} finished jobs in {fill_s:.0f} s (load {load_avg()})")
        for rep in range(reps):
            for size, db in dbs.items():
                with pg_connect(db.schema) as c:
                    c.execute("DELETE FROM jobs WHERE task = 'noop'")
                enq = oncebeat_enqueue(db, n_jobs, per_call=1000)
                before = load_avg()
                d = oncebeat_drain(db, n_jobs, settings, workers=2)
                res[size].append({"enqueue_rate": enq, **d.as_dict(), "load_before": before, "load_after": load_avg()})
                log(f"drain rep {rep + 1}, {int(size):,} finished jobs: {d.rate:,.0f} jobs/s ({d.seconds:.2f} s), "
                    f"enqueue_many {enq:,.0f}/s; load {before} → {load_avg()}")
        with pg_connect(dbs[str(finished)].schema) as c:
            sizes = {r[0]: int(r[1]) for r in c.execute(
                "SELECT c.relname, pg_relation_size(c.oid) FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
                "WHERE i.indrelid = 'jobs'::regclass").fetchall()}
    finally:
        for db in dbs.values():
            db.__exit__(None, None, None)
    return {"finished": finished, "jobs": n_jobs, "fill_s": fill_s, "results": res, "index_bytes": sizes}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("step", choices=("build", "scan", "pages", "compare", "triggers", "drain", "remind", "runs",
                                     "drop"))
    p.add_argument("--only", default=",".join(PAGE_KINDS), help=f"pages: some of {','.join(PAGE_KINDS)}")
    p.add_argument("--before", type=Path, help="compare: an export of the tree to compare with")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--rows", type=int, default=20_000)
    p.add_argument("--print-only", action="store_true", help="pages: print the JSON result, write no file")
    p.add_argument("--schema", default="scale_book")
    p.add_argument("--invoices", type=int, default=10_000_000)
    p.add_argument("--customers", type=int, default=1_000_000)
    p.add_argument("--collapse", default="next", choices=("next", "highest"))
    p.add_argument("--reps", type=int, default=None)
    p.add_argument("--finished", type=int, default=10_000_000)
    p.add_argument("--jobs", type=int, default=20_000)
    a = p.parse_args(argv)
    out: Any
    if a.step == "build":
        out = build(a.schema, a.invoices, a.customers)
    elif a.step == "scan":
        out = scan(a.schema, a.collapse)
    elif a.step == "pages":
        only = tuple(k.strip() for k in a.only.split(",") if k.strip())
        if unknown := [k for k in only if k not in PAGE_KINDS]:
            p.error(f"--only: unknown {unknown}; choose from {', '.join(PAGE_KINDS)}")
        out = pages(a.schema, a.reps or 10, only)
        if a.print_only:
            print(json.dumps(out))
            return 0
    elif a.step == "compare":
        if a.before is None:
            p.error("compare needs --before DIR (e.g. git archive fde1b3c | tar -x -C DIR)")
        out = compare(a.schema, a.before, tuple(k.strip() for k in a.only.split(",") if k.strip()), a.reps or 5,
                      a.rounds)
    elif a.step == "triggers":
        out = triggers(a.schema, a.rows, a.rounds)
    elif a.step == "drain":
        out = drain(a.finished, a.jobs, a.reps or 2)
    elif a.step == "remind":
        out = remind(a.schema)
    elif a.step == "runs":
        out = runs(a.schema, a.reps or 5)
    else:
        drop_schema(a.schema)
        return 0
    print(write_json(f"scale-{a.step}", {"step": a.step, "args": vars(a), "result": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
