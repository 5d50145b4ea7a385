"""One error tree for oncebeat.

Every error the library raises on purpose derives from :class:`OncebeatError`.
Driver errors (sqlite3, psycopg, smtplib) are translated at the boundary of the
module that talks to them, so callers catch these classes only.

Control-flow signals raised *by handlers* to steer the queue (``Retry``,
``Discard``) are a separate group under :class:`JobSignal`.
"""

from __future__ import annotations


class OncebeatError(Exception):
    """Base class of every error oncebeat raises on purpose."""


class ConfigError(OncebeatError):
    """Bad configuration: the message names the field (or variable) and the fix."""


class ScheduleError(OncebeatError):
    """A schedule cannot be built: bad cron field, unknown zone, bad DST option."""


class StoreError(OncebeatError):
    """The database could not be reached or a statement failed."""


class TransientStoreError(StoreError):
    """A store failure that may pass on retry (lock timeout, dropped connection)."""


class QueryTimedOut(TransientStoreError):
    """A statement ran past the time its transaction allowed it (PostgreSQL ``statement_timeout``, e.g. a read
    under :meth:`oncebeat.store.Store.snapshot`'s ``timeout_ms``) and was cancelled; nothing it did is kept."""


class UniqueConflict(StoreError):
    """A statement would break a unique rule the database enforces (a unique index or constraint).

    ``constraint`` names it: the index name (e.g. ``jobs_one_run_per_occurrence``, ``jobs_unique_key``), as
    PostgreSQL reports it and SQLite's store maps it from the columns SQLite names. The layer that ran the
    statement turns it into an error that says what is held and by whom (e.g. :class:`RunUnfinished`).
    """

    def __init__(self, message: str, constraint: str) -> None:
        super().__init__(message)
        self.constraint = constraint


class RunUnfinished(OncebeatError):
    """An occurrence already has an unfinished run, so a second one is refused (at most one per occurrence, G1).

    ``occurrence_id`` is the occurrence served (for a make-up run, the one first re-run), ``job_id`` and ``state``
    the unfinished run holding it (``job_id`` None when it finished a moment ago: try again).
    """

    def __init__(self, occurrence_id: int, job_id: int | None, state: str | None, *, action: str = "run it again"
                 ) -> None:
        if job_id is None:
            text = (f"occurrence {occurrence_id} had another run unfinished a moment ago; look at its jobs and "
                    f"{action} if it is still needed")
        elif state == "running":
            text = f"occurrence {occurrence_id} already has run {job_id} running; wait for it to finish, then {action}"
        else:
            text = (f"occurrence {occurrence_id} already has run {job_id} {state}; wait for it or cancel it "
                    f"(`oncebeat jobs --cancel {job_id}`), then {action}")
        super().__init__(text)
        self.occurrence_id = occurrence_id
        self.job_id = job_id
        self.state = state


class MigrationError(StoreError):
    """The schema could not be brought to the current version."""


class LeaseLost(OncebeatError):
    """This worker no longer owns the job it is running (fencing): its lease expired or another attempt holds it.

    Raised before a new effect is claimed (and by the worker before it starts a claimed job) when the job's
    ``(worker, attempt)`` is no longer the current holder with an unexpired lease, or when the worker's
    heartbeat has kept failing past its lease (self-fencing). The worker stops that job without recording
    anything on it: the current holder, or the rescue, owns it now. ``job_id`` and ``attempt`` are kept.
    """

    def __init__(self, job_id: int | None, attempt: int | None, reason: str) -> None:
        super().__init__(f"job {job_id} attempt {attempt}: lease lost ({reason}); stopping it without recording "
                         "anything — the rescue or the current holder owns it now")
        self.job_id = job_id
        self.attempt = attempt


class EffectError(OncebeatError):
    """Base of effect-ledger errors."""


class EffectKeyConflict(EffectError):
    """An effect key was reused with a different payload (a programming error, never retried).

    ``key``, ``first_payload_hash`` (the payload the key was first used with) and ``payload_hash`` (this
    use's) are kept; the ledger records the conflict as an ``effect.conflict`` event for the doctor.
    """

    def __init__(self, key: str, first_payload_hash: str = "", payload_hash: str = "") -> None:
        super().__init__(f"effect key {key!r} was first used with a different payload (hash {first_payload_hash}, "
                         f"now {payload_hash}); a key must name one effect")
        self.key = key
        self.first_payload_hash = first_payload_hash
        self.payload_hash = payload_hash


class EffectBusy(EffectError):
    """The effect key is held by another live attempt; try again later."""


