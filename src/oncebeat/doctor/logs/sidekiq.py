"""Sidekiq's lines (6 and 7, and the older 5 form).

::

    2026-03-02T14:00:00.512Z pid=4 tid=gr3 class=SendInvoiceOverdueRemindersJob jid=5b1d… INFO: start
    2026-03-02T14:00:05.901Z pid=4 tid=gr3 class=SendInvoiceOverdueRemindersJob jid=5b1d… elapsed=5.389 INFO: done
    2026-03-02T14:00:01.420Z pid=4 tid=gr3 class=SendInvoiceOverdueRemindersJob jid=5b1d… elapsed=0.908 INFO: fail
    2026-03-02T14:00:01.421Z pid=4 tid=gr3 WARN: {"context":"Job raised exception","job":{"class":…,"jid":"5b1d…","retry_count":0,"error_class":"PG::ConnectionBad",…}}
    2026-03-02T14:00:01.421Z pid=4 tid=gr3 WARN: PG::ConnectionBad: server closed the connection unexpectedly
    pid=4 tid=gr3 class=SendInvoiceOverdueRemindersJob jid=5b1d… INFO: start    (Sidekiq 6 with DYNO set: no stamp)
    2026-03-02T14:00:00.512Z 4 TID-gr3 SendInvoiceOverdueRemindersJob JID-5b1d… INFO: start      (Sidekiq 5)

A job run through Active Job shows as ``class=…JobWrapper wrapped=Job`` (6) or
``class=Job`` (7); the wrapped class is the job. Sidekiq's stamp is UTC.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

from .records import Context, Event

__all__ = ["parse"]

# Linear in the line: the tid is a possessive run (`\S++`: backtracking into it cannot find the space that must
# follow), the fields a lazy run that stops at the first " LEVEL: ", a field name is matched only where a word
# starts (`(?<!\w)`, so a run of word characters is scanned once, not once per position), and the exception
# class is checked by hand (see :func:`_is_exception`).
_LEVEL = r"(?P<level>DEBUG|INFO|WARN|ERROR|FATAL)"
_NEW = re.compile(r"^(?:(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d++)?Z) )?pid=(?P<pid>\d++) "
                  rf"tid=(?P<tid>\S++)(?P<fields>.*?) {_LEVEL}: (?P<msg>.*)$")
_OLD = re.compile(r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d++)?Z) (?P<pid>\d++) TID-(?P<tid>\S++)"
                  rf"(?: (?P<cls>[\w:]++) JID-(?P<jid>\w++))? {_LEVEL}: (?P<msg>.*)$")
_FIELD = re.compile(r"(?<!\w)(\w++)=(\S++)")
_EXC_CLASS = re.compile(r"[A-Z][\w:]*+")
_EXC_WORDS = ("Error", "Exception", "Bad", "Timeout", "Invalid", "Shutdown", "NotFound", "Refused", "Failure")
_WRAPPER = "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper"


def parse(ctx: Context, message: str) -> list[Event] | None:
    """Events from a Sidekiq message, or None when it is not one."""
    m = _NEW.match(message)
    fields: dict[str, str] = {}
    if m is not None:
        fields = dict(_FIELD.findall(m["fields"]))
    else:
        m = _OLD.match(message)
        if m is None:
            return None
        if m["cls"]:
            fields = {"class": m["cls"], "jid": m["jid"]}
    if ctx.envelope.at is not None and not (m["ts"] and ctx.envelope.fmt == "journal"):
        at = ctx.envelope.at
    elif m["ts"]:  # Sidekiq's own stamp (UTC, milliseconds): inside journalctl's whole seconds, the finer one
        at = datetime.fromisoformat(m["ts"]).astimezone(UTC)
    else:  # Sidekiq 6 with DYNO set writes no stamp: only an envelope (Heroku's) can date the line
        raise ValueError("a Sidekiq line without a timestamp needs an envelope")
    job = fields.get("wrapped") or fields.get("class")
    if job == _WRAPPER:
        job = None
    jid = fields.get("jid")
    tid = f"{ctx.envelope.process}/{m['tid']}"
    msg = m["msg"].strip()
    common = {"job": job, "job_id": jid, "thread": tid}
    word = msg.split(":", 1)[0]  # Sidekiq 5 writes "done: 1.5 sec"
    if jid and word == "start":
        return [ctx.event("start", at, **common, detail={"via": "sidekiq"})]
    if jid and word == "done":
        return [ctx.event("done", at, **common, detail={"via": "sidekiq", "elapsed": fields.get("elapsed")})]
    if jid and word == "fail":
        return [ctx.event("fail", at, **common, detail={"via": "sidekiq", "elapsed": fields.get("elapsed")})]
    if jid and (mail := ctx.mail.match(msg)) is not None:  # the job's own logger: "… sent to a@b.example (250 …)"
        return [ctx.event("mail", at, **common, detail={"via": "sidekiq", **mail})]
    if msg.startswith("{"):
        return [_json_event(ctx, at, tid, msg)]
    if msg.startswith(("Booting Sidekiq", "Starting processing")):
        return [ctx.event("boot", at, detail={"what": "sidekiq"})]
    if msg.startswith(("Shutting down", "Terminating", "Bye!")):
        return [ctx.event("restart", at, detail={"what": msg})]
    if m["level"] in ("WARN", "ERROR") and _is_exception(msg):
        return [ctx.event("error", at, thread=tid, detail={"via": "sidekiq", "error": msg})]
    return [ctx.event("noise", at, detail={"what": "sidekiq"})]


def _is_exception(msg: str) -> bool:
    """Whether ``msg`` is ``ExceptionClass`` or ``ExceptionClass: text``, the class a ``[A-Z][\\w:]*`` name holding
    one of :data:`_EXC_WORDS` after its first letter (``PG::ConnectionBad``, ``Net::ReadTimeout``).

    The same language as ``^[A-Z][\\w:]*(?:Error|…)[\\w:]*(?:: .*)?$`` without its backtracking, which was
    quadratic on a name such as ``AErrorErrorError…`` followed by a space.
    """
    m = _EXC_CLASS.match(msg)
    if m is None:
        return False
    cls, rest = m[0], msg[m.end():]
    if rest:  # the class must end the message or be followed by ": "; its run then ends with that ":"
        if not (rest.startswith(" ") and cls.endswith(":")):
            return False
        cls = cls[:-1]
    return any(w in cls[1:] for w in _EXC_WORDS)


def _json_event(ctx: Context, at: datetime, tid: str, text: str) -> Event:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: JSON nested deeper than the interpreter's stack
        return ctx.event("noise", at, detail={"what": "sidekiq"})
    job = data.get("job") if isinstance(data, dict) else None
    if not isinstance(job, dict):
        return ctx.event("noise", at, detail={"what": "sidekiq"})
    cls = job.get("wrapped") or job.get("class")
    error = " ".join(str(job[k]) for k in ("error_class", "error_message") if job.get(k)) or None
    if isinstance(cls, dict):  # Sidekiq 6 puts the Active Job payload here
        cls = cls.get("job_class")
    return ctx.event("retry", at, job=cls if cls != _WRAPPER else None, job_id=job.get("jid"), thread=tid,
                     detail={"via": "sidekiq", "error": error, "retry_count": job.get("retry_count"),
                             "context": data.get("context")})
