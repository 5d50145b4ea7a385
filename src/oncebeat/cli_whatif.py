"""``oncebeat preview --policy new.toml``: the what-if of a proposed policy on the real book (README "What-if").

Entry point only: load both policies, open the live database (read only), call
:func:`oncebeat.simulate.whatif.run_whatif`, print its text or JSON. The proposed policy file is read first, so a
mistake in it is reported (file, line, field and fix, as ``oncebeat check`` reports it) before anything is opened.
"""

from __future__ import annotations

import os
import re
from datetime import date
from pathlib import Path
from typing import Any

import click

from .errors import ConfigError

#: The window of a what-if when ``--days`` is not given (0): a month of reminders.
DEFAULT_DAYS = 30


def _policy_name(config: Path | None) -> str:
    """How the current policy is named in the report: its file, or the defaults when there is none."""
    path = config or (Path(os.environ["ONCEBEAT_CONFIG"]) if os.environ.get("ONCEBEAT_CONFIG") else None)
    path = path or Path("oncebeat.toml")
    return str(path) if path.is_file() else "built-in defaults"


_FIELD = re.compile(r"^(?P<lead>\s*(?:- )?)\[(?P<section>[\w.]+)\] (?P<key>\w+)", re.MULTILINE)


def _line_of(text: str, section: str, key: str) -> int | None:
    """The line (1-based) where ``key = …`` is written inside ``[section]`` of a TOML text; None if not found."""
    current = ""
    for n, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("[") and not stripped.startswith("[["):
            current = stripped.strip("[]").strip()
        elif current == section and re.match(rf"{re.escape(key)}\s*=", stripped):
            return n
    return None


def _located(path: Path, exc: ConfigError) -> ConfigError:
    """``exc`` from reading the policy file ``path`` with the line of each field it names (``file:line:``), so a
    what-if's error points at the line to fix. Syntax errors already carry theirs; a message naming no field is
    returned as it is."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeError):
        return exc
    message = str(exc)

    def locate(m: re.Match[str]) -> str:
        line = _line_of(text, m["section"], m["key"])
        return m[0] if line is None else f"{m['lead']}line {line}: [{m['section']}] {m['key']}"

    prefix = f"{path}: "
    body = message.removeprefix(prefix)
    first = _FIELD.match(body)
    if first is not None and "\n" not in body:  # one problem: file:line: as compilers and `tomllib` write it
        line = _line_of(text, first["section"], first["key"])
        if line is not None:
            return ConfigError(f"{path}:{line}: {body}")
    located = _FIELD.sub(locate, body)
    return exc if located == body else ConfigError(prefix + located)


def preview_whatif(*, proposed_path: Path, days: int, start: date | None, database_url: str | None,
                   config: Path | None, as_json: bool, runtime: Any, print_json: Any,
                   apply_to_open: bool = False) -> None:
    """Run and print the what-if of ``proposed_path`` against the current policy (``config``); ``runtime`` and
    ``print_json`` are the CLI's own helpers (passed in: this module never imports the cli module back).

    Raises:
        ConfigError: either policy file is invalid (nothing opened or run).
        OncebeatError: see :func:`oncebeat.simulate.whatif.run_whatif`.
    """
    from .reminders.policy import load_policy
    from .simulate.whatif import run_whatif

    try:
        proposed = load_policy(proposed_path)  # its own errors first: file, line, field and the fix
    except ConfigError as exc:
        raise _located(proposed_path, exc) from None
    rt = runtime(config=config, database_url=database_url, migrate=False)
    try:
        first = start or rt.clock.now().astimezone(rt.policy.zone).date()
        report = run_whatif(rt.store, current=rt.policy, proposed=proposed, start=first,
                            days=days or DEFAULT_DAYS, current_name=_policy_name(config),
                            proposed_name=str(proposed_path), apply_to_open=apply_to_open)
    finally:
        rt.close()
    if as_json:
        print_json(report.as_dict())
        return
    click.echo(report.to_text())


__all__ = ["preview_whatif", "DEFAULT_DAYS"]
