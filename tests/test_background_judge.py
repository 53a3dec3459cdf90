"""Entailment behind the response: sampled citations queued without waiting, judged by
workers (lexical first, the model for the rest), dropped by reason, published when not
entailed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry

from exporter.checks.engine import Policy
from exporter.checks.store import ChunkStore
from exporter.checks.verdict import Verdict
from exporter.entailment.background import BackgroundJudge, HourlyBudget
from exporter.entailment.lexical import LexicalJudge
from exporter.entailment.results import EntailmentAction, EntailmentResult, Judgement
from exporter.outputs.metrics import ExporterMetrics, SourceLabels
from exporter.pipeline.messages import check_message
from exporter.pipeline.outcome import Mode, Origin, Outcome
from exporter.records.decode import decode_chunk

TEXT = "Refunds are issued within 30 days of purchase. Annual plans renew automatically."
QUOTE = "Refunds are issued within 30 days of purchase"


def _store() -> ChunkStore:
    store = ChunkStore()
    store.apply(
        decode_chunk({"doc_id": "d1", "doc_version": "v1", "chunk_id": "d1#0", "text": TEXT})
    )
    return store


def _outcome(store: ChunkStore, offset: int, *claims: str, topic: str = "billing") -> Outcome:
    citations = [
        {
            "citation_id": f"c{offset}-{n}",
            "doc_id": "d1",
            "doc_version": "v1",
            "chunk_id": "d1#0",
            "chunk_span": [0, len(QUOTE)],
            "quote": QUOTE,
            "claim": claim,
        }
        for n, claim in enumerate(claims)
    ]
    value = orjson.dumps({"answer_id": f"a{offset}", "topic": topic, "citations": citations})
    origin = Origin("rag.answers", 0, offset)
    return check_message(value, None, origin, store=store, policy=Policy(judge_rate=1.0))


class FakeModel:
    """A model judge whose answers and speed the test chooses; counts its calls at once."""

    name = "openai"

    def __init__(self, result: EntailmentResult, seconds: float = 0.0, cost: float = 0.01):
        self.result, self.seconds, self.cost = result, seconds, cost
        self.calls = 0
        self.in_flight = 0
        self.most_in_flight = 0

    async def judge(self, claim: str, evidence: str) -> Judgement:
        self.calls += 1
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.seconds)
        finally:
            self.in_flight -= 1
        return Judgement(
            self.result,
            self.name,
            seconds=self.seconds,
            cost_usd=self.cost,
            prompt_tokens=100,
            completion_tokens=1,
        )


class FakePublisher:
    def __init__(self) -> None:
        self.sent: list[tuple[Verdict, Judgement, EntailmentAction, Origin, str]] = []

    async def entailment(
        self,
        verdict: Verdict,
        judgement: Judgement,
        action: EntailmentAction,
        origin: Origin,
        mode: str,
    ) -> asyncio.Future[Any]:
        self.sent.append((verdict, judgement, action, origin, mode))
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


def _metrics() -> tuple[CollectorRegistry, ExporterMetrics]:
    registry = CollectorRegistry()
    return registry, ExporterMetrics(registry, SourceLabels(), "t")


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    assert value is not None, (name, labels)
    return value


def _judge(
    model: FakeModel | None,
    publisher: FakePublisher,
    metrics: ExporterMetrics,
    store: ChunkStore,
    **options: Any,
) -> BackgroundJudge:
    @asynccontextmanager
    async def opened() -> AsyncIterator[FakeModel]:
        assert model is not None
        yield model

    return BackgroundJudge(
        store=store,
        lexical=LexicalJudge(),
        model=None if model is None else opened,
        metrics=metrics,
        publisher=publisher,
        high_severity_topics=frozenset({"pricing"}),
        **options,
    )


async def _drain(judging: BackgroundJudge, stop: asyncio.Event, until: Any) -> None:
    running = asyncio.create_task(judging.run(stop))
    for _ in range(500):
        if until():
            break
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(running, 5)


def test_the_lexical_judge_settles_a_plain_disagreement_and_it_is_published() -> None:
    async def scenario() -> None:
        registry, metrics = _metrics()
        store, publisher = _store(), FakePublisher()
        model = FakeModel(EntailmentResult.ENTAILED)
        judging = _judge(model, publisher, metrics, store, concurrency=2)
        judging.offer(
            [_outcome(store, 1, "Refunds are issued within 60 days of purchase.", topic="pricing")]
        )
        await _drain(judging, asyncio.Event(), lambda: publisher.sent)
        assert model.calls == 0  # settled without the dear judge
        [(verdict, judgement, action, origin, mode)] = publisher.sent
        assert (verdict.citation_id, judgement.result, judgement.judge) == (
            "c1-0",
            EntailmentResult.NOT_ENTAILED,
            "lexical",
        )
        assert action is EntailmentAction.SUPPRESS_CLAIM and mode == "inline"
        assert origin == Origin("rag.answers", 0, 1)
        checks = "citation_entailment_checks_total"
        assert _value(registry, checks, mode="inline", judge="lexical", result="not_entailed") == 1

    asyncio.run(scenario())


def test_the_model_is_asked_the_rest_at_most_concurrency_at_once() -> None:
    async def scenario() -> None:
        registry, metrics = _metrics()
        store, publisher = _store(), FakePublisher()
        model = FakeModel(EntailmentResult.NOT_ENTAILED, seconds=0.02)
        judging = _judge(model, publisher, metrics, store, concurrency=3, queue_size=100)
        judging.offer(
            [_outcome(store, n, "You get your money back within a month.") for n in range(12)]
        )
        assert _value(registry, "citation_entailment_queue_depth") == 12
        await _drain(judging, asyncio.Event(), lambda: len(publisher.sent) == 12)
        assert model.calls == 12 and model.most_in_flight == 3
        assert {a for _, _, a, _, _ in publisher.sent} == {EntailmentAction.FLAG_FOR_REVIEW}
        assert _value(registry, "citation_entailment_cost_dollars_total", mode="inline") == (
            pytest.approx(0.12)
        )
        assert (
            _value(registry, "citation_entailment_tokens_total", mode="inline", direction="prompt")
            == 1200
        )
        assert _value(registry, "citation_entailment_duration_seconds_count", judge="openai") == 12

    asyncio.run(scenario())


def test_a_full_queue_drops_samples_and_never_waits() -> None:
    async def scenario() -> None:
        registry, metrics = _metrics()
        store, publisher = _store(), FakePublisher()
        judging = _judge(
            FakeModel(EntailmentResult.ENTAILED), publisher, metrics, store, queue_size=3
        )
        judging.offer(
            [_outcome(store, n, "You get your money back within a month.") for n in range(10)]
        )  # no worker runs: nothing is taken
        assert _value(registry, "citation_entailment_dropped_total", reason="queue_full") == 7
        assert _value(registry, "citation_entailment_queue_depth") == 3

    asyncio.run(scenario())


def test_an_exhausted_hourly_budget_drops_samples_until_the_next_hour() -> None:
    async def scenario() -> None:
        registry, metrics = _metrics()
        store, publisher = _store(), FakePublisher()
        now = [7200.0]
        budget = HourlyBudget(0.025, clock=lambda: now[0])
        model = FakeModel(EntailmentResult.ENTAILED, cost=0.01)
        judging = _judge(model, publisher, metrics, store, budget=budget)
        judging.offer([_outcome(store, n, "Money back within a month.") for n in range(5)])
        await _drain(judging, asyncio.Event(), lambda: model.calls >= 3 and judging._queue.empty())
        assert model.calls == 3  # 0.01 a call: the third crosses 0.025, then it stops
        dropped = "citation_entailment_dropped_total"
        assert _value(registry, dropped, reason="budget") == 2
        judging.offer([_outcome(store, 9, "Money back within a month.")])
        assert _value(registry, dropped, reason="budget") == 3  # refused at the door now
        now[0] += 3600
        assert not budget.exhausted  # a new hour, a new budget

    asyncio.run(scenario())


def test_without_a_model_the_lexical_judge_alone_judges_the_sample() -> None:
    async def scenario() -> None:
        registry, metrics = _metrics()
        store, publisher = _store(), FakePublisher()
        judging = _judge(None, publisher, metrics, store)
        judging.offer([_outcome(store, 1, "Money back within a month.", QUOTE + ".")])
        checks = "citation_entailment_checks_total"
        await _drain(
            judging,
            asyncio.Event(),
            lambda: _value(registry, checks, mode="inline", judge="lexical", result="unknown") == 1,
        )
        assert _value(registry, checks, mode="inline", judge="lexical", result="entailed") == 1
        assert publisher.sent == []

    asyncio.run(scenario())


def test_the_pipeline_keeps_judge_inputs_for_about_the_sample_rate() -> None:
    store = _store()
    kept = 0
    for offset in range(2_000):
        value = orjson.dumps(
            {
                "citation_id": f"c{offset}",
                "answer_id": "a",
                "doc_id": "d1",
                "doc_version": "v1",
                "chunk_id": "d1#0",
                "chunk_span": [0, len(QUOTE)],
                "quote": QUOTE,
                "claim": "x y",
            }
        )
        outcome = check_message(
            value, None, Origin("t", 3, offset), store=store, policy=Policy(judge_rate=0.05)
        )
        kept += outcome.checked[0].judge_input is not None
        again = check_message(
            value, None, Origin("t", 3, offset), store=store, policy=Policy(judge_rate=0.05)
        )
        assert (again.checked[0].judge_input is None) == (outcome.checked[0].judge_input is None)
    assert 60 <= kept <= 140  # 5% of 2,000, and the same citations each time
    assert (
        check_message(value, None, Origin("t", 3, 1), store=store, policy=Policy())
        .checked[0]
        .judge_input
        is None
    )
    assert Mode.INLINE == "inline"
