"""`python -m bench` without the bench extra says which extra to install instead of failing mid-run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root holds the bench package

import bench.__main__ as bench_main  # noqa: E402


def test_a_missing_peer_is_named_with_the_extra_that_brings_it(monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(bench_main.BENCH_EXTRA, "oncebeat_no_such_peer", "no-such-peer")
    assert bench_main.main(["w1", "--quick"]) == 2
    err = capsys.readouterr().err
    assert "no-such-peer" in err and "pip install -e '.[bench]'" in err
