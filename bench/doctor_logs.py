"""``doctor --logs`` on hostile and on large input: per-line cost against line length, peak memory against log size.

::

    python -m bench.doctor_logs lines [--lengths 1000,10000,100000,1000000] [--timeout 60] [--src DIR]
    python -m bench.doctor_logs memory [--sizes 200M,1G] [--src DIR] [--keep DIR]

- ``lines``: each hostile line (a Clockwork boot line with a run of spaces, a Sidekiq line with one huge tid
  or a run of field text, …: what the log patterns could backtrack on) is read through the whole
  reader — every envelope and message parser — by :func:`oncebeat.doctor.logs.reader.parse_lines`, one line
  per child process with a time limit (a line that does not finish shows as ``> LIMIT``; best of three runs).
  ``parse_lines``
  is called directly, so the 64 KiB line cap of :func:`~oncebeat.doctor.logs.reader.read_lines` does not
  hide the parsers' own cost; the last table row reads a 1 MB line through ``diagnose_logs`` (cap included).
- ``memory``: a log of realistic mixed Heroku lines (router and web requests, SQL, Sidekiq and Active Job
  runs of unscheduled jobs, a daily Clockwork job that delivers mail, restarts) is generated into a fresh
  temporary folder (deleted afterwards unless ``--keep``), and ``diagnose_logs`` plus the text and JSON
  report run on it in a child process, which reports its peak resident set (``VmHWM``) and its time (and how
  many times it read the file, and the job lines it dropped: see :mod:`oncebeat.doctor.logs.scope`).

``--src DIR`` measures another tree's ``src`` (e.g. ``git archive HEAD~3 src | tar -x -C /tmp/before``)
with ``PYTHONPATH``, for before/after figures. Prints markdown tables; nothing is written to the repository.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.common import md_table

ROOT = Path(__file__).resolve().parents[1]
H = "2026-03-02T14:00:00.123456+00:00 "
SK = "2026-03-02T14:00:00.512Z pid=4 tid="


def _rep(unit: str, n: int) -> str:
    return (unit * (n // len(unit) + 1))[:n]


#: name → (what it is, builder of a line of about n characters)
CASES: dict[str, tuple[str, Callable[[int], str]]] = {
    "typical": ("a Heroku Sidekiq `start` line padded with a long class name",
                lambda n: f"{H}app[worker.1]: {SK}gr3 class={_rep('Job', n)} jid=5b1d INFO: start"),
    "clockwork-spaces": ("Clockwork `Starting clock for 2 events: [` then spaces, no `]`",
                         lambda n: f"{H}app[clock.1]: Starting clock for 2 events: [" + " " * n),
    "sidekiq-tid": ("Sidekiq line with one huge tid and no level",
                    lambda n: f"{H}app[worker.1]: {SK}" + "x" * n),
    "sidekiq-fields": ("Sidekiq line with a run of word characters where the fields are, then a level",
                       lambda n: f"{H}app[worker.1]: {SK}gr3 " + "a" * n + " INFO: start"),
    "sidekiq-fields-eq": ("Sidekiq fields `a=a=a=…` then a level",
                          lambda n: f"{H}app[worker.1]: {SK}gr3 " + _rep("a=", n) + " INFO: start"),
    "sidekiq-exception": ("Sidekiq WARN `AErrorError…` then a space (the exception pattern)",
                          lambda n: f"{H}app[worker.1]: {SK}gr3 WARN: A" + _rep("Error", n) + " x"),
    "sidekiq-json-nesting": ("Sidekiq WARN with `{\"a\":{\"a\":…` nested JSON",
                             lambda n: f"{H}app[worker.1]: {SK}gr3 WARN: " + _rep('{"a":', n)),
    "scale-formation": ("Heroku `Scaled to` with one long word and no `@`",
                        lambda n: f"{H}app[api]: Scaled to " + "a" * n),
    "activejob-brackets": ("Active Job tags: a run of `[`", lambda n: f"{H}app[worker.1]: " + "[" * n),
    "celery-prefix": ("Celery prefix with a huge process name and no `]`",
                      lambda n: "[2026-03-02 08:00:00,001: INFO/" + "x" * n),
    "ruby-logger-spaces": ("Ruby Logger prefix then spaces",
                           lambda n: f"{H}app[clock.1]: I, [2026-03-02T14:00:00.012345 #4]" + " " * n),
    "journal-short-spaces": ("journalctl -o short `Mar` then spaces", lambda n: "Mar" + " " * n + "x"),
    "cron-parens": ("cron `CMD (` then `) ) ) …`",
                    lambda n: "2026-03-02T08:05:01-0600 old-cron CRON[2231]: (billing) CMD (" + _rep(") ", n) + "x"),
    "digits": ("a stamp whose fraction is a run of digits", lambda n: "2026-03-02T14:00:00." + "1" * n),
    "equals": ("a run of `=`", lambda n: "=" * n),
    "quotes": ("a run of `'` after `Triggering `", lambda n: f"{H}app[clock.1]: Triggering " + "'" * n),
}

_CHILD_LINE = """
import json, sys, time
from zoneinfo import ZoneInfo
from oncebeat.doctor.logs.reader import ReadStats, parse_lines
from oncebeat.doctor.logs.records import Line
text = sys.stdin.read()
best = None
for _ in range(3):  # best of three (one when a run takes over a second)
    t0 = time.perf_counter()
    parse_lines([Line(file="bench.log", number=1, text=text)], log_tz=ZoneInfo("UTC"), year=2026, stats=ReadStats())
    best = min(best or 1e9, time.perf_counter() - t0)
    if best > 1:
        break
