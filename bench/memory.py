"""Memory: resident set size of idle and busy workers and clocks.

- *idle*: the process is started, registered and polling an empty queue (or
  ticking with nothing due) for a few seconds; we read its RSS and its peak
  (``VmHWM``; not ``ru_maxrss``, which Linux carries over ``execve`` from the parent). Three kinds: the engine
  alone (a :class:`~oncebeat.worker.Worker` over a no-op App), and the real
  ``oncebeat worker`` / ``oncebeat clock`` commands (reminder runtime: Jinja2,
  Babel, the mailer), started as a user would with ``DATABASE_URL`` and ``SMTP_URL``.
- *busy*: peak RSS of the worker processes during the W1 drain (20,000 jobs,
  2 workers, batch 100), of the reminder workers during W3, and of the clock
  during W4 (10,000 schedules). ``python -m bench memory`` runs small W1 and W3
  drains itself (no busy clock: that needs W4's minutes); ``all`` reuses the
  numbers of its W1/W3/W4 runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import FreshDb, Settings, log, md_table, start_children


def _status_kb(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            out[key] = int(rest.split()[0])
    return out


def idle_engine_worker(settings: Settings, backend: str, seconds: float = 5.0) -> dict[str, Any]:
    with FreshDb(backend, "mem", settings) as db:
        kid = start_children("oncebeat-worker", [{"url": db.url, "batch_size": 100, "concurrency": 1}],
                             logdir=settings.tmp / "logs")[0]
        kid.go()
        time.sleep(seconds)
        st = _status_kb(kid.pid)
        kid.stop()
        info = kid.finish()
    return {"rss_kb": st["VmRSS"], "peak_kb": max(st["VmHWM"], info["maxrss_kb"]), "anon_kb": st.get("RssAnon"),
            "after_stop_rss_kb": info["rss_kb"]}


def idle_cli(settings: Settings, command: str, backend: str, seconds: float = 6.0) -> dict[str, Any]:
    """``oncebeat worker`` / ``oncebeat clock`` as a user starts them; RSS after ``seconds`` idle."""
    exe = str(Path(sys.executable).with_name("oncebeat"))
    with FreshDb(backend, "memcli", settings) as db:
        env = {**os.environ, "DATABASE_URL": db.url, "SMTP_URL": "smtp://127.0.0.1:2525"}
        args = [exe, command] + (["--concurrency", "1"] if command == "worker" else [])
        logf = (settings.tmp / "logs" / f"cli-{command}.log")
        logf.parent.mkdir(parents=True, exist_ok=True)
        with logf.open("w") as lf:
            proc = subprocess.Popen(args, env=env, stdout=lf, stderr=subprocess.STDOUT, cwd=settings.tmp)
            try:
                # Registered in the process table = started; then idle for `seconds`.
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    try:
                        if db.query("SELECT count(*) FROM processes")[0][0]:
                            break
                    except Exception:  # noqa: BLE001 - not migrated yet
                        pass
                    if proc.poll() is not None:
                        raise RuntimeError(f"oncebeat {command} exited: {logf.read_text()[-2000:]}")
                    time.sleep(0.1)
                time.sleep(seconds)
                st = _status_kb(proc.pid)
            finally:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=40)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    return {"rss_kb": st["VmRSS"], "peak_kb": st["VmHWM"], "anon_kb": st.get("RssAnon")}


def run(settings: Settings, reuse: dict[str, Any] | None = None) -> dict[str, Any]:
    reuse = reuse or {}
    res: dict[str, Any] = {}
    for backend in settings.backends:
        log(f"memory: idle engine worker ({backend})")
        res[f"idle engine worker ({backend})"] = idle_engine_worker(settings, backend)
    log("memory: idle `oncebeat worker` / `oncebeat clock` (PostgreSQL)")
    res["idle `oncebeat worker --concurrency 1` (postgres)"] = idle_cli(settings, "worker", "postgres")
    res["idle `oncebeat clock`, reminders schedule (postgres)"] = idle_cli(settings, "clock", "postgres")
    # busy
    if "w1" in reuse:
        for backend in settings.backends:
            vals = [r[f"ob_{backend}"]["w2"]["maxrss_kb"] for r in reuse["w1"]["reps"] if f"ob_{backend}" in r]
            if vals:
                res[f"busy engine worker, W1 drain ({backend})"] = {"peak_kb": max(vals)}
    else:
        from bench import w1_queue

        for backend in settings.backends:
            log(f"memory: busy engine worker ({backend}), {settings.jobs:,} jobs, 2 workers")
            with FreshDb(backend, "membusy", settings) as db:
                w1_queue.oncebeat_enqueue(db, settings.jobs, per_call=1000)
                d = w1_queue.oncebeat_drain(db, settings.jobs, settings, workers=2)
            res[f"busy engine worker, W1 drain ({backend})"] = {"peak_kb": d.maxrss_kb}
    if "w3" in reuse:
        for backend, by_w in reuse["w3"]["results"].items():
            res[f"busy reminders worker, W3 ({backend})"] = {
                "peak_kb": max(r["maxrss_kb"] for reps in by_w.values() for r in reps)}
    else:
        from bench import w3_e2e

        log("memory: busy reminders worker (postgres), 300 reminders")
        r = w3_e2e.one(settings, "postgres", 300, 1)
        res["busy reminders worker, W3 (postgres)"] = {"peak_kb": r["maxrss_kb"]}
    if "w4" in reuse:
        for r in reuse["w4"]["results"]:
            res[f"busy clock, W4 {r['mode']} ({r['backend']}, {r['schedules']:,} schedules)"] = {
                "peak_kb": r["maxrss_kb"], "rss_kb": r.get("rss_after_start_kb")}
    return {"results": res, "tables": tables(res)}


def tables(res: dict[str, Any]) -> dict[str, str]:
    rows = []
    for name, r in res.items():
        rss = r.get("rss_kb")
        rows.append([name, f"{rss / 1024:.0f}" if rss else "–", f"{r['peak_kb'] / 1024:.0f}" if r.get("peak_kb") else "–"])
    return {"memory": md_table(["process", "RSS MB (idle, or after start-up)", "peak RSS MB"], rows)}
