"""The doctor's report values: findings, their evidence, and the text and JSON renderings.

Everything here is plain data. Instants are aware datetimes; they are shown
twice, in a local zone (the schedule's, when the finding is about one) and in
UTC, because an operator reads local time and the database stores UTC.

The JSON shape (``DoctorReport.to_json()``) is versioned by :data:`SCHEMA`
and documented in ``docs/doctor.md``; fields are only ever added.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from . import registry

__all__ = [
    "LOG_CHECKS",
    "SEVERITIES",
    "SCHEMA",
    "Evidence",
    "Finding",
    "CheckRun",
    "DoctorReport",
    "Timeface",
    "duration_text",
]

SCHEMA = "oncebeat.doctor/1"
SEVERITIES = ("info", "warning", "error")
# The database doctor's cause codes are those registered (:func:`oncebeat.doctor.registry.check_codes`): the
# engine's, plus those of the apps imported (an app may add codes of its own).
# Causes only the log doctor (``doctor --logs``, :mod:`oncebeat.doctor.logs`) reports: with oncebeat's
# ledgers a job cannot be enqueued twice for one occurrence nor run twice at once, so the database doctor has none.
LOG_CHECKS = ("double-enqueue", "concurrent-run")
_RANK = {"error": 0, "warning": 1, "info": 2}


def duration_text(seconds: float) -> str:
    """``3725`` → ``"1 h 2 min"``; ``42.4`` → ``"42 s"``; negative values keep their sign."""
    sign = "-" if seconds < 0 else ""
    s = abs(seconds)
    if s < 90:
        return f"{sign}{s:.0f} s"
    if s < 3600:
        return f"{sign}{s / 60:.0f} min"
    if s < 2 * 86400:
        h, rest = divmod(round(s), 3600)
        m = rest // 60
        return f"{sign}{h} h" + (f" {m} min" if m else "")
    d, rest = divmod(round(s), 86400)
    h = rest // 3600
    return f"{sign}{d} d" + (f" {h} h" if h else "")


class Timeface:
    """Renders instants in a zone and in UTC, as text and as JSON.

    Args:
        default_tz: the zone used when a caller names none (an IANA name).
    """

    def __init__(self, default_tz: str = "UTC") -> None:
        self.default_tz = default_tz
        self._zones: dict[str, ZoneInfo] = {}

    def zone(self, tz: str | None) -> ZoneInfo:
        name = tz or self.default_tz
        if name not in self._zones:
            try:
                self._zones[name] = ZoneInfo(name)
            except (ZoneInfoNotFoundError, ValueError):  # an unknown zone in old rows must not break the report
                self._zones[name] = ZoneInfo("UTC")
        return self._zones[name]

    def json(self, instant: datetime | None, tz: str | None = None) -> dict[str, str] | None:
        """``{"utc": "2026-03-02T14:00:00Z", "local": "2026-03-02T08:00:00-06:00", "tz": "America/Chicago"}``."""
        if instant is None:
            return None
        utc = instant.astimezone(UTC)
        local = utc.astimezone(self.zone(tz))
        return {"utc": utc.strftime("%Y-%m-%dT%H:%M:%S") + _frac(utc) + "Z",
                "local": local.isoformat(timespec="microseconds" if utc.microsecond else "seconds"),
                "tz": tz or self.default_tz}

    def text(self, instant: datetime | None, tz: str | None = None) -> str:
        """``2026-03-02 08:00:00 CST = 14:00:00 UTC``: local time, then UTC (with its date when it differs).

        The zone's name is added when it is not the report's zone; a UTC zone is shown once.
        """
        if instant is None:
            return "never"
        name = tz or self.default_tz
        utc = instant.astimezone(UTC)
        utc_text = utc.strftime("%Y-%m-%d %H:%M:%S") + " UTC"
        if name in ("UTC", "Etc/UTC", "Etc/Universal", "Universal", "Zulu", "Etc/Zulu"):
            return utc_text
        local = utc.astimezone(self.zone(name))
        zone = "" if name == self.default_tz else f" ({name})"
        if local.date() == utc.date():
            utc_text = utc.strftime("%H:%M:%S") + " UTC"
        return f"{local.strftime('%Y-%m-%d %H:%M:%S %Z')}{zone} = {utc_text}"


def _frac(instant: datetime) -> str:
    return f".{instant.microsecond:06d}" if instant.microsecond else ""


def jsonable(value: Any) -> Any:
    """Make a row value JSON-ready: datetimes as ISO text in UTC, dates as ISO dates."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    return value


@dataclass(frozen=True, kw_only=True, slots=True)
class Evidence:
    """One fact behind a finding.

    Attributes:
        kind: what the fact is about: ``process``, ``occurrence``, ``job``, ``effect``,
            ``event``, ``message``, ``schedule``, ``transition``, ``measurement``, ``note``,
            (log doctor) ``log``, or a kind an app adds for its own rows (``docs/doctor.md`` lists each kind's
            fields).
        text: the fact as one human-readable line (instants local and UTC).
        data: the fact's fields, JSON-ready (instants as ``{"utc", "local", "tz"}``).
    """

    kind: str
    text: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, **{k: jsonable(v) for k, v in self.data.items()}}


