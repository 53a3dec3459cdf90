"""The signed shift of repaired drift: its buckets, its histogram and its clusters.

The shift is where a quote is now minus where its recorded span points: one tight cluster means
one systematic cause (a chunker or parser change that moved every span alike). The text summary,
the metrics' buckets, the HTML report's chart and its examples all bucket shifts here.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass

__all__ = [
    "SHIFT_BOUNDS",
    "ShiftCluster",
    "bucket_label",
    "histogram",
    "shift_bucket",
    "shift_clusters",
]

# Signed, symmetric bucket bounds: fine near 0, up to several thousand characters either way.
_POSITIVE = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
SHIFT_BOUNDS: tuple[int, ...] = (*(-b for b in reversed(_POSITIVE)), 0, *_POSITIVE)


def shift_bucket(shift: int) -> int:
    """The index of ``shift``'s bucket: 0 below the first bound, len(SHIFT_BOUNDS) from the
    last; bucket i holds [SHIFT_BOUNDS[i - 1], SHIFT_BOUNDS[i])."""
    return bisect_right(SHIFT_BOUNDS, shift)


@dataclass(frozen=True, slots=True)
class ShiftCluster:
    """Shifts that lie close together; ``share`` is of all repaired drift with a known shift."""

    center: int
    low: int
    high: int
    count: int
    share: float


def shift_clusters(
    shifts: Counter[int], *, top: int = 3, min_share: float = 0.05
) -> list[ShiftCluster]:
    """Group shift values whose neighbours are within 2% (at least 4 characters) of each other."""
    total = sum(shifts.values())
    if not total:
        return []
    groups: list[list[int]] = []
    for value in sorted(shifts):
        if groups and value - groups[-1][-1] <= max(4, abs(value) // 50):
            groups[-1].append(value)
        else:
            groups.append([value])
    clusters = []
    for group in groups:
        count = sum(shifts[v] for v in group)
        running, center = 0, group[0]
        for value in group:  # weighted median
            running += shifts[value]
            if running * 2 >= count:
                center = value
                break
        clusters.append(ShiftCluster(center, group[0], group[-1], count, count / total))
    clusters.sort(key=lambda c: c.count, reverse=True)
    return [c for c in clusters[:top] if c.share >= min_share]


def bucket_label(index: int) -> str:
    """Label of bucket ``index`` of SHIFT_BOUNDS plus the two open ends."""
    bounds = SHIFT_BOUNDS
    if index == 0:
        return f"< {bounds[0]}"
    if index == len(bounds):
        return f">= {bounds[-1]}"
    low, high = bounds[index - 1], bounds[index]
    return str(low) if high - low == 1 else f"[{low}, {high})"


def histogram(shifts: Counter[int]) -> list[tuple[str, int]]:
    counts = [0] * (len(SHIFT_BOUNDS) + 1)
    for value, count in shifts.items():
        counts[shift_bucket(value)] += count
    used = [i for i, c in enumerate(counts) if c]
    if not used:
        return []
    return [(bucket_label(i), counts[i]) for i in range(used[0], used[-1] + 1)]
