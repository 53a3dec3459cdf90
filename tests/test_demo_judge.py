"""The demo with a model judge: reworded claims for it, and the thread it runs in.

Every test is bounded: the fake judges sleep at most a few seconds and are cancelled sooner,
and every wait has a deadline.
"""

from __future__ import annotations

import asyncio
import threading
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from exporter.checks.entailment import EntailmentResult, Judgement
from exporter.checks.lexical import LexicalJudge
from exporter.judge.background import HourlyBudget
from exporter.judge.thread import JudgeThread
from exporter.simulate.scenario import LEAD_INS, ScenarioConfig, build_scenario

# -- the scenario's reworded claims ------------------------------------------------------------


def test_reworded_claims_are_what_the_lexical_judge_leaves_to_a_model() -> None:
    config = ScenarioConfig(seed=3, answers=200)
    plain = build_scenario(config)
    reworded = build_scenario(ScenarioConfig(seed=3, answers=200, reworded_share=0.3))
    assert reworded.expected == plain.expected and reworded.misclaims == plain.misclaims
    lexical = LexicalJudge()
    changed = 0
    for before, after in zip(plain.citation_lines, reworded.citation_lines, strict=True):
        if not isinstance(after, dict) or "sentences" not in after:
            assert after == before
            continue
        assert isinstance(before, dict)
        for citation in after["citations"]:
            was = before["sentences"][citation["sentence_index"]]
            claim = after["sentences"][citation["sentence_index"]]
            if claim == was:
                continue
            changed += 1
            assert claim.startswith(LEAD_INS)
            assert lexical.judge(was, citation["quote"]).result is EntailmentResult.ENTAILED
            assert lexical.judge(claim, citation["quote"]).result is EntailmentResult.UNKNOWN
    assert changed > 50
    with pytest.raises(ValueError, match="reworded"):
        ScenarioConfig(reworded_share=1.5).validate()


# -- the thread a model judge runs in ----------------------------------------------------------


@dataclass
class FakeJudge:
    """Answers ``result`` after ``seconds`` (asyncio.sleep: cancellable); ``fail`` raises."""

    seconds: float = 0.0
    result: EntailmentResult = EntailmentResult.ENTAILED
    cost_usd: float = 0.0
    fail: bool = False
    name: str = "openai"

    async def judge(self, claim: str, evidence: str) -> Judgement:
        await asyncio.sleep(self.seconds)
        if self.fail and claim == "boom":
            raise RuntimeError("a bug")
        return Judgement(self.result, self.name, seconds=self.seconds, cost_usd=self.cost_usd)


def thread_of(judge: FakeJudge, **options: Any) -> tuple[JudgeThread, threading.Event]:
    """A started thread for ``judge``, and an event set once the judge is closed."""
    closed = threading.Event()

    @asynccontextmanager
    async def made() -> Any:
        try:
            yield judge
        finally:
            closed.set()

    def make() -> Any:
        return made()

    values: dict[str, Any] = {"queue_size": 10, "concurrency": 2, **options}
    thread = JudgeThread(make, **values)
    thread.start()
    return thread, closed


def test_the_thread_judges_what_it_is_offered_and_the_caller_takes_it() -> None:
    thread, closed = thread_of(FakeJudge(seconds=0.01, result=EntailmentResult.NOT_ENTAILED))
    assert all(thread.offer(f"claim {n}", "evidence") for n in range(8))
    assert thread.finish(5.0) == 0
    taken = thread.take()
    assert [j.result for j in taken.judgements] == [EntailmentResult.NOT_ENTAILED] * 8
    assert not taken.dropped and thread.waiting == 0
    assert closed.is_set()
    assert not thread.offer("late", "evidence"), "a finished thread takes nothing"


def test_offers_never_wait_and_a_full_queue_drops_what_it_cannot_take() -> None:
    thread, closed = thread_of(FakeJudge(seconds=5.0), queue_size=5, concurrency=2)
    started = time.monotonic()
    taken = [thread.offer(f"claim {n}", "evidence") for n in range(50)]
    assert time.monotonic() - started < 0.5
    assert sum(taken) == 7  # five waiting, two in flight
    assert thread.waiting == 7
    started = time.monotonic()
    assert thread.finish(0.2) == 7  # the judge is slower than the wait: nothing decided
    assert time.monotonic() - started < 3.0
    assert thread.take().dropped == {"queue_full": 43}
    assert closed.is_set()


def test_a_spent_budget_drops_and_a_failing_judge_decides_nothing() -> None:
    judge = FakeJudge(cost_usd=1.0, fail=True)
    thread, _ = thread_of(judge, concurrency=1, budget=HourlyBudget(2.0))
    for claim in ("boom", "a", "b"):
        assert thread.offer(claim, "evidence")
    assert thread.finish(5.0) == 0
    taken = thread.take()
    assert [(j.result, j.reason) for j in taken.judgements] == [
        (EntailmentResult.ERROR, "failed: RuntimeError"),
        (EntailmentResult.ENTAILED, None),
        (EntailmentResult.ENTAILED, None),
    ]
    assert not taken.dropped
    thread, _ = thread_of(judge, concurrency=1, budget=HourlyBudget(0.0))
    assert not thread.offer("a", "evidence")
    thread.finish(0)
    assert thread.take().dropped == {"budget": 1}
