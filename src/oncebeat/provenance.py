"""Who caused a thing (G8): kind, host, pid, process name and version.

Every occurrence, job, effect and audit event stores a :class:`Source`.
``kind`` is one of ``clock``, ``worker``, ``manual``, ``cli``, ``api``,
``retry``, ``rescue``, ``simulator``. The process name comes from ``DYNO``
(Heroku-style platforms) or ``ONCEBEAT_PROCESS_NAME``, else the program name.
"""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass, replace
from importlib import metadata
from typing import Any

__all__ = ["Source", "current_source", "VERSION", "SOURCE_KINDS"]


def _installed_version() -> str:
    """The version of the installed distribution (pyproject.toml), "0+unknown" when run from an uninstalled tree."""
    try:
        return metadata.version("oncebeat")
    except metadata.PackageNotFoundError:
        return "0+unknown"


VERSION = _installed_version()
SOURCE_KINDS = ("clock", "worker", "manual", "cli", "api", "retry", "rescue", "simulator")


@dataclass(frozen=True, kw_only=True, slots=True)
class Source:
    kind: str
    host: str
    pid: int
    name: str
    version: str = VERSION

    def params(self) -> dict[str, Any]:
        """The ``src_*`` query parameters every provenance-carrying insert takes."""
        return {"src_kind": self.kind, "src_host": self.host, "src_pid": self.pid,
                "src_name": self.name, "src_version": self.version}

    def with_kind(self, kind: str) -> Source:
        return replace(self, kind=kind)

    def __str__(self) -> str:
        return f"{self.kind} {self.name} pid {self.pid} on {self.host} (v{self.version})"


def current_source(kind: str, *, name: str | None = None) -> Source:
    """The provenance of this process for actions of ``kind``."""
    if kind not in SOURCE_KINDS:
        raise ValueError(f"unknown source kind {kind!r}; use one of {', '.join(SOURCE_KINDS)}")
    proc = name or os.environ.get("DYNO") or os.environ.get("ONCEBEAT_PROCESS_NAME")
    if not proc:
        prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
        proc = f"{prog} {sys.argv[1]}" if prog == "oncebeat" and len(sys.argv) > 1 else prog
    return Source(kind=kind, host=socket.gethostname(), pid=os.getpid(), name=proc)
