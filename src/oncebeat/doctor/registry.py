"""What the doctor runs: the registry of checks, scopes, ``explain`` kinds and evidence hooks.

The doctor's core knows the engine only (schedules, occurrences, jobs, effects, processes, events,
delivered mail). The engine's checks register themselves here when :mod:`oncebeat.doctor` is
imported; an app built on the engine registers its own when it is imported (the bundled app does
so from its package's ``doctor`` module), so a library user's app that never imports that app gets an
engine-only doctor. Each registration may name the SQL line whose tables it reads (``sql_line``): it then takes
part only in databases where that line is migrated.

- :func:`register_check` — a cause code and the function finding it. Several functions may share a
  code (``part``), e.g. the engine's ``lost`` (occurrences without a job, expired leases, unclaimed jobs)
  and an app's (its own work that nothing will do); the report has one entry per code.
- :func:`register_scope` — a ``run_doctor(**{name: value})`` scope such as ``order="ORD-1"``: its
  resolver names the jobs, effects, schedules and messages that belong to the value.
- :func:`register_explain` — an ``explain(store, kind, ident)`` kind such as ``order``.
- :func:`register_hooks` — :class:`Hooks` that add an app's evidence to the engine's findings (the
  row behind an effect key or a job, the effect a delivered message came from).

Example (an app's module, run once on import)::

    register_check("undelivered", check_undelivered, title="work that did not go out", order=120,
                   part="billing", sql_line="billing")
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..mail.maildir import StoredMessage
    from ..store import Store
    from .facts import Facts
    from .model import Evidence, Finding

__all__ = ["CheckPart", "Scope", "ScopeDef", "ExplainKind", "Context", "Hooks", "register_check",
           "register_scope", "register_explain", "register_hooks", "check_codes", "check_parts", "scopes",
           "explain_kinds", "hooks", "known_code"]

CheckFn = Callable[["Facts"], "list[Finding]"]


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckPart:
    """One function finding cause ``code``; ``order`` places codes (their lowest part) and parts in a run."""

    code: str
    part: str
    fn: CheckFn
    title: str
    order: float
    sql_line: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Scope:
    """What belongs to one scope value (``order ORD-7``); None in a field means "not limited by this scope".

    Attributes:
        job_ids: jobs in scope. effect_keys: effects in scope. schedule_keys: schedules in scope.
        message_ok: True for a delivered message in scope. notes: lines for the report's ``notes``.
    """

    job_ids: frozenset[int] | None = None
    effect_keys: frozenset[str] | None = None
    schedule_keys: frozenset[str] | None = None
    message_ok: Callable[[StoredMessage], bool] | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class ScopeDef:
    """A named scope: ``resolve(facts, value)`` returns its :class:`Scope` or raises ``OncebeatError``."""

    name: str
    resolve: Callable[[Facts, str], Scope]
    help: str
    sql_line: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ExplainKind:
    """An ``explain`` kind: ``fn(store, ident)`` returns the story's lines; ``numeric`` ids are whole numbers."""

    kind: str
    fn: Callable[[Store, str], list[str]]
    numeric: bool
    help: str
    sql_line: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Context:
    """An app's word about an engine row: more evidence, the Message-ID it mailed, a subject or fix for a finding."""

    evidence: tuple[Evidence, ...] = ()
    message_id: str | None = None
    subject: str | None = None
    fix: str | None = None


class Hooks:
    """Evidence an app adds to the engine's checks; every method's default adds nothing.

    ``sql_line`` names the line whose tables the hooks read (None: they read none).
    """

    name = "app"
    sql_line: str | None = None

    def effect_context(self, facts: Facts, keys: Sequence[str]) -> dict[str, Context]:
        """For effect keys (of effects in doubt): the app rows behind them and the Message-ID they carry."""
        return {}

    def job_context(self, facts: Facts, jobs: Sequence[Mapping[str, Any]]) -> dict[int, Context]:
        """For job rows (discarded ones): the app rows behind them and, as ``fix``, how the app redoes the work."""
        return {}

    def message_effect(self, msg: StoredMessage) -> str | None:
        """The effect key that sent a delivered message, when the message says."""
        return None

    def effect_sends_mail(self, key: str) -> bool:
        """Whether the effect ``key`` delivers mail (so the Maildir shows each time it happened)."""
        return False

    def message_group(self, msg: StoredMessage) -> str | None:
        """A label naming what a message is, the same for every copy of one logical message
        (two messages with one label and different Message-IDs are still one thing sent twice)."""
        return None

    def message_fields(self, msg: StoredMessage) -> tuple[str, dict[str, Any]]:
        """Text (``", order X step 1"``) and JSON fields the app adds to a message's evidence."""
        return "", {}

    def group_context(self, facts: Facts, messages: Sequence[StoredMessage]) -> Context | None:
        """For copies of one message delivered more than once: the app rows behind them, a subject and a fix."""
        return None

    def occurrence_story(self, store: Store, occurrence: Mapping[str, Any]) -> tuple[list[Any], list[str]]:
        """Lines an app adds to ``explain occurrence``: ``(entries, header_lines)``, each entry
        ``(at, rank, text)`` with a rank of :mod:`oncebeat.doctor.explain` (``CREATED`` … ``FINISHED``)."""
        return [], []


