"""Who caused a thing (G8): kind, host, pid, process name and version; for a person's action, the operator.

Every occurrence, job, effect and audit event stores a :class:`Source`.
``kind`` is one of ``clock``, ``worker``, ``manual``, ``cli``, ``api``,
``retry``, ``rescue``, ``simulator``. The process name comes from ``DYNO``
(Heroku-style platforms) or ``ONCEBEAT_PROCESS_NAME``, else the program name.

An action a person takes through the ``oncebeat`` CLI or the dashboard carries an :class:`Operator`
(``via`` ``cli`` or ``dashboard``, the user where known, whether it came from a terminal); every audit
event recorded with that source keeps it under ``detail["operator"]``, so the doctor tells an operator's
trigger or re-run from a leftover cron entry. Library calls carry none: only the entry points attach one.

Example::

    source = current_source("cli", operator=cli_operator())   # what `oncebeat trigger` records
"""

from __future__ import annotations

import getpass
import os
import socket
import sys
from dataclasses import dataclass, replace
from importlib import metadata
from typing import Any

__all__ = ["Source", "Operator", "current_source", "cli_operator", "dashboard_operator", "api_operator", "VERSION",
           "SOURCE_KINDS",
           "OPERATOR_VIAS", "DASHBOARD_USER"]


def _installed_version() -> str:
    """The version of the installed distribution (pyproject.toml), "0+unknown" when run from an uninstalled tree."""
    try:
        return metadata.version("oncebeat")
    except metadata.PackageNotFoundError:
        return "0+unknown"


VERSION = _installed_version()
SOURCE_KINDS = ("clock", "worker", "manual", "cli", "api", "retry", "rescue", "simulator")
OPERATOR_VIAS = ("cli", "dashboard", "api")
DASHBOARD_USER = "operator session"  # who acts on the dashboard: whoever holds the operator token's session


@dataclass(frozen=True, kw_only=True, slots=True)
class Operator:
    """The person behind an action: ``via`` (``cli``, ``dashboard`` or ``api``), ``user`` (None when unknown) and
    ``terminal`` (the CLI ran with a terminal on stdin; None for the dashboard)."""

    via: str
    user: str | None = None
    terminal: bool | None = None

    def __post_init__(self) -> None:
        if self.via not in OPERATOR_VIAS:
            raise ValueError(f"unknown operator via {self.via!r}; use one of {', '.join(OPERATOR_VIAS)}")

    def detail(self) -> dict[str, Any]:
        """The JSON an audit event keeps under ``detail["operator"]``."""
        return {"via": self.via, "user": self.user, "terminal": self.terminal}

    @classmethod
    def from_detail(cls, value: Any) -> Operator | None:
        """The operator an event's ``detail["operator"]`` names, or None (absent or not one)."""
        if not isinstance(value, dict) or value.get("via") not in OPERATOR_VIAS:
            return None
        user, terminal = value.get("user"), value.get("terminal")
        return cls(via=str(value["via"]), user=str(user) if user is not None else None,
                   terminal=terminal if isinstance(terminal, bool) else None)

    def __str__(self) -> str:
        where = "" if self.terminal is None else (", from a terminal" if self.terminal else ", no terminal")
        return f"{self.via}, user {self.user or 'unknown'}{where}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Source:
    kind: str
    host: str
    pid: int
    name: str
    version: str = VERSION
    operator: Operator | None = None  # the person behind it (CLI, dashboard); not a column, kept in audit details

    def params(self) -> dict[str, Any]:
        """The ``src_*`` query parameters every provenance-carrying insert takes."""
        return {"src_kind": self.kind, "src_host": self.host, "src_pid": self.pid,
                "src_name": self.name, "src_version": self.version}

    def with_kind(self, kind: str) -> Source:
        return replace(self, kind=kind)

    def __str__(self) -> str:
        return f"{self.kind} {self.name} pid {self.pid} on {self.host} (v{self.version})"


def current_source(kind: str, *, name: str | None = None, operator: Operator | None = None) -> Source:
    """The provenance of this process for actions of ``kind`` (by ``operator`` when a person acts)."""
    if kind not in SOURCE_KINDS:
        raise ValueError(f"unknown source kind {kind!r}; use one of {', '.join(SOURCE_KINDS)}")
    proc = name or os.environ.get("DYNO") or os.environ.get("ONCEBEAT_PROCESS_NAME")
    if not proc:
        prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
        if sys.argv and sys.argv[0].endswith(os.path.join("oncebeat", "cli.py")):
            prog = "oncebeat"  # `python -m oncebeat.cli ...` is the oncebeat command too
        proc = f"{prog} {sys.argv[1]}" if prog == "oncebeat" and len(sys.argv) > 1 else prog
    return Source(kind=kind, host=socket.gethostname(), pid=os.getpid(), name=proc, operator=operator)


def _login_user() -> str | None:
    """The person at this process: ``SUDO_USER`` (who ran sudo), else the login name; None when unknown."""
    try:
        return os.environ.get("SUDO_USER") or getpass.getuser() or None
    except (KeyError, OSError):  # no passwd entry for the uid (some containers) and no LOGNAME/USER
        return None


def cli_operator() -> Operator:
    """The operator of an ``oncebeat`` CLI command: the login user and whether stdin is a terminal."""
    try:
        terminal = sys.stdin is not None and sys.stdin.isatty()
    except (ValueError, OSError):  # stdin closed
        terminal = False
    return Operator(via="cli", user=_login_user(), terminal=terminal)


def dashboard_operator(user: str | None = None) -> Operator:
    """The operator of a dashboard action: ``user`` when the session names one, else :data:`DASHBOARD_USER`."""
    return Operator(via="dashboard", user=user or DASHBOARD_USER)


def api_operator(client: str) -> Operator:
    """The operator of an HTTP API write: the name of the API token that sent it (``ONCEBEAT_API_TOKENS``)."""
    return Operator(via="api", user=client)
