"""Where imported invoices and payments come from: CSV files read as a stream of checked rows.

- :mod:`.table`: the CSV file (encoding, delimiter, header, ``--map``), read one row at a time;
- :mod:`.values`: the rules of single values (dates, amounts, emails, zones, locales);
- :mod:`.invoices` and :mod:`.payments`: the per-row checks, the rules across rows, the in-memory readers;
- :mod:`.problems`: :class:`~.problems.RowProblem` and the files that report problems (rejects, errors).

The Stripe export and webhooks are in :mod:`oncebeat.reminders.stripe`; the streaming import into the
database, in one transaction, in :mod:`oncebeat.reminders.bulk`. :mod:`oncebeat.reminders.importing` keeps
the public names of all of these in one place.
"""
