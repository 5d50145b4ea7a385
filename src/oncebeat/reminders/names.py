"""Customers' names folded for the dashboard's search by name (reminders migration 0024).

The search compares names without case and accents ("muller" and "MULLER" find "Müller"; "mueller" does not:
the folding is Unicode's, NFKD without combining marks after casefold, not a transliteration). Neither backend
folds accents without an extension, so the folded name is computed here, by :func:`fold_name`, and stored in
``customers.name_folded`` by every path that writes a name: ``upsert_customer`` (imports, the API, Stripe,
synced sources, through :func:`oncebeat.reminders.records.customer_params`) and the what-if copy.

Invariants:

- ``name_folded`` is either ``fold_name(name)`` or NULL, never a stale value: a trigger sets it NULL when
  ``name`` changes without it (a SQL update of its own, an older oncebeat), and the search folds NULL rows in
  Python (:func:`unfolded_matches`), so such a customer is still found.
- The rows left NULL (every customer of a book migrated to 0024, and each renamed one) are folded by
  :func:`backfill_folded_names`: ``oncebeat migrate`` runs it to the end in transactions of
  :data:`BACKFILL_BATCH` customers, and each scan folds at most :data:`SCAN_BACKFILL` of them, so a big book
  is never blocked by one long migration.

Example::

    >>> fold_name("MÜLLER")
    'muller'
    >>> like_pattern("50%_off")
    '%50\\\\%\\\\_off%'
"""

from __future__ import annotations

import unicodedata
from typing import Any

from ..store import Store

__all__ = ["BACKFILL_BATCH", "SCAN_BACKFILL", "backfill_folded_names", "fold_name", "fold_text", "like_pattern",
           "matching_customers"]

#: Customers folded per transaction by :func:`backfill_folded_names`.
BACKFILL_BATCH = 5_000
#: Customers a scan folds at most (the rest wait for the next scan or ``oncebeat migrate``).
SCAN_BACKFILL = 50_000
#: Unfolded names read per statement by the search (bounded memory).
_UNFOLDED_PAGE = 5_000


def fold_text(text: str) -> str:
    """``text`` without case and accents (casefold, NFKD, combining marks dropped): ``"Müller" -> "muller"``."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def fold_name(name: str) -> str:
    """The stored and searched form of a customer's name: :func:`fold_text`, with a shortcut for ASCII text
    (most names): NFKD leaves it as it is and its casefold is its lower case, so the result is the same at a
    fraction of the cost."""
    return name.lower() if name.isascii() else fold_text(name)


def like_pattern(needle: str) -> str:
    r"""A SQL ``LIKE … ESCAPE '\'`` pattern matching text that holds ``needle`` (already folded): ``%``, ``_``
    and ``\`` in it stand for themselves."""
    escaped = needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def matching_customers(store: Store, needle: str, *, limit: int) -> list[int]:
    """Ids of at most ``limit`` customers whose folded name holds ``needle`` (folded by :func:`fold_text`), in no
    particular order.

    The stored folds are read through ``customers_named_like`` (on PostgreSQL a trigram index when pg_trgm could be
    installed, else a scan that stops at ``limit``); the customers whose fold is not stored yet are folded here,
    :data:`_UNFOLDED_PAGE` at a time, through the partial index ``customers_unfolded`` (none once backfilled).
    """
    if limit < 1 or not needle:
        return []
    ids = [int(r["id"]) for r in store.read("customers_named_like", pattern=like_pattern(needle), limit=limit)]
    after = 0
    while len(ids) < limit:
        page = store.read("customers_unfolded_after", after_id=after, limit=_UNFOLDED_PAGE)
        if not page:
            break
        ids += [int(r["id"]) for r in page if needle in fold_name(r["name"])][:limit - len(ids)]
        after = int(page[-1]["id"])
    return ids


def _fold_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"id": r["id"], "name": r["name"], "name_folded": fold_name(r["name"])} for r in rows]


def backfill_folded_names(store: Store, *, at_most: int | None = None, batch: int = BACKFILL_BATCH) -> int:
    """Store the folded name of customers that have none, ``batch`` per transaction, until none is left or
    ``at_most`` were folded (None: no bound). A customer renamed meanwhile keeps NULL (the write names the
    name it folded), to be folded by a later call. Returns the number of customers folded."""
    done = 0
    while at_most is None or done < at_most:
        size = batch if at_most is None else min(batch, at_most - done)
        with store.transaction() as tx:
            rows = tx.run("customers_unfolded_after", after_id=0, limit=size)
            if rows:
                tx.many("store_folded_name", _fold_rows(rows))
        done += len(rows)
        if len(rows) < size:
            break
    return done

