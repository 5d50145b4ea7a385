"""Overdue-invoice reminders (dunning), built only on oncebeat's public engine API.

Modules: ``model`` (values), ``policy`` (oncebeat.toml), ``importing`` (CSV),
``render`` (Jinja2 + Babel), ``tasks`` (the scan and send tasks), ``service`` (database
operations and reports). Sample books and the end-to-end demo live above this app, in
:mod:`oncebeat.sample`.

The app owns its SQL: ``reminders/sql/<backend>/`` holds its queries and its own migration line
(``customers``, ``invoices``, ``reminders``, ``stripe_events``), registered here on import as :data:`SQL`,
so ``migrate`` creates those tables only where the reminder app is installed. Its part of the doctor
(``doctor``: the ``undelivered`` check, lost reminders, ``--invoice``, ``explain invoice``) is registered
here too, so a library user's app that never imports this package gets the engine's doctor alone.
"""

from ..retention import protect_effects
from ..store.sqlfiles import SqlLine, register_line

#: The reminder app's SQL line; ``legacy`` maps oncebeat 0.1's single numbering to this line's versions.
SQL = SqlLine("reminders", __name__, legacy=((2, 1), (6, 2), (7, 3), (8, 4), (9, 5)))
register_line(SQL)
# A delivered reminder's effect key is what stops a re-run (an operator's rerun, a restored backup of the queue)
# from sending it again, and reminders are never pruned: its key is kept for as long as the reminder row exists.
protect_effects("reminder:", "the reminder app: kept while their reminders exist, so a delivered reminder "
                "is never sent again")

from . import doctor as _doctor  # noqa: E402 - after the SQL line: the doctor's part reads it

_doctor.register()
