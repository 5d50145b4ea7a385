"""What-if measurements: proposed engine changes, measured without editing the engine.

``python -m bench whatif`` runs SQL that a proposed change would run, against
the real oncebeat schema, next to what the engine runs today:

- **clock firing**: ``ClockProcess.tick()`` with 10,000 schedules due at one
  instant (five statements per schedule, 200 schedules per transaction) versus
  occurrences and jobs inserted set-based, 500 schedules per transaction;
- **scan** (PostgreSQL, 1M invoices, collapse = highest): the scan's two
  statements as today, then with ``SET LOCAL jit = off``, with the
  ``reminders → invoices`` foreign key that reminders migration 0007 dropped
  put back, and the no-op repeat with a ``NOT EXISTS`` probe instead of
  conflicting inserts.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench import invoices
from bench.common import FreshDb, Settings, log, md_table, pg_connect
from bench.w2_scan import BUSINESS_DATE

FIRE_OCC_PG = """
INSERT INTO occurrences (schedule_key, fire_at, local_fire_at, tz, business_date, tzdata_version, outcome,
                         source_kind, source_host, source_pid, source_name, source_version, created_at)
SELECT k, f, l, z, d, %(tzdata)s, 'enqueued', %(src_kind)s, %(src_host)s, %(src_pid)s, %(src_name)s,
       %(src_version)s, clock_timestamp()
FROM unnest(%(keys)s::text[], %(fires)s::timestamptz[], %(locals)s::text[], %(tzs)s::text[], %(dates)s::date[])
     AS x(k, f, l, z, d)
ON CONFLICT DO NOTHING
RETURNING id, schedule_key
"""
FIRE_JOBS_PG = """
WITH occ AS (SELECT * FROM unnest(%(occ_ids)s::bigint[], %(keys)s::text[]) AS o(id, key)),
ins AS (
  INSERT INTO jobs (queue, task, args, state, priority, max_attempts, run_at, occurrence_id, source_kind,
                    source_host, source_pid, source_name, source_version, created_at)
  SELECT s.queue, s.task, s.args, 'available', 0, 20, %(now)s, occ.id, %(src_kind)s, %(src_host)s, %(src_pid)s,
         %(src_name)s, %(src_version)s, %(now)s
  FROM occ JOIN schedules s ON s.key = occ.key
  RETURNING id, occurrence_id)
