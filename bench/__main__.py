"""``python -m bench all|w1|w2|w3|w4|memory|growth|whatif [--reps 3] [--quick] [--profile]``.

``all`` runs w1, w2, w3, w4, memory and growth; ``whatif`` (proposed engine
changes measured beside the engine as it is) runs only when asked.

Prints the machine description and markdown tables, writes everything as
JSON to ``bench/results/<timestamp>-<command>.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import time
from typing import Any

from bench.common import Settings, engine_version, fsync_probe, log, machine_info, write_json

ALL = ("w1", "w2", "w3", "w4", "memory", "growth")
COMMANDS = ("all", *ALL, "whatif")


def _ints(text: str | None) -> tuple[int, ...] | None:
    return tuple(int(x.replace("_", "")) for x in text.split(",")) if text else None


def _strs(text: str | None) -> tuple[str, ...] | None:
    return tuple(x.strip() for x in text.split(",") if x.strip()) if text else None


def parse(argv: list[str]) -> tuple[str, Settings, argparse.Namespace]:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=COMMANDS)
    p.add_argument("--reps", type=int, default=None, help="repetitions (default 3; 1 with --quick)")
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke run of a few minutes")
    p.add_argument("--profile", action="store_true",
                   help="attach py-spy to the first repetition's oncebeat workers/clock and run scans under "
                        "pyinstrument (files in bench/results/profiles/); slows what it profiles")
    p.add_argument("--jobs", type=int, help="W1 jobs per run for oncebeat and the raw loops (default 20,000)")
    p.add_argument("--peer-jobs", type=int, help="W1 jobs per run for Procrastinate/Celery/RQ (default 2,000)")
    p.add_argument("--scan-sizes", help="W2 invoice counts, comma separated (default 10000,100000,1000000)")
    p.add_argument("--scan-collapse",
                   help="W2 collapse modes of the policy, comma separated (default highest,next: highest writes "
                        "the superseded stages, next is the default policy)")
    p.add_argument("--e2e-reminders", type=int, help="W3 reminders per run (default 1,000)")
    p.add_argument("--e2e-sink", choices=("discard", "maildir"),
                   help="W3 sink, one process per worker: discard (aiosmtpd keeping nothing; default) or maildir")
    p.add_argument("--e2e-workers", help="W3 worker process counts (default 1,2)")
    p.add_argument("--e2e-concurrency",
                   help="W3 handler slots per worker, each with its own SMTP connection (default 1)")
    p.add_argument("--clock-schedules", type=int, help="W4 schedules (default 10,000)")
    p.add_argument("--clock-seconds", type=float, help="W4 window in seconds (default 120)")
    p.add_argument("--clock-modes", help="W4 modes: burst,spread (default both)")
    p.add_argument("--clock-backends", default="postgres", help="W4 backends (default postgres)")
    p.add_argument("--growth-sizes", help="growth job counts (default 10000,100000)")
    p.add_argument("--backends", help="oncebeat backends (default postgres,sqlite)")
    p.add_argument("--only", help="W1: only rows whose key starts with one of these (raw_pg always runs)")
    p.add_argument("--keep-tmp", action="store_true",
                   help="keep the temporary directory (worker logs, SQLite files, Maildirs) after a successful run")
    a = p.parse_args(argv)
    s = Settings.make(reps=a.reps, quick=a.quick, jobs=a.jobs, peer_jobs=a.peer_jobs,
                      scan_sizes=_ints(a.scan_sizes), scan_collapse=_strs(a.scan_collapse),
                      e2e_reminders=a.e2e_reminders,
                      e2e_sink=a.e2e_sink, e2e_workers=_ints(a.e2e_workers),
                      e2e_concurrency=_ints(a.e2e_concurrency),
                      clock_schedules=a.clock_schedules, clock_seconds=a.clock_seconds,
                      clock_modes=_strs(a.clock_modes), growth_sizes=_ints(a.growth_sizes),
                      backends=_strs(a.backends), only=_strs(a.only) or ())
    s.profile = a.profile
    return a.command, s, a


# import name -> the pyproject `bench` extra's package that brings it
BENCH_EXTRA = {"procrastinate": "procrastinate", "pgqueuer": "pgqueuer", "asyncpg": "asyncpg", "dbos": "dbos",
               "celery": "celery[redis]", "rq": "rq", "psutil": "psutil", "pyinstrument": "pyinstrument"}


def missing_extra() -> list[str]:
    """The bench extra's packages that this interpreter cannot import (empty when it is installed)."""
    return [package for module, package in BENCH_EXTRA.items() if importlib.util.find_spec(module) is None]


