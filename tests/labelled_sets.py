"""Scoring a classifier on a labelled set's split: the one helper the floors tests share."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["precision_recall"]


def precision_recall(
    path: Path,
    split: str,
    predicted: Callable[[dict[str, Any]], bool],
    actual: Callable[[dict[str, Any]], bool],
) -> tuple[float, float, int]:
    """Precision and recall of the positive class on one split of a JSONL set, and its size."""
    tp = fp = fn = total = 0
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            if row["split"] != split:
                continue
            total += 1
            guess, truth = predicted(row), actual(row)
            tp += guess and truth
            fp += guess and not truth
            fn += truth and not guess
    return tp / (tp + fp), tp / (tp + fn), total