@dataclass(frozen=True, kw_only=True, slots=True)
class Finding:
    """One cause the doctor found.

    Attributes:
        code: the cause, a registered check's code (e.g. ``multiple-clocks``) or one of :data:`LOG_CHECKS`.
        severity: ``info``, ``warning`` or ``error``.
        summary: one line saying what happened (or may happen).
        fix: what to do, in one or two sentences.
        subject: what it is about, in the audit trail's notation (``schedule:KEY``,
            ``job:42``, ``effect:KEY``, ``process:3``, or an app's own such as ``TABLE:ID``), or None.
        evidence: the facts, most telling first.
    """

    code: str
    severity: str
    summary: str
    fix: str
    subject: str | None = None
    evidence: tuple[Evidence, ...] = ()

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {', '.join(SEVERITIES)}, not {self.severity!r}")
        if self.code not in LOG_CHECKS and not registry.known_code(self.code):
            raise ValueError(f"unknown cause code {self.code!r}")

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "severity": self.severity, "summary": self.summary, "fix": self.fix,
                "subject": self.subject, "evidence": [e.to_json() for e in self.evidence]}


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckRun:
    """Whether a check ran; ``note`` says why it was skipped or what limited it."""

    code: str
    ran: bool
    findings: int = 0
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "ran": self.ran, "findings": self.findings, "note": self.note}


@dataclass(frozen=True, kw_only=True, slots=True)
class DoctorReport:
    """What :func:`oncebeat.doctor.run_doctor` found.

    ``findings`` are ordered errors first, then warnings, then info; within a
    severity in check order (:func:`~oncebeat.doctor.registry.check_codes`) and, inside a check, oldest first.
    """

    generated_at: datetime
    backend: str
    database: str
    tz: str
    scope: Mapping[str, Any]
    checks: tuple[CheckRun, ...]
    findings: tuple[Finding, ...]
    notes: tuple[str, ...] = ()

    @staticmethod
    def ordered(findings: Iterable[Finding]) -> tuple[Finding, ...]:
        codes = {c: i for i, c in enumerate(registry.check_codes() + LOG_CHECKS)}
        indexed = list(enumerate(findings))
        indexed.sort(key=lambda p: (_RANK[p[1].severity], codes.get(p[1].code, len(codes)), p[0]))
        return tuple(f for _, f in indexed)

    @property
    def exit_code(self) -> int:
        """0 when no finding has severity ``error``, else 1."""
        return 1 if any(f.severity == "error" for f in self.findings) else 0

    def counts(self) -> dict[str, int]:
        return {s: sum(1 for f in self.findings if f.severity == s) for s in ("error", "warning", "info")}

    def by_code(self, code: str) -> list[Finding]:
        """The findings with cause ``code``."""
        return [f for f in self.findings if f.code == code]

    def to_json(self) -> dict[str, Any]:
        """The report as JSON-ready data (shape: ``docs/doctor.md``, version :data:`SCHEMA`)."""
        face = Timeface(self.tz)
        return {
            "schema": SCHEMA,
            "generated_at": face.json(self.generated_at),
            "database": {"backend": self.backend, "url": self.database},
            "tz": self.tz,
            "scope": {k: jsonable(v) for k, v in self.scope.items()},
            "exit_code": self.exit_code,
            "counts": self.counts(),
            "checks": [c.to_json() for c in self.checks],
            "notes": list(self.notes),
            "findings": [f.to_json() for f in self.findings],
        }

    def to_text(self) -> str:
        """The report for a terminal: a header, then each finding with its evidence and fix."""
        face = Timeface(self.tz)
        counts = self.counts()
        lines = [f"oncebeat doctor: {self.backend} {self.database}, at {face.text(self.generated_at)} "
                 f"(times in {self.tz}" + (" and UTC)" if self.tz != "UTC" else ")")]
        scope = [f"{k} {face.text(v) if isinstance(v, datetime) else v}" for k, v in self.scope.items()
                 if v is not None]
        if scope:
            lines.append("scope: " + ", ".join(scope))
        lines.extend(f"note: {n}" for n in self.notes)
        if not self.findings:
            lines.append("no findings: nothing duplicated, lost or at risk in what the database and mail show")
        else:
            lines.append(f"{len(self.findings)} finding(s): {counts['error']} error, {counts['warning']} warning, "
                         f"{counts['info']} info")
        for f in self.findings:
            lines.append("")
            lines.append(f"{f.severity.upper():7} {f.code}: {f.summary}")
            for e in f.evidence:
                lines.extend(_indent(e.text, "  - ", "    "))
            lines.extend(_indent(f"fix: {f.fix}", "  ", "       "))
        skipped = [c for c in self.checks if not c.ran]
        lines.append("")
        lines.append("checks: " + ", ".join(f"{c.code} ({c.findings})" if c.ran else f"{c.code} (skipped)"
                                             for c in self.checks))
        for c in skipped:
            if c.note:
                lines.append(f"  {c.code} skipped: {c.note}")
        if not any(f.severity in ("error", "warning") for f in self.findings):
            lines.append("all checks passed: no duplicate, miss or risk found")
        return "\n".join(lines) + "\n"


def _indent(text: str, first: str, rest: str) -> Sequence[str]:
    parts = text.splitlines() or [""]
    return [first + parts[0]] + [rest + p for p in parts[1:]]
