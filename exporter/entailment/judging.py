"""A sweep's stratified sample: drawn while the sweep checks, judged once it is done.

Drawing (:class:`Drawing`) counts every judgeable citation in its stratum and keeps the
candidates that may be in the sample, as plain tuples that cross processes cheaply. Judging
(:class:`SampleJudging`) asks the lexical judge first and the model judge for the rest. The
lexical judge settles what plainly disagrees in microseconds; only what it cannot settle
goes to the model judge, at most ``concurrency`` calls at once, until the budget is spent: the
citations left then are ``skipped`` with reason ``budget``. The budget is checked before each
call starts, so calls already in flight may overrun it by at most ``concurrency`` calls' cost.
A model judge that fails 20 times in a row is asked nothing more: the rest are ``skipped``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from exporter.checks.store import ChunkStore
from exporter.entailment.drawing import (
    Candidate,
    PackedCandidate,
    chosen_candidates,
)
from exporter.entailment.lexical import LexicalJudge
from exporter.entailment.results import (
    AsyncJudge,
    EntailmentAction,
    EntailmentResult,
    Judgement,
    SyncJudge,
    entailment_action,
    settled,
)
from exporter.entailment.sampling import (
    StratifiedSample,
    Stratum,
)
from exporter.entailment.summary import EntailmentSummary

if TYPE_CHECKING:
    from exporter.config.judge import OpenAIJudgeConfig
    from exporter.config.sweep_judging import SweepJudging

__all__ = [
    "Judged",
    "SampleJudging",
    "judge_sample_async",
    "model_judge",
    "sample_judging",
]

# The longest the lexical judging of a sample keeps the event loop before giving it back.
_YIELD_SECONDS = 0.05

# After this many errors of the model judge in a row (an endpoint down or never answering, a
# key refused, a model that answers no label), the rest of the sample is skipped: each citation
# would wait out its own timeout and retries, for hours over a sample of thousands, to decide
# nothing. An endpoint that answers even half the time all but never fails 20 times in a row.
_ERRORS_BEFORE_GIVING_UP = 20
_GIVEN_UP = f"the model judge failed {_ERRORS_BEFORE_GIVING_UP} times in a row"

ModelFactory = Callable[[], AbstractAsyncContextManager[AsyncJudge]]


def model_judge(config: OpenAIJudgeConfig | None) -> tuple[ModelFactory | None, int]:
    """What makes the model judge ``config`` describes (None for the lexical judge alone),
    and the calls it may have in flight. The HTTP client is imported only when a model judge
    is configured."""
    from exporter.entailment.openai import OpenAIJudge  # noqa: PLC0415

    if config is None:
        return None, 1

    def make() -> OpenAIJudge:
        return OpenAIJudge(config)

    return make, config.concurrency


def sample_judging(
    config: SweepJudging, high_severity_topics: frozenset[str], seed: int = 0
) -> SampleJudging | None:
    """How a sweep judges its sample as ``config`` says; None when it judges none."""
    if config.sample <= 0:
        return None
    model, concurrency = model_judge(config.model)
    return SampleJudging(
        config.sample,
        LexicalJudge(),
        model,
        high_severity_topics,
        config.budget_usd,
        concurrency,
        seed,
    )


@dataclass(frozen=True, slots=True)
class SampleJudging:
    """What judging a sweep's sample takes: its size and seed, the judges, the budget."""

    size: int
    lexical: SyncJudge
    # makes the model judge in the event loop that asks it; None: the lexical judge alone
    model: ModelFactory | None
    high_severity_topics: frozenset[str]
    budget_usd: float | None = None
    concurrency: int = 1
    seed: int = 0

    @property
    def judge_name(self) -> str:
        return self.lexical.name if self.model is None else f"{self.lexical.name}+openai"

    def summary(self, totals: dict[Stratum, int]) -> EntailmentSummary:
        """An empty summary of this judging, for a sample drawn from ``totals``."""
        summary = EntailmentSummary(
            judge=self.judge_name, sample_size=self.size, concurrency=self.concurrency
        )
        summary.totals = totals
        return summary

    async def judge(
        self, sample: StratifiedSample[PackedCandidate], store: ChunkStore
    ) -> tuple[list[Judged], EntailmentSummary]:
        """Judge the sample drawn; the judgements and their summary."""
        summary = self.summary(sample.totals)
        judged = await judge_sample_async(
            chosen_candidates(sample),
            store,
            self.lexical,
            self.model,
            summary,
            high_severity_topics=self.high_severity_topics,
            budget_usd=self.budget_usd,
            concurrency=self.concurrency,
        )
        return judged, summary


