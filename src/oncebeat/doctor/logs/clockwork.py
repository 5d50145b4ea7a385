"""Clockwork's lines (the ``clock`` process of a Ruby app).

::

    Starting clock for 2 events: [ SendInvoiceOverdueRemindersJob nightly.cleanup ]
    Triggering 'SendInvoiceOverdueRemindersJob'
    Finished 'SendInvoiceOverdueRemindersJob' duration_ms=4 error=nil      (Clockwork 3)
    Got TERM signal
    Gracefully shutting down

``Triggering`` is a trigger of the named job (the name is Clockwork's, often
the job class; the enqueue line that follows on the same process links the two);
``Starting clock`` is a boot of the clock.
"""

from __future__ import annotations

import re

from .records import Context, Event

__all__ = ["parse"]

# Every pattern here and in the other parsers runs in time linear in the line: anchored, each variable part a
# class that cannot overlap what follows it (the names run to the first "]", split afterwards), so a failed
# match never retries a run of characters (the old `\[\s*(.*?)\s*\]` took 35 s on 3,000 spaces).
_TRIGGER = re.compile(r"^Triggering '(?P<name>[^']+)'")
_FINISHED = re.compile(r"^Finished '(?P<name>[^']+)' duration_ms=(?P<ms>\d{1,12}) error=(?P<error>.*)$")
_STOP = re.compile(r"^(?:Got (?P<signal>[A-Z]{3,6}) signal|Gracefully shutting down)")
_START = re.compile(r"^Starting clock for (?P<n>\d+) events?: \[(?P<names>[^\]]*)\]")


def parse(ctx: Context, message: str) -> list[Event] | None:
    """Events from a Clockwork message, or None when it is not one."""
    if m := _TRIGGER.match(message):
        return [ctx.event("trigger", job=m["name"], detail={"alias": m["name"], "origin": "clockwork"})]
    if m := _FINISHED.match(message):  # Clockwork 3: the block ran; error= is what it raised (nil: nothing)
        error = None if m["error"] == "nil" else m["error"]
        return [ctx.event("noise", detail={"what": "clockwork finished", "alias": m["name"], "error": error})]
    if m := _STOP.match(message):  # the clock was told to stop (a deploy, a restart): it fires again when it starts
        return [ctx.event("restart", detail={"what": "clockwork", "signal": m["signal"]})]
    if m := _START.match(message):
        return [ctx.event("boot", detail={"what": "clockwork", "events": m["names"].split()})]
    return None