@dataclass(slots=True)
class _Registry:
    checks: dict[tuple[str, str], CheckPart] = field(default_factory=dict)
    scopes: dict[str, ScopeDef] = field(default_factory=dict)
    explain: dict[str, ExplainKind] = field(default_factory=dict)
    hooks: dict[str, Hooks] = field(default_factory=dict)


_lock = threading.Lock()
_reg = _Registry()


def register_check(code: str, fn: CheckFn, *, title: str, order: float, part: str = "engine",
                   sql_line: str | None = None) -> None:
    """Register ``fn`` as (a part of) the check of cause ``code``; registering the same (code, part) again
    replaces it (a module imported twice).

    Args:
        code: the cause code findings carry (lower-case words joined by ``-``).
        fn: ``fn(facts) -> list[Finding]``; it may raise :class:`~oncebeat.doctor.checks.Skip`.
        title: what the check looks for, in a few words (``docs/doctor.md``, ``oncebeat doctor --help``).
        order: place in a run; codes run by their lowest order, parts of one code by theirs.
        part: who contributes it (``engine`` or an app's name).
        sql_line: the SQL line whose tables ``fn`` reads; the part is skipped where it is not migrated.
    Raises:
        ValueError: ``code`` is not lower-case words joined by ``-``.
    """
    if not code or not all(w.isalpha() and w.islower() for w in code.split("-")):
        raise ValueError(f"cause code {code!r}: use lower-case words joined by '-' (e.g. lost-order)")
    with _lock:
        _reg.checks[(code, part)] = CheckPart(code=code, part=part, fn=fn, title=title, order=order,
                                              sql_line=sql_line)


def register_scope(name: str, resolve: Callable[[Facts, str], Scope], *, help: str,  # noqa: A002 - click's word
                   sql_line: str | None = None) -> None:
    """Add ``run_doctor(..., name=value)``; ``resolve(facts, value)`` returns the :class:`Scope` or raises
    ``OncebeatError`` (e.g. no such order). ``name`` must not be one of run_doctor's own arguments."""
    if name in ("since", "schedule", "maildir", "now", "definitions", "store"):
        raise ValueError(f"scope name {name!r} is one of run_doctor's own arguments")
    with _lock:
        _reg.scopes[name] = ScopeDef(name=name, resolve=resolve, help=help, sql_line=sql_line)


def register_explain(kind: str, fn: Callable[[Store, str], list[str]], *, numeric: bool, help: str,  # noqa: A002
                     sql_line: str | None = None) -> None:
    """Add ``explain(store, kind, ident)``: ``fn(store, ident)`` tells the story (``ident`` as text)."""
    with _lock:
        _reg.explain[kind] = ExplainKind(kind=kind, fn=fn, numeric=numeric, help=help, sql_line=sql_line)


def register_hooks(hooks: Hooks) -> None:
    """Add an app's :class:`Hooks` (by ``hooks.name``; registering that name again replaces them)."""
    with _lock:
        _reg.hooks[hooks.name] = hooks


def check_parts(lines: Iterable[str] | None = None) -> list[CheckPart]:
    """Registered check parts in run order; with ``lines``, only those whose SQL line is among them."""
    parts = list(_reg.checks.values())
    first: dict[str, float] = {}
    for p in parts:
        first[p.code] = min(first.get(p.code, p.order), p.order)
    wanted = None if lines is None else set(lines)
    return sorted((p for p in parts if wanted is None or p.sql_line is None or p.sql_line in wanted),
                  key=lambda p: (first[p.code], p.code, p.order, p.part))


def check_codes() -> tuple[str, ...]:
    """The registered cause codes in run order (the report's ``checks``)."""
    return tuple(dict.fromkeys(p.code for p in check_parts()))


def known_code(code: str) -> bool:
    return any(c == code for c, _ in _reg.checks)


def scopes() -> dict[str, ScopeDef]:
    """The registered scopes by name."""
    return dict(_reg.scopes)


def explain_kinds() -> dict[str, ExplainKind]:
    """The registered ``explain`` kinds by name (the engine's ``occurrence`` and ``job`` first)."""
    return dict(_reg.explain)


def hooks(lines: Iterable[str] | None = None) -> list[Hooks]:
    """The registered hooks; with ``lines``, only those whose SQL line is among them."""
    wanted = None if lines is None else set(lines)
    return [h for h in _reg.hooks.values() if wanted is None or h.sql_line is None or h.sql_line in wanted]
