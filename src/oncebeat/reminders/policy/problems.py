"""How a policy problem is told: one value's problem and its fix (:class:`_Invalid`), a value shown in a message,
the key path it sits at, and every problem of one file in one :class:`~oncebeat.errors.ConfigError`.

The key modules (``schedule_keys``, ``reminders_keys``, ``sender_keys``, ``delivery_keys``) raise :class:`_Invalid`;
:func:`~oncebeat.reminders.policy.loading.policy_from_dict` turns each into ``[section] key = value problem. fix``
(:func:`_describe`) and gathers them (:func:`_config_error`). :mod:`oncebeat.reminders.ladders` uses the same.
"""

from __future__ import annotations

import difflib
import json
import unicodedata
from typing import Any

from oncebeat.errors import ConfigError


class _Invalid(Exception):
    """One validation problem of one value; wrapped into ConfigError by the caller."""

    def __init__(self, problem: str, fix: str, *, index: int | None = None, value: Any = None, show_value: bool = True):
        super().__init__(problem)
        self.problem = problem
        self.fix = fix
        self.index = index
        self.value = value
        self.show_value = show_value


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "table"
    return type(value).__name__


def _has_control(text: str) -> bool:
    return any(unicodedata.category(ch) in ("Cc", "Zl", "Zp") for ch in text)


def _show(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _describe(where: str, inv: _Invalid) -> str:
    if inv.index is not None:
        where = f"{where}[{inv.index}]"
    shown = f" = {_show(inv.value)}" if inv.show_value else ""
    return f"{where}{shown} {inv.problem}. {inv.fix}"


class PolicyProblems(ConfigError):
    """A :class:`~oncebeat.errors.ConfigError` that keeps its problems (``problems``, one message each), so a caller
    that knows the file can name it and each problem's line (a check across sections, run by ``Policy``)."""

    def __init__(self, message: str, problems: list[str]) -> None:
        super().__init__(message)
        self.problems = problems


def _config_error(source: str, problems: list[str]) -> PolicyProblems:
    if len(problems) == 1:
        return PolicyProblems(f"{source}: {problems[0]}", problems)
    listing = "\n".join(f"  - {p}" for p in problems)
    return PolicyProblems(f"{source}: {len(problems)} problems:\n{listing}", problems)


def _unknown_key(where: str, key: str, allowed: list[str]) -> str:
    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return f"{where} is not a known key.{hint} Allowed keys: {', '.join(allowed)}."