class EffectInDoubt(EffectError):
    """A previous attempt started the effect and died before recording its outcome.

    The effect is never re-run blindly: an operator (or a reconcile hook) must
    decide whether it happened.
    """

    def __init__(self, key: str, detail: str = "") -> None:
        super().__init__(f"effect {key!r} is in doubt: {detail}" if detail else f"effect {key!r} is in doubt")
        self.key = key


class EffectOutcomeUnknown(EffectError):
    """Raised by an effect function when it cannot tell whether the effect happened
    (e.g. the connection dropped after the message was sent, before the server's reply).
    The ledger records the key ``in_doubt`` instead of ``failed``, so it is never re-run blindly."""


class MailError(OncebeatError):
    """Base of mail delivery errors."""


class TransientMailError(MailError):
    """The SMTP server or network failed in a way that may pass (4xx, reset, timeout)."""


class ConnectionCapped(TransientMailError):
    """The SMTP server refused one more connection (a 4xx greeting such as ``421 too many connections``) while
    this mailer had others open to it: a cap on connections per client, not an outage. The mailer has
    shrunk its pool to the connections the server accepted (``connections``); the message was not sent
    and goes out over one of those once it is free."""

    connections: int = 1


class DeliveryUnknown(TransientMailError):
    """The connection was lost after the message content was sent and before the final reply:
    the server may or may not have accepted it."""


class PermanentMailError(MailError):
    """The SMTP server rejected the message for good (5xx); retrying cannot help."""


class TargetError(OncebeatError):
    """A push to a schedule's target (Celery, Sidekiq, HTTP) certainly did not happen: the broker or endpoint
    could not be reached before anything was sent, or the endpoint answered that it failed (5xx). Retried."""


class TargetRejected(TargetError):
    """The target refused the push for good (an HTTP 4xx, a missing secret variable): retrying cannot help.
    The job is discarded with the reply kept."""


class ImportRejected(OncebeatError):
    """An import file has invalid rows; nothing was applied.

    ``problems`` is a list of human-readable lines, each naming the file line,
    the column and the reason: all of them, or the first ones when ``total``
    (the number found) is larger.
    """

    def __init__(self, message: str, problems: list[str], *, total: int | None = None) -> None:
        super().__init__(message)
        self.problems = problems
        self.total = len(problems) if total is None else total


class IdempotencyKeyReused(OncebeatError):
    """An idempotency key was sent again with a different request (method, path or body) than its first use.

    Nothing is applied; ``key`` is the key, ``first`` says what it was first used for (``POST /api/v1/…``).
    """

    def __init__(self, key: str, first: str) -> None:
        super().__init__(f"Idempotency-Key {key!r} was first used for another request ({first}, with another "
                         "body); a retry must repeat the same request exactly: send a new key for a new request")
        self.key = key
        self.first = first


class JobSignal(Exception):
    """Base of signals a task handler raises to steer its job (not failures of oncebeat)."""


class Retry(JobSignal):
    """Retry the job after ``delay`` seconds (or the backoff) without counting it as a failure reason."""

    def __init__(self, reason: str = "", delay: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delay = delay


class Snooze(JobSignal):
    """Run the job again after ``delay`` seconds **without using up an attempt**: it was not the job's fault.

    For waits on something outside the job, e.g. a mail server that is down, answering 4xx or refusing
    TLS/auth (a mail outage is a delay, not a failure). The job goes back ``retryable`` with ``reason`` kept
    in its errors (kind ``snooze``) and its attempt budget (``max_attempts``) one larger, so the attempts it
    has left are unchanged. Whoever raises it bounds the total wait (a job that snoozes forever never ends).
    """

    def __init__(self, reason: str, delay: float) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delay = delay


class RateLimited(Snooze):
    """No permit of a rate limit was free (:mod:`oncebeat.ratelimit`): the job runs again once one frees.

    A :class:`Snooze` (no attempt used up, never a failure): raised out of a handler the job goes back with
    ``run_at`` at ``delay`` seconds from now. ``key``, ``limit`` and ``per_seconds`` name the limit; ``delay``
    is the seconds until a permit frees (plus a little jitter so waiting jobs do not all wake at once).
    """

    def __init__(self, key: str, limit: int, per_seconds: float, delay: float) -> None:
        super().__init__(f"rate limit {key!r} ({limit} per {per_seconds:g} s) reached; next permit in "
                         f"{delay:.1f} s", delay=delay)
        self.key = key
        self.limit = limit
        self.per_seconds = per_seconds


class Discard(JobSignal):
    """Give up on the job at once: it ends ``discarded`` with ``reason`` kept."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
