"""Reading ``oncebeat.toml``: the TOML layout (section -> key -> :class:`~oncebeat.reminders.policy.Policy` field),
:func:`policy_from_dict` (every section and key checked, every problem reported at once, naming the file, the key path
and, with the file's text, the line) and :func:`load_policy` (the file itself: missing, unreadable, not UTF-8 or not
TOML).
"""

from __future__ import annotations

import difflib
import re
import tomllib
from pathlib import Path
from typing import Any

from oncebeat.errors import ConfigError
from oncebeat.reminders.calendar import calendar_config
from oncebeat.reminders.notices.attachments import attachments_config
from oncebeat.reminders.notices.escalation import escalation_config
from oncebeat.reminders.policy.checks import _CHECKS
from oncebeat.reminders.policy.lines import StageLines
from oncebeat.reminders.policy.model import Policy
from oncebeat.reminders.policy.problems import (
    PolicyProblems,
    _config_error,
    _describe,
    _Invalid,
    _show,
    _type_name,
    _unknown_key,
)
from oncebeat.reminders.sources.database import source_config
from oncebeat.targets.config import target_schedules

#: File name ``load_policy(None)`` looks for in the working directory.
DEFAULT_CONFIG_NAME = "oncebeat.toml"


# --------------------------------------------------------------------------- TOML layout

# section -> {toml key -> Policy field}
_LAYOUT: dict[str, dict[str, str]] = {
    "schedule": {"cron": "schedule", "tz": "tz", "catchup": "catchup", "catchup_window": "catchup_window",
                 "overlap": "overlap"},
    "reminders": {"stages": "stages", "collapse": "collapse", "spacing": "spacing", "send_zone": "send_zone",
                  "send_at": "send_at", "templates": "templates", "fallback_locale": "fallback_locale"},
    "sender": {"from": "sender", "reply_to": "reply_to", "company": "company"},
    "delivery": {"outage_retry": "outage_retry", "max_per_minute": "max_per_minute", "rate_window": "rate_window",
                 "max_connections": "max_connections"},
    "retention": {"older_than": "retention", "cron": "retention_cron"},
}
# issue 23 items 4-5 (oncebeat.reminders.capfence)
_LAYOUT["reminders"] |= {"group": "group", "max_notices_per_week": "max_notices_per_week",
                         "max_payment_staleness": "max_payment_staleness"}
_LAYOUT["reminders"] |= {"notify_final": "notify_final"}  # issue 24.4 (oncebeat.reminders.notices.escalation)


