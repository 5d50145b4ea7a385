"""Import memory: peak RSS and rows/s of ``oncebeat import`` on generated invoice CSVs (issue 21, item 9).

``python -m bench.import_memory [--rows 200000,2000000] [--backends sqlite,postgres] [--payments]``

Each size is a CSV generated into a fresh ``mktemp`` folder (removed afterwards, never committed): invoice
numbers ``BENCH-0000001`` …, 50,000 customers (so names repeat and are checked for agreement), four currencies,
dates in 2026. The import runs as a user runs it, ``oncebeat import FILE`` in a child process with
``DATABASE_URL`` set to a fresh migrated database (a PostgreSQL schema, dropped afterwards, or a SQLite file);
its peak RSS is the child's own ``ru_maxrss`` from ``os.wait4`` (nothing of this process is counted), its time
the wall time of the whole command (start-up, checks, one transaction, commit) and its own CPU time (user +
system; on a busy machine the steadier figure; PostgreSQL's server time is not in it). ``--payments`` then imports a
payments CSV for every second invoice into the same database. To measure another version of the code, point
``PYTHONPATH`` at an export of it (``git archive``): the child imports ``oncebeat.cli`` from there.

Prints one markdown table; the figures in docs/benchmarks.md ("Import memory") come from it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import FreshDb, Settings, fmt_num, log, md_table

HEADER = "invoice_number,customer_email,customer_name,currency,amount_due,issued_on,due_on\n"
CURRENCIES = ("USD", "EUR", "GBP", "JPY")
_CLI = "import sys; from oncebeat.cli import cli; sys.exit(cli())"  # the oncebeat command of PYTHONPATH's code


def write_invoices(path: Path, rows: int, customers: int = 50_000) -> int:
    """Write ``rows`` valid invoice rows to ``path``; returns the file's size in bytes."""
    with path.open("w", encoding="utf-8", newline="") as fh:
        fh.write(HEADER)
        for i in range(1, rows + 1):
            c = i % customers
            currency = CURRENCIES[i % len(CURRENCIES)]
            amount = f"{(i % 5000) + 1}" if currency == "JPY" else f"{(i % 5000) + 1}.{i % 100:02d}"
            month, day = 1 + i % 12, 1 + i % 28
            fh.write(f"BENCH-{i:07d},customer{c}@example.test,Customer {c},{currency},{amount},"
                     f"2026-{month:02d}-{day:02d},2026-{month:02d}-{min(day + 14, 28):02d}\n")
    return path.stat().st_size


def write_payments(path: Path, rows: int) -> int:
    with path.open("w", encoding="utf-8", newline="") as fh:
        fh.write("invoice_number,paid_on\n")
        for i in range(2, rows + 1, 2):
            fh.write(f"BENCH-{i:07d},2026-{1 + i % 12:02d}-28\n")
    return path.stat().st_size


def run_import(url: str, args: list[str], cwd: Path) -> dict[str, Any]:
    """``oncebeat import ARGS`` in a child; its wall seconds, peak RSS (KiB), exit code and stderr tail."""
    env = {**os.environ, "DATABASE_URL": url}
    err = cwd / "stderr.txt"
    started = time.perf_counter()
    with err.open("w") as fh:
        proc = subprocess.Popen([sys.executable, "-c", _CLI, "import", *args], env=env, cwd=cwd,
                                stdout=subprocess.DEVNULL, stderr=fh)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "cpu": usage.ru_utime + usage.ru_stime, "peak_kb": usage.ru_maxrss,
            "rc": proc.returncode, "stderr": err.read_text(errors="replace")[-400:]}


def measure(rows: int, backend: str, settings: Settings, payments: bool) -> list[dict[str, Any]]:
    folder = Path(tempfile.mkdtemp(prefix="oncebeat-import-bench-"))
    try:
        csv_path = folder / "invoices.csv"
        size = write_invoices(csv_path, rows)
        out = []
        with FreshDb(backend, "imp", settings) as db:
            r = run_import(db.url, [str(csv_path)], folder)
            out.append({"what": "invoices", "backend": backend, "rows": rows, "file_bytes": size, **r})
            if payments:
                pay_path = folder / "payments.csv"
                psize = write_payments(pay_path, rows)
                r = run_import(db.url, ["--payments", str(pay_path)], folder)
                out.append({"what": "payments", "backend": backend, "rows": rows // 2, "file_bytes": psize, **r})
        return out
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.import_memory", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", default="200000,2000000", help="CSV sizes in rows, comma separated")
    p.add_argument("--backends", default="sqlite,postgres")
    p.add_argument("--payments", action="store_true", help="also import a payments CSV (every second invoice)")
    a = p.parse_args(argv)
    settings = Settings.make(reps=1, quick=True)
    results = []
    for rows in (int(x.replace("_", "")) for x in a.rows.split(",")):
        for backend in (b.strip() for b in a.backends.split(",") if b.strip()):
            log(f"import {rows:,} rows on {backend}")
            for r in measure(rows, backend, settings, a.payments):
                log(f"  {r['what']}: rc {r['rc']}, {r['seconds']:.1f} s, CPU {r['cpu']:.1f} s, "
                    f"peak {r['peak_kb'] / 1024:.0f} MiB")
                if r["rc"] != 0:
                    log(f"  stderr: {r['stderr']}")
                results.append(r)
    shutil.rmtree(settings.tmp, ignore_errors=True)
    print(md_table(
        ["what", "backend", "rows", "file MiB", "rc", "wall s", "rows/s", "CPU s (import process)", "peak RSS MiB",
         "peak bytes/row"],
        [[r["what"], r["backend"], f"{r['rows']:,}", fmt_num(r["file_bytes"] / 2**20, 1), r["rc"],
          fmt_num(r["seconds"], 1), fmt_num(r["rows"] / r["seconds"], 0), fmt_num(r["cpu"], 1),
          fmt_num(r["peak_kb"] / 1024, 0), _per_row(r, results)] for r in results]))


def _per_row(r: dict[str, Any], results: list[dict[str, Any]]) -> str:
    """Extra peak bytes per extra row against the smallest run of the same kind and backend (the slope)."""
    base = min((x for x in results if x["what"] == r["what"] and x["backend"] == r["backend"]),
               key=lambda x: x["rows"])
    if base is r or r["rows"] == base["rows"]:
        return "-"
    return fmt_num((r["peak_kb"] - base["peak_kb"]) * 1024 / (r["rows"] - base["rows"]), 0)


if __name__ == "__main__":
    main()