print(json.dumps({"seconds": best}))
"""

_CHILD_FILE = """
import json, sys, time
from oncebeat.doctor.logs import diagnose_logs
t0 = time.perf_counter()
report = diagnose_logs([sys.argv[1]], tz=sys.argv[2])
report.to_text(); json.dumps(report.to_json(), default=str)
seconds = time.perf_counter() - t0
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(json.dumps({"seconds": seconds, "peak_kb": hwm, "lines": report.stats.lines,
                  "findings": [f.finding.code for f in report.findings], "jobs": len(report.jobs),
                  "reads": getattr(report.stats, "reads", 1), "dropped": getattr(report.stats, "dropped", 0)}))
"""


def _env(src: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(src)}


def _child(code: str, args: list[str], stdin: str | None, src: Path, timeout: float) -> dict[str, object] | None:
    """The child's JSON; None when it ran out of time; ``{"error": last line of stderr}`` when it failed."""
    try:
        out = subprocess.run([sys.executable, "-c", code, *args], input=stdin, capture_output=True, text=True,
                             env=_env(src), timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or [f"exit status {out.returncode}"])[-1][:60]}
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def _fmt(res: dict[str, object] | None, timeout: float) -> str:
    if res is None:
        return f"> {timeout:g} s"
    if "error" in res:
        return f"crash: {res['error']}"
    seconds = float(res["seconds"])  # type: ignore[arg-type]
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.1f} s"


def lines(lengths: list[int], timeout: float, src: Path, only: list[str] | None) -> None:
    rows = []
    for name, (what, build) in CASES.items():
        if only and name not in only:
            continue
        row = [f"{name}: {what}"]
        for n in lengths:
            res = _child(_CHILD_LINE, [], build(n), src, timeout)
            row.append(_fmt(res, timeout))
            print(name, n, row[-1], file=sys.stderr, flush=True)
        rows.append(row)
    with tempfile.TemporaryDirectory(prefix="bench-doctor-logs-") as tmp:
        path = Path(tmp) / "one-huge-line.log"
        path.write_text(CASES["clockwork-spaces"][1](1_000_000) + "\n")
        res = _child(_CHILD_FILE, [str(path), "UTC"], None, src, timeout)
        rows.append(["diagnose_logs on a file holding the 1 MB clockwork-spaces line (the reader's cap)",
                     *["" for _ in lengths[:-1]], _fmt(res, timeout)])
    print(md_table(["line (through every envelope and parser)", *[f"{n:,} chars" for n in lengths]], rows))


# --- a realistic mixed log ---------------------------------------------------------------------------------

_PATHS = ["/", "/invoices", "/invoices/{}", "/customers/{}", "/api/v1/payments", "/assets/app-{}.js", "/login"]
_JOBS = ["ActionMailer::MailDeliveryJob", "WebhookDeliveryJob", "SyncCustomerJob", "PdfRenderJob"]