@dataclass(frozen=True, slots=True)
class Judged:
    stratum: Stratum
    candidate: Candidate
    judgement: Judgement
    action: EntailmentAction
    called: bool  # whether the model judge was called for it (its cost counts)


async def judge_sample_async(
    chosen: Iterable[tuple[Stratum, Candidate]],
    store: ChunkStore,
    lexical: SyncJudge,
    model: Callable[[], AbstractAsyncContextManager[AsyncJudge]] | None,
    summary: EntailmentSummary,
    *,
    high_severity_topics: frozenset[str],
    budget_usd: float | None = None,
    concurrency: int = 1,
) -> list[Judged]:
    """Judge the chosen citations, in order; add them to ``summary``; return every judgement.

    ``model`` makes the model judge, inside this event loop (its connections live there), and
    closes it afterwards. The lexical judge's work (about 0.1 ms a citation) gives the loop
    back every ``_YIELD_SECONDS``: in the service, inline checks go on meanwhile.
    """
    started = time.perf_counter()
    decided: list[tuple[Stratum, Candidate, Judgement | None, str | None]] = []
    last_yield = time.monotonic()
    for stratum, candidate in chosen:
        if time.monotonic() - last_yield > _YIELD_SECONDS:
            await asyncio.sleep(0)
            last_yield = time.monotonic()
        evidence = candidate.judge_input.evidence(store)
        if evidence is None:  # the chunk is gone since the check, or holds other text now
            gone = Judgement(EntailmentResult.SKIPPED, lexical.name, "evidence gone or changed")
            decided.append((stratum, candidate, gone, None))
            continue
        first = lexical.judge(candidate.judge_input.claim, evidence)
        if settled(first) or model is None:
            decided.append((stratum, candidate, first, None))
        else:
            decided.append((stratum, candidate, None, evidence))
    asked = [(i, entry) for i, entry in enumerate(decided) if entry[2] is None]
    answers: dict[int, tuple[Judgement, bool]] = {}
    if asked and model is not None:
        answers = await _ask(model, asked, budget_usd, concurrency)
    judged = []
    for index, (stratum, candidate, judgement, _) in enumerate(decided):
        final, called = (judgement, False) if judgement is not None else answers[index]
        summary.add(stratum, final, called)
        action = entailment_action(final.result, candidate.judge_input.topic, high_severity_topics)
        judged.append(Judged(stratum, candidate, final, action, called))
    summary.wall_seconds += time.perf_counter() - started
    return judged


async def _ask(
    make: Callable[[], AbstractAsyncContextManager[AsyncJudge]],
    asked: list[tuple[int, tuple[Stratum, Candidate, Judgement | None, str | None]]],
    budget_usd: float | None,
    concurrency: int,
) -> dict[int, tuple[Judgement, bool]]:
    """The model judge's answers (and whether it was called), ``concurrency`` at a time, until
    the budget is spent."""
    queue = list(reversed(asked))
    answers: dict[int, tuple[Judgement, bool]] = {}
    spent = 0.0
    failing = 0  # the model's errors in a row
    async with make() as model:

        async def worker() -> None:
            nonlocal spent, failing
            while queue:
                index, (_, candidate, _, evidence) = queue.pop()
                if budget_usd is not None and spent >= budget_usd:
                    skipped = Judgement(EntailmentResult.SKIPPED, model.name, "budget")
                    answers[index] = (skipped, False)
                    continue
                if failing >= _ERRORS_BEFORE_GIVING_UP:
                    given_up = Judgement(EntailmentResult.SKIPPED, model.name, _GIVEN_UP)
                    answers[index] = (given_up, False)
                    continue
                assert evidence is not None
                answer = await model.judge(candidate.judge_input.claim, evidence)
                spent += answer.cost_usd
                failing = failing + 1 if answer.result is EntailmentResult.ERROR else 0
                answers[index] = (answer, True)

        await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
    return answers