UPDATE occurrences o SET job_id = ins.id FROM ins WHERE o.id = ins.occurrence_id
"""


def clock_firing(settings: Settings, n: int = 2_000, chunk: int = 500) -> list[list[str]]:
    """Seconds to record n occurrences + jobs due at one instant: the engine's tick vs set-based chunks.

    Today: the real ``ClockProcess.tick()`` (simulated time: synced one minute before, then moved to the
    instant), which runs five statements per schedule. Proposed: per chunk of 500 schedules, one read of
    the schedule rows, one of their cursors, one ``INSERT … SELECT FROM unnest`` of the occurrences and one
    statement inserting the jobs and linking them.
    """
    from oncebeat.app import ScheduleDef
    from oncebeat.clock import TZDATA_VERSION, ClockProcess
    from oncebeat.provenance import current_source
    from oncebeat.store import open_store
    from oncebeat.timebase import SimulatedClock

    from bench.w4_clock import ZONES

    defs = [ScheduleDef(key=f"s{i:05d}", expression="*/1 * * * *", tz=ZONES[i % len(ZONES)], task="noop")
            for i in range(n)]
    t0 = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=10)
    instant = t0 + timedelta(minutes=1)
    src = current_source("clock")
    with FreshDb("postgres", "whatif", settings) as db, open_store(db.url) as store:
        sim = SimulatedClock(t0 + timedelta(seconds=1))
        clk = ClockProcess(defs, store, clock=sim, source=src)
        clk.sync()
        sim.set(instant + timedelta(milliseconds=100))
        t = time.perf_counter()
        fires = clk.tick()
        today = time.perf_counter() - t
        assert sum(1 for f in fires if f.inserted) == n, len(fires)
    with FreshDb("postgres", "whatif", settings) as db, open_store(db.url) as store:
        sim = SimulatedClock(t0 + timedelta(seconds=1))
        clk = ClockProcess(defs, store, clock=sim, source=src)
        clk.sync()
        with pg_connect(db.schema) as c:
            t = time.perf_counter()
            for start in range(0, n, chunk):
                part = defs[start:start + chunk]
                scheds = [clk._parsed[d.key] for d in part]
                locals_ = [s.local(instant) for s in scheds]
                with c.transaction():
                    keys = [d.key for d in part]
                    c.execute("SELECT * FROM schedules WHERE key = ANY(%s) FOR SHARE", (keys,)).fetchall()
                    c.execute("SELECT schedule_key, max(fire_at) FROM occurrences WHERE schedule_key = ANY(%s) "
                              "AND outcome <> 'manual' GROUP BY schedule_key", (keys,)).fetchall()
                    got = c.execute(FIRE_OCC_PG, {
                        "tzdata": TZDATA_VERSION, **src.params(), "keys": keys, "fires": [instant] * len(part),
                        "locals": [x.isoformat() for x in locals_], "tzs": [s.tz for s in scheds],
                        "dates": [x.date() for x in locals_]}).fetchall()
                    c.execute(FIRE_JOBS_PG, {"occ_ids": [r[0] for r in got], "keys": [r[1] for r in got],
                                             "now": datetime.now(UTC), **src.params()})
            setbased = time.perf_counter() - t
        jobs = db.query("SELECT count(*) FROM jobs WHERE occurrence_id IS NOT NULL")[0][0]
        assert jobs == n, jobs
    log(f"what-if clock firing {n:,}: today {today:.2f} s, set-based {setbased:.2f} s")
    return [[f"clock: {n:,} schedules due at one instant → occurrences + jobs, PostgreSQL (s)",
             f"{today:.2f} ({n / today:,.0f}/s)", f"{setbased:.2f} ({n / setbased:,.0f}/s)",
             f"{today / setbased:.0f}×"]]


scan_detail: list[dict[str, Any]] = []


def scan(settings: Settings, n: int = 1_000_000) -> list[list[str]]:
    """The 1M-invoice scan's SQL on PostgreSQL (collapse = highest), as today and with each proposed change.

    Since reminders migration 0007 the scan writes one row per invoice (superseded stages in that row) and
    PostgreSQL has no reminders -> invoices foreign key; "+ the old foreign key" measures what that saved.
    """
    from psycopg.types.json import Jsonb

    from oncebeat.provenance import current_source
    from oncebeat.reminders.policy import Policy
    from oncebeat.reminders.service import SEND_MAX_ATTEMPTS, SEND_TASK, stage_cutoffs
    from oncebeat.store.sqlfiles import load_queries

    queries = load_queries("postgres")
    insert_sql = queries["scan_insert_reminders"]
    enqueue_sql = queries["enqueue_select"].replace("/*source*/", queries["pending_send_jobs"])
    enqueue_probe = enqueue_sql.replace(
        "WHERE r.state = 'pending'",
        "WHERE r.state = 'pending' AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.unique_key = 'reminder:' || r.id "
        "AND j.state IN ('available', 'scheduled', 'running', 'retryable'))")
    assert enqueue_probe != enqueue_sql, "scan SQL changed"
    policy = Policy(collapse="highest")
    stages = stage_cutoffs(policy.stages, BUSINESS_DATE)
    src = current_source("worker").params()
    rows: list[list[str]] = []
    detail: list[dict[str, Any]] = []
    with FreshDb("postgres", "whatif", settings) as db:
        invoices.load(db, n, BUSINESS_DATE)

        def run(label: str, *, jit: bool = True, probe: bool = False, repeat: bool = False
                ) -> tuple[float, float, float]:
            """(transaction s, reminder insert s, job insert s) of the last scan."""
            with pg_connect(db.schema) as c:
                c.execute("TRUNCATE reminders, jobs RESTART IDENTITY")
                times = (0.0, 0.0, 0.0)
                for occ in ((1, 2) if repeat else (1,)):
                    now = datetime.now(UTC)
                    p1 = {"stages": Jsonb(stages), "max_cutoff": max(s["cutoff"] for s in stages),
                          "occurrence_id": occ, "business_date": BUSINESS_DATE, "now": now,
                          "default_tz": policy.tz}
                    p2 = {"queue": "default", "task": SEND_TASK, "max_attempts": SEND_MAX_ATTEMPTS, "priority": 0,
                          "now": now, **src}
                    t = time.perf_counter()
                    with c.transaction():
                        if not jit:
                            c.execute("SET LOCAL jit = off")
                        a = time.perf_counter()
                        c.execute(insert_sql, {k: v for k, v in p1.items() if f"%({k})s" in insert_sql}).fetchall()
                        b = time.perf_counter()
                        sql2 = enqueue_probe if probe else enqueue_sql
                        c.execute(sql2, {k: v for k, v in p2.items() if f"%({k})s" in sql2})
                        e = time.perf_counter()
                    times = (time.perf_counter() - t, b - a, e - b)
            log(f"what-if scan {n:,}: {label}: {times[0]:.2f} s (reminders {times[1]:.2f} s, jobs {times[2]:.2f} s)")
            detail.append({"variant": label, "total_s": times[0], "reminders_s": times[1], "jobs_s": times[2]})
            return times

        base = run("as today")
        nojit = run("jit off", jit=False)
        second = run("second scan as today", repeat=True)
        second_probe = run("second scan with NOT EXISTS probe", probe=True, repeat=True)
        with pg_connect(db.schema) as c:
            c.execute("ALTER TABLE reminders ADD CONSTRAINT reminders_invoice_id_fkey FOREIGN KEY (invoice_id) "
                      "REFERENCES invoices (id)")
        with_fk = run("+ the old foreign key")

    def cell(x: tuple[float, float, float]) -> str:
        return f"{x[0]:.2f} ({x[1]:.2f} + {x[2]:.2f})"

    rows.append([f"scan {n:,} invoices, first, PostgreSQL: s (reminder insert + job insert)", cell(base),
                 f"jit off {cell(nojit)}; with the foreign key dropped by reminders 0007 {cell(with_fk)}",
                 f"{base[0] / nojit[0]:.2f}× (jit off)"])
    rows.append([f"scan {n:,} invoices, second (no-op), PostgreSQL (s)", cell(second), cell(second_probe),
                 f"{second[0] / second_probe[0]:.1f}×"])
    scan_detail.extend(detail)
    return rows


def run(settings: Settings) -> dict[str, Any]:
    rows = clock_firing(settings, n=settings.clock_schedules)
    rows += scan(settings, n=max(settings.scan_sizes))
    return {"rows": rows, "scan_detail": scan_detail, "tables": {"whatif": md_table(["measurement", "engine today", "proposed change",
                                                          "gain"], rows)}}
