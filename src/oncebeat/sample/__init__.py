"""Sample data and the end-to-end demo: the reminder app run on simulated time, for trying oncebeat out.

Above the reminder app (it imports ``reminders``; ``reminders`` and the engine never import it); the
simulator and the CLI use it through the names below.

- :func:`load_book` — the invoice book of a run (generated and seeded, or read from the import CSVs);
  :func:`generate_book`, :func:`chinook_book` build sample books, :func:`write_invoices_csv` and
  :func:`write_payments_csv` write them in the import formats (``python -m oncebeat.sample.book``).
- :func:`run_demo` — ``oncebeat demo``: a real clock, workers and SMTP server on a
  :class:`~oncebeat.timebase.SimulatedClock`; returns a :class:`DemoResult` (duplicates and lost
  reminders judged from the Maildir and from first principles).
- :func:`payment_instant`, :func:`expected_reminders`, :func:`count_duplicates` — the replay rules the
  demo and the simulator share.
- :func:`prepare_workdir` — the folders demo and simulate recreate, refusing to delete anything oncebeat
  did not make.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .book import (
        CHINOOK_LEAD_DAYS,
        CHINOOK_NET_DAYS,
        Book,
        chinook_book,
        generate_book,
        load_book,
        write_invoices_csv,
        write_payments_csv,
    )
    from .demo import DEFAULT_DEMO_START, DemoResult, count_duplicates, expected_reminders, payment_instant, run_demo
    from .workdir import MARKER, prepare_workdir

# Each name is loaded from its module on first use (PEP 562), so that `python -m oncebeat.sample.book` runs the
# module once, as __main__, instead of after the package has already imported it (runpy's RuntimeWarning).
_HOMES = {
    **dict.fromkeys(("Book", "generate_book", "chinook_book", "load_book", "write_invoices_csv",
                     "write_payments_csv", "CHINOOK_NET_DAYS", "CHINOOK_LEAD_DAYS"), "book"),
    **dict.fromkeys(("DemoResult", "run_demo", "payment_instant", "expected_reminders", "count_duplicates",
                     "DEFAULT_DEMO_START"), "demo"),
    **dict.fromkeys(("prepare_workdir", "MARKER"), "workdir"),
}

__all__ = [
    "Book", "generate_book", "chinook_book", "load_book", "write_invoices_csv", "write_payments_csv",
    "CHINOOK_NET_DAYS", "CHINOOK_LEAD_DAYS",
    "DemoResult", "run_demo", "payment_instant", "expected_reminders", "count_duplicates", "DEFAULT_DEMO_START",
    "prepare_workdir", "MARKER",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
