"""``python -m bench.dashboard [--pg URL] [--jobs 1000000] [--reminders 100000] [--reps 20]``.

Fills a fresh PostgreSQL schema with a large history (default 1,000,000 jobs and 100,000 reminders,
with their invoices, customers, effects, occurrences, processes and audit events), then times every
dashboard page and a ``/metrics`` scrape through the real application (in-process ASGI client: the
server-side time of each request, no network). Prints a markdown table (median, p95, max) and writes
JSON to ``bench/results/``. The schema is dropped afterwards unless ``--keep``.

The fill is plain SQL (``generate_series``) because it stands for years of history, not for a code path
under test; the pages then read it only through the library's verbs.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg

from bench.common import log, machine_info, write_json

DEFAULT_PG = os.environ.get("BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")

FILL = [
    # Customers and invoices: one customer per 5 invoices, amounts in four currencies, due dates over 2 years.
    """INSERT INTO customers (email, name, locale, tz)
       SELECT 'customer' || g || '@example.test', 'Customer ' || g, 'en_US', 'America/Chicago'
       FROM generate_series(1, %(customers)s) g""",
    """INSERT INTO invoices (number, customer_id, currency, amount_due, issued_on, due_on, status, paid_on, updated_at)
       SELECT 'INV-' || lpad(g::text, 8, '0'), 1 + (g %% %(customers)s),
              (ARRAY['USD','EUR','GBP','JPY'])[1 + g %% 4], 1000 + (g * 7919) %% 500000,
              DATE '2025-01-01' + (g %% 700), DATE '2025-01-31' + (g %% 700),
              CASE WHEN g %% 3 = 0 THEN 'paid' ELSE 'open' END,
              CASE WHEN g %% 3 = 0 THEN DATE '2025-02-10' + (g %% 700) END, now()
       FROM generate_series(1, %(invoices)s) g""",
    # The ledger: the daily reminder schedule for three years, and 20 hourly library schedules for 60 days.
    """INSERT INTO schedules (key, expression, tz, task, definition_hash, version, state, active_since,
                              created_at, updated_at)
       VALUES ('reminders', '0 8 * * *', 'America/Chicago', 'reminders.scan', 'bench', 1, 'active', now(), now(), now())""",
    """INSERT INTO schedules (key, expression, tz, task, definition_hash, version, state, active_since,
                              created_at, updated_at)
       SELECT 'hourly-' || k, '0 * * * *', 'UTC', 'report.daily', 'bench', 1, 'active', now(), now(), now()
       FROM generate_series(1, 20) k""",
    """INSERT INTO occurrences (schedule_key, fire_at, local_fire_at, tz, business_date, outcome, source_kind,
                                source_host, source_pid, source_name, source_version, created_at)
       SELECT 'reminders', ts, to_char(ts AT TIME ZONE 'America/Chicago', 'YYYY-MM-DD"T"HH24:MI:SS'),
              'America/Chicago', (ts AT TIME ZONE 'America/Chicago')::date, 'enqueued', 'clock', 'bench', 1,
              'clock.1', '0.1.0', ts
       FROM generate_series(date_trunc('day', now()) - interval '1095 days' + interval '14 hours',
                            now() - interval '1 hour', interval '1 day') ts""",
    """INSERT INTO occurrences (schedule_key, fire_at, local_fire_at, tz, business_date, outcome, source_kind,
                                source_host, source_pid, source_name, source_version, created_at)
       SELECT 'hourly-' || k, ts, to_char(ts, 'YYYY-MM-DD"T"HH24:MI:SS'), 'UTC', ts::date, 'enqueued', 'clock',
              'bench', 1, 'clock.1', '0.1.0', ts
       FROM generate_series(1, 20) k,
            generate_series(date_trunc('hour', now()) - interval '60 days', now(), interval '1 hour') ts""",
    # Jobs over 30 days (newest in the last hour): mostly completed, some discarded with errors, a backlog.
    """INSERT INTO jobs (queue, task, args, state, priority, attempt, max_attempts, run_at, source_kind,
                         source_host, source_pid, source_name, source_version, errors, created_at, started_at,
                         finished_at, lease_expires_at, worker_id)
       SELECT (ARRAY['default','mail','reports'])[1 + g %% 3],
              (ARRAY['reminders.send','reminders.scan','report.daily','sync.crm','billing.charge',
                     'webhook.deliver','digest.weekly','cleanup'])[1 + (g / 7) %% 8],
              jsonb_build_object('n', g), s.state, 0,
              CASE WHEN s.state IN ('available','scheduled') THEN 0 WHEN s.state = 'discarded' THEN 20 ELSE 1 END,
              20, t.created + interval '1 second', 'worker', 'bench', 1, 'worker.1', '0.1.0',
              CASE WHEN s.state IN ('discarded','retryable')
                   THEN jsonb_build_array(jsonb_build_object('attempt', 1, 'at', t.created, 'kind', 'error',
                        'error', 'ConnectionError: upstream refused the connection'))
                   ELSE '[]'::jsonb END,
              t.created, CASE WHEN s.state NOT IN ('available','scheduled') THEN t.created + interval '2 seconds' END,
              CASE WHEN s.state IN ('completed','discarded','cancelled') THEN t.created + interval '3 seconds' END,
              CASE WHEN s.state = 'running' THEN now() + interval '30 seconds' END,
              CASE WHEN s.state = 'running' THEN 1 END
       FROM generate_series(1, %(jobs)s) g
       CROSS JOIN LATERAL (SELECT now() - (interval '30 days') * ((%(jobs)s - g)::float / %(jobs)s) AS created) t
       CROSS JOIN LATERAL (SELECT CASE
              WHEN g > %(jobs)s - 2000 AND g %% 4 = 0 THEN 'available'
              WHEN g > %(jobs)s - 2000 AND g %% 4 = 1 THEN 'scheduled'
              WHEN g > %(jobs)s - 200 AND g %% 4 = 2 THEN 'running'
              WHEN g %% 50 = 0 THEN 'discarded'
              WHEN g %% 97 = 0 THEN 'cancelled'
              WHEN g %% 211 = 0 THEN 'retryable'
              ELSE 'completed' END AS state) s""",
    # Reminders: up to 4 stages per invoice; the effect ledger holds one key per sent reminder, 12 in doubt.
    """INSERT INTO reminders (invoice_id, stage, state, reason, business_date, message_id, created_at, updated_at,
                              sent_at)
       SELECT 1 + (g / 4) %% %(invoices)s, (ARRAY[1, 7, 14, 30])[1 + g %% 4],
              CASE WHEN g %% 10 < 6 THEN 'sent' WHEN g %% 10 < 9 THEN 'skipped' ELSE 'failed' END,
              CASE WHEN g %% 10 >= 6 THEN 'invoice paid' END, DATE '2025-03-01' + (g %% 600),
              '<reminder-' || g || '@example.test>', now(), now(), now()
       FROM generate_series(0, %(reminders)s - 1) g ON CONFLICT DO NOTHING""",
    """INSERT INTO effects (key, state, payload_hash, job_id, attempt, process_id, source_kind, source_host,
                            source_pid, source_name, source_version, result, detail, started_at, finished_at)
       SELECT 'reminder:' || r.id, CASE WHEN r.id %% 8000 = 0 THEN 'in_doubt' ELSE 'done' END, 'bench',
              1 + (r.id * 31) %% %(jobs)s, 1, 1, 'worker', 'bench', 1, 'worker.1', '0.1.0',
              jsonb_build_object('message_id', r.message_id, 'reply', '250 OK queued'),
              CASE WHEN r.id %% 8000 = 0 THEN 'holder died after the final dot, before recording' END,
              now() - interval '1 day', now() - interval '1 day'
       FROM reminders r WHERE r.state = 'sent'""",
    """UPDATE effects SET state = 'in_doubt', detail = 'holder died after the final dot, before recording'
       WHERE key IN (SELECT key FROM effects ORDER BY started_at, key LIMIT 12)""",
    """INSERT INTO processes (role, host, pid, name, version, tz_env, info, started_at, heartbeat_at, stopped_at)
       SELECT (ARRAY['clock','worker','worker','web'])[1 + g %% 4], 'host-' || (g %% 5), 1000 + g, 'proc.' || g,
              '0.1.0', NULL, '{}'::jsonb, now() - interval '10 days', now() - interval '1 day',
              now() - interval '1 day'
       FROM generate_series(1, 2000) g""",
    """INSERT INTO processes (role, host, pid, name, version, tz_env, info, started_at, heartbeat_at)
       VALUES ('clock', 'host-1', 1, 'clock.1', '0.1.0', 'UTC', '{}', now() - interval '1 hour', now()),
              ('worker', 'host-1', 2, 'worker.1', '0.1.0', 'UTC', '{}', now() - interval '1 hour', now()),
              ('worker', 'host-2', 3, 'worker.2', '0.1.0', 'UTC', '{}', now() - interval '1 hour', now())""",
    """INSERT INTO events (at, kind, subject, source_kind, source_host, source_pid, source_name, source_version,
                           detail)
       SELECT now() - (interval '30 days') * (g::float / 200000), 'job.retried', 'job:' || (1 + (g * 13) %% %(jobs)s),
              'worker', 'bench', 1, 'worker.1', '0.1.0', '{}'::jsonb
       FROM generate_series(1, 200000) g""",
]


def _with_schema(url: str, schema: str) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "schema"] + [("schema", schema)]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), parts.fragment))


def fill(url: str, schema: str, sizes: dict[str, int]) -> None:
    import oncebeat.reminders  # noqa: F401  (registers the reminders SQL line: the fill writes its tables)
    from oncebeat.store import open_store

    with open_store(_with_schema(url, schema)) as store:
        store.migrate()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        for sql in FILL:
            started = time.monotonic()
            conn.execute(sql, sizes)
            log(f"  {sql.split()[2]}: {time.monotonic() - started:.1f} s")
        conn.execute("VACUUM ANALYZE")


def _time(call: Callable[[], Any], reps: int) -> dict[str, float]:
    call()  # warm: caches, prepared plans, templates
    samples = []
    for _ in range(reps):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return {"median_ms": statistics.median(samples), "p95_ms": samples[max(0, int(len(samples) * 0.95) - 1)],
            "max_ms": samples[-1]}


def measure(url: str, schema: str, reps: int) -> list[dict[str, Any]]:
    import re

    from starlette.testclient import TestClient

    from oncebeat.web import WebSettings, create_app

    app = create_app(WebSettings(database_url=_with_schema(url, schema), token="bench", migrate=False))
    results = []
    with TestClient(app, base_url="http://127.0.0.1:8000", follow_redirects=False) as client:
        # Every page needs a login: sign in as the admin once (the session cookie then rides on each request).
        login = re.search(r'name="csrf" value="([0-9a-f]+)"', client.get("/login").text)
        assert login is not None, "the login page has no CSRF field"
        signed_in = client.post("/login", data={"csrf": login.group(1), "token": "bench"})
        if signed_in.status_code != 303:
            raise RuntimeError(f"login with the bench token failed: HTTP {signed_in.status_code}")
        # One doctor run first, to its end: its background thread would otherwise share the CPU with the pages.
        started = time.monotonic()
        client.get("/doctor")
        while "reading the audit trail" in client.get("/doctor").text:
            time.sleep(1)
        doctor_seconds = time.monotonic() - started
        log(f"  doctor run (background thread, all checks): {doctor_seconds:.1f} s")
        results.append({"page": "doctor run, all checks (background)", "status": 200,
                        "median_ms": doctor_seconds * 1000, "p95_ms": doctor_seconds * 1000,
                        "max_ms": doctor_seconds * 1000})
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', client.get("/reminders").text)
        assert csrf is not None
        jobs_page = client.get("/jobs").text
        before = re.findall(r'before=(\d+)', jobs_page)[-1]
        discarded = re.search(r'href="/jobs/(\d+)"', client.get("/jobs?state=discarded").text)
        assert discarded is not None
        cases: list[tuple[str, Callable[[], Any]]] = [
            ("/ (overview)", lambda: client.get("/")),
            ("/schedules", lambda: client.get("/schedules")),
            ("/schedules/reminders (ledger timeline)", lambda: client.get("/schedules/reminders")),
            ("/jobs", lambda: client.get("/jobs")),
            ("/jobs, next page (keyset)", lambda: client.get(f"/jobs?before={before}")),
            ("/jobs?state=discarded", lambda: client.get("/jobs?state=discarded")),
            ("/jobs?state=retryable&task=sync.crm", lambda: client.get("/jobs?state=retryable&task=sync.crm")),
            ("/jobs?state=running", lambda: client.get("/jobs?state=running")),
            ("/jobs?state=completed", lambda: client.get("/jobs?state=completed")),
            ("/jobs?state=available", lambda: client.get("/jobs?state=available")),
            ("/jobs?task=cleanup", lambda: client.get("/jobs?task=cleanup")),
            ("/jobs?queue=reports&since=…", lambda: client.get("/jobs?queue=reports&since=2020-01-01T00:00")),
            ("/jobs/ID (attempts, effects, events)", lambda: client.get(f"/jobs/{discarded.group(1)}")),
            ("/effects (in doubt)", lambda: client.get("/effects")),
            ("/reminders (counts, aging charts)", lambda: client.get("/reminders")),
            ("POST /reminders/search (email)", lambda: client.post(
                "/reminders/search", data={"csrf": csrf.group(1), "q": "customer77@example.test"})),
            ("/reminders/invoices/NUMBER (timeline, previews)", lambda: client.get("/reminders/invoices/INV-00000077")),
            ("/doctor/explain/job/ID", lambda: client.get(f"/doctor/explain/job/{discarded.group(1)}")),
            ("/doctor (latest report)", lambda: client.get("/doctor")),
            ("/metrics (scrape)", lambda: client.get("/metrics")),
            ("/queues (depths, running, holds)", lambda: client.get("/queues")),
            ("GET /api/v1/queues", lambda: client.get("/api/v1/queues", headers={"Authorization": "Bearer bench"})),
        ]
        for name, call in cases:
            status = call().status_code
            timing = _time(call, reps)
            results.append({"page": name, "status": status, **timing})
            log(f"  {name}: median {timing['median_ms']:.1f} ms, p95 {timing['p95_ms']:.1f} ms")
    return results


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.dashboard", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pg", default=DEFAULT_PG, help="PostgreSQL URL (a schema of its own is created in it)")
    p.add_argument("--jobs", type=int, default=1_000_000)
    p.add_argument("--reminders", type=int, default=100_000)
    p.add_argument("--reps", type=int, default=20, help="timed requests per page")
    p.add_argument("--schema", default=None, help="reuse this filled schema (skips the fill)")
    p.add_argument("--keep", action="store_true", help="keep the schema afterwards")
    args = p.parse_args(argv)
    schema = args.schema or f"ob_bench_web_{secrets.token_hex(4)}"
    sizes = {"jobs": args.jobs, "reminders": args.reminders, "invoices": max(1, args.reminders // 2),
             "customers": max(1, args.reminders // 10)}
    started = time.monotonic()
    try:
        if args.schema is None:
            log(f"filling {schema}: {sizes}")
            fill(args.pg, schema, sizes)
        fill_seconds = time.monotonic() - started
        log("timing pages")
        results = measure(args.pg, schema, args.reps)
    finally:
        if not args.keep and args.schema is None:
            with psycopg.connect(args.pg, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    print(f"\n{sizes['jobs']:,} jobs, {sizes['reminders']:,} reminders (PostgreSQL, {args.reps} requests per page)\n")
    print("| page | median ms | p95 ms | max ms |\n|---|---:|---:|---:|")
    for r in results:
        print(f"| {r['page']} | {r['median_ms']:.1f} | {r['p95_ms']:.1f} | {r['max_ms']:.1f} |")
    path = write_json("dashboard", {"machine": machine_info(), "sizes": sizes, "fill_seconds": fill_seconds,
                                    "results": results})
    print(f"\nwritten to {Path(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
