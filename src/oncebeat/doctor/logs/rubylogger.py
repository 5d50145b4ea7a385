"""Ruby's default ``Logger`` prefix, as Clockwork and many Ruby processes write it.

::

    I, [2026-03-02T14:00:00.012345 #4]  INFO -- : Triggering 'SendInvoiceOverdueRemindersJob'

The stamp is the process's **local** wall-clock time with no offset. Next to
Heroku's UTC stamp it tells the process's ``TZ`` (the offset between the two),
which is the evidence the time-zone check uses. :func:`strip` returns the
message and that local time.
"""

from __future__ import annotations

import re
from datetime import datetime

__all__ = ["strip"]

_PREFIX = re.compile(r"^[DIWEFA], \[(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?) #(?P<pid>\d{1,10})\]\s++\w++ -- "
                     r"[^:]*+: (?P<msg>.*)$")


def strip(message: str) -> tuple[str, datetime | None, int | None]:
    """``(message without the prefix, local naive time, pid)``; the message unchanged and Nones without one."""
    m = _PREFIX.match(message)
    if m is None:
        return message, None, None
    try:
        local = datetime.fromisoformat(m["ts"])
    except ValueError:
        return message, None, None
    return m["msg"], local, int(m["pid"])
