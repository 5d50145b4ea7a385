"""W4 clock: 10,000 schedules across 50 zones, ticking for 2 minutes of real time.

One :class:`oncebeat.clock.ClockProcess` (``tick_interval=1``, default
``misfire_grace``) in its own process over definitions (no App), on a fresh
PostgreSQL schema (or SQLite file). Modes:

- ``burst``: every schedule is ``*/1 * * * *`` — 10,000 occurrences (and
  jobs) fall due at the same instant every minute, the worst case;
- ``spread``: schedule *i* is ``{i % 60} * * * *`` (hourly, minutes spread) —
  about 167 occurrences a minute.

Measured: the clock's start-up (register + sync of the definitions + first
tick), its CPU use during the window (share of one core), its peak RSS;
occurrences written; and the fire lag two ways:

- *recorded*: ``occurrences.created_at - fire_at`` (what the ledger says);
- *visible*: when the occurrence's row (and job) became visible to other
  processes minus ``fire_at``, from polling ``max(id)`` of the ledger every
  0.1 s in this process (ids are assigned in insert order by one clock).
"""

from __future__ import annotations

import bisect
import os
import time
from datetime import UTC, datetime
from typing import Any

from bench.common import FreshDb, Settings, fmt_num, log, md_table, start_children

ZONES = [
    "UTC", "Europe/London", "Europe/Dublin", "Europe/Lisbon", "Europe/Paris", "Europe/Berlin", "Europe/Madrid",
    "Europe/Rome", "Europe/Warsaw", "Europe/Athens", "Europe/Helsinki", "Europe/Kyiv", "Europe/Istanbul",
    "Europe/Moscow", "Africa/Cairo", "Africa/Lagos", "Africa/Johannesburg", "Africa/Nairobi", "Asia/Dubai",
    "Asia/Tehran", "Asia/Karachi", "Asia/Kolkata", "Asia/Kathmandu", "Asia/Dhaka", "Asia/Bangkok",
    "Asia/Jakarta", "Asia/Shanghai", "Asia/Singapore", "Asia/Manila", "Asia/Tokyo", "Asia/Seoul",
    "Australia/Perth", "Australia/Adelaide", "Australia/Sydney", "Pacific/Auckland", "Pacific/Chatham",
    "Pacific/Honolulu", "America/Anchorage", "America/Los_Angeles", "America/Phoenix", "America/Denver",
    "America/Chicago", "America/Mexico_City", "America/New_York", "America/Bogota", "America/Caracas",
    "America/Santiago", "America/Sao_Paulo", "America/St_Johns", "Atlantic/Azores",
]
assert len(ZONES) == 50


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def one(settings: Settings, backend: str, mode: str) -> dict[str, Any]:
    import psutil

    load0 = os.getloadavg()[0]
    with FreshDb(backend, "w4", settings) as db:
        spec = {"url": db.url, "schedules": settings.clock_schedules, "mode": mode, "zones": ZONES,
                "seconds": settings.clock_seconds}
        kid = start_children("clock", [spec], logdir=settings.tmp / "logs")[0]
        ps = psutil.Process(kid.pid)
        spies = []
        if settings.profile:
            from bench.profiling import spy

            spies = [spy(kid.pid, f"w4-{backend}-{mode}")]
        polls: list[tuple[int, float]] = []  # (max id, wall time)
        peak_rss = 0
        kid.go()
        go_epoch = time.time()
        deadline = time.monotonic() + settings.clock_seconds + 600
        last_rss = 0.0
        while kid.running() and time.monotonic() < deadline:
            try:
                mx = db.query("SELECT COALESCE(max(id), 0) FROM occurrences")[0][0]
                polls.append((int(mx), time.time()))
            except Exception:  # noqa: BLE001 - schema not migrated yet / SQLite busy: skip this poll
                pass
            if time.monotonic() - last_rss > 1.0:
                last_rss = time.monotonic()
                try:
                    peak_rss = max(peak_rss, ps.memory_info().rss)
                except psutil.Error:
                    pass
            time.sleep(0.1)
        info = kid.finish(timeout=60)
        for p in spies:
            p.wait(timeout=60)
        if backend == "postgres":
            occ = db.query("SELECT id, EXTRACT(EPOCH FROM fire_at), EXTRACT(EPOCH FROM created_at - fire_at), outcome "
                           "FROM occurrences ORDER BY id")
        else:
            raw = db.query("SELECT id, fire_at, created_at, outcome FROM occurrences ORDER BY id")
            occ = []
            for i, f, c, o in raw:
                fa, ca = datetime.fromisoformat(f), datetime.fromisoformat(c)
                occ.append((i, fa.timestamp(), (ca - fa).total_seconds(), o))
        jobs = int(db.query("SELECT count(*) FROM jobs")[0][0])
    enq = [o for o in occ if o[3] == "enqueued"]
    recorded = [float(o[2]) for o in enq]
    ids = [p[0] for p in polls]
    visible: list[float] = []
    for oid, fire_epoch, _lag, _o in enq:
        k = bisect.bisect_left(ids, oid)
        if k < len(polls):
            visible.append(polls[k][1] - float(fire_epoch))
    # Instants that fell before the clock had started (a start-up slowed by load) are recorded by start-up's
    # catch-up, late by up to the start-up time: the steady figure leaves them out.
    started_epoch = go_epoch + float(info.get("startup_seconds") or 0.0)
    steady = []
    for oid, fire_epoch, _lag, _o in enq:
        k = bisect.bisect_left(ids, oid)
        if k < len(polls) and float(fire_epoch) >= started_epoch:
            steady.append(polls[k][1] - float(fire_epoch))
    minutes = len({o[1] for o in enq})
    return {
        "mode": mode, "backend": backend, "schedules": settings.clock_schedules, "seconds": settings.clock_seconds,
        "startup_s": info.get("startup_seconds"), "startup_cpu_s": info.get("startup_cpu"),
        "window_cpu_s": info.get("window_cpu"), "window_wall_s": info.get("window_wall"),
        "cpu_share": (info.get("window_cpu") or 0) / (info.get("window_wall") or 1),
        "occurrences": len(occ), "enqueued": len(enq), "jobs": jobs, "fire_instants": minutes,
        "recorded_lag": {"p50": _pct(recorded, 0.5), "p99": _pct(recorded, 0.99), "max": max(recorded, default=None)},
        "visible_lag": {"p50": _pct(visible, 0.5), "p99": _pct(visible, 0.99), "max": max(visible, default=None)},
        "visible_lag_after_startup": {"n": len(steady), "p50": _pct(steady, 0.5), "p99": _pct(steady, 0.99),
                                      "max": max(steady, default=None)},
        "maxrss_kb": info.get("maxrss_kb"), "rss_after_start_kb": info.get("rss_after_start_kb"),
        "peak_rss_sampled_kb": peak_rss // 1024, "bursts": info.get("bursts") or [],
        "load": [load0, os.getloadavg()[0]],
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def run(settings: Settings, backends: tuple[str, ...] = ("postgres",)) -> dict[str, Any]:
    res = []
    for backend in backends:
        for mode in settings.clock_modes:
            log(f"W4 {backend} {mode}: {settings.clock_schedules:,} schedules, {settings.clock_seconds:.0f} s")
            r = one(settings, backend, mode)
            log(f"  start-up {r['startup_s']:.1f} s; CPU {100 * r['cpu_share']:.0f} % of a core; "
                f"{r['enqueued']:,} enqueued over {r['fire_instants']} instants; lag recorded p99 "
                f"{fmt_num(r['recorded_lag']['p99'])} s, visible p50 {fmt_num(r['visible_lag']['p50'])} s "
                f"p99 {fmt_num(r['visible_lag']['p99'])} s (instants after start-up: "
                f"{r['visible_lag_after_startup']['n']:,}, p50 {fmt_num(r['visible_lag_after_startup']['p50'])} s "
                f"p99 {fmt_num(r['visible_lag_after_startup']['p99'])} s); "
                f"load {r['load'][0]:.1f} → {r['load'][1]:.1f}; per burst "
                f"(wall, clock CPU, PostgreSQL CPU s) "
                + ("; ".join(f"{b['wall']:.2f}, {b['cpu']:.2f}, {b['pg_cpu']:.2f}" for b in r["bursts"]) or "–"))
            res.append(r)
    return {"results": res, "tables": tables(res)}


def tables(res: list[dict[str, Any]]) -> dict[str, str]:
    rows = []
    for r in res:
        rows.append([r["backend"], r["mode"], f"{r['schedules']:,}", f"{fmt_num(r['startup_s'])} s",
                     f"{100 * r['cpu_share']:.0f} %", f"{r['enqueued']:,} ({r['fire_instants']})",
                     f"{fmt_num(r['recorded_lag']['p50'])} / {fmt_num(r['recorded_lag']['p99'])}",
                     f"{fmt_num(r['visible_lag']['p50'])} / {fmt_num(r['visible_lag']['p99'])} / "
                     f"{fmt_num(r['visible_lag']['max'])}",
                     f"{(r['maxrss_kb'] or 0) / 1024:.0f}",
                     " / ".join(f"{b['wall']:.2f}, {b['cpu']:.2f}, {b['pg_cpu']:.2f}"
                                for b in r.get("bursts", [])) or "–",
                     " → ".join(f"{x:.1f}" for x in r.get("load", []))])
    return {"clock": md_table(["backend", "mode", "schedules", "start-up", "clock CPU (window)",
                               "occurrences enqueued (fire instants)", "recorded lag p50 / p99 s",
                               "visible lag p50 / p99 / max s", "peak RSS MB",
                               "per tick of ≥ 100 due: wall, clock CPU, PostgreSQL CPU s", "load"], rows)}
