"""CPU per drained job, two engines alternated: ``python -m bench.drain_cpu --before DIR [--reps 4] [--n 20000]``.

One ``ob_postgres_2w`` cell of ``bench.drain_ab`` (20,000 jobs enqueued 1,000 per call, drained by 2 workers,
batch 100) per engine and repetition, each in its own process (``--before``, a directory holding an exported
``oncebeat`` package, is put first on ``PYTHONPATH``), measuring what wall time hides on a loaded machine: the
workers' CPU per job (their ``work_cpu``) and the server's (user + system time of the workers' backends, read
from ``/proc/PID/stat`` before and after the drain: clock ticks, so ±1 tick over the drain, ~±3 µs per job at
20,000). Prints a markdown table with the load average at each repetition.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import md_table


def _backend_cpu(tag: str) -> dict[int, float]:
    """CPU seconds (user + system) of each backend whose application_name is ``tag``."""
    import psycopg

    from bench.common import PG_BASE, libpq_url

    with psycopg.connect(libpq_url(PG_BASE), autocommit=True) as conn:
        pids = [r[0] for r in conn.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s", (tag,))]
    out = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile, or another host: not counted
            continue
        out[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


def _cell(n: int) -> dict[str, float]:
    import shutil

    from bench import probe
    from bench.common import FreshDb, Settings, probe_dir, start_children, wait_until
    from bench.w1_queue import _env, _timeout, oncebeat_enqueue

    settings = Settings.make(reps=1, quick=False)
    try:
        with FreshDb("postgres", "draincpu", settings) as db:
            oncebeat_enqueue(db, n, per_call=1000)
            tag = f"draincpu{os.getpid()}"
            pdir = probe_dir(settings)
            spec = {"url": f"{db.url}&application_name={tag}", "batch_size": 100, "concurrency": 1, "mode": "run"}
            kids = start_children("oncebeat-worker", [spec] * 2, env=_env(pdir), logdir=settings.tmp / "logs")
            before = _backend_cpu(tag)
            for k in kids:
                k.go()
            wait_until(lambda: probe.read(pdir).count >= n, timeout=_timeout(n), children=kids, what="handlers")
            wait_until(lambda: db.jobs_unfinished() == 0, timeout=60, interval=0.005, children=kids, what="completion")
            after = _backend_cpu(tag)
            for k in kids:
                k.stop()
            infos = [k.finish() for k in kids]
            _, seconds = db.job_span()
    finally:
        shutil.rmtree(settings.tmp, ignore_errors=True)
    server = sum(v - before.get(pid, 0.0) for pid, v in after.items())
    return {"rate": n / seconds, "worker_us": 1e6 * sum(i["work_cpu"] for i in infos) / n,
            "server_us": 1e6 * server / n, "load": os.getloadavg()[0]}


def _run(n: int, src: str | None) -> dict[str, Any]:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = os.pathsep.join([src, str(Path.cwd())])
    out = subprocess.run([sys.executable, "-m", "bench.drain_cpu", "--cell", "--n", str(n)], env=env,
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"drain failed ({out.returncode}):\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.drain_cpu", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cell", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--n", type=int, default=20_000, help="jobs per drain (default 20,000)")
    p.add_argument("--reps", type=int, default=4)
    p.add_argument("--before", required=False, help="directory with the engine before (an exported src/)")
    a = p.parse_args(argv)
    if a.cell:
        print(json.dumps(_cell(a.n)))
        return 0
    rows = []
    for rep in range(a.reps):
        started = time.strftime("%H:%M:%S")
        before = _run(a.n, a.before) if a.before else None
        after = _run(a.n, None)
        row = [str(rep + 1), started, f"{after['load']:.1f}"]
        if before:
            row += [f"{before['worker_us']:.1f}", f"{after['worker_us']:.1f}",
                    f"{after['worker_us'] / before['worker_us']:.2f}", f"{before['server_us']:.1f}",
                    f"{after['server_us']:.1f}", f"{before['rate']:,.0f}", f"{after['rate']:,.0f}"]
        else:
            row += ["–", f"{after['worker_us']:.1f}", "–", "–", f"{after['server_us']:.1f}", "–",
                    f"{after['rate']:,.0f}"]
        rows.append(row)
        print(" | ".join(row), flush=True)
    print(md_table(["repetition", "start", "load", "worker µs/job before", "after", "after ÷ before",
                    "server µs/job before", "after", "jobs/s before", "after"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