def _stamp(t: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "+00:00"


def generate(path: Path, size: int, seed: int = 7) -> int:
    """Write about ``size`` bytes of mixed Heroku lines to ``path``; return the number of lines.

    Every 0.5-4 s a web request (router line, Rails request lines with a Ruby Logger prefix, SQL); with one
    request in eight a Sidekiq/Active Job run of an unscheduled job (enqueued on the web dyno; 5 lines); every
    day at 14:00 UTC clock.1 triggers SendInvoiceOverdueRemindersJob, which runs on worker.1 and delivers 300
    mails; every third day a deploy restarts the clock at the fire time, every fourth day the platform
    restarts clock.1 six minutes after the fire and it fires again on boot (findings to find). About 1 GB is
    5.3 million lines over 31 days, 11% of them job lines.
    """
    rnd = random.Random(seed)
    t = 1772409600.0  # 2026-03-02T00:00:00Z
    written = lines = 0
    day = -1
    job_no = 0
    with open(path, "w", encoding="utf-8") as fh:
        while written < size:
            chunk: list[str] = []
            t += rnd.uniform(0.5, 4.0)
            s = _stamp(t)
            web = f"web.{rnd.randint(1, 4)}"
            rid = f"{rnd.getrandbits(32):08x}-{rnd.getrandbits(16):04x}"
            p = rnd.choice(_PATHS).format(rnd.randint(1, 99999))
            chunk.append(f'{s} heroku[router]: at=info method=GET path="{p}" host=billing.example.test '
                         f'request_id={rid} fwd="203.0.113.{rnd.randint(1, 254)}" dyno={web} connect=0ms '
                         f"service={rnd.randint(2, 400)}ms status=200 bytes={rnd.randint(300, 90000)} protocol=https")
            chunk.append(f'{s} app[{web}]: I, [{s[:26]} #4]  INFO -- : [{rid}] Started GET "{p}" for 203.0.113.9')
            chunk.append(f"{s} app[{web}]: D, [{s[:26]} #4] DEBUG -- : [{rid}]   Invoice Load (0.{rnd.randint(1, 9)}ms)"
                         f'  SELECT "invoices".* FROM "invoices" WHERE "invoices"."id" = $1 LIMIT $2')
            chunk.append(f"{s} app[{web}]: I, [{s[:26]} #4]  INFO -- : [{rid}] Completed 200 OK in "
                         f"{rnd.randint(2, 400)}ms (Views: 1.2ms | ActiveRecord: 0.8ms)")
            if rnd.random() < 0.125:  # an unscheduled job: enqueued by the web dyno, run by a worker
                job_no += 1
                job = rnd.choice(_JOBS)
                jid = f"{job_no:012x}{rnd.getrandbits(48):012x}"
                aj = f"{rnd.getrandbits(64):016x}-{job_no:08x}"
                w = f"worker.{rnd.randint(1, 2)}"
                chunk += [f"{s} app[{web}]: [ActiveJob] Enqueued {job} (Job ID: {aj}) to Sidekiq(default)",
                          f"{s} app[{w}]: {s[:23]}Z pid=4 tid=gr{job_no % 7} class={job} jid={jid} INFO: start",
                          f"{s} app[{w}]: [ActiveJob] [{job}] [{aj}] Performing {job} (Job ID: {aj}) from "
                          "Sidekiq(default) enqueued at " + s[:19] + "Z",
                          f"{s} app[{w}]: [ActiveJob] [{job}] [{aj}] Performed {job} (Job ID: {aj}) from "
                          f"Sidekiq(default) in {rnd.randint(5, 900)}.1ms",
                          f"{s} app[{w}]: {s[:23]}Z pid=4 tid=gr{job_no % 7} class={job} jid={jid} elapsed=0.3 "
                          "INFO: done"]
            today = int((t - 1772409600.0) // 86400)
            if today != day and t % 86400 >= 14 * 3600:  # the daily job, once its fire time has passed
                day = today
                aj = f"7d1b5a0e-{day:04d}-4c1e-9a55-{day:012d}"
                jid = f"{day:024x}"
                J = "SendInvoiceOverdueRemindersJob"
                chunk += [f"{s} app[clock.1]: I, [{s[:26]} #4]  INFO -- : Triggering 'invoice_reminders'",
                          f"{s} app[clock.1]: [ActiveJob] Enqueued {J} (Job ID: {aj}) to Sidekiq(default)",
                          f"{s} app[worker.1]: {s[:23]}Z pid=4 tid=gr9 class={J} jid={jid} INFO: start",
                          f"{s} app[worker.1]: [ActiveJob] [{J}] [{aj}] Performing {J} (Job ID: {aj}) from "
                          "Sidekiq(default) enqueued at " + s[:19] + "Z"]
                chunk += [f"{s} app[worker.1]: [ActiveJob] [{J}] [{aj}] Delivered mail {day}-{i}@example.test "
                          f"({rnd.randint(5, 60)}.2ms)" for i in range(300)]
                chunk += [f"{s} app[worker.1]: [ActiveJob] [{J}] [{aj}] Performed {J} (Job ID: {aj}) from "
                          "Sidekiq(default) in 5120.3ms",
                          f"{s} app[worker.1]: {s[:23]}Z pid=4 tid=gr9 class={J} jid={jid} elapsed=5.1 INFO: done"]
                if day % 4 == 3:  # restarted six minutes after the fire: it fires again on boot
                    r = _stamp(t + 360)
                    aj2 = f"7d1b5a0e-{day:04d}-4c1e-9a55-{day + 10**6:012d}"
                    chunk += [f"{r} heroku[clock.1]: Restarting", f"{r} heroku[clock.1]: State changed from up to "
                              "starting", f"{r} heroku[clock.1]: State changed from starting to up",
                              f"{r} app[clock.1]: I, [{r[:26]} #4]  INFO -- : Triggering 'invoice_reminders'",
                              f"{r} app[clock.1]: [ActiveJob] Enqueued {J} (Job ID: {aj2}) to Sidekiq(default)"]
                if day % 3 == 2:
                    chunk += [f"{s} app[api]: Deploy 3f2a91c by user ops@example.test",
                              f"{s} heroku[clock.1]: Restarting", f"{s} heroku[clock.1]: State changed from up to "
                              "starting", f"{s} heroku[clock.1]: State changed from starting to up"]
            text = "\n".join(chunk) + "\n"
            fh.write(text)
            written += len(text)
            lines += len(chunk)
    return lines


def _size(text: str) -> int:
    mult = {"K": 10**3, "M": 10**6, "G": 10**9}
    return int(float(text[:-1]) * mult[text[-1].upper()]) if text[-1].upper() in mult else int(text)


def memory(sizes: list[str], src: Path, keep: Path | None, timeout: float) -> None:
    rows = []
    tmp = Path(tempfile.mkdtemp(prefix="bench-doctor-logs-"))
    try:
        for label in sizes:
            path = (keep or tmp) / f"mixed-{label}.log"
            if not path.exists():
                n = generate(path, _size(label))
                print(f"generated {path} ({n:,} lines)", file=sys.stderr, flush=True)
            mb = path.stat().st_size / 1e6
            res = _child(_CHILD_FILE, [str(path), "America/Chicago"], None, src, timeout)
            if res is None:
                rows.append([label, f"{mb:,.0f}", "", f"> {timeout:g} s", "", ""])
                continue
            peak = int(res["peak_kb"]) / 1024  # type: ignore[call-overload]
            rows.append([label, f"{mb:,.0f}", f"{int(res['lines']):,}", f"{float(res['seconds']):.0f} s",  # type: ignore[call-overload, arg-type]
                         f"{peak:,.0f}", f"{peak / mb:.2f}×"])
            print(rows[-1], res["findings"], f"reads {res.get('reads', 1)}, dropped {res.get('dropped', 0):,}",
                  file=sys.stderr, flush=True)
    finally:
        if keep is None:
            shutil.rmtree(tmp)
    print(md_table(["log", "MB", "lines", "time", "peak RSS MB", "peak / log"], rows))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.doctor_logs", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=("lines", "memory"))
    p.add_argument("--lengths", default="1000,10000,100000,1000000")
    p.add_argument("--only", help="lines: these cases only, comma separated")
    p.add_argument("--sizes", default="200M,1G")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per child (default 60; memory: 3600)")
    p.add_argument("--src", type=Path, default=ROOT / "src", help="the src folder to measure (default this tree's)")
    p.add_argument("--keep", type=Path, help="memory: generate the logs here and keep them (reused when present)")
    a = p.parse_args(argv)
    started = time.time()
    if a.command == "lines":
        lines([int(x) for x in a.lengths.split(",")], a.timeout, a.src.resolve(),
              a.only.split(",") if a.only else None)
    else:
        memory(a.sizes.split(","), a.src.resolve(), a.keep, a.timeout if a.timeout != 60.0 else 3600.0)
    print(f"({time.time() - started:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
