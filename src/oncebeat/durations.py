"""Durations as people write them: ``90s``, ``15m``, ``24h``, ``2d``, ``1h30m`` or a number of seconds.

One reader and one writer for every setting and option that takes a duration (oncebeat.toml, the CLI, the
dashboard's forms). No SQL, no dependency: any layer may use it.
"""

from __future__ import annotations

import math
import re

__all__ = ["format_duration", "parse_duration"]

_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd])\s*")


def parse_duration(value: int | float | str) -> float:
    """Seconds of a duration: a number of seconds, or a string such as "90s", "15m", "24h", "2d", "1h30m".

    A string of digits alone ("3600") is seconds. Raises ``ValueError`` for
    anything else, negative or non-finite values, and booleans.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected a duration, got boolean {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().lower()
        if re.fullmatch(r"\d+(?:\.\d+)?", text):
            seconds = float(text)
        else:
            pos, seconds, parts = 0, 0.0, 0
            while pos < len(text):
                m = _DURATION_PART.match(text, pos)
                if not m or m.end() == pos:
                    raise ValueError(f"cannot read duration {value!r}")
                seconds += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
                pos, parts = m.end(), parts + 1
            if parts == 0:
                raise ValueError(f"cannot read duration {value!r}")
    else:
        raise ValueError(f"expected a duration, got {type(value).__name__}")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"duration must be a finite number of seconds >= 0, got {value!r}")
    return seconds


def format_duration(seconds: float) -> str:
    """A duration string that :func:`parse_duration` reads back exactly.

    86400 -> "24h", 172800 -> "2d", 5400 -> "90m", 90 -> "90s", 1.5 -> "1.5s".
    """
    if seconds != int(seconds):
        return f"{seconds!r}s"
    whole = int(seconds)
    if whole and whole % 86400 == 0 and whole >= 2 * 86400:
        return f"{whole // 86400}d"
    if whole and whole % 3600 == 0:
        return f"{whole // 3600}h"
    if whole and whole % 60 == 0:
        return f"{whole // 60}m"
    return f"{whole}s"
