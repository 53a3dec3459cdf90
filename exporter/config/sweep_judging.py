"""How a sweep judges its sample, apart from the model judge's configuration: a sweep whose
judge nobody configured needs this and not httpx (exporter.config.judge imports it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from exporter.config.judge import OpenAIJudgeConfig

__all__ = ["SweepJudging"]


@dataclass(frozen=True, slots=True)
class SweepJudging:
    """How a sweep judges its sample: how many citations (0: none), the model judge for what
    the lexical judge cannot settle (None: the lexical judge alone), and what the model may
    cost the sweep (None: no limit)."""

    sample: int
    model: OpenAIJudgeConfig | None = None
    budget_usd: float | None = None
