"""The stores' parameter conversions give exactly the text and values they always gave (issue 27: faster paths).

``instant_text`` builds an instant's fixed-width UTC text from ``isoformat`` instead of ``strftime`` (SQLite stores
every instant so: text order is time order), and the SQLite store's ``_adapt`` passes plain values through by exact
type before its isinstance checks. Both are compared here with the formulas they replace, over instants in many
zones, folds, years and microseconds, and over values of every kind a query passes.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, date, datetime, timedelta, timezone
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from oncebeat.store import Json
from oncebeat.store.base import instant_text
from oncebeat.store.sqlite import _adapt, _params

ZONES = [UTC, timezone(timedelta(hours=5, minutes=45)), timezone(timedelta(hours=-9, minutes=-30)),
         ZoneInfo("America/Chicago"), ZoneInfo("Europe/Berlin"), ZoneInfo("Australia/Lord_Howe"),
         ZoneInfo("Pacific/Kiritimati"), ZoneInfo("Asia/Kathmandu")]


def _old_instant_text(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _old_adapt(value: Any) -> Any:
    if isinstance(value, datetime):
        return _old_instant_text(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Json):
        return json.dumps(value.value, separators=(",", ":"), default=str)
    if isinstance(value, (list, tuple)):
        return json.dumps(list(value), default=str)
    if isinstance(value, bool):
        return int(value)
    return value


def _instants() -> list[datetime]:
    rng = random.Random(27)
    out = [datetime(2026, 3, 8, 8, 0, tzinfo=ZoneInfo("America/Chicago")),
           datetime(2026, 11, 1, 1, 30, fold=1, tzinfo=ZoneInfo("America/Chicago")),
           datetime(2026, 10, 25, 2, 30, fold=0, tzinfo=ZoneInfo("Europe/Berlin")),
           datetime(1000, 1, 1, 12, tzinfo=UTC), datetime(1001, 1, 1, tzinfo=timezone(timedelta(hours=14))),
           datetime(999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC), datetime(5, 1, 1, tzinfo=UTC),
           datetime(9999, 12, 31, 12, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC)]
    for _ in range(3000):
        zone = rng.choice(ZONES)
        local = datetime(rng.randint(2, 9998), rng.randint(1, 12), rng.randint(1, 28), rng.randint(0, 23),
                         rng.randint(0, 59), rng.randint(0, 59), rng.choice((0, 1, 999_999, rng.randint(0, 999_999))),
                         fold=rng.randint(0, 1), tzinfo=zone)
        out.append(local)
    return out


def test_instant_text_is_the_strftime_text_for_every_zone_fold_year_and_microsecond() -> None:
    for value in _instants():
        assert instant_text(value) == _old_instant_text(value), repr(value)


def test_instant_text_still_refuses_a_naive_datetime() -> None:
    with pytest.raises(ValueError, match="naive datetime"):
        instant_text(datetime(2026, 3, 8, 8, 0))


class _Colour(StrEnum):
    RED = "red"


class _Count(int):
    pass


def test_sqlite_adapt_gives_what_the_isinstance_chain_gave_for_every_kind_of_value() -> None:
    values: list[Any] = [None, "", "text", "ünïcode", 0, -7, 2**63 - 1, 1.5, float("inf"), b"\x00bytes", True, False,
                         _Colour.RED, _Count(3), date(2026, 3, 8), date(5, 1, 1), [1, "a", None], (2, "b"), [],
                         Json({"a": [1, 2], "when": date(2026, 1, 1)}), Json([]), Json(None), {"a": 1},
                         *_instants()[:200]]
    for value in values:
        new, old = _adapt(value), _old_adapt(value)
        assert (type(new), new) == (type(old), old), repr(value)
    params = {f"p{i}": v for i, v in enumerate(values)}
    assert _params(params) == {k: _old_adapt(v) for k, v in params.items()}
