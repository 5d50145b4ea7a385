"""The log doctor on hostile lines: 1 MB lines built to make each pattern backtrack, for every parser, under a hang
guard; lines over the 64 KiB cap are counted as unknown without being held whole.

Each parser runs its lines in a child process with a time limit, so a pattern that backtracks fails the test
(naming the line) instead of hanging the suite. The limits are generous hang guards, not performance bounds:
before the patterns were made linear a 3,000-space Clockwork line took 35 s and a 40 KB Sidekiq line 17 s, and
1 MB lines did not finish. Per-line cost against line length is in docs/benchmarks.md (bench/doctor_logs.py).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from oncebeat.doctor.logs import MAX_LINE, diagnose_logs
from oncebeat.doctor.logs.reader import read_file_lines, read_lines

SRC = Path(__file__).resolve().parents[2] / "src"
MB = 1_000_000

# The child: builds every hostile line of one parser at 100 kB and 1 MB, runs the parser on each (best of three),
# prints the line's label before running it (so a hang names it) and the timings as JSON at the end.
CHILD = r'''
import json, sys, time
from datetime import UTC, datetime
from zoneinfo import ZoneInfo
from oncebeat.doctor.logs import activejob, celery, clockwork, heroku, journald, mail, rubylogger, sidekiq
from oncebeat.doctor.logs.reader import ReadStats, iter_events
from oncebeat.doctor.logs.records import Context, Envelope, Event, Line
from oncebeat.doctor.logs.story import Ctx
from oncebeat.redact import redact_url

AT = datetime(2026, 3, 2, 14, 0, tzinfo=UTC)
H = "2026-03-02T14:00:00.123456+00:00 "
SK = "2026-03-02T14:00:00.512Z pid=4 tid="
ISO = "2026-03-02T08:00:00-0600 "

def rep(unit, n):
    return (unit * (n // len(unit) + 1))[:n]

def ctx(msg, source="app", process="worker.1", fmt="heroku"):
    env = Envelope(fmt=fmt, at=AT, offset=None, source=source, process=process, host="h", pid=None, message=msg)
    return Context(envelope=env, line=Line(file="f", number=1, text=msg), log_tz=ZoneInfo("UTC"))

MESSAGES = {
    "clockwork": [lambda n: "Starting clock for 2 events: [" + " " * n,
                  lambda n: "Starting clock for 2 events: [" + rep(" x", n),
                  lambda n: "Starting clock for " + "1" * n,
                  lambda n: "Triggering '" + "x" * n,
                  lambda n: "Finished '" + "x" * n,
                  lambda n: "Finished 'x' duration_ms=" + "1" * n + " error=nil",
                  lambda n: "Finished 'x' duration_ms=1 error=" + rep("nil ", n),
                  lambda n: "Got " + "T" * n + " signal"],
    "sidekiq": [lambda n: SK + "x" * n,
                lambda n: SK + "gr3 " + "a" * n + " INFO: start",
                lambda n: SK + "gr3 " + "a" * n,
                lambda n: SK + "gr3 " + rep("a=", n) + " INFO: start",
                lambda n: SK + "gr3 " + " " * n + "INFO: x",
                lambda n: SK + "gr3 " + rep(" INFO", n),
                lambda n: SK + "gr3 WARN: A" + rep("Error", n) + " x",
                lambda n: SK + "gr3 WARN: A" + rep("Error:", n) + " x",
                lambda n: SK + "gr3 WARN: " + rep('{"a":', n),
                lambda n: SK + "gr3 WARN: " + rep("[", n),
                lambda n: SK + "gr3 class=" + "x" * n + " jid=1 INFO: start",
                lambda n: "2026-03-02T14:00:00." + "1" * n,
                lambda n: "2026-03-02T14:00:00.512Z 4 TID-" + "x" * n,
                lambda n: "2026-03-02T14:00:00.512Z 4 TID-gr3 " + rep("A:", n) + " JID-1 x",
                lambda n: "2026-03-02T14:00:00.512Z " + "4" * n,
                lambda n: "pid=" + "4" * n,
                lambda n: "pid=4 tid=" + "x" * n,
                lambda n: "pid=4 tid=gr3 class=A jid=1 INFO: " + rep("a@b.c ", n),
                lambda n: "pid=4 tid=gr3 class=A jid=1 INFO: sent 250 " + rep("a.", n) + "@" + rep("b.", n)],
    "celery": [lambda n: "[2026-03-02 08:00:00,001: INFO/" + "x" * n,
               lambda n: "[2026-03-02 08:00:00,001: " + "I" * n,
               lambda n: "[2026-03-02 08:00:00,001: INFO/MainProcess] Scheduler: Sending due task " + rep("x (", n),
               lambda n: "[2026-03-02 08:00:00,001: INFO/MainProcess] Task " + "a" * n + "[",
               lambda n: "[2026-03-02 08:00:00,001: INFO/MainProcess] Task t[1] retry: Retry in " + "s" * n,
               lambda n: "[2026-03-02 08:00:00,001: INFO/MainProcess] Task t[1] retry: Retry in " + rep("1s:", n),
               lambda n: "[2026-03-02 08:00:00,001: INFO/MainProcess] Process '" + "x" * n,
               lambda n: "[2026-03-02 08:00:00,001: INFO/MainProcess] celery@" + "x" * n + " ready",
               lambda n: "[2026-03-02 08:00:00,001: INFO/MainProcess] " + rep("a.", n) + "[1]: x",
               lambda n: "[2026-03-02 08:00:00,001: WARNING/MainProcess] worker: Warm" + " " * n,
               lambda n: "[2026-03-02 08:00:00,001: INFO/ForkPoolWorker-1] t[1]: sent to " + rep("a@", n)],
    "activejob": [lambda n: "[" * n,
                  lambda n: rep("[a] ", n) + "x",
                  lambda n: rep("[ActiveJob] ", n) + "Enqueued A (Job ID: 1) to S(q)",
                  lambda n: "Enqueued " + "A" * n,
                  lambda n: "Enqueued A (Job ID: 1) to S(" + "q" * n,
                  lambda n: "Retrying A in 1 seconds, due to a " + "." * n + "x",
                  lambda n: "Retrying A " + rep("after 1 attempts ", n),
                  lambda n: "Stopped retrying A due to a " + rep(", which", n),
                  lambda n: "Performed A (Job ID: 1) from " + rep("x in 1", n),
                  lambda n: "Error performing A (Job ID: 1) from S in 1ms: " + "x" * n,
                  lambda n: "Delivered mail " + "x" * n + " (1" + "." * n],
    "rubylogger": [lambda n: "I, [2026-03-02T14:00:00.012345 #4]" + " " * n,
                   lambda n: "I, [2026-03-02T14:00:00.012345 #4]  INFO -- " + "a" * n,
                   lambda n: "I, [2026-03-02T14:00:00.012345 #4]  INFO -- " + ":" * n,
                   lambda n: "I, [2026-03-02T14:00:00." + "1" * n,
                   lambda n: "I, [2026-03-02T14:00:00.012345 #" + "4" * n + "]  INFO -- : x"],
    "heroku-envelope": [lambda n: "2026-03-02T14:00:00." + "1" * n,
                        lambda n: H + "a" * n,
                        lambda n: H + "app[" + "x" * n,
                        lambda n: H + rep("a-", n) + "[x]",
                        lambda n: "83 <190>1 2026-03-02T14:00:00+00:00 " + "h" * n,
                        lambda n: "83 <190>1 2026-03-02T14:00:00+00:00 h app " + "d" * n,
                        lambda n: "1" * n + " <190>1"],
    "heroku-system": [lambda n: "Starting process with command `" + rep(" by user x", n) + " y",
                      lambda n: "Starting process with command `" + "`" * n,
                      lambda n: "Scaled to " + "a" * n,
                      lambda n: "Scaled to " + rep("a@1", n) + " by user " + "u" * n,
                      lambda n: "Scaled to " + rep(" by user ", n),
                      lambda n: "State changed from " + "a" * n,
                      lambda n: "Process exited with status " + "1" * n,
                      lambda n: "Error R" + "1" * n + " (" + "x" * n,
                      lambda n: "Release v" + "1" * n,
                      lambda n: "Deploy " + "a" * n],
    "journald-envelope": [lambda n: "Mar" + " " * n + "x",
                          lambda n: "Mar 2 08:00:00." + "1" * n,
                          lambda n: ISO + "h" * n,
                          lambda n: ISO + "host " + "i" * n,
                          lambda n: ISO + "host i[" + "1" * n,
                          lambda n: "2026-03-02T08:00:00," + "1" * n],
    "journald-system": [lambda n: "Started " + "x" * n,
                        lambda n: "Started " + "." * n,
                        lambda n: "Stopping " + rep("a - ", n) + "x",
                        lambda n: "(u) CMD (" + rep(") ", n) + "x",
                        lambda n: "(u) CMD (" + ")" + " " * n + "x",
                        lambda n: "(" + "u" * n,
                        lambda n: "x.service: " + "M" * n,
                        lambda n: "a" * n + ".service: x",
                        lambda n: rep("a.service", n) + ": x",
                        lambda n: "x.service: Main process exited, code=" + "k" * n,
                        lambda n: "x.service: Main process exited, code=killed, status=" + "9" * n],
    "mail": [lambda n: "@" * n,
             lambda n: rep("a@", n) + " sent",
             lambda n: "x" * n + "@" + "a" * n + " sent",
             lambda n: rep("a.", n) + "@" + rep("b.", n) + " sent",
             lambda n: rep("sent ", n) + "a@b.example",
             lambda n: "250 " + rep("a@b", n),
             lambda n: "a@b.example " + rep("e-mailed", n),
             lambda n: rep("a-", n) + "@" + rep("b-", n) + ".c sent",
             lambda n: "a@b.example sent " + rep("not ", n) + "x"],
    "redact": [lambda n: "=" * n + ":",
               lambda n: rep("=a", n) + ":x",
               lambda n: rep("://a:", n),
               lambda n: "=" * n + "/x:@",
               lambda n: rep("=:", n) + "@",
               lambda n: rep("a ", n) + "@",
               lambda n: "x:@" + rep("=a:", n),
               lambda n: rep("://", n) + "@",
               lambda n: "?" + rep("password", n),
               lambda n: "password='" + rep("\\'", n),
               lambda n: " password" + " " * n + "=x"],
}
ALL = [m for ms in MESSAGES.values() for m in ms]

def run_reader(text):
    list(iter_events([Line(file="f", number=1, text=text)], log_tz=ZoneInfo("UTC"), year=2026, stats=ReadStats()))

def run_evidence(text):
    line = Line(file="f", number=1, text=text)
    Ctx([], "America/Chicago").evidence(Event(kind="trigger", at=AT, line=line, process="clock.1"), "note")

RUN = {
    "clockwork": lambda m: clockwork.parse(ctx(m), m),
    "sidekiq": lambda m: sidekiq.parse(ctx(m), m),
    "celery": lambda m: celery.parse(ctx(m), m),
    "activejob": lambda m: activejob.parse(ctx(m), m),
    "rubylogger": rubylogger.strip,
    "heroku-envelope": lambda m: heroku.envelope(m, "f"),
    "heroku-system": lambda m: (heroku.parse_system(ctx(m, "heroku", "run.1")),
                                heroku.parse_system(ctx(m, "app", "api"))),
    "journald-envelope": lambda m: journald.envelope(m, "f", year=2026, log_tz=ZoneInfo("UTC")),
    "journald-system": lambda m: (journald.parse_system(ctx(m, "systemd", "h systemd[1]", "journal")),
                                  journald.parse_system(ctx(m, "CRON", "h CRON[2]", "journal"))),
    "redact": redact_url,
    "mail": mail.DEFAULT.match,
}

which = sys.argv[1]
sizes = [int(x) for x in sys.argv[2].split(",")]
if which == "reader":  # every envelope and parser, on each message bare and inside a Heroku envelope
    wraps = (("", ""), ("+heroku", H + "app[clock.1]: "))
    cases = [(f"{p}[{i}]{wrap}", (lambda b, w: (lambda n: w + b(n)))(b, w), run_reader)
             for p, ms in MESSAGES.items() for i, b in enumerate(ms) for wrap, w in wraps]
elif which == "evidence":  # a line shown as evidence: redacted, trimmed
    cases = [(f"evidence[{i}]", b, run_evidence) for i, b in enumerate(ALL)]
else:
    cases = [(f"{which}[{i}]", b, RUN[which]) for i, b in enumerate(MESSAGES[which])]
times = {}
for label, build, run in cases:
    for n in sizes:
        text = build(n)
        print(f"{label} {len(text)}", flush=True)
        best = None
        for _ in range(3):
            # CPU time of this process, not wall time: under parallel test processes a 1 MB run outlasts the
            # scheduler's slice and waits for a core, which the parser's cost does not include.
            t0 = time.process_time()
            run(text)
            best = min(best or 1e9, time.process_time() - t0)
        times.setdefault(label, []).append(best)
print("RESULT " + json.dumps(times), flush=True)
'''

GROUPS = ["clockwork", "sidekiq", "celery", "activejob", "rubylogger", "heroku-envelope", "heroku-system",
          "journald-envelope", "journald-system", "redact", "mail", "evidence", "reader"]
HANG_GUARD = 240.0  # seconds for one group (all its lines at 100 kB and 1 MB, twice): a hang guard, not a bound


def run_child(group: str, sizes: str) -> dict[str, list[float]]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    try:
        out = subprocess.run([sys.executable, "-c", CHILD, group, sizes], capture_output=True, text=True, env=env,
                             timeout=HANG_GUARD)
    except subprocess.TimeoutExpired as exc:
        seen = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        last = seen.strip().splitlines()[-1:] or ["(before the first line)"]
        pytest.fail(f"{group}: no answer within {HANG_GUARD:g} s; it hung on the line labelled {last[0]!r}")
    assert out.returncode == 0, out.stderr[-3000:]
    result = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(result.removeprefix("RESULT "))  # type: ignore[no-any-return]


@pytest.mark.parametrize("group", GROUPS)
def test_every_parser_reads_1_mb_hostile_lines_in_time_that_grows_linearly(group: str) -> None:
    # evidence is only ever a line the reader kept: at most the cap
    sizes = f"{MAX_LINE // 10},{MAX_LINE}" if group == "evidence" else f"{MB // 10},{MB}"

    def steep(times: dict[str, list[float]]) -> dict[str, str]:
        # linear: 10x the line, 10x the time, up to ~4x more once a line no longer fits the CPU's caches (measured:
        # 30 ns per character at 100 kB, 48-94 at 1-4 MB); quadratic is 100x, and the patterns that were took
        # minutes. Times under 50 ms are noise.
        return {label: f"100 kB in {small:.3f} s, 1 MB in {big:.3f} s" for label, (small, big) in times.items()
                if big > 0.05 and big / small >= 70}

    times = run_child(group, sizes)
    assert times
    if failed := steep(times):  # a busy machine can stall one run: a line must be steep twice to fail
        again = steep(run_child(group, sizes))
        failed = {label: f"{why}; again {again[label]}" for label, why in failed.items() if label in again}
    assert not failed, f"not linear: {failed}"


def _lines(text: str, tmp_path: Path) -> tuple[list[tuple[int, str, bool]], list[tuple[int, str, bool]]]:
    path = tmp_path / "log"
    path.write_bytes(text.encode())
    with open(path, "rb") as fh:
        binary = [(x.number, x.text, x.too_long) for x in read_file_lines(str(path), fh)]
    textual = [(x.number, x.text, x.too_long) for x in read_lines("s", io.StringIO(text))]
    return binary, textual


def test_a_line_longer_than_the_cap_is_one_unknown_line_and_the_next_line_is_read(tmp_path: Path) -> None:
    text = ("a" * MAX_LINE + "\n" + "b" * (MAX_LINE + 1) + "\n" + "c" * (3 * MAX_LINE + 7) + "\nlast\n"
            + "x" * (2 * MAX_LINE))
    for lines in _lines(text, tmp_path):
        assert lines == [(1, "a" * MAX_LINE, False), (2, "", True), (3, "", True), (4, "last", False),
                         (5, "", True)]


def test_the_line_after_a_long_one_keeps_its_byte_offset_for_evidence(tmp_path: Path) -> None:
    from oncebeat.doctor.logs.reader import line_text

    path = tmp_path / "log"
    path.write_bytes(b"x" * (5 * MAX_LINE) + b"\r\nsecond \xff line\r\n")
    with open(path, "rb") as fh:
        lines = list(read_file_lines(str(path), fh))
    assert [x.too_long for x in lines] == [True, False]
    assert lines[1].offset == 5 * MAX_LINE + 2 and lines[1].text == "second \ufffd line"
    assert line_text(lines[1].stored()) == "second \ufffd line"
    path.write_bytes(b"x" * (5 * MAX_LINE) + b"\r\nsecond line changed\r\n")  # rotated or edited since
    assert "changed since it was read" in line_text(lines[1].stored())


def test_a_file_of_1_mb_hostile_lines_is_counted_as_unknown_in_bounded_time(tmp_path: Path) -> None:
    # end to end through diagnose_logs, in a child with a hang guard: the cap drops them before any pattern
    path = tmp_path / "hostile.log"
    heroku = "2026-03-02T14:00:00.123456+00:00 app[clock.1]: "
    with open(path, "w") as fh:
        for body in ("Starting clock for 2 events: [" + " " * MB, "2026-03-02T14:00:00.512Z pid=4 tid=" + "x" * MB,
                     "[" * MB, "=" * MB, '"' * MB):
            fh.write(heroku + body + "\n")
        fh.write(heroku + "Starting clock for 2 events: [" + " " * (MAX_LINE - 200) + "]\n")  # under the cap
    code = ("import json, sys; from oncebeat.doctor.logs import diagnose_logs; "
            "print(json.dumps(diagnose_logs([sys.argv[1]]).stats.to_json()))")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=HANG_GUARD,
                         env={**os.environ, "PYTHONPATH": str(SRC)}, check=True)
    stats = json.loads(out.stdout)
    assert stats["lines"] == 6 and stats["too_long"] == 5 and stats["unknown"] == 5
    assert stats["by_format"] == {"clockwork": 1}
    report = diagnose_logs([path])
    assert "6 lines: 1 recognised (clockwork 1), 5 unknown (5 longer than 64 KiB, not read)" in report.to_text()
    assert report.to_json()["read"]["too_long"] == 5


def test_a_pipe_is_read_once_its_lines_keep_their_text() -> None:
    # `doctor --logs <(zcat log.gz)`: a pipe cannot be read again for evidence, so its lines keep their text
    code = f"import sys; sys.stdout.buffer.write(b'first\\r\\n' + b'x' * {MAX_LINE + 5} + b'\\nthird \\xff')"
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE) as child:
        assert child.stdout is not None
        lines = list(read_file_lines("pipe", child.stdout))
    assert [(x.text, x.too_long, x.offset) for x in lines] == [("first", False, None), ("", True, None),
                                                              ("third \ufffd", False, None)]
    assert lines[0].stored() is lines[0]
