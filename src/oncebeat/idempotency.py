"""Idempotency keys: a retried write is applied once and answered as the first time (Stripe's semantics).

A client sends a key of its choosing with every write (``Idempotency-Key`` in the HTTP API). The key is
claimed, the write is made and its answer stored **in one transaction** (:func:`once`): a crash anywhere in
between rolls all three back, so a retry either finds nothing (and applies the write) or finds the stored
answer (and applies nothing). Rules:

1. same client, same key, same request (method, path, body digest): the stored answer is returned, nothing
   is written again;
2. same key, another request: :class:`~oncebeat.errors.IdempotencyKeyReused`, nothing is written;
3. a request that fails (bad input, unknown schedule) rolls back with its claim: nothing is stored and the key
   may be sent again with a corrected request;
4. two requests with one key at the same time: the database serialises them on the key's primary key
   (PostgreSQL makes the second claim wait for the first transaction; SQLite has one writer at a time), and
   the second gets rule 1 or 2;
5. keys are scoped per client (one API token name) and kept at least :data:`RETENTION`; older keys are pruned
   a few at a time after each write (:func:`prune`), after which a retry is a new request.

Example::

    def write(tx):
        service.upsert(customers, invoices, tx=tx)
        return 200, json.dumps({"invoices": len(invoices)})

    answer = once(store, client="billing", key="3f9a…", method="POST", path="/api/v1/invoices", body=raw,
                  now=clock.now(), write=write)
    answer.replayed  # True when this was a retry answered from the ledger
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from .errors import IdempotencyKeyReused
from .store import Store, Tx

__all__ = ["MAX_KEY_LENGTH", "PRUNE_BATCH", "RETENTION", "Answer", "fingerprint", "key_problem", "once", "prune",
           "stored"]

#: How long a key is remembered at least (Stripe keeps 24 hours); a retry within it is never applied twice.
RETENTION = timedelta(hours=24)
#: The longest key accepted (Stripe's limit); a UUID is 36 characters.
MAX_KEY_LENGTH = 255
#: Keys deleted at most per :func:`prune` call.
PRUNE_BATCH = 500


@dataclass(frozen=True, kw_only=True, slots=True)
class Answer:
    """The answer of a keyed write: HTTP-style ``status``, ``body`` (JSON text) and whether it was ``replayed``."""

    status: int
    body: str
    replayed: bool


def fingerprint(method: str, path: str, body: bytes) -> str:
    """The digest (SHA-256, hex) that tells one request from another under the same key."""
    h = hashlib.sha256()
    for part in (method.upper().encode(), path.encode(), body):
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.hexdigest()


def key_problem(key: str | None) -> str | None:
    """Why ``key`` cannot be an idempotency key (missing, too long, not printable ASCII), or None."""
    if not key:
        return ("every write needs an Idempotency-Key header: a unique value per request, e.g. a UUID; send the "
                "same key again only to retry the same request")
    if len(key) > MAX_KEY_LENGTH:
        return f"the Idempotency-Key is longer than {MAX_KEY_LENGTH} characters"
    if not key.isascii() or not key.isprintable():
        return "the Idempotency-Key must be printable ASCII (e.g. a UUID)"
    return None


def stored(store: Store, *, client: str, key: str, method: str, path: str, body: bytes) -> Answer | None:
    """The stored answer of (``client``, ``key``) when that request came before, else None: a fast path for a
    retry (it skips checking the body again). :func:`once` decides on its own; this read only saves work.

    Raises:
        IdempotencyKeyReused: the key came before with another request.
    """
    with store.transaction() as tx:
        prior = tx.one("idempotency_get", client=client, key=key)
    if prior is None:
        return None
    if prior["fingerprint"] != fingerprint(method, path, body):
        raise IdempotencyKeyReused(key, f"{prior['method']} {prior['path']}")
    return Answer(status=int(prior["status"]), body=str(prior["response"]), replayed=True)


def once(store: Store, *, client: str, key: str, method: str, path: str, body: bytes, now: datetime,
         write: Callable[[Tx], tuple[int, str]]) -> Answer:
    """Run ``write`` once per (``client``, ``key``): claim, write and store the answer in one transaction.

    Args:
        client: who sends the key (the API token's name); keys of different clients never meet.
        key: the client's idempotency key (check it with :func:`key_problem` first).
        method, path, body: the request, digested by :func:`fingerprint`.
        now: the claim's instant (UTC).
        write: makes the write in the given transaction and returns ``(status, JSON text)`` to store; an
            exception from it rolls everything back (nothing stored) and propagates.
    Returns:
        The new :class:`Answer`, or the stored one (``replayed``) when the same request came before.
    Raises:
        IdempotencyKeyReused: the key came before with another request (nothing written).
        StoreError: the database failed (nothing written).
    """
    digest = fingerprint(method, path, body)
    with store.transaction() as tx:
        claim = {"client": client, "key": key, "method": method, "path": path, "fingerprint": digest, "now": now}
        prior = None
        if tx.one("idempotency_claim", **claim) is None:
            prior = tx.one("idempotency_get", client=client, key=key)
            # None: an expired key pruned between the two statements; it is a new request now.
            if prior is None and tx.one("idempotency_claim", **claim) is None:
                prior = tx.one("idempotency_get", client=client, key=key)
        if prior is not None:
            if prior["fingerprint"] != digest:
                raise IdempotencyKeyReused(key, f"{prior['method']} {prior['path']}")
            return Answer(status=int(prior["status"]), body=str(prior["response"]), replayed=True)
        status, text = write(tx)
        tx.run("idempotency_answer", client=client, key=key, status=status, response=text)
    return Answer(status=status, body=text, replayed=False)


def prune(store: Store, *, now: datetime, retention: timedelta = RETENTION, limit: int = PRUNE_BATCH) -> int:
    """Delete at most ``limit`` keys created before ``now - retention``; returns how many (bounded work)."""
    with store.transaction() as tx:
        rows = tx.run("idempotency_prune", before=now - retention, limit=limit)
    return len(rows)
