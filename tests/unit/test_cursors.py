"""The clock's cursors: a dict of next fire instants whose time index answers "due" and "earliest" without a scan."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from oncebeat.cursors import Cursors

T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


def t(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_due_lists_keys_at_or_before_now_earliest_first_and_keeps_them() -> None:
    c = Cursors()
    for key, s in (("c", 5), ("a", 0), ("b", 0), ("d", 60)):
        c[key] = t(s)
    assert c.due(t(-1)) == []
    assert c.due(t(5)) == ["a", "b", "c"]
    assert c.due(t(5)) == ["a", "b", "c"], "asking again removes nothing: an unfired key stays due"
    assert c.earliest() == t(0)
    assert c.due_unordered(t(5)) == {"a", "b", "c"}


def test_a_moved_or_removed_key_is_due_only_at_its_new_instant() -> None:
    c = Cursors()
    c["a"], c["b"], c["x"] = t(0), t(1), t(2)
    c["a"] = t(120)  # fired: its cursor moved on; the old heap entry is stale
    c.pop("b")
    c["x"] = t(2)  # written twice with one instant: listed once
    assert c.due(t(60)) == ["x"]
    assert c.earliest() == t(2)
    assert c.due(t(120)) == ["x", "a"]
    c.clear()
    assert c.due(t(1e6)) == [] and c.earliest() is None


def test_many_rewrites_keep_the_index_small_and_right() -> None:
    c = Cursors()
    for i in range(100):
        c[f"k{i:03d}"] = t(i)
    for round_ in range(1, 60):  # every key fired 59 times: 5,900 stale entries without a rebuild
        for i in range(100):
            c[f"k{i:03d}"] = t(i + 100 * round_)
    assert len(c._heap) <= 4 * len(c) + 1024
    assert c.due(t(5900 + 9)) == [f"k{i:03d}" for i in range(10)]
    assert c.earliest() == t(5900)


def test_writes_that_would_bypass_the_index_are_refused() -> None:
    c = Cursors()
    with pytest.raises(TypeError):
        c.update({"a": t(0)})
    with pytest.raises(TypeError):
        c.setdefault("a", t(0))