def main(argv: list[str] | None = None) -> int:
    command, settings, args = parse(sys.argv[1:] if argv is None else argv)
    missing = missing_extra()
    if missing:
        print(f"python -m bench: the peers and tools it measures with are not installed ({', '.join(missing)}).\n"
              "Install the bench extra into this environment: .venv/bin/pip install -e '.[bench]'", file=sys.stderr)
        return 2
    needs_data = {"w2", "w3", "whatif"} & set(ALL if command == "all" else (command,))
    if needs_data:
        from bench.invoices import data_problem

        problem = data_problem()
        if problem:
            print(f"python -m bench {command}: {', '.join(sorted(needs_data))} need invoice books, but {problem}.",
                  file=sys.stderr)
            return 2
    started = time.monotonic()
    meta = machine_info()
    meta["fsync"] = fsync_probe()
    meta["command"] = " ".join(["python -m bench", *(sys.argv[1:] if argv is None else argv)])
    meta["settings"] = {k: (list(v) if isinstance(v, tuple) else str(v) if k == "tmp" else v)
                        for k, v in vars(settings).items()}
    log(f"bench {command}: {meta.get('cpu')} × {meta.get('cpus')}, load {meta.get('load_avg')}, "
        f"fdatasync {meta['fsync'].get('fdatasync_ops_per_s', '?')}/s; temp dir {settings.tmp}")
    out: dict[str, Any] = {"meta": meta}
    todo = ALL if command == "all" else (command,)
    try:
        for name in todo:
            t = time.monotonic()
            before = engine_version()
            if name == "w1":
                from bench import w1_queue

                out["w1"] = w1_queue.run(settings)
            elif name == "w2":
                from bench import w2_scan

                out["w2"] = w2_scan.run(settings)
            elif name == "w3":
                from bench import w3_e2e

                out["w3"] = w3_e2e.run(settings)
            elif name == "w4":
                from bench import w4_clock

                out["w4"] = w4_clock.run(settings, backends=_strs(args.clock_backends) or ("postgres",))
            elif name == "memory":
                from bench import memory

                out["memory"] = memory.run(settings, reuse=out)
            elif name == "growth":
                from bench import growth

                out["growth"] = growth.run(settings)
            elif name == "whatif":
                from bench import whatif

                out["whatif"] = whatif.run(settings)
            after = engine_version()
            changed = before["src_hash"] != after["src_hash"]
            out[name]["engine"] = {"start": before, "end": after, "changed_during": changed}
            if changed:
                log(f"warning: the engine code changed while {name} ran ({before['src_hash']} -> {after['src_hash']})")
            out.setdefault("durations_s", {})[name] = round(time.monotonic() - t, 1)
            write_json(f"{command}-partial", out)  # keep what is done if a later workload fails
    finally:
        out["meta"]["total_seconds"] = round(time.monotonic() - started, 1)
        out["meta"]["load_avg_end"] = os.getloadavg()
        path = write_json(command, out)
        partial = sorted(path.parent.glob(f"*-{command}-partial.json"))
        for p in partial:
            p.unlink(missing_ok=True)
        print(render(out))
        log(f"results: {path}")
    if not args.keep_tmp:  # only after success: on failure the worker logs named in the error stay
        shutil.rmtree(settings.tmp, ignore_errors=True)
    return 0


def render(out: dict[str, Any]) -> str:
    m = out["meta"]
    lines = ["## Machine", "",
             f"- {m.get('cpu')} × {m.get('cpus')} vCPU, {m.get('memory_gb')} GB RAM; {m.get('os')}; Python {m.get('python')}",
             f"- {m.get('postgres')}; settings {json.dumps(m.get('postgres_settings'))}",
             f"- SQLite {m.get('sqlite')} (WAL, synchronous=FULL); Redis {m.get('redis')}",
             f"- fdatasync (pg_test_fsync, 8 kB): {m.get('fsync', {}).get('fdatasync_ops_per_s', '?')} ops/s; "
             f"load average at start {m.get('load_avg')}, at end {m.get('load_avg_end')}",
             f"- packages: {', '.join(f'{k} {v}' for k, v in (m.get('packages') or {}).items() if v)}",
             f"- oncebeat commit {m.get('oncebeat_commit')} (src modified: {m.get('oncebeat_src_dirty')}); "
             f"command `{m.get('command')}`; {m.get('total_seconds')} s", ""]
    titles = {"w1": "W1 queue", "w2": "W2 scan", "w3": "W3 end to end", "w4": "W4 clock", "memory": "Memory",
              "growth": "Growth (W1)", "whatif": "What-if (proposed engine changes)"}
    for key, title in titles.items():
        if key not in out:
            continue
        eng = out[key].get("engine", {})
        start = eng.get("start", {})
        note = (f"_engine: {start.get('head')}, src hash {start.get('src_hash')}"
                + (f", uncommitted: {', '.join(start['src_changed'])}" if start.get("src_changed") else "")
                + ("; **the engine changed during this workload**" if eng.get("changed_during") else "") + "_")
        for tname, table in out[key]["tables"].items():
            lines += [f"## {title}: {tname}", "", note, "", table, ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
