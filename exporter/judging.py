"""A sweep's stratified sample, judged: the lexical judge first, the model judge for the rest.

The lexical judge settles what plainly disagrees in microseconds; only what it cannot settle
goes to the model judge, at most ``concurrency`` calls at once, until the budget is spent: the
citations left then are ``skipped`` with reason ``budget``. The budget is checked before each
call starts, so calls already in flight may overrun it by at most ``concurrency`` calls' cost.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any

from exporter.checks.entailment import (
    AsyncJudge,
    EntailmentAction,
    EntailmentResult,
    Judgement,
    SyncJudge,
    entailment_action,
    settled,
)
from exporter.checks.store import ChunkStore
from exporter.checks.verdict import Repair, Verdict
from exporter.outputs.entailment_report import EntailmentSummary
from exporter.pipeline.outcome import JudgeInput
from exporter.pipeline.sampling import StratifiedSample, Stratum

__all__ = ["Candidate", "Judged", "PackedCandidate", "chosen_candidates", "judge_sample"]

# A candidate as a tuple of plain values: what worker processes send and the sample keeps.
PackedCandidate = tuple[int, tuple[Any, ...], tuple[Any, ...] | None, tuple[Any, ...]]

_VERDICT_FIELDS = tuple(field.name for field in fields(Verdict) if field.name != "repair")
_verdict_values = attrgetter(*_VERDICT_FIELDS)
_repair_values = attrgetter(*(field.name for field in fields(Repair)))
_judge_input_values = attrgetter(*(field.name for field in fields(JudgeInput)))


@dataclass(frozen=True, slots=True)
class Candidate:
    """A judgeable citation of the archive: where it was, its verdict, what to judge."""

    line: int
    verdict: Verdict
    judge_input: JudgeInput

    def pack(self) -> PackedCandidate:
        """The candidate as nested tuples of plain values: a sweep offers every judgeable
        citation of a small archive to its sample, and these cost a tenth of the objects to
        send between processes (no class is pickled by reference) and nothing to the
        garbage collector while the sample holds them."""
        repair = self.verdict.repair
        return (
            self.line,
            _verdict_values(self.verdict),
            None if repair is None else _repair_values(repair),
            _judge_input_values(self.judge_input),
        )

    @classmethod
    def unpack(cls, packed: PackedCandidate) -> Candidate:
        line, verdict, repair, judge_input = packed
        rebuilt = Verdict(
            **dict(zip(_VERDICT_FIELDS, verdict, strict=True)),
            repair=None if repair is None else Repair(*repair),
        )
        return cls(line, rebuilt, JudgeInput(*judge_input))


def chosen_candidates(
    sample: StratifiedSample[PackedCandidate],
) -> Iterator[tuple[Stratum, Candidate]]:
    """The sample a sweep drew, stratum by stratum, as candidates again."""
    for stratum, packed in sample.chosen():
        yield stratum, Candidate.unpack(packed)


@dataclass(frozen=True, slots=True)
class Judged:
    stratum: Stratum
    candidate: Candidate
    judgement: Judgement
    action: EntailmentAction


def judge_sample(
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

    ``model`` makes the model judge, inside the event loop that asks it (its connections live
    there), and closes it afterwards.
    """
    started = time.perf_counter()
    decided: list[tuple[Stratum, Candidate, Judgement | None, str | None]] = []
    for stratum, candidate in chosen:
        evidence = candidate.judge_input.evidence(store)
        if evidence is None:  # the store lost the chunk since the check: nothing to read
            gone = Judgement(EntailmentResult.SKIPPED, lexical.name, "evidence gone")
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
        answers = asyncio.run(_ask(model, asked, budget_usd, concurrency))
    judged = []
    for index, (stratum, candidate, judgement, _) in enumerate(decided):
        final, called = (judgement, False) if judgement is not None else answers[index]
        summary.add(stratum, final, called)
        action = entailment_action(final.result, candidate.judge_input.topic, high_severity_topics)
        judged.append(Judged(stratum, candidate, final, action))
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
    async with make() as model:

        async def worker() -> None:
            nonlocal spent
            while queue:
                index, (_, candidate, _, evidence) = queue.pop()
                if budget_usd is not None and spent >= budget_usd:
                    skipped = Judgement(EntailmentResult.SKIPPED, model.name, "budget")
                    answers[index] = (skipped, False)
                    continue
                assert evidence is not None
                answer = await model.judge(candidate.judge_input.claim, evidence)
                spent += answer.cost_usd
                answers[index] = (answer, True)

        await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
    return answers
