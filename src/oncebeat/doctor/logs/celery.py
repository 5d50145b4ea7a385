"""Celery's lines: beat (the clock) and workers, with task-logger lines.

::

    [2026-03-02 08:00:00,001: INFO/MainProcess] beat: Starting...
    [2026-03-02 08:00:00,004: INFO/MainProcess] Scheduler: Sending due task send-overdue-reminders (billing.tasks.send_overdue_reminders)
    [2026-03-02 08:00:00,015: INFO/MainProcess] Task billing.tasks.send_overdue_reminders[6f0c…] received
    [2026-03-02 08:00:01,230: INFO/ForkPoolWorker-1] billing.tasks.send_overdue_reminders[6f0c…]: Delivered mail <…@example.test> to ap@example.test
    [2026-03-02 08:00:01,502: INFO/ForkPoolWorker-1] Task billing.tasks.send_overdue_reminders[6f0c…] retry: Retry in 60s: OperationalError('server closed the connection unexpectedly')
    [2026-03-02 08:00:04,700: INFO/ForkPoolWorker-1] Task billing.tasks.send_overdue_reminders[6f0c…] succeeded in 4.68s: None
    [2026-03-02 08:00:04,701: ERROR/MainProcess] Task billing.tasks.send_overdue_reminders[6f0c…] raised unexpected: ValueError('…')
    [2026-03-02 08:00:02,100: ERROR/MainProcess] Process 'ForkPoolWorker-1' pid:4321 exited with 'signal 9 (SIGKILL)'
    [2026-03-02 08:00:00,900: INFO/MainProcess] celery@billing-1 ready.
    [2026-03-02 08:03:00,100: WARNING/MainProcess] worker: Warm shutdown (MainProcess)

Celery stamps are the host's local time without an offset: inside journalctl
``-o short-iso`` the envelope's offset is used, otherwise ``--log-tz``. A task
``received`` is counted as the start of an attempt (Celery logs no other start).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timezone

from .records import Context, Event

__all__ = ["parse"]

_PREFIX = re.compile(r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:,(?P<ms>\d{3}))?: (?P<level>\w+)/(?P<proc>[^\]]+)\] "
                     r"(?P<msg>.*)$")
_T = r"(?P<task>[\w.:]+)\[(?P<id>[\w-]+)\]"
_SENDING = re.compile(r"^Scheduler: Sending due task (?P<entry>\S+) \((?P<task>[^)]+)\)")
_RECEIVED = re.compile(rf"^Task {_T} received")
_SUCCEEDED = re.compile(rf"^Task {_T} succeeded in (?P<secs>[\d.]+)s")
_RETRY = re.compile(rf"^Task {_T} retry: Retry in (?P<wait>\S+?)s?: (?P<error>.*)$")
_RAISED = re.compile(rf"^Task {_T} raised unexpected: (?P<error>.*)$")
_LOST = re.compile(r"^Process '(?P<child>[^']+)' pid:(?P<pid>\d+) exited with '(?P<how>[^']*)'")
_HANDLER = re.compile(r"^Task handler raised error: (?P<error>.*)$")
_TASKLOG = re.compile(rf"^{_T}: (?P<msg>.*)$")
_MAIL = re.compile(r"^(?:Delivered mail (?P<mid>\S+)|Sent mail to (?P<to>\S+))")
_SHUTDOWN = re.compile(r"^(?:worker: )?(?P<how>Warm|Cold) shutdown\b")
_READY = re.compile(r"^(?:celery@\S+ ready\.|beat: Starting\.\.\.)")


def parse(ctx: Context, message: str) -> list[Event] | None:
    """Events from a Celery log message, or None when it is not one."""
    m = _PREFIX.match(message)
    if m is None:
        if ctx.envelope.at is not None and (s := _SHUTDOWN.match(message)):
            # Celery 5 prints "worker: Warm shutdown (MainProcess)" bare, to the terminal (a journal, a dyno)
            return [ctx.event("restart", detail={"what": f"{s['how'].lower()} shutdown"})]
        return None
    at = ctx.envelope.at
    local = datetime.fromisoformat(m["ts"]).replace(microsecond=int(m["ms"] or 0) * 1000)
    if at is None or ctx.envelope.fmt == "journal":
        # journalctl stamps whole seconds; Celery's own stamp has milliseconds (and the envelope's offset)
        zone = timezone(ctx.envelope.offset) if ctx.envelope.offset is not None else ctx.log_tz
        at = local.replace(tzinfo=zone).astimezone(UTC)
    proc = m["proc"]
    thread = f"{ctx.envelope.process}/{proc}" if proc != "MainProcess" else None
    msg = m["msg"]
    detail_local = {"local": local}
    if s := _SENDING.match(msg):
        return [ctx.event("trigger", at, job=s["task"], detail={**detail_local, "alias": s["entry"], "origin": "beat"})]
    if s := _RECEIVED.match(msg):
        return [ctx.event("start", at, job=s["task"], job_id=s["id"], detail={"via": "celery"})]
    if s := _SUCCEEDED.match(msg):
        return [ctx.event("done", at, job=s["task"], job_id=s["id"], thread=thread, detail={"via": "celery"})]
    if s := _RETRY.match(msg):
        return [ctx.event("fail", at, job=s["task"], job_id=s["id"], thread=thread,
                          detail={"via": "celery", "error": s["error"]}),
                ctx.event("retry", at, job=s["task"], job_id=s["id"], thread=thread,
                          detail={"via": "celery", "error": s["error"], "wait": s["wait"]})]
    if s := _RAISED.match(msg):
        return [ctx.event("fail", at, job=s["task"], job_id=s["id"], thread=thread,
                          detail={"via": "celery", "error": s["error"]})]
    if s := _LOST.match(msg):
        return [ctx.event("exit", at, thread=f"{ctx.envelope.process}/{s['child']}",
                          detail={"status": s["how"], "child": s["child"]})]
    if s := _HANDLER.match(msg):
        return [ctx.event("error", at, detail={"via": "celery", "error": s["error"]})]
    if s := _TASKLOG.match(msg):
        if mail := _MAIL.match(s["msg"]):
            return [ctx.event("mail", at, job=s["task"], job_id=s["id"], thread=thread,
                              detail={"message_id": mail["mid"], "to": mail["to"]})]
        if (own := ctx.mail.match(s["msg"])) is not None:
            return [ctx.event("mail", at, job=s["task"], job_id=s["id"], thread=thread, detail=own)]
        return [ctx.event("noise", at, detail={"what": "celery task log"})]
    if _READY.match(msg):
        return [ctx.event("boot", at, detail={**detail_local, "what": "beat" if msg.startswith("beat") else "worker"})]
    if s := _SHUTDOWN.match(msg):  # the worker (or beat) stops: its pool children go with it
        return [ctx.event("restart", at, detail={"what": f"{s['how'].lower()} shutdown"})]
    if mail := _MAIL.match(msg):
        return [ctx.event("mail", at, thread=thread, detail={"message_id": mail["mid"], "to": mail["to"]})]
    if (own := ctx.mail.match(msg)) is not None:
        return [ctx.event("mail", at, thread=thread, detail=own)]
    return [ctx.event("noise", at, detail={"what": "celery"})]
