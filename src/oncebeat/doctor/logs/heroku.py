"""Heroku's log lines: the ``TIMESTAMP source[dyno]: message`` envelope, log-drain framing, and Heroku's own lines.

Accepted envelopes (``heroku logs``, ``heroku logs --tail``, a syslog log drain)::

    2026-03-02T14:00:00.123456+00:00 app[clock.1]: Triggering 'SendInvoiceOverdueRemindersJob'
    2026-03-02T14:00:00+00:00 heroku[clock.1]: State changed from up to starting
    83 <190>1 2026-03-02T14:00:00.123456+00:00 host app worker.1 - Delivered mail 5f3e@example.test (12.1ms)

Heroku's own messages (``heroku[DYNO]``) become restart/boot/exit events of that
dyno; ``app[api]`` release, deploy and scale lines become deploy/scale events;
``heroku[router]`` lines are noise. The dyno's type (``clock``, ``worker``,
``web``, ``scheduler``, ``run``, ``release``) is the part before the dot.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from .records import Context, Envelope, Event

__all__ = ["envelope", "parse_system", "dyno_type"]

_TS = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)"
_LINE = re.compile(rf"^(?P<ts>{_TS}) (?P<src>[A-Za-z][\w-]*)\[(?P<dyno>[^\]\s]+)\]: ?(?P<msg>.*)$")
_DRAIN = re.compile(rf"^(?:\d+ )?<\d+>1 (?P<ts>{_TS}) (?P<host>\S+) (?P<src>app|heroku) (?P<dyno>\S+) - ?(?P<msg>.*)$")

_STATE = re.compile(r"^State changed from (?P<old>\w+) to (?P<new>\w+)")
_STOPPING = re.compile(r"^(Restarting|Cycling|Stopping all processes with SIGTERM|Stopping process with SIGKILL|"
                       r"Idling|Stopping remaining processes with SIGKILL)\b")
_STARTING = re.compile(r"^Starting process with command [`'\"](?P<command>.*?)[`'\"]?(?: by user (?P<user>\S+))?$")
_EXITED = re.compile(r"^Process exited with status (?P<status>-?\d{1,10})(?!\d)")  # int() of 4,300+ digits raises
_RCODE = re.compile(r"^Error (?P<code>R\d+) \((?P<text>[^)]*)\)")
_RELEASE = re.compile(r"^(?P<what>Release v\d+ created by|Deploy \w+ by|Rollback to v\d+ by) (?:user )?(?P<user>\S+)")
_SCALED = re.compile(r"^Scaled to (?P<formation>.+?)(?: by user (?P<user>\S+))?$")
# "clock@2:Standard-1X web@1": each word once, possessively, with its "@N" when it has one. The findall of
# `(\w+)@(\d+)` it replaces retried a long word without "@" from each of its positions (quadratic).
_FORMATION = re.compile(r"(\w++)(?:@(\d++))?")


def dyno_type(process: str) -> str:
    """``clock.1`` → ``clock``; ``scheduler.4821`` → ``scheduler``; any other name → itself."""
    return process.split(".", 1)[0]


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def envelope(text: str, file: str) -> Envelope | None:
    """The envelope of a Heroku or log-drain line, or None when ``text`` is neither."""
    m = _LINE.match(text) or _DRAIN.match(text)
    if m is None:
        return None
    try:
        at = _instant(m["ts"])
    except ValueError:
        return None
    fmt = "drain" if text[0] != m["ts"][0] or "<" in text[:8] else "heroku"
    return Envelope(fmt=fmt, at=at, offset=None, source=m["src"], process=m["dyno"], host=None, pid=None,
                    message=m["msg"])


def parse_system(ctx: Context) -> list[Event] | None:
    """Events from Heroku's own lines (``heroku[…]`` and ``app[api]``); None when the line is not one."""
    env = ctx.envelope
    msg = env.message
    if env.source == "heroku":
        if env.process == "router":
            return [ctx.event("noise", detail={"what": "router"})]
        if m := _STATE.match(msg):
            kind = "boot" if m["new"] == "up" else "restart"
            return [ctx.event(kind, detail={"state_from": m["old"], "state_to": m["new"]})]
        if m := _STOPPING.match(msg):
            return [ctx.event("restart", detail={"what": m[1]})]
        if m := _STARTING.match(msg):
            return [ctx.event("boot", detail={"command": m["command"], "user": m["user"]})]
        if m := _EXITED.match(msg):
            return [ctx.event("exit", detail={"status": int(m["status"])})]
        if m := _RCODE.match(msg):
            return [ctx.event("noise", detail={"what": m["code"], "text": m["text"]})]
        return [ctx.event("noise", detail={"what": "heroku"})]
    if env.source == "app" and env.process == "api":
        if m := _RELEASE.match(msg):
            return [ctx.event("deploy", detail={"what": m["what"], "user": m["user"]})]
        if m := _SCALED.match(msg):
            formation = {f[1]: int(f[2]) for f in _FORMATION.finditer(m["formation"]) if f[2] is not None}
            return [ctx.event("scale", detail={"formation": formation})]
        if m := _STARTING.match(msg):
            return [ctx.event("noise", detail={"what": "one-off", "command": m["command"]})]
        return [ctx.event("noise", detail={"what": "api"})]
    return None
