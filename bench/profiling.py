"""Profiles: py-spy attached to worker/clock processes, pyinstrument around in-process work.

``python -m bench … --profile`` makes the workloads attach ``py-spy record``
(on-CPU samples of every thread, collapsed stacks) to the first repetition's
oncebeat worker and clock processes and run the in-process parts (enqueue
loops, scans) under pyinstrument. Files go to ``bench/results/profiles/``;
:func:`summarize_collapsed` prints the top frames (inclusive and self share
of on-CPU samples) that ``docs/benchmarks.md`` quotes.
"""

from __future__ import annotations

import collections
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.common import RESULTS

PROFILES = RESULTS / "profiles"


def spy(pid: int, name: str, *, rate: int = 250) -> subprocess.Popen[bytes]:
    """Start ``py-spy record`` on ``pid`` (ends when the process exits); writes ``<name>.collapsed``."""
    PROFILES.mkdir(parents=True, exist_ok=True)
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    out = PROFILES / f"{name}.collapsed"
    return subprocess.Popen([exe, "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw",
                             "--nonblocking", "--threads", "-o", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _frames(stack: str) -> list[str]:
    # "thread (tid);frame (file:line);frame …" — keep "function (file)" without the line number.
    out = []
    for part in stack.split(";"):
        part = part.strip()
        if part.startswith("process ") or part.startswith("thread "):
            continue
        if "(" in part and ":" in part:
            fn, _, loc = part.partition(" (")
            loc = loc.rstrip(")").rsplit(":", 1)[0]
            loc = "/".join(loc.split("/")[-2:])
            part = f"{fn} ({loc})"
        out.append(part)
    return out


def summarize_collapsed(path: Path | str, *, top: int = 15) -> dict[str, Any]:
    """Top frames by inclusive and by self share of samples in a py-spy ``raw`` (collapsed) file."""
    inclusive: collections.Counter[str] = collections.Counter()
    selfc: collections.Counter[str] = collections.Counter()
    total = 0
    for line in Path(path).read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = _frames(stack)
        for f in set(frames):
            inclusive[f] += n
        if frames:
            selfc[frames[-1]] += n
    pct = (lambda c: round(100.0 * c / total, 1)) if total else (lambda c: 0.0)
    return {"samples": total,
            "inclusive": [(f, pct(c)) for f, c in inclusive.most_common(top)],
            "self": [(f, pct(c)) for f, c in selfc.most_common(top)]}


def format_summary(name: str, s: dict[str, Any]) -> str:
    lines = [f"### {name} ({s['samples']} on-CPU samples)", "", "| inclusive % | frame | | self % | frame |",
             "|---:|---|---|---:|---|"]
    for (fi, pi), (fs, ps) in zip(s["inclusive"], s["self"]):
        lines.append(f"| {pi} | `{fi}` | | {ps} | `{fs}` |")
    return "\n".join(lines)


@contextmanager
def pyinstrument_to(name: str, enabled: bool) -> Iterator[None]:
    """Run the block under pyinstrument (wall-clock, this thread) and write text + html when enabled."""
    if not enabled:
        yield
        return
    from pyinstrument import Profiler

    PROFILES.mkdir(parents=True, exist_ok=True)
    prof = Profiler(interval=0.0005)
    prof.start()
    try:
        yield
    finally:
        prof.stop()
        (PROFILES / f"{name}.txt").write_text(prof.output_text(unicode=False, color=False))
        (PROFILES / f"{name}.html").write_text(prof.output_html())


def profile_call(name: str, fn: Callable[[], Any], enabled: bool) -> Any:
    with pyinstrument_to(name, enabled):
        return fn()


def main(argv: list[str]) -> None:
    """``python -m bench.profiling FILE.collapsed …``: print the top-frame tables."""
    for p in argv:
        print(format_summary(Path(p).stem, summarize_collapsed(p)))
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
