"""Server-rendered bar charts: geometry for inline SVG (no script, no chart library).

:func:`stacked_bars` turns labelled columns of named values into rectangles, a y axis with
round ticks and x labels; ``templates/_chart.html`` draws them. Series get CSS classes ``s0``…``s5``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Chart", "nice_ceiling", "stacked_bars"]


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    css: str
    title: str


@dataclass(slots=True)
class Chart:
    width: int
    height: int
    bars: list[Bar] = field(default_factory=list)
    ticks: list[tuple[float, str]] = field(default_factory=list)  # (y, label)
    labels: list[tuple[float, str]] = field(default_factory=list)  # (x centre, label)
    legend: list[tuple[str, str]] = field(default_factory=list)  # (css class, series name)
    left: int = 48
    bottom: int = 20
    top: int = 8
    title: str = ""


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 × 10^k that is >= ``value`` (1 for 0)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * power >= value:
            return float(step * power)
    return float(10 * power)


def _short(value: float) -> str:
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.3g}"


def stacked_bars(columns: Sequence[tuple[str, dict[str, float]]], series: Sequence[str], *, width: int = 560,
                 height: int = 160, title: str = "", label_every: int = 1,
                 value_text: dict[str, str] | None = None) -> Chart:
    """A stacked bar chart.

    Args:
        columns: ``(x label, {series name: value})`` per column, left to right.
        series: series names in stacking order (bottom first); series i is drawn with class ``s{i}``.
        label_every: print every n-th x label (dense time axes).
        value_text: optional text per x label shown in each bar's tooltip instead of the raw numbers.
    """
    chart = Chart(width=width, height=height, title=title,
                  legend=[(f"s{i % 6}", name) for i, name in enumerate(series)])
    plot_w = width - chart.left - 8
    plot_h = height - chart.top - chart.bottom
    top_value = nice_ceiling(max((sum(v.get(s, 0.0) for s in series) for _, v in columns), default=0.0))
    for i in range(5):
        value = top_value * i / 4
        chart.ticks.append((chart.top + plot_h - plot_h * i / 4, _short(value)))
    slot = plot_w / max(1, len(columns))
    bar_w = max(1.0, slot * 0.72)
    for n, (label, values) in enumerate(columns):
        x = chart.left + n * slot + (slot - bar_w) / 2
        base = float(chart.top + plot_h)
        for i, name in enumerate(series):
            v = values.get(name, 0.0)
            if v <= 0:
                continue
            h = plot_h * v / top_value
            base -= h
            tip = (value_text or {}).get(label) or f"{label}: {_short(v)} {name}"
            chart.bars.append(Bar(round(x, 1), round(base, 1), round(bar_w, 1), round(h, 1), f"s{i % 6}", tip))
        if n % label_every == 0:
            chart.labels.append((round(chart.left + n * slot + slot / 2, 1), label))
    return chart
