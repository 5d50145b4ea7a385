"""The ``[sender]`` keys: ``from``, ``reply_to`` (one mailbox each, ``addr`` or ``Name <addr>``, on one line) and
``company``; each check returns the value as :class:`~oncebeat.reminders.policy.Policy` keeps it, or raises
:class:`~oncebeat.reminders.policy.problems._Invalid` with the fix.
"""

from __future__ import annotations

import re
from typing import Any

from oncebeat.reminders.policy.problems import _has_control, _Invalid, _type_name

_ADDR = re.compile(r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[^\s@<>()\[\],;:\"\\]+")
_NAME_ADDR = re.compile(r"(?P<name>[^<>]*?)\s*<(?P<addr>[^<>]*)>")


def _valid_addr(addr: str) -> bool:
    if not _ADDR.fullmatch(addr):
        return False
    local, domain = addr.rsplit("@", 1)
    if local.startswith(".") or local.endswith(".") or ".." in local:
        return False
    labels = domain.split(".")
    return all(labels) and not any(lbl.startswith("-") or lbl.endswith("-") for lbl in labels)


def _check_address(value: Any, *, optional: bool) -> str | None:
    fix = 'Write one address, e.g. "billing@example.com" or "Billing <billing@example.com>".'
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise _Invalid(f"must be a string, got {_type_name(value)}", fix, value=value)
    text = value.strip()
    if not text:
        if optional:
            return None
        raise _Invalid("is empty", fix, value=value)
    if _has_control(text):
        raise _Invalid("contains a line break or control "
                       "character", "Write the address on one line. " + fix, value=value)
    m = _NAME_ADDR.fullmatch(text)
    addr = m.group("addr").strip() if m else text
    if not _valid_addr(addr):
        raise _Invalid("is not a valid email address", fix, value=value)
    return text


def _check_sender(value: Any) -> str:
    result = _check_address(value, optional=False)
    assert result is not None
    return result


def _check_reply_to(value: Any) -> str | None:
    return _check_address(value, optional=True)


def _check_company(value: Any) -> str:
    if not isinstance(value, str):
        raise _Invalid(f"must be a string, got "
                       f"{_type_name(value)}", 'Write your company name in quotes, e.g. "Example Co".', value=value)
    if _has_control(value):
        raise _Invalid("contains a line break or control character", "Write the company name on one line.", value=value)
    text = " ".join(value.split())
    if not text:
        raise _Invalid("is empty", 'Write the company name shown in emails, e.g. "Example Co".', value=value)
    return text
