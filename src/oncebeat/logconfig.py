"""How oncebeat's processes log: a level, text or JSON lines, one redaction path for both.

``configure(level, fmt)`` sets the root logger up once per process (the CLI calls it; a library user may too):

- ``fmt = "text"``: ``2026-12-01 08:00:00,123 INFO oncebeat.worker: job 12 (send_reminder) attempt 1 …``
- ``fmt = "json"``: one JSON object per line for log drains (Datadog, Loki, Papertrail): ``ts`` (UTC, ISO 8601),
  ``level``, ``logger``, ``message``, and the record's structured fields (``event``, ``job_id``, ``schedule``,
  ``task``, …, as the engine passes them in ``extra``), plus ``exc`` for a traceback.

Every handler gets :class:`oncebeat.redact.RedactingFilter` (passwords in URLs masked in the message and the
traceback), and the JSON formatter masks the structured fields' text the same way: a secret never reaches a log
line in either format. Lines go to stderr.

Job and fire lines come from :mod:`oncebeat.telemetry` events through :func:`attach_job_lines`, so the engine
emits events and logging is one subscriber among others (metrics, crash points).

Example::

    from oncebeat.logconfig import configure
    configure("info", "json")
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from . import telemetry
from .redact import RedactingFilter, redact_url

__all__ = ["LEVELS", "FORMATS", "JsonFormatter", "configure", "attach_job_lines"]

LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# LogRecord's own attributes: everything else on a record came from ``extra`` and is a structured field.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
_log = logging.getLogger("oncebeat.jobs")
_attached = False


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module docstring); text values pass through :func:`redact_url`."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_") and key not in out:
                out[key] = _clean(value)
        if record.exc_info and record.exc_info[1] is not None:
            out["exc"] = redact_url(self.formatException(record.exc_info))
        elif record.exc_text:
            out["exc"] = redact_url(record.exc_text)
        return json.dumps(out, ensure_ascii=False, default=str)


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return redact_url(value)
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return redact_url(str(value))


def configure(level: str = "warning", fmt: str = "text") -> None:
    """Set the root logger to ``level`` (one of :data:`LEVELS`) with ``fmt`` lines (``text`` or ``json``) on stderr.

    Calling it again replaces the handler it installed (the CLI's options may come after the subcommand).

    Raises:
        ValueError: an unknown level or format (the message names the allowed values).
    """
    if level not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, not {level!r}")
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "_oncebeat", False)]:
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler._oncebeat = True  # type: ignore[attr-defined]
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper()))
    for h in root.handlers:  # no password in any log line, whoever wrote it (drivers too)
        if not any(isinstance(f, RedactingFilter) for f in h.filters):
            h.addFilter(RedactingFilter())


def _job_started(_: str, data: Mapping[str, Any]) -> None:
    if _log.isEnabledFor(logging.INFO):
        _log.info("job %s (%s) attempt %s started, queue %s", data.get("job_id"), data.get("task"),
                  data.get("attempt"), data.get("queue"),
                  extra={"event": "job.started", "job_id": data.get("job_id"), "task": data.get("task"),
                         "attempt": data.get("attempt"), "queue": data.get("queue")})


def _job_finished(_: str, data: Mapping[str, Any]) -> None:
    if _log.isEnabledFor(logging.INFO):
        seconds = float(data.get("seconds") or 0.0)
        _log.info("job %s (%s) attempt %s %s in %.3f s", data.get("job_id"), data.get("task"), data.get("attempt"),
                  data.get("outcome"), seconds,
                  extra={"event": "job.finished", "job_id": data.get("job_id"), "task": data.get("task"),
                         "attempt": data.get("attempt"), "outcome": data.get("outcome"),
                         "duration_seconds": round(seconds, 6)})


def attach_job_lines() -> None:
    """Log one INFO line when each job starts and one when it finishes (task, id, attempt, duration, outcome).

    A :mod:`oncebeat.telemetry` subscriber, attached once per process; costs nothing below INFO.
    """
    global _attached
    if not _attached:
        telemetry.attach("job.started", _job_started)
        telemetry.attach("job.finished", _job_finished)
        _attached = True
