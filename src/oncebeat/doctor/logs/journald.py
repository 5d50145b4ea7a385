"""``journalctl`` output: the ``TIMESTAMP HOST IDENT[PID]: message`` envelope, systemd and cron lines.

Accepted (``journalctl -o short-iso`` is best: it carries the host's UTC offset)::

    2026-03-02T08:00:00-0600 billing-1 celery[812]: [2026-03-02 08:00:00,001: INFO/MainProcess] Scheduler: …
    Mar 02 08:00:00 billing-1 celery[812]: [2026-03-02 08:00:00,001: INFO/MainProcess] …   (-o short)
    2026-03-02T08:00:00-0600 billing-1 systemd[1]: Started celery-beat.service - Celery beat.
    2026-03-02T08:00:05-0600 billing-1 systemd[1]: celery-beat.service: Main process exited, code=killed, status=9/KILL
    2026-03-02T08:05:01-0600 old-cron CRON[2231]: (billing) CMD (celery -A billing call billing.tasks.send)

``-o short`` has no year and no offset: the year comes from the last full
timestamp seen (or ``--since``, or this year) and the zone from ``--log-tz``.
The process is named ``HOST IDENT[PID]``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from .records import Context, Envelope, Event

__all__ = ["envelope", "parse_system"]

_ISO = re.compile(r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)) (?P<host>\S++) "
                  r"(?P<ident>[^\s\[:]+)(?:\[(?P<pid>\d{1,10})\])?: ?(?P<msg>.*)$")
_SHORT = re.compile(r"^(?P<mon>[A-Z][a-z]{2}) +(?P<day>\d{1,2}) (?P<time>\d\d:\d\d:\d\d(?:\.\d+)?) (?P<host>\S++) "
                    r"(?P<ident>[^\s\[:]+)(?:\[(?P<pid>\d{1,10})\])?: ?(?P<msg>.*)$")
_MONTHS = {m: i + 1 for i, m in enumerate(["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov",
                                           "Dec"])}
_UNIT = re.compile(r"^(?P<verb>Started|Starting|Stopping|Stopped|Restarting) (?P<unit>[^\s]+?)(?:\.\.\.| - |\.$|$)")
# "celery-beat.service: Main process exited, code=killed, status=9/KILL" and the lines around it: the unit name
# is a possessive run up to the first ":" (no backtracking), the rest is checked by prefix
_UNIT_SAYS = re.compile(r"^(?P<unit>[^\s:]++): (?P<what>.*)$")
_EXITED = re.compile(r"^Main process exited, code=(?P<code>\w++), status=(?P<status>[^\s,]++)")
_CRON = re.compile(r"^\((?P<user>[^)]++)\) CMD \((?P<command>.*)\)\s*+$")


def _process(host: str, ident: str, pid: str | None) -> str:
    return f"{host} {ident}[{pid}]" if pid else f"{host} {ident}"


def envelope(text: str, file: str, *, year: int, log_tz: object) -> Envelope | None:
    """The envelope of a journalctl line, or None. ``year`` and ``log_tz`` complete ``-o short`` stamps."""
    if m := _ISO.match(text):
        try:
            stamp = datetime.fromisoformat(m["ts"].replace(",", "."))
        except ValueError:
            return None
        return Envelope(fmt="journal", at=stamp.astimezone(UTC), offset=stamp.utcoffset(), source=m["ident"],
                        process=_process(m["host"], m["ident"], m["pid"]), host=m["host"],
                        pid=int(m["pid"]) if m["pid"] else None, message=m["msg"])
    if (m := _SHORT.match(text)) and m["mon"] in _MONTHS:
        hh, mm, ss = m["time"].split(":")
        try:
            local = datetime(year, _MONTHS[m["mon"]], int(m["day"]), int(hh), int(mm), int(float(ss)),
                             tzinfo=log_tz)  # type: ignore[arg-type]
        except ValueError:
            return None
        return Envelope(fmt="journal", at=local.astimezone(UTC), offset=None, source=m["ident"],
                        process=_process(m["host"], m["ident"], m["pid"]), host=m["host"],
                        pid=int(m["pid"]) if m["pid"] else None, message=m["msg"])
    return None


def parse_system(ctx: Context) -> list[Event] | None:
    """Events from systemd unit lines and cron ``CMD`` lines; None when the line is neither."""
    env = ctx.envelope
    if env.source in ("systemd", "init") and (m := _UNIT.match(env.message)):
        kind = "boot" if m["verb"] == "Started" else "restart"
        return [ctx.event(kind, process=f"{env.host} {m['unit'].removesuffix('.service')}",
                          detail={"unit": m["unit"], "verb": m["verb"]})]
    if env.source in ("systemd", "init") and (m := _UNIT_SAYS.match(env.message)) \
            and m["unit"].endswith((".service", ".scope")):
        process = f"{env.host} {m['unit'].removesuffix('.service')}"
        what = m["what"]
        if e := _EXITED.match(what):  # killed (OOM killer, kill -9) or exited: the unit's process ended
            return [ctx.event("exit", process=process, detail={"unit": m["unit"], "code": e["code"],
                                                               "status": e["status"]})]
        if what.startswith(("Scheduled restart job", "Failed with result")):
            return [ctx.event("restart", process=process, detail={"unit": m["unit"], "verb": what.split(",")[0]})]
        if what.startswith("Deactivated successfully"):
            return [ctx.event("exit", process=process, detail={"unit": m["unit"], "code": "exited", "status": "0"})]
        return [ctx.event("noise", detail={"unit": m["unit"]})]
    if env.source.upper() in ("CRON", "CROND") and (m := _CRON.match(env.message)):
        return [ctx.event("trigger", process=f"{env.host} cron", detail={"command": m["command"], "user": m["user"],
                                                                          "origin": "cron"})]
    if env.source.startswith("-- ") or env.message.startswith("-- "):
        return [ctx.event("noise")]
    return None


def offset_text(offset: timedelta) -> str:
    """``-6 h`` → ``-06:00``."""
    minutes = int(offset.total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
