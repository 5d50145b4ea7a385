"""Rails lines: Active Job (enqueue, perform, error, retry) and Action Mailer deliveries.

::

    [ActiveJob] Enqueued SendInvoiceOverdueRemindersJob (Job ID: 1c0e…) to Sidekiq(default)
    [ActiveJob] [SendInvoiceOverdueRemindersJob] [1c0e…] Performing SendInvoiceOverdueRemindersJob (Job ID: 1c0e…) from Sidekiq(default) enqueued at 2026-03-02T14:00:00Z
    [ActiveJob] [SendInvoiceOverdueRemindersJob] [1c0e…] Delivered mail 6603f2@example.test (41.2ms)
    [ActiveJob] [SendInvoiceOverdueRemindersJob] [1c0e…] Error performing SendInvoiceOverdueRemindersJob (Job ID: 1c0e…) from Sidekiq(default) in 912.4ms: Net::ReadTimeout (Net::ReadTimeout)
    [ActiveJob] [SendInvoiceOverdueRemindersJob] [1c0e…] Performed SendInvoiceOverdueRemindersJob (Job ID: 1c0e…) from Sidekiq(default) in 5120.3ms
    Retrying SendInvoiceOverdueRemindersJob (Job ID: 1c0e…) after 1 attempts in 3 seconds, due to a Net::ReadTimeout (Net::ReadTimeout).

The tags ``[ActiveJob] [Class] [Job ID]`` that Rails adds inside a job tie a
delivery to the job that made it. ``Sent mail to ADDRESS`` (older Rails) is a
delivery too.
"""

from __future__ import annotations

import re
from itertools import islice

from .records import Context, Event

__all__ = ["parse"]

# Possessive: the tags never give back (what follows them always matches), so a run of thousands of tags keeps
# no backtracking state; only the first three are read.
_TAGS = re.compile(r"^((?:\[[^\]]*+\] ?+)*+)(.*)$")
_TAG = re.compile(r"\[([^\]]*+)\]")
_ID = r"\(Job ID: (?P<id>[\w-]+)\)"
_ENQUEUED = re.compile(rf"^Enqueued (?P<job>[\w:]+) {_ID} to (?P<adapter>\w+)\((?P<queue>[^)]*)\)(?: at (?P<at>\S+))?")
_PERFORMING = re.compile(rf"^Performing (?P<job>[\w:]+) {_ID} from (?P<adapter>\w+)\((?P<queue>[^)]*)\)")
_PERFORMED = re.compile(rf"^Performed (?P<job>[\w:]+) {_ID} from \S+ in (?P<ms>[\d.]+) ?ms")
_ERROR = re.compile(rf"^Error performing (?P<job>[\w:]+) {_ID} from \S+ in (?P<ms>[\d.]+) ?ms: (?P<error>.*)$")
_RETRYING = re.compile(rf"^Retrying (?P<job>[\w:]+) (?:{_ID} )?(?:after \d+ attempts )?in (?P<wait>[\d.]+) seconds?, "
                       r"due to a (?P<error>.*?)\.?$")
_STOPPED = re.compile(rf"^Stopped retrying (?P<job>[\w:]+) (?:{_ID} )?due to a (?P<error>.*?), which reoccurred")
_DELIVERED = re.compile(r"^Delivered mail (?P<mid>\S+)(?: \((?P<ms>[\d.]+) ?ms\))?")
_SENT = re.compile(r"^Sent mail to (?P<to>\S+)")


def _tags(message: str) -> tuple[list[str], str]:
    """``(the first three tags, the message after all of them)``."""
    m = _TAGS.match(message)
    assert m is not None  # the pattern matches any text
    return [t[1] for t in islice(_TAG.finditer(m[1]), 3)], m[2]


def parse(ctx: Context, message: str) -> list[Event] | None:
    """Events from an Active Job or Action Mailer message, or None when it is not one."""
    tags, body = _tags(message)
    tag_job = tag_id = None
    if len(tags) >= 3 and tags[0] == "ActiveJob":
        tag_job, tag_id = tags[1], tags[2]
    if m := _ENQUEUED.match(body):
        return [ctx.event("enqueue", job=m["job"], job_id=m["id"], detail={"queue": m["queue"], "adapter": m["adapter"],
                                                                           "scheduled_at": m["at"]})]
    if m := _PERFORMING.match(body):
        return [ctx.event("start", job=m["job"], job_id=m["id"], detail={"via": "activejob"})]
    if m := _PERFORMED.match(body):
        return [ctx.event("done", job=m["job"], job_id=m["id"], detail={"via": "activejob", "ms": float(m["ms"])})]
    if m := _ERROR.match(body):
        return [ctx.event("fail", job=m["job"], job_id=m["id"], detail={"via": "activejob", "error": m["error"]})]
    if m := _RETRYING.match(body):
        return [ctx.event("retry", job=m["job"], job_id=m["id"] or tag_id,
                          detail={"via": "activejob", "error": m["error"], "wait": float(m["wait"])})]
    if m := _STOPPED.match(body):
        return [ctx.event("error", job=m["job"], job_id=m["id"] or tag_id,
                          detail={"via": "activejob", "error": m["error"], "final": True})]
    if m := _DELIVERED.match(body):
        return [ctx.event("mail", job=tag_job, job_id=tag_id, detail={"message_id": m["mid"]})]
    if m := _SENT.match(body):
        return [ctx.event("mail", job=tag_job, job_id=tag_id, detail={"to": m["to"]})]
    if tag_id is not None and (mail := ctx.mail.match(body)) is not None:
        return [ctx.event("mail", job=tag_job, job_id=tag_id, detail=mail)]
    return None
