"""Working folders that commands recreate (demo, simulate): never delete what oncebeat did not make.

A folder is reset only if it is new, empty, or carries the marker file
``.oncebeat-workdir`` that :func:`prepare_workdir` leaves in every folder it
creates. Anything else — ``/``, a home folder, a project folder, a file — is
refused with a :class:`~oncebeat.errors.ConfigError` naming it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..errors import ConfigError

__all__ = ["prepare_workdir", "MARKER"]

MARKER = ".oncebeat-workdir"


def prepare_workdir(path: Path, *, option: str = "--dir") -> Path:
    """Return ``path`` as a fresh, empty folder holding only the marker; refuse to delete foreign content.

    Raises:
        ConfigError: ``path`` is a file, or a non-empty folder that oncebeat did not create.
    """
    path = Path(path)
    if path.exists():
        if not path.is_dir():
            raise ConfigError(f"{option} {path}: is a file, not a folder; name a new or empty folder")
        entries = list(path.iterdir())
        if entries and not (path / MARKER).is_file():
            raise ConfigError(f"{option} {path}: the folder is not empty and was not created by oncebeat, so it "
                              "will not be deleted; name a new or empty folder (e.g. --dir oncebeat-demo)")
        for entry in entries:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    path.mkdir(parents=True, exist_ok=True)
    (path / MARKER).write_text("created by oncebeat; this folder is recreated on each run\n", encoding="utf-8")
    return path
