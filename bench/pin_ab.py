"""The first scan's pin, before/after (issue 27 item 5, branch ``pin``): ``bench.scale scan`` on one kept book,
alternating two engines, with the PostgreSQL backend's CPU split by phase.

    python -m bench.pin_ab --schema S --before /tmp/pin-before/src [--order after,before,after]

``before``: the engine at ``--before`` (an export of main's ``src``: the pin is ``UPDATE invoices SET
ladder_version_id``); ``after``: this worktree's (a row of ``invoice_pins`` per invoice, reminders 0021). The book
(``bench.scale build``, main's schema) keeps both layouts side by side: ``invoice_pins`` is created here as 0021
creates it, but the column and its two indexes stay (so the before engine runs; the after engine never reads or
writes them). Before each run: ``TRUNCATE reminders, jobs, invoice_pins``; a before run after another before run
also sets the pins back to NULL and vacuums ``invoices`` (logged: that rep then finds free space in the pages,
which a freshly imported book has not). Each run is ``bench.scale scan`` in a subprocess (first, duplicate and
next-day scan); a sampler reads every backend of the database every 2 s (``/proc/<pid>/stat``) and charges its
CPU to the phase its current statement names: ``pin`` (the pin statement), ``reminders`` (the reminder insert),
``jobs`` (the send jobs), ``other``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from bench.common import ROOT, log, pg_connect, write_json

PIN_TABLE = """CREATE TABLE IF NOT EXISTS invoice_pins (
    invoice_id        BIGINT PRIMARY KEY REFERENCES invoices (id) ON DELETE CASCADE,
    ladder_version_id BIGINT NOT NULL REFERENCES ladder_versions (id));
CREATE INDEX IF NOT EXISTS invoice_pins_version ON invoice_pins (ladder_version_id)"""


def _phase(query: str) -> str:
    q = " ".join(query.split())
    if "INSERT INTO invoice_pins (invoice_id, ladder_version_id)" in q or "UPDATE invoices SET ladder_version_id" in q:
        return "pin"
    # the text is cut at 1 kB (track_activity_query_size): the insert's leading comment or its first CTE
    if "INSERT INTO reminders" in q or "is a JSON list of" in q or "WITH stages" in q:
        return "reminders"
    if "INSERT INTO jobs" in q or "pending_send_jobs" in q or "reminder:" in q:
        return "jobs"
    return "other"


class Sampler(threading.Thread):
    """CPU of the database's backends every ``every`` s, charged to the phase of each one's current statement."""

    def __init__(self, every: float = 2.0) -> None:
        super().__init__(daemon=True)
        self.every, self.stop = every, threading.Event()
        self.scan = "first"  # which of the three scans runs (set from the subprocess's log lines)
        self.phases: dict[str, float] = {}
        self.last: dict[int, float] = {}

    def run(self) -> None:
        with pg_connect() as c:
            while not self.stop.wait(self.every):
                rows = c.execute("SELECT pid, coalesce(query, '') FROM pg_stat_activity "
                                 "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                                 "AND backend_type = 'client backend'").fetchall()
                for pid, query in rows:
                    try:
                        t = psutil.Process(pid).cpu_times()
                    except psutil.Error:
                        continue
                    cpu = t.user + t.system
                    if pid in self.last:
                        phase = f"{self.scan}.{_phase(query)}"
                        self.phases[phase] = self.phases.get(phase, 0.0) + cpu - self.last[pid]
                    self.last[pid] = cpu


def _reset(schema: str, variant: str) -> None:
    with pg_connect(schema) as c:
        c.execute(PIN_TABLE)
        c.execute("TRUNCATE reminders, jobs, invoice_pins RESTART IDENTITY CASCADE")
        if variant == "before" and c.execute("SELECT EXISTS (SELECT 1 FROM invoices "
                                             "WHERE ladder_version_id IS NOT NULL)").fetchone()[0]:
            t = time.perf_counter()
            c.execute("UPDATE invoices SET ladder_version_id = NULL WHERE ladder_version_id IS NOT NULL")
            c.execute("VACUUM invoices")
            log(f"  before: pins set back to NULL and invoices vacuumed in {time.perf_counter() - t:.0f} s")


def run(schema: str, before_src: str, order: list[str]) -> list[dict[str, Any]]:
    out = []
    for i, variant in enumerate(order):
        _reset(schema, variant)
        src = before_src if variant == "before" else str(ROOT / "src")
        env = os.environ | {"PYTHONPATH": f"{src}{os.pathsep}{ROOT}"}
        sampler = Sampler()
        sampler.start()
        proc = subprocess.Popen([sys.executable, "-m", "bench.scale", "scan", "--schema", schema], env=env,
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None and proc.stdout is not None
        for line in proc.stderr:  # "scan next N first: …" ends the first scan, "… second: …" the duplicate
            sys.stderr.write(line)
            if " first: " in line:
                sampler.scan = "second"
            elif " second: " in line:
                sampler.scan = "nextday"
        stdout = proc.stdout.read()
        sampler.stop.set()
        sampler.join()
        if proc.wait():
            raise RuntimeError(f"{variant}: scan failed\n{stdout}")
        result = json.loads(Path(stdout.strip().splitlines()[-1]).read_text())["result"]
        row = {"rep": i, "variant": variant, "phases_cpu_s": {k: round(v, 1) for k, v in sampler.phases.items()},
               **result}
        log(f"{variant} (run {i + 1}/{len(order)}): first {result['first']['wall_s']:.1f} s wall, "
            f"{result['first']['server_cpu_s']:.1f} s CPU; phases {row['phases_cpu_s']}; duplicate "
            f"{result['second']['server_cpu_s']:.1f} s CPU, next day {result['nextday']['server_cpu_s']:.1f} s CPU")
        out.append(row)
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.pin_ab", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--schema", default="scale_book")
    p.add_argument("--before", required=True, help="the before engine's src folder (git archive main src)")
    p.add_argument("--order", default="after,before,after")
    a = p.parse_args(argv)
    rows = run(a.schema, a.before, a.order.split(","))
    print(write_json("pin-ab", {"args": vars(a), "runs": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
