"""Working folders: recreated when oncebeat made them, never deleted otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from oncebeat.errors import ConfigError
from oncebeat.sample.workdir import MARKER, prepare_workdir


def test_a_new_folder_is_created_with_the_marker(tmp_path: Path) -> None:
    work = prepare_workdir(tmp_path / "new")
    assert (work / MARKER).is_file()


def test_a_folder_oncebeat_made_is_emptied_and_reused(tmp_path: Path) -> None:
    work = prepare_workdir(tmp_path / "w")
    (work / "old.db").write_text("x")
    (work / "maildir").mkdir()
    prepare_workdir(work)
    assert sorted(p.name for p in work.iterdir()) == [MARKER]


def test_a_foreign_folder_with_content_is_refused_and_left_alone(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("precious")
    with pytest.raises(ConfigError, match="not created by oncebeat"):
        prepare_workdir(tmp_path)
    assert (tmp_path / "keep.txt").read_text() == "precious"


def test_a_file_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "mine.txt"
    target.write_text("x")
    with pytest.raises(ConfigError, match="is a file"):
        prepare_workdir(target)
    assert target.read_text() == "x"


def test_the_filesystem_root_is_refused() -> None:
    with pytest.raises(ConfigError):
        prepare_workdir(Path("/"))