def policy_from_dict(data: dict[str, Any], source: str = "<dict>", *, base_dir: Path | None = None,
                     text: str | None = None) -> Policy:
    """Validate parsed TOML data (``{"schedule": {...}, ...}``) into a :class:`Policy`.

    ``source`` names the origin in error messages. A relative ``templates``
    folder is resolved against ``base_dir`` when given (``load_policy`` passes
    the folder of the file) and must then exist. ``text``: the file's text, for the line numbers of
    ``[[ladders]]`` and ``[stage.N]`` problems (``line 12: [stage.30] cc[0] ...``).
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a table of sections, got {_type_name(data)}")
    problems: list[str] = []
    values: dict[str, Any] = {}
    stage_lines = StageLines(text)
    sections = [*_LAYOUT, "source", "calendar", "attachments", "stage"]
    for section, content in data.items():
        if section == "schedules":  # [[schedules]]: the engine's target schedules, checked by their own module
            try:
                values["schedules"] = target_schedules(content, source=source)
            except ConfigError as exc:
                problems.append(str(exc).removeprefix(f"{source}: "))
            continue
        if section == "ladders":  # [[ladders]]: named ladders, checked by their own module
            from oncebeat.reminders.ladders import ladder_defs  # builds on this module: imported when used

            try:
                values["ladders"] = ladder_defs(content, source=source, base_dir=base_dir, text=text)
            except ConfigError as exc:
                problems.append(str(exc).removeprefix(f"{source}: "))
            continue
        if section == "source":  # [source]: the team's own database, checked by its own module
            try:
                values["source"] = source_config(content, source=source)
            except ConfigError as exc:
                problems.append(str(exc).removeprefix(f"{source}: "))
            continue
        if section == "calendar":  # [calendar]: business days and the send window, checked by its own module
            try:
                values["calendar"] = calendar_config(content, source=source)
            except ConfigError as exc:
                problems.append(str(exc).removeprefix(f"{source}: "))
            continue
        if section == "attachments":  # [attachments]: the invoice PDF and statements, checked by their own module
            try:
                values["attachments"] = attachments_config(content, source=source, base_dir=base_dir)
            except ConfigError as exc:
                problems.append(str(exc).removeprefix(f"{source}: "))
            continue
        if section == "stage":  # [stage.N]: escalation per stage, checked by its own module
            found, bad = escalation_config(content, where=lambda k: f"[stage.{k}]")
            problems += [stage_lines.at(p) for p in bad]
            values["escalation"] = found
            continue
        if section not in _LAYOUT:
            if section in {k for keys in _LAYOUT.values() for k in keys}:
                owner = next(s for s, keys in _LAYOUT.items() if section in keys)
                problems.append(f"{section} must be inside the [{owner}] section. Move the line below a [{owner}] "
                                "header.")
            else:
                close = difflib.get_close_matches(section, sections, n=1)
                hint = f" Did you mean [{close[0]}]?" if close else ""
                allowed_sections = ", ".join(f"[{s}]" for s in sections)
                problems.append(f"[{section}] is not a known section.{hint} Allowed sections: {allowed_sections}.")
            continue
        if not isinstance(content, dict):
            problems.append(f"{section} = {_show(content)} must be a table. Write it as a [{section}] section header "
                            "followed by its keys.")
            continue
        allowed = _LAYOUT[section]
        for key, raw in content.items():
            where = f"[{section}] {key}"
            if key not in allowed:
                problems.append(_unknown_key(where, key, list(allowed)))
                continue
            name = allowed[key]
            try:
                value = _CHECKS[name](raw)
            except _Invalid as inv:
                problems.append(_describe(where, inv))
                continue
            if name == "templates" and isinstance(value, Path):
                value = value.expanduser()
                if base_dir is not None:
                    if not value.is_absolute():
                        value = Path(base_dir).absolute() / value
                    if not value.is_dir():
                        problems.append(
                            f"{where} = {_show(raw)}: folder {str(value)!r} does not exist. "
                            "Create it (run `oncebeat init` for examples) or remove the key to use the built-in "
                            "templates."
                        )
                        continue
            values[name] = value
    if problems:
        raise _config_error(source, problems)
    try:
        return Policy(**values)
    except PolicyProblems as exc:  # a check across sections: named by the file (and line), as the others are
        raise _config_error(source, [stage_lines.at(p) for p in exc.problems]) from None
    except ConfigError as exc:
        raise ConfigError(f"{source}: {str(exc).removeprefix('Policy: ')}") from None


def _syntax_error(path: Path, text: str, exc: tomllib.TOMLDecodeError) -> ConfigError:
    message = str(exc)
    m = re.search(r"\s*\(at line (\d+), column (\d+)\)\s*$", message)
    if m:
        line, column = int(m.group(1)), int(m.group(2))
        message = message[: m.start()]
    else:
        message = re.sub(r"\s*\(at end of document\)\s*$", "", message) + " at end of file"
        lines = text.split("\n")
        line, column = len(lines), len(lines[-1]) + 1
    return ConfigError(f"{path}:{line}:{column}: TOML syntax error: {message}. Fix the line (strings need double "
                       "quotes, e.g. tz = \"UTC\").")


def load_policy(path: Path | None) -> Policy:
    """Read the policy from a TOML file.

    ``None`` means ``./oncebeat.toml``. When that default file does not
    exist, the defaults are returned; any other missing file is an error.
    """
    default = path is None or Path(path) == Path(DEFAULT_CONFIG_NAME)
    path = Path(DEFAULT_CONFIG_NAME) if path is None else Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        if default:
            return Policy()
        raise ConfigError(f"{path}: file not found. Create it with `oncebeat init` or pass the right path.") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder, not a TOML file. Pass the path of oncebeat.toml.") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the file ({exc.strerror or exc}). Check the path and its "
                          "permissions.") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: byte {exc.start} is not UTF-8. Save the file as UTF-8.") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _syntax_error(path, text, exc) from None
    return policy_from_dict(data, str(path), base_dir=path.parent, text=text)
