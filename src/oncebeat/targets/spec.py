"""A schedule's target: what a push sends where, validated once, and the ids derived from an occurrence.

A target is written ``KIND:NAME`` with options beside it::

    celery:billing.tasks.send_overdue_reminders   broker = "$CELERY_BROKER_URL", queue = "celery", args, kwargs
    sidekiq:OverdueReminderJob                    redis = "$REDIS_URL", queue = "default", args, retry, namespace,
                                                  activejob = true (an Active Job class on the Sidekiq adapter)
    http:https://billing.example.com/hooks/tick   secret_env = "ONCEBEAT_HOOK_SECRET", args, attempts, timeout

A broker or Redis URL is written either literally without a password (``redis://127.0.0.1:6379/0``) or as
``$NAME``, an environment variable the worker reads at each push: the options are stored with the schedule
(``schedules.args``) and the job, so a password written there would sit in the database. The HTTP target's
HMAC secret is always an environment variable (``secret_env``).

Every id a push carries derives from the effect key ``push:<schedule key>:<fire instant UTC>`` alone, so a
second push of one occurrence (there is none unless an operator resolves an in-doubt push ``not_done``) carries
the same Celery ``task_id``, Sidekiq ``jid`` and HTTP ``Idempotency-Key``.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any
from urllib.parse import urlsplit

from ..errors import ConfigError, TargetRejected
from ..redact import redact_url, remember_secrets, url_secret

__all__ = ["KINDS", "Occurrence", "Target", "derived_jid", "derived_uuid", "effect_key", "parse_target"]

KINDS = ("celery", "sidekiq", "http")
_NAMESPACE = uuid.UUID("5b0a4d57-8a47-4c6e-9d56-6f6e63656265")  # oncebeat's own uuid5 namespace

_OPTIONS: dict[str, tuple[str, ...]] = {
    "celery": ("broker", "queue", "args", "kwargs"),
    "sidekiq": ("redis", "queue", "args", "retry", "namespace", "activejob"),
    "http": ("secret_env", "args", "attempts", "timeout"),
}
_REQUIRED = {"celery": ("broker",), "sidekiq": ("redis",), "http": ("secret_env",)}
_URL_OPTION = {"celery": "broker", "sidekiq": "redis"}
_RUBY_CLASS = re.compile(r"[A-Z][A-Za-z0-9_]*(?:::[A-Z][A-Za-z0-9_]*)*")
_CELERY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:\-]*")
_QUEUE = re.compile(r"[A-Za-z0-9_.:\-]{1,200}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def effect_key(schedule_key: str, fire_at: datetime) -> str:
    """The effect key of the push for one occurrence: ``push:<schedule key>:<fire instant, ISO UTC>``."""
    return f"push:{schedule_key}:{fire_at.astimezone(UTC).isoformat()}"


def derived_jid(key: str) -> str:
    """A Sidekiq job id (24 hex digits, as ``SecureRandom.hex(12)``) derived from an effect key."""
    return hashlib.sha256(f"oncebeat:{key}".encode()).hexdigest()[:24]


def derived_uuid(key: str) -> str:
    """A UUID (Celery ``task_id``, HTTP ``Idempotency-Key``) derived from an effect key (uuid5)."""
    return str(uuid.uuid5(_NAMESPACE, key))


@dataclass(frozen=True, kw_only=True, slots=True)
class Occurrence:
    """The occurrence a push serves: what every target receives about it.

    Attributes:
        schedule_key: the schedule; occurrence_id: the ledger row's id.
        fire_at: the instant, aware UTC; local_fire_at: ISO text with the zone's offset; tz: the IANA zone.
        business_date: the local date in the schedule's zone (G7).
        key: the push's effect key (:func:`effect_key`).
    """

    schedule_key: str
    occurrence_id: int
    fire_at: datetime
    local_fire_at: str
    tz: str
    business_date: date
    key: str

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Occurrence:
        """From an occurrence-ledger row (``ledger.get_occurrence``)."""
        fire_at = row["fire_at"]
        if isinstance(fire_at, str):
            fire_at = datetime.fromisoformat(fire_at)
        business = row["business_date"]
        if isinstance(business, str):
            business = date.fromisoformat(business)
        return cls(schedule_key=str(row["schedule_key"]), occurrence_id=int(row["id"]), fire_at=fire_at,
                   local_fire_at=str(row["local_fire_at"]), tz=str(row["tz"]), business_date=business,
                   key=effect_key(str(row["schedule_key"]), fire_at))

    def describe(self) -> dict[str, Any]:
        """JSON fields naming the occurrence (schedule, id, instant UTC and local, zone, business date)."""
        return {"schedule": self.schedule_key, "occurrence_id": self.occurrence_id,
                "fire_at": self.fire_at.astimezone(UTC).isoformat(), "local_fire_at": self.local_fire_at,
                "tz": self.tz, "business_date": self.business_date.isoformat()}


@dataclass(frozen=True, kw_only=True, slots=True)
class Target:
    """A validated target: ``kind`` (celery, sidekiq, http), ``name`` (task, class or URL) and its options."""

    kind: str
    name: str
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def spec(self) -> str:
        return f"{self.kind}:{self.name}"

    def args(self) -> dict[str, Any]:
        """The JSON the push job carries (and the schedule stores): ``{"target": spec, **options}``."""
        return {"target": self.spec, **self.options}

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> Target:
        """Back from :meth:`args` (the push job's arguments). Raises ConfigError as :func:`parse_target`."""
        rest = {k: v for k, v in args.items() if k != "target"}
        return parse_target(args.get("target"), rest, where="job arguments")

    def describe(self) -> str:
        """One line for people: the spec and its broker/Redis with any password masked."""
        url_option = _URL_OPTION.get(self.kind)
        shown = redact_url(self.name) if self.kind == "http" else self.name
        text = f"{self.kind}:{shown}"
        if url_option:
            text += f" via {redact_url(str(self.options[url_option]))}"
        return text

    def url(self) -> str:
        """The broker/Redis URL (``$NAME`` read from the environment now) or the HTTP endpoint.

        Raises:
            TargetRejected: the named environment variable is not set or empty.
        """
        if self.kind == "http":
            return self.name
        return _resolve(str(self.options[_URL_OPTION[self.kind]]), _URL_OPTION[self.kind])

    def secret(self) -> bytes:
        """The HTTP target's HMAC secret, from the variable ``secret_env`` names.

        Raises:
            TargetRejected: the variable is not set or empty.
        """
        name = str(self.options["secret_env"])
        value = os.environ.get(name, "")
        if not value:
            raise TargetRejected(f"{self.spec}: the HMAC secret variable {name} is not set in this worker's "
                                 f"environment; set {name} (the endpoint checks the signature with the same secret)")
        return value.encode()


def _resolve(value: str, option: str) -> str:
    if not value.startswith("$"):
        return value
    name = value[1:]
    url = os.environ.get(name, "").strip()
    if not url:
        raise TargetRejected(f"{option} = {value!r}: the environment variable {name} is not set in this worker's "
                             f"environment; set it to the URL (e.g. {name}=redis://:password@host:6379/0)")
    remember_secrets(url)  # a client library's message quoting a piece of the password is masked too
    return url


def _problem(where: str, text: str) -> ConfigError:
    return ConfigError(f"{where}: {text}")


def parse_target(spec: Any, options: Mapping[str, Any], *, where: str) -> Target:
    """Validate ``spec`` (``KIND:NAME``) and its options; ``where`` names the place in errors.

    Returns:
        The :class:`Target`, with defaults filled in (Sidekiq ``queue = "default"``, ``args = []``, ``retry =
        true``; HTTP ``attempts = 3``, ``timeout = 10`` seconds).

    Raises:
        ConfigError: an unknown kind or option, a bad name, queue, URL (a literal password), type or range;
            the message names ``where``, the field and the fix.
    """
    if not isinstance(spec, str) or ":" not in spec:
        raise _problem(where, f"target = {spec!r} must be a string KIND:NAME with KIND one of {', '.join(KINDS)}, "
                       'e.g. "sidekiq:OverdueReminderJob"')
    kind, _, name = spec.partition(":")
    kind = kind.strip().lower()
    if kind not in KINDS:
        close = difflib.get_close_matches(kind, KINDS, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise _problem(where, f"target kind {kind!r} is not known.{hint} Use one of {', '.join(KINDS)}")
    allowed = _OPTIONS[kind]
    for option in options:
        if option not in allowed:
            close = difflib.get_close_matches(option, allowed, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise _problem(where, f"{option} is not an option of a {kind} target.{hint} Allowed: {', '.join(allowed)}")
    for option in _REQUIRED[kind]:
        if option not in options:
            example = "$REDIS_URL" if option != "secret_env" else "ONCEBEAT_HOOK_SECRET"
            raise _problem(where, f"a {kind} target needs {option} (e.g. {option} = \"{example}\")")
    values = dict(options)
    if kind == "sidekiq":
        if not _RUBY_CLASS.fullmatch(name):
            raise _problem(where, f"{name!r} is not a Ruby class name; write the worker's class, e.g. "
                           '"sidekiq:OverdueReminderJob" or "sidekiq:Billing::OverdueJob"')
        values.setdefault("queue", "default")
        values.setdefault("args", [])
        values.setdefault("retry", True)
        if not isinstance(values["retry"], (bool, int)) or (not isinstance(values["retry"], bool)
                                                           and values["retry"] < 0):
            raise _problem(where, f"retry = {values['retry']!r} must be true, false or a number of retries >= 0")
        if not isinstance(values.get("activejob", False), bool):
            raise _problem(where, f"activejob = {values['activejob']!r} must be true (the class is an Active Job "
                           "enqueued through Sidekiq) or false (a Sidekiq::Worker)")
        if values.get("activejob"):
            _check_activejob_args(values["args"], where)
        if "namespace" in values and not (isinstance(values["namespace"], str) and _QUEUE.fullmatch(
                values["namespace"])):
            raise _problem(where, f"namespace = {values['namespace']!r} must be the redis-namespace prefix your "
                           "Sidekiq uses (letters, digits, . _ : -)")
    elif kind == "celery":
        if not _CELERY_NAME.fullmatch(name):
            raise _problem(where, f"{name!r} is not a Celery task name; write the registered name, e.g. "
                           '"celery:billing.tasks.send_overdue_reminders"')
        values.setdefault("args", [])
        values.setdefault("kwargs", {})
        if not isinstance(values["kwargs"], dict):
            raise _problem(where, f"kwargs = {values['kwargs']!r} must be a table (keyword arguments of the task)")
    else:
        _check_endpoint(name, where)
        values.setdefault("args", {})
        values.setdefault("attempts", 3)
        values.setdefault("timeout", 10)
        if not isinstance(values["secret_env"], str) or not _ENV_NAME.fullmatch(values["secret_env"]):
            raise _problem(where, f"secret_env = {values['secret_env']!r} must name an environment variable "
                           "holding the HMAC secret (e.g. ONCEBEAT_HOOK_SECRET), not the secret itself")
        attempts = values["attempts"]
        if isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts <= 10:
            raise _problem(where, f"attempts = {attempts!r} must be a whole number from 1 to 10 (POSTs per try)")
        timeout = values["timeout"]
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 300:
            raise _problem(where, f"timeout = {timeout!r} must be seconds, more than 0 and at most 300")
    if kind in ("sidekiq", "celery"):
        if not isinstance(values["args"], list):
            raise _problem(where, f"args = {values['args']!r} must be a list (the job's positional arguments)")
        if "queue" in values and not (isinstance(values["queue"], str) and _QUEUE.fullmatch(values["queue"])):
            raise _problem(where, f"queue = {values['queue']!r} must be a queue name (letters, digits, . _ : -)")
        _check_broker_url(values[_URL_OPTION[kind]], _URL_OPTION[kind], where)
    elif not isinstance(values["args"], dict):
        raise _problem(where, f"args = {values['args']!r} must be a table (sent as the body's \"args\" object)")
    return Target(kind=kind, name=name, options=values)


def _check_activejob_args(value: Any, where: str) -> None:
    """Active Job arguments as JSON can carry: null, booleans, numbers, strings, lists and tables of them."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            if any(k.startswith("_aj_") for k in item):
                raise _problem(where, "args: a table key starting with _aj_ is reserved by Active Job; rename it")
            stack.extend(item.values())
        elif item is not None and not isinstance(item, (bool, int, float, str)):
            raise _problem(where, f"args holds {item!r}, which Active Job cannot take; use strings, numbers, "
                           "booleans, lists and tables")


def _check_broker_url(value: Any, option: str, where: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise _problem(where, f"{option} must be a URL or $VARIABLE, e.g. {option} = \"$REDIS_URL\"")
    if value.startswith("$"):
        if not _ENV_NAME.fullmatch(value[1:]):
            raise _problem(where, f"{option} = {value!r}: after $ comes an environment variable's name")
        return
    parts = urlsplit(value)
    if parts.scheme not in ("redis", "rediss", "amqp", "amqps", "pyamqp", "sqs", "memory") or not parts.netloc \
            and parts.scheme != "memory":
        raise _problem(where, f"{option} = {redact_url(value)!r} is not a broker URL; write e.g. "
                       "redis://127.0.0.1:6379/0 or $REDIS_URL")
    if secret := url_secret(value):
        remember_secrets(value)
        raise _problem(where, f"{option} = {redact_url(value)!r} holds {secret}, which would be stored with the "
                       f"schedule in the database; write {option} = \"$REDIS_URL\" and set REDIS_URL in the "
                       "environment of the workers")


def _check_endpoint(url: str, where: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _problem(where, f"{redact_url(url)!r} is not an http(s) URL; write e.g. "
                       '"http:https://billing.example.com/hooks/overdue"')
    if parts.password or parts.username or url_secret(url):
        remember_secrets(url)
        raise _problem(where, f"{redact_url(url)!r} holds credentials, which would be stored with the schedule; "
                       "the push is signed with secret_env's HMAC instead")
