"""The log doctor's report: findings (the doctor's :class:`~oncebeat.doctor.model.Finding`), jobs, the per-day
table and what was read, as text for a terminal and as JSON (schema :data:`SCHEMA`, documented in
``docs/doctor-logs.md``; fields are only ever added)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..model import CheckRun, DoctorReport, Timeface, jsonable
from .reader import MAX_LINE, ReadStats
from .story import DayRow, JobStory, LogFinding

__all__ = ["SCHEMA", "LOG_CHECK_CODES", "LogReport"]

SCHEMA = "oncebeat.doctor.logs/1"
# The causes the log doctor looks for, in report order.
LOG_CHECK_CODES = ("multiple-clocks", "clock-restart", "leftover-trigger", "double-enqueue", "retry-side-effect",
                   "concurrent-run", "timezone", "lost")


@dataclass(frozen=True, kw_only=True, slots=True)
class LogReport:
    """What :func:`oncebeat.doctor.logs.diagnose_logs` found; ``findings`` ordered as the database doctor's."""

    tz: str
    scope: Mapping[str, Any]
    stats: ReadStats
    jobs: tuple[JobStory, ...]
    findings: tuple[LogFinding, ...]
    days: tuple[DayRow, ...]
    checks: tuple[CheckRun, ...]
    notes: tuple[str, ...] = ()

    @property
    def judged(self) -> bool:
        """True when the logs held at least one scheduled job to judge (else "no findings" would mean nothing)."""
        return bool(self.jobs)

    @property
    def exit_code(self) -> int:
        """1 when a finding has severity ``error``; 2 when there was nothing to judge (no scheduled job found in
        the lines read: an empty or unrecognised file is bad input, not a clean bill); else 0."""
        if any(f.finding.severity == "error" for f in self.findings):
            return 1
        return 0 if self.judged else 2

    def by_code(self, code: str) -> list[LogFinding]:
        return [f for f in self.findings if f.finding.code == code]

    def counts(self) -> dict[str, int]:
        return {s: sum(1 for f in self.findings if f.finding.severity == s) for s in ("error", "warning", "info")}

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "tz": self.tz, "scope": {k: jsonable(v) for k, v in self.scope.items()},
                "read": self.stats.to_json(), "exit_code": self.exit_code,
                "judged": self.judged, "counts": self.counts(),
                "checks": [c.to_json() for c in self.checks], "notes": list(self.notes),
                "jobs": [j.to_json() for j in self.jobs], "findings": [f.to_json() for f in self.findings],
                "days": [d.to_json() for d in self.days]}

    def to_text(self) -> str:
        face = Timeface(self.tz)
        s = self.stats
        formats = ", ".join(f"{k} {v}" for k, v in sorted(s.by_format.items())) or "none"
        lines = [f"oncebeat doctor --logs: {len(s.files)} file(s), {s.lines} lines: {s.recognised} recognised "
                 f"({formats}), {s.unknown} unknown" + (f" ({s.too_long} longer than {MAX_LINE // 1024} KiB, not read)"
                                                       if s.too_long else "")
                 + (f", {s.outside} outside the range" if s.outside else ""),
                 f"times in {self.tz}" + (" and UTC" if self.tz != "UTC" else "")
                 + (f"; logs span {face.text(s.first)} .. {face.text(s.last)}" if s.first and s.last else "")]
        scope = [f"{k} {face.text(v) if isinstance(v, datetime) else v}" for k, v in self.scope.items()
                 if v is not None and k != "files"]
        if scope:
            lines.append("scope: " + ", ".join(scope))
        lines += [f"note: {n}" for n in self.notes]
        for j in self.jobs:
            at = (f", fires at {j.fire_local} {self.tz} ({j.fire_utc} UTC on most days)" if j.fire_local else "")
            data = j.to_json()
            lines.append(f"job {j.job}: {'daily' if j.daily else 'not daily'}{at}; {data['enqueues']} enqueue(s), "
                         f"{data['attempts']} attempt(s), {data['mails']} mail(s)"
                         + (f"; also called {', '.join(data['aliases'])}" if data["aliases"] else ""))
        counts = self.counts()
        if not self.judged:
            lines.append("nothing judged: no scheduled job was found in "
                         + ("these lines" if s.recognised else "these files (no line is a log line the doctor knows)")
                         + "; point it at the clock's and the workers' logs, or name the job with --job")
        elif not self.findings:
            lines.append("no findings: each scheduled job was enqueued once a day, ran once, and no retry resent mail")
        else:
            lines.append(f"{len(self.findings)} finding(s): {counts['error']} error, {counts['warning']} warning, "
                         f"{counts['info']} info")
        body = DoctorReport(generated_at=datetime.now().astimezone(), backend="logs", database="", tz=self.tz,
                            scope={}, checks=(), findings=tuple(f.finding for f in self.findings)).to_text()
        # reuse the database doctor's rendering of findings: everything between its header and its check line
        parts = body.split("\n")
        start = next((i for i, p in enumerate(parts) if p == ""), len(parts))
        end = max((i for i, p in enumerate(parts) if p.startswith("checks:")), default=len(parts))
        lines += parts[start:end]
        if self.days:
            lines.append(f"per day ({self.tz}):")
            w = max(len(d.job) for d in self.days)
            lines.append(f"  {'job':<{w}} {'day':<10} {'enqueued':>8} {'performed':>9} {'failed':>6} {'mails':>6}  "
                         "enqueued by")
            for d in self.days:
                flag = "  <- more than once" if d.enqueued > 1 else ""
                lines.append(f"  {d.job:<{w}} {d.day.isoformat():<10} {d.enqueued:>8} {d.performed:>9} "
                             f"{d.failed:>6} {d.mails:>6}  {', '.join(d.enqueued_by)}{flag}")
            lines.append("")
        lines.append("checks: " + ", ".join(f"{c.code} ({c.findings})" if c.ran else f"{c.code} (skipped)"
                                             for c in self.checks))
        return "\n".join(lines) + "\n"
