"""Server-rendered bar charts: geometry for inline SVG (no script, no chart library).

:func:`stacked_bars` turns labelled columns of named values into rectangles, a y axis with
round ticks and x labels; ``templates/_chart.html`` draws them. Series get CSS classes ``s0``…``s5``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Chart", "grouped_bars", "nice_ceiling", "stacked_bars"]


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


def grouped_bars(columns: Sequence[tuple[str, dict[str, float | None]]], series: Sequence[str], *,
                 width: int = 560, height: int = 160, title: str = "", top: float | None = None,
                 unit: str = "", value_text: dict[tuple[str, str], str] | None = None) -> Chart:
    """Bars side by side: per column, one bar per series (series i has class ``s{i}``), on one y axis.

    Args:
        columns: ``(x label, {series name: value or None})``; None draws no bar (no data), unlike 0.
        top: the axis maximum (100 for percentages); default a round number above the largest value.
        unit: appended to tick labels and tooltips ("%", " d").
        value_text: optional tooltip per (x label, series name), e.g. why a value is missing.
    """
    chart = Chart(width=width, height=height, title=title,
                  legend=[(f"s{i % 6}", name) for i, name in enumerate(series)] if len(series) > 1 else [])
    plot_w = width - chart.left - 8
    plot_h = height - chart.top - chart.bottom
    largest = max((v for _, values in columns for v in values.values() if v is not None), default=0.0)
    top_value = top if top is not None else nice_ceiling(largest)
    for i in range(5):
        chart.ticks.append((chart.top + plot_h - plot_h * i / 4, _short(top_value * i / 4) + unit))
    slot = plot_w / max(1, len(columns))
    group_w = slot * 0.8
    bar_w = max(1.0, group_w / max(1, len(series)))
    for n, (label, values) in enumerate(columns):
        x0 = chart.left + n * slot + (slot - group_w) / 2
        for i, name in enumerate(series):
            v = values.get(name)
            tip = (value_text or {}).get((label, name))
            if v is None:
                continue
            h = plot_h * min(v, top_value) / top_value if top_value else 0.0
            chart.bars.append(Bar(round(x0 + i * bar_w, 1), round(chart.top + plot_h - h, 1), round(bar_w * 0.92, 1),
                                  round(h, 1), f"s{i % 6}", tip or f"{label} {name}: {_short(v)}{unit}"))
        chart.labels.append((round(chart.left + n * slot + slot / 2, 1), label))
    return chart
