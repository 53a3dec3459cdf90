"""What judging a sweep's sample came to: per stratum, what it cost, and what the whole archive
would have cost.

The point of sampling is the arithmetic: a model judge at about 120 ms and $0.0004 a citation
would take hours and dollars for the whole archive on every re-index. The summary says what
the sample cost and projects it onto every judgeable citation, from the latency and price this
run measured.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from exporter.entailment.results import EntailmentResult, Judgement
from exporter.entailment.sampling import Stratum

__all__ = ["EntailmentSummary"]


@dataclass
class EntailmentSummary:
    """Counts of a judged sample, by stratum and result, and the cost of the model judge."""

    judge: str = "lexical"
    sample_size: int = 0
    concurrency: int = 1
    totals: dict[Stratum, int] = field(default_factory=dict)
    sampled: Counter[Stratum] = field(default_factory=Counter)
    results: Counter[tuple[Stratum, str]] = field(default_factory=Counter)
    deciding: Counter[str] = field(default_factory=Counter)  # which judge decided, per judged
    skipped_because: Counter[str] = field(default_factory=Counter)  # skipped, by reason
    calls: int = 0  # calls to the model judge
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    judge_seconds: float = 0.0  # summed latency of the model judge's calls
    wall_seconds: float = 0.0

    def add(self, stratum: Stratum, judgement: Judgement, called: bool) -> None:
        """One sampled citation and what was decided (``called``: the model judge was asked)."""
        self.sampled[stratum] += 1
        self.results[stratum, judgement.result.value] += 1
        self.deciding[judgement.judge] += 1
        if judgement.result is EntailmentResult.SKIPPED:
            self.skipped_because[judgement.reason or "unknown"] += 1
        if called:
            self.calls += 1
            self.prompt_tokens += judgement.prompt_tokens
            self.completion_tokens += judgement.completion_tokens
            self.cost_usd += judgement.cost_usd
            self.judge_seconds += judgement.seconds

    @property
    def judgeable(self) -> int:
        return sum(self.totals.values())

    def result_count(self, result: EntailmentResult) -> int:
        return sum(n for (_, name), n in self.results.items() if name == result.value)

    def projection(self) -> dict[str, float | int]:
        """What judging every judgeable citation would cost at this run's measured figures:
        the model judge is asked the same share of them as of the sample."""
        sampled = sum(self.sampled.values())
        if not sampled or not self.calls:
            return {"calls": 0, "hours": 0.0, "usd": 0.0}
        calls = round(self.judgeable * self.calls / sampled)
        latency = self.judge_seconds / self.calls
        return {
            "calls": calls,
            "hours": calls * latency / max(1, self.concurrency) / 3600,
            "usd": calls * self.cost_usd / self.calls,
        }
