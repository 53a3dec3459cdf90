"""The shift distribution as an SVG bar chart, made here rather than by a charting library: it
is one small picture, it must work with no script and no network, and its bars must be
checkable by a test (each bar carries its bucket and count as data attributes).

Bars are the histogram's buckets (see :mod:`exporter.pipeline.shifts`), from the first used to
the last used; a bar most of whose citations belong to a main cluster is marked with its letter
(the others are grey: repaired drift outside the main clusters).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

from exporter.pipeline.shifts import ShiftCluster, bucket_label, shift_bucket

__all__ = ["Bar", "chart_bars", "cluster_letter", "shift_chart_svg"]

_WIDTH, _HEIGHT = 760, 300
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 12, 28, 92  # margins: axis labels and bucket labels
_LETTERS = "ABCDEFGHIJ"


def cluster_letter(index: int) -> str:
    """A cluster's mark in the chart and the page: A for the largest, then B, C..."""
    return _LETTERS[index] if index < len(_LETTERS) else str(index + 1)


@dataclass(frozen=True, slots=True)
class Bar:
    """One bucket of the chart: its label, its count, and the cluster holding most of it."""

    bucket: int
    label: str
    count: int
    clusters: tuple[str, ...]


def chart_bars(shifts: Counter[int], clusters: list[ShiftCluster]) -> list[Bar]:
    """The bars, from the first bucket used to the last (empty ones between kept: the gaps
    are part of the picture)."""
    counts = Counter[int]()
    # per bucket, how many of its citations each cluster holds
    held: dict[int, Counter[int]] = {}
    for value, count in shifts.items():
        bucket = shift_bucket(value)
        counts[bucket] += count
        for i, cluster in enumerate(clusters):
            if cluster.low <= value <= cluster.high:
                held.setdefault(bucket, Counter())[i] += count
    used = sorted(bucket for bucket, count in counts.items() if count)
    if not used:
        return []
    bars = []
    for bucket in range(used[0], used[-1] + 1):
        # a bar is lettered with a cluster that holds most of its citations, never one that
        # only touches its range
        inside = held.get(bucket, Counter())
        marks = tuple(
            cluster_letter(i) for i in range(len(clusters)) if inside[i] * 2 > counts[bucket]
        )
        bars.append(Bar(bucket, bucket_label(bucket), counts[bucket], marks))
    return bars


def _ticks(peak: int) -> list[int]:
    """Three or so round values from 0 to at least ``peak`` for the count axis."""
    if peak <= 0:
        return [0]
    step = 1
    while step * 4 < peak:
        for factor in (2, 5, 10):
            if step * factor * 4 >= peak:
                step *= factor
                break
        else:
            step *= 10
    return list(range(0, peak + step, step))


def shift_chart_svg(bars: list[Bar], title: str = "Shift of repaired drift") -> str:
    """The chart as an inline ``<svg>`` element (empty string without bars)."""
    if not bars:
        return ""
    ticks = _ticks(max(bar.count for bar in bars))
    top = ticks[-1] or 1
    plot_w = _WIDTH - _LEFT - _RIGHT
    plot_h = _HEIGHT - _TOP - _BOTTOM
    slot = plot_w / len(bars)
    width = max(1.0, slot * 0.8)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_WIDTH} {_HEIGHT}" '
        f'role="img" aria-label={quoteattr(title)} class="chart">',
        f"<title>{escape(title)}</title>",
    ]
    for tick in ticks:
        y = _TOP + plot_h * (1 - tick / top)
        parts.append(
            f'<line class="grid" x1="{_LEFT}" x2="{_WIDTH - _RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="tick" x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{tick:,}</text>'
        )
    for i, bar in enumerate(bars):
        x = _LEFT + i * slot + (slot - width) / 2
        height = plot_h * bar.count / top
        y = _TOP + plot_h - height
        marked = " cluster" if bar.clusters else ""
        label = f"{bar.label}: {bar.count:,} citations"
        if bar.clusters:
            label += f" (cluster {', '.join(bar.clusters)})"
        parts.append(
            f'<rect class="bar{marked}" x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" '
            f'height="{height:.1f}" data-bucket={quoteattr(bar.label)} '
            f'data-count="{bar.count}"><title>{escape(label)}</title></rect>'
        )
        if bar.clusters:
            parts.append(
                f'<text class="mark" x="{x + width / 2:.1f}" y="{y - 6:.1f}" '
                f'text-anchor="middle">{escape(",".join(bar.clusters))}</text>'
            )
        cx, cy = x + width / 2, _TOP + plot_h + 10
        parts.append(
            f'<text class="bucket" x="{cx:.1f}" y="{cy:.1f}" text-anchor="end" '
            f'transform="rotate(-50 {cx:.1f} {cy:.1f})">{escape(bar.label)}</text>'
        )
    axis_y = _TOP + plot_h
    parts.append(
        f'<line class="axis" x1="{_LEFT}" x2="{_WIDTH - _RIGHT}" y1="{axis_y}" y2="{axis_y}"/>'
    )
    parts.append(
        f'<text class="axis-title" x="{_LEFT + plot_w / 2:.1f}" y="{_HEIGHT - 4}" '
        'text-anchor="middle">shift (characters: where the quote is now minus where the span '
        "points)</text>"
    )
    parts.append("</svg>")
    return "".join(parts)
