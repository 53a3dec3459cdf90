"""The Kafka adapter's loops against the in-memory broker of tests/fake_kafka.py (no broker).

Each test drives the real AnswerChecker, ChunkFollower, SweepRunner, ControlListener, Publisher,
Pipeline and ExporterMetrics; only the broker is fake. Waiting for another task is a loop
bounded in steps (:data:`STEPS`), never a timed assertion.
"""

from __future__ import annotations

import asyncio
import functools
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from aiokafka import TopicPartition
from aiokafka.errors import KafkaError
from conftest import chunk_record, store_of, until
from fake_kafka import FakeBroker, FakeConsumer, FakeProducer
from prometheus_client import CollectorRegistry
from sweep_watch import WatchedStep, watching

from exporter.checks.engine import Policy
from exporter.checks.verdict import Status
from exporter.config.kafka import KafkaConnection
from exporter.entailment.drawing import Drawing
from exporter.entailment.judging import SampleJudging
from exporter.entailment.lexical import LexicalJudge
from exporter.entailment.results import EntailmentResult, Judgement
from exporter.errors import RestartRequired
from exporter.kafka import runtime, topic_sweep
from exporter.kafka.answers import AnswerChecker
from exporter.kafka.chunks import ChunkFollower
from exporter.kafka.control import ControlListener
from exporter.kafka.publish import Publisher
from exporter.kafka.topic_sweep import SweepRunner
from exporter.outputs.metrics import ExporterMetrics, SourceLabels
from exporter.pipeline.core import Pipeline, Record
from exporter.pipeline.outcome import Origin, Outcome
from exporter.pipeline.sweep import SweepStep
from exporter.records.decode import decode_chunk
from exporter.records.schema import ChunkDeletion
from exporter.settings import Settings

ANSWERS, CHUNKS, VERDICTS, DLQ, CONTROL = "answers", "chunks", "verdicts", "dlq", "control"
GROUP = "exporter"
P0, P1 = TopicPartition(ANSWERS, 0), TopicPartition(ANSWERS, 1)
C0 = TopicPartition(CONTROL, 0)
TEXT = "The refund window is thirty days."
# How many times a test lets the loop run while it waits for another task (~1 ms each).
STEPS = 3000


def _answer(answer_id: str, citations: int = 1, doc: str = "d") -> bytes:
    """An answer event: citations of document "d" hold; of any other, the document is missing."""
    cited = {"doc_id": doc, "doc_version": "v1", "chunk_id": f"{doc}#0", "chunk_span": [4, 17]}
    return orjson.dumps(
        {
            "answer_id": answer_id,
            "citations": [
                {"citation_id": f"{answer_id}-{i}", "quote": "refund window", **cited}
                for i in range(citations)
            ],
        }
    )


def _sweep_request(reason: str) -> bytes:
    return orjson.dumps({"type": "sweep", "reason": reason})


_until = functools.partial(until, steps=STEPS)


def _total(registry: CollectorRegistry, name: str, **labels: str) -> float:
    """The sum of a metric's samples whose labels include ``labels``."""
    return sum(
        sample.value
        for family in registry.collect()
        for sample in family.samples
        if sample.name == name and labels.items() <= sample.labels.items()
    )


class WatchedPipeline(Pipeline):
    """The real pipeline; ``on_sweep`` is called with each message a sweep is about to check."""

    on_sweep: Callable[[Origin], None] | None = None

    def sweep_step(self, drawing: Drawing | None = None) -> SweepStep:
        return WatchedStep(super().sweep_step(drawing), self._swept)

    def _swept(self, record: Origin) -> None:
        if self.on_sweep is not None:
            self.on_sweep(record)


class HeldConsumer(FakeConsumer):
    """A consumer whose start() waits for the test to release it (a sweep held back)."""

    def __init__(self, broker: FakeBroker, releases: asyncio.Semaphore, **options: Any) -> None:
        super().__init__(broker, **options)
        self._releases = releases

    async def start(self) -> None:
        await self._releases.acquire()
        await super().start()


class Rig:
    """A broker with the exporter's topics, and the real pipeline, metrics and publisher."""

    def __init__(self) -> None:
        self.broker = FakeBroker()
        for topic, partitions in ((ANSWERS, 2), (CHUNKS, 2), (VERDICTS, 1), (DLQ, 1), (CONTROL, 1)):
            self.broker.create_topic(topic, partitions)
        self.producer = FakeProducer(self.broker)
        self.registry = CollectorRegistry()
        self.metrics = ExporterMetrics(self.registry, SourceLabels(), "test")
        self.pipeline = WatchedPipeline(store_of(chunk_record("d", 0, TEXT)), Policy())
        self.publisher = Publisher(self.producer, VERDICTS, DLQ)
        self.sweep_consumers: list[FakeConsumer] = []

    def checker(self) -> tuple[FakeConsumer, AnswerChecker]:
        consumer = FakeConsumer(self.broker, group_id=GROUP)
        checker = AnswerChecker(
            consumer,
            ANSWERS,
            pipeline=self.pipeline,
            metrics=self.metrics,
            publisher=self.publisher,
        )
        checker.subscribe()
        return consumer, checker

    def sweeps(
        self, held: asyncio.Semaphore | None = None, judging: SampleJudging | None = None
    ) -> SweepRunner:
        """A runner whose sweeps read 3 records a fetch (each started when ``held`` releases),
        their consumers kept for the test."""

        def make_consumer() -> FakeConsumer:
            if held is None:
                consumer = FakeConsumer(self.broker, fetch_max_records=3)
            else:
                consumer = HeldConsumer(self.broker, held, fetch_max_records=3)
            self.sweep_consumers.append(consumer)
            return consumer

        return SweepRunner(
            make_consumer,
            ANSWERS,
            lambda: self.producer.partitions_for(ANSWERS),
            pipeline=lambda: self.pipeline,
            metrics=self.metrics,
            publisher=self.publisher,
            judging=judging,
        )

    def total(self, name: str, **labels: str) -> float:
        return _total(self.registry, name, **labels)

    def lag(self, partition: int) -> float | None:
        labels = {"topic": ANSWERS, "partition": str(partition)}
        return self.registry.get_sample_value("citation_exporter_consumer_lag_messages", labels)

    def published(self, topic: str = VERDICTS) -> list[dict[str, Any]]:
        return [orjson.loads(record.value or b"null") for record in self.broker.records(topic)]


# -- inline checking: rewinds and commits ----------------------------------------------------


@pytest.mark.parametrize("failing", [VERDICTS, DLQ])
def test_a_batch_whose_outputs_were_not_delivered_is_checked_again_and_counted_once(
    failing: str,
) -> None:
    rig = Rig()
    for i in range(3):
        rig.broker.append(ANSWERS, _answer(f"a{i}", citations=2, doc="gone"), partition=0)
    rig.broker.append(ANSWERS, b"not json", partition=0)
    rig.broker.append(ANSWERS, _answer("b0"), partition=1)
    consumer, checker = rig.checker()
    rig.producer.fail_topic(failing)

    async def scenario() -> int:
        with pytest.raises(KafkaError):
            await checker.poll()
        assert rig.broker.committed(GROUP) == {}, "nothing committed past undelivered outputs"
        assert [await consumer.position(tp) for tp in (P0, P1)] == [0, 0], "rewound"
        assert rig.total("citation_checks_total") == 0, "not counted before delivery"
        rig.producer.fail_topic(failing, None)
        return await checker.poll()

    assert asyncio.run(scenario()) == 5, "the same five messages, checked again"
    assert rig.broker.committed(GROUP) == {P0: 4, P1: 1}
    assert rig.total("citation_checks_total") == 7, "a0-a2's six citations and b0's, once each"
    assert rig.total("citation_document_missing_total") == 6
    assert rig.total("citation_exporter_events_total", topic=ANSWERS) == 5
    assert rig.total("citation_exporter_invalid_events_total", topic=ANSWERS) == 1
    assert {v["citation_id"] for v in rig.published()} == {
        f"a{i}-{j}" for i in range(3) for j in range(2)
    }
    assert {dict(r.headers)["source_offset"] for r in rig.broker.records(DLQ)} == {b"3"}


def _answers_on_both(rig: Rig, numbers: range) -> None:
    for i in numbers:
        for tp in (P0, P1):
            rig.broker.append(ANSWERS, _answer(f"{tp.partition}-{i}"), partition=tp.partition)


async def _delivered_but_not_committed(rig: Rig) -> tuple[FakeConsumer, AnswerChecker]:
    """Two answers per partition checked and committed; three more checked, not committed."""
    consumer, checker = rig.checker()
    _answers_on_both(rig, range(2))
    assert await checker.poll() == 4
    assert rig.lag(0) == 0 and rig.lag(1) == 0
    _answers_on_both(rig, range(2, 5))
    # the batch's commit raises (any KafkaError but CommitFailedError leaves the offsets pending)
    consumer.fail_commits(KafkaError("the coordinator refused the commit"))
    with pytest.raises(KafkaError):
        await checker.poll()
    assert rig.broker.committed(GROUP) == {P0: 2, P1: 2}
    return consumer, checker


def test_a_rebalance_commits_the_delivered_offsets_before_the_partitions_go() -> None:
    rig = Rig()

    async def scenario() -> None:
        consumer, checker = await _delivered_but_not_committed(rig)
        await consumer.rebalance(assigned={P0})  # aiokafka revokes every partition first
        assert rig.broker.committed(GROUP) == {P0: 5, P1: 5}
        assert await checker.poll() == 0, "P0 resumes from its commit: nothing checked twice"
        newcomer = FakeConsumer(rig.broker, group_id=GROUP)
        newcomer.assign([P1])
        assert await newcomer.position(P1) == 5, "P1's next owner starts after what was checked"

    asyncio.run(scenario())
    assert rig.total("citation_checks_total") == 10
    assert rig.lag(1) is None, "the lag of a partition another member owns is not reported"
    assert rig.lag(0) == 0


def test_a_partition_revoked_alone_has_exactly_its_offsets_committed() -> None:
    rig = Rig()

    async def scenario() -> None:
        consumer, checker = await _delivered_but_not_committed(rig)
        await consumer.rebalance(assigned={P0}, revoked={P1})
        assert rig.broker.committed(GROUP) == {P0: 2, P1: 5}, "P1's offsets, and only those"
        assert rig.lag(1) is None and rig.lag(0) is not None
        rig.broker.append(ANSWERS, _answer("late"), partition=0)
        assert await checker.poll() == 1
        assert rig.broker.committed(GROUP) == {P0: 6, P1: 5}

    asyncio.run(scenario())
    assert rig.total("citation_checks_total") == 11


def test_a_revoke_whose_commit_fails_does_not_hold_up_the_partitions_kept() -> None:
    """Found by review: the revoked partitions' offsets stayed pending after a failed commit, so
    the next commit named a partition no longer assigned and failed for the kept ones too."""
    rig = Rig()

    async def scenario() -> None:
        consumer, checker = await _delivered_but_not_committed(rig)
        consumer.fail_commits(KafkaError("the coordinator went away"))
        await consumer.rebalance(
            assigned={P0}, revoked={P1}
        )  # its error is logged, as aiokafka does
        rig.broker.append(ANSWERS, _answer("late"), partition=0)
        assert await checker.poll() == 1
        assert rig.broker.committed(GROUP)[P0] == 6, "P0 committed though P1's commit failed"

    asyncio.run(scenario())


# -- sweeps of the answer topic ------------------------------------------------------------------


def _archive(rig: Rig, ok: int = 8, missing: int = 2) -> int:
    """Answers of two citations over both partitions; returns how many citations."""
    for i in range(ok + missing):
        doc = "d" if i < ok else "gone"
        rig.broker.append(ANSWERS, _answer(f"old{i}", citations=2, doc=doc), partition=i % 2)
    return 2 * (ok + missing)


def _sweep(runner: SweepRunner) -> None:
    """Request a sweep and let it run until the request is answered."""

    async def scenario() -> bool:
        done = runner.request("test")
        answered = await _until(done.done)
        await runner.stop()
        return answered

    assert asyncio.run(scenario()), "the sweep completed"


def test_a_sweep_reads_the_archive_up_to_the_end_offsets_seen_at_its_start() -> None:
    rig = Rig()
    citations = _archive(rig)
    targets = {tp: rig.broker.log_end(tp) for tp in (P0, P1)}
    # while the sweep reads, every message it checks is followed by a new one cited as missing
    rig.pipeline.on_sweep = lambda record: rig.broker.append(
        ANSWERS, _answer("new", doc="gone"), partition=record.partition
    )
    runner = rig.sweeps()
    _sweep(runner)
    last = rig.metrics.state.last_sweep
    assert last is not None and dict(last.statuses) == {Status.OK: 16, Status.DOCUMENT_MISSING: 4}
    assert sum(last.statuses.values()) == citations
    assert rig.total("citation_checks_total", mode="sweep") == citations
    assert rig.total("citation_sweep_citations", status="document_missing") == 4
    published = [v for v in rig.published() if v["mode"] == "sweep"]
    assert len(published) == 4
    assert all(v["offset"] < targets[TopicPartition(ANSWERS, v["partition"])] for v in published)
    assert rig.broker.log_end(P0) > targets[P0], "records did arrive during the sweep"


def test_a_sweep_of_a_topic_whose_head_was_deleted_starts_at_the_log_start() -> None:
    rig = Rig()
    for i in range(9):
        rig.broker.append(ANSWERS, _answer(f"a{i}"), partition=0)
    rig.broker.delete_before(P0, 3)  # retention: six left, read three a fetch
    state = rig.metrics.state
    seen: list[tuple[bool, float]] = []
    rig.pipeline.on_sweep = lambda _: seen.append((state.sweep_running, state.sweep_progress))
    runner = rig.sweeps()
    _sweep(runner)
    assert state.last_sweep is not None and dict(state.last_sweep.statuses) == {Status.OK: 6}
    assert seen and all(running for running, _ in seen), "in progress while it ran"
    assert sorted({progress for _, progress in seen}) == [0.0, 0.5], "shares of what is left"
    assert rig.total("citation_sweep_progress_ratio") == 1
    assert rig.total("citation_sweep_in_progress") == 0
    assert runner.completed == 1


def test_requests_during_a_sweep_cause_one_more_sweep_not_two() -> None:
    rig = Rig()
    _archive(rig)
    runner = rig.sweeps()
    answered_by: dict[str, int] = {}  # request: how many sweeps had completed when answered

    def request(reason: str) -> asyncio.Future[None]:
        done = runner.request(reason)
        done.add_done_callback(lambda _: answered_by.setdefault(reason, runner.completed))
        return done

    def two_requests_during_the_first_sweep(_: Record) -> None:
        if runner.completed == 0 and not answered_by and len(requested) == 1:
            requested.extend([request("second"), request("third")])

    requested: list[asyncio.Future[None]] = []
    rig.pipeline.on_sweep = two_requests_during_the_first_sweep

    async def scenario() -> None:
        requested.append(request("first"))
        await _until(lambda: len(answered_by) == 3 and not runner.running)
        await runner.stop()

    asyncio.run(scenario())
    assert answered_by == {"first": 1, "second": 2, "third": 2}
    assert runner.completed == 2 and not runner.running


def test_a_sweep_that_failed_is_run_again_and_counts_the_archive_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(topic_sweep, "_FIRST_RETRY_SECONDS", 0.0)
    rig = Rig()
    citations = _archive(rig)
    rig.producer.fail_next(1)  # the first sweep verdict is not delivered
    read: list[tuple[int, int]] = []
    rig.pipeline.on_sweep = lambda record: read.append((record.partition, record.offset))
    runner = rig.sweeps()
    _sweep(runner)
    assert len(rig.sweep_consumers) == 2, "started again"
    last = rig.metrics.state.last_sweep
    assert last is not None and sum(last.statuses.values()) == citations
    assert runner.completed == 1 and rig.metrics.state.sweep_running is False
    # the batches delivered before the failure are not read, counted or published again (the
    # failed batch is: at least once)
    assert rig.total("citation_checks_total", mode="sweep") == citations
    published = {v["citation_id"] for v in rig.published() if v["mode"] == "sweep"}
    assert published == {"old8-0", "old8-1", "old9-0", "old9-1"}
    assert len(read) < 2 * citations // 2, "the second attempt resumed, not read everything"


def test_a_sweep_of_a_topic_ending_in_a_transaction_marker_completes() -> None:
    rig = Rig()
    _archive(rig)
    rig.broker.append_marker(P0)  # a transactional producer committed
    runner = rig.sweeps()

    async def scenario() -> None:
        done = runner.request("test")
        await _until(lambda: done.done() or sum(c.fetches for c in rig.sweep_consumers) > 50)
        await runner.stop()

    asyncio.run(scenario())
    assert runner.completed == 1


class CountingModel:
    """A model judge that says entailed to whatever it is asked, and remembers the claims."""

    name = "openai"

    def __init__(self) -> None:
        self.claims: list[str] = []

    async def __aenter__(self) -> CountingModel:
        return self

    async def __aexit__(self, *_: object) -> None:
        return None

    async def judge(self, claim: str, evidence: str) -> Judgement:
        self.claims.append(claim)
        return Judgement(EntailmentResult.ENTAILED, self.name, "model", 0.1, 0.0004, 90, 2)


def _judged_archive(rig: Rig) -> list[str]:
    """Eight answers, each citing one claim: the even ones misstate the number, the odd ones
    paraphrase (the claims)."""
    rig.pipeline = WatchedPipeline(
        store_of(chunk_record("d", 0, TEXT)), Policy(), sweep_judge_rate=1.0
    )
    claims = ["The refund window is 60 days.", "Refunds are possible for a while."]
    for i in range(8):
        cited = {"doc_id": "d", "doc_version": "v1", "chunk_id": "d#0", "chunk_span": [4, 32]}
        citation = {"citation_id": f"c{i}", "quote": "refund window is thirty days", **cited}
        answer = {"answer_id": f"a{i}", "topic": "pricing", "citations": [citation]}
        answer["citations"][0]["claim"] = claims[i % 2]
        rig.broker.append(ANSWERS, orjson.dumps(answer), partition=i % 2)
    return claims


def test_a_sweep_judges_a_sample_after_its_gauges_and_publishes_what_is_not_entailed() -> None:
    rig = Rig()
    claims = _judged_archive(rig)
    model = CountingModel()
    judged_after_the_gauges: list[bool] = []

    def make_model() -> CountingModel:
        judged_after_the_gauges.append(rig.metrics.state.last_sweep is not None)
        return model

    judging = SampleJudging(100, LexicalJudge(), make_model, frozenset({"pricing"}))
    _sweep(rig.sweeps(judging=judging))
    # the lexical judge settles the misstated number; the model is asked only the paraphrases
    assert sorted(model.claims) == [claims[1]] * 4
    assert judged_after_the_gauges == [True]
    assert rig.total("citation_entailment_checks_total", mode="sweep", result="not_entailed") == 4
    assert rig.total("citation_entailment_checks_total", mode="sweep", judge="openai") == 4
    assert rig.total("citation_entailment_cost_dollars_total", mode="sweep") == pytest.approx(
        0.0016
    )
    flagged = [v for v in rig.published() if v.get("check") == "entailment"]
    assert sorted(v["citation_id"] for v in flagged) == ["c0", "c2", "c4", "c6"]
    assert {v["mode"] for v in flagged} == {"sweep"}
    assert {v["entailment"]["action"] for v in flagged} == {"suppress_claim"}  # a pricing claim
    assert all(v["partition"] == 0 for v in flagged)  # where each came from, for provenance
    assert sorted(v["offset"] for v in flagged) == [0, 1, 2, 3]


def test_a_sweep_whose_judged_results_are_not_delivered_is_not_read_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The sweep is complete (its gauges set) before its sample is judged: a publisher that
    fails then made the runner start the whole sweep again, counting the archive, the
    judgements and the model's cost twice (and forever, while the failure lasted)."""
    rig = Rig()
    _judged_archive(rig)
    model = CountingModel()
    judging = SampleJudging(100, LexicalJudge(), lambda: model, frozenset({"pricing"}))
    rig.producer.fail_next(1)  # the first not_entailed result is not delivered
    runner = rig.sweeps(judging=judging)
    _sweep(runner)
    assert len(rig.sweep_consumers) == 1, "the archive was read once"
    assert runner.completed == 1
    assert rig.total("citation_checks_total", mode="sweep") == 8
    assert rig.total("citation_entailment_checks_total", mode="sweep") == 8
    assert len(model.claims) == 4, "the model was asked once about each paraphrase"
    flagged = [v for v in rig.published() if v.get("check") == "entailment"]
    assert len(flagged) == 3, "the others were published"
    assert "could not be published" in caplog.text


def test_a_sweep_whose_judging_fails_is_not_read_again(caplog: pytest.LogCaptureFixture) -> None:
    rig = Rig()
    _judged_archive(rig)

    def broken_model() -> CountingModel:
        raise RuntimeError("no judge today")

    judging = SampleJudging(100, LexicalJudge(), broken_model, frozenset({"pricing"}))
    runner = rig.sweeps(judging=judging)
    _sweep(runner)
    assert len(rig.sweep_consumers) == 1 and runner.completed == 1
    assert rig.total("citation_checks_total", mode="sweep") == 8
    assert rig.metrics.state.last_sweep is not None
    assert "judging the sample of the sweep (test) failed" in caplog.text


@pytest.mark.parametrize("change", ["re-indexed", "deleted"])
def test_a_sample_whose_evidence_changed_after_its_check_is_not_judged_on_the_new_text(
    change: str,
) -> None:
    """The store follows the chunk topic while a sweep reads the answers: a chunk re-indexed
    under the same id between a citation's check and the judging of the sample held other
    text at the span, and the citation was published as not_entailed against text it never
    cited (suppress_claim, for a pricing claim)."""
    rig = Rig()
    rig.pipeline = WatchedPipeline(
        store_of(chunk_record("d", 0, TEXT)), Policy(), sweep_judge_rate=1.0
    )
    cited = {"doc_id": "d", "doc_version": "v1", "chunk_id": "d#0", "chunk_span": [4, 32]}
    for i in range(4):
        citation = {"citation_id": f"c{i}", "quote": "refund window is thirty days", **cited}
        citation["claim"] = "You have thirty days to ask for a refund."
        answer = {"answer_id": f"a{i}", "topic": "pricing", "citations": [citation]}
        rig.broker.append(ANSWERS, orjson.dumps(answer), partition=0)

    def then_the_chunk_changes(record: Origin, _: Outcome) -> None:
        if record.offset == 3:  # the last answer is checked: the sample is drawn
            new = chunk_record("d", 0, "The refund window is ninety days.", doc_version="v2")
            rig.pipeline.store.apply(
                ChunkDeletion("d#0") if change == "deleted" else decode_chunk(new)
            )

    rig.pipeline.sweep_step = watching(  # type: ignore[method-assign]
        rig.pipeline.sweep_step, after=then_the_chunk_changes
    )
    model = CountingModel()
    judging = SampleJudging(100, LexicalJudge(), lambda: model, frozenset({"pricing"}))
    _sweep(rig.sweeps(judging=judging))
    last = rig.metrics.state.last_sweep
    assert last is not None and dict(last.statuses) == {Status.OK: 4}
    assert not [v for v in rig.published() if v.get("check") == "entailment"]
    assert rig.total("citation_entailment_checks_total", mode="sweep", result="skipped") == 4
    assert model.claims == []


def test_a_sweep_without_judging_keeps_no_claims() -> None:
    rig = Rig()
    seen: list[Outcome] = []
    rig.pipeline.sweep_step = watching(  # type: ignore[method-assign]
        rig.pipeline.sweep_step, after=lambda _, outcome: seen.append(outcome)
    )
    _archive(rig)
    _sweep(rig.sweeps())
    assert seen and all(item.judge_input is None for o in seen for item in o.checked)


# -- readiness ---------------------------------------------------------------------------------


def _chunk(doc: str, ordinal: int) -> tuple[bytes, bytes]:
    record = chunk_record(doc, ordinal, f"{TEXT} ({doc} {ordinal})")
    return record["chunk_id"].encode(), orjson.dumps(record)


def test_the_store_is_caught_up_exactly_when_positions_reach_the_end_offsets_at_assign() -> None:
    rig = Rig()
    for ordinal in range(9):
        key, value = _chunk("doc", ordinal)
        rig.broker.append(CHUNKS, value, key, partition=ordinal % 2)
    consumer = FakeConsumer(rig.broker, fetch_max_records=2)
    follower = ChunkFollower(consumer, CHUNKS, rig.pipeline, rig.metrics)
    tps = [TopicPartition(CHUNKS, p) for p in (0, 1)]

    async def scenario() -> None:
        await follower.assign(await rig.producer.partitions_for(CHUNKS))
        targets = {tp: rig.broker.log_end(tp) for tp in tps}
        for ordinal in range(30):  # produced after assign(): not waited for
            key, value = _chunk("later", ordinal)
            rig.broker.append(CHUNKS, value, key, partition=1)
        for _ in range(20):
            assert follower.caught_up.is_set() == all(
                [await consumer.position(tp) >= targets[tp] for tp in tps]
            )
            if follower.caught_up.is_set():
                break
            assert await follower.poll(timeout_ms=0) == []
        assert follower.caught_up.is_set()
        assert await consumer.position(tps[1]) < rig.broker.log_end(tps[1])

    asyncio.run(scenario())
    assert rig.pipeline.store.document_count == 3, "d, doc, and the first of 'later'"


def test_an_empty_chunk_topic_is_caught_up_at_once() -> None:
    rig = Rig()
    follower = ChunkFollower(FakeConsumer(rig.broker), CHUNKS, rig.pipeline, rig.metrics)
    asyncio.run(follower.assign({0, 1}))
    assert follower.caught_up.is_set()


def test_a_chunk_topic_without_partitions_requires_a_restart() -> None:
    rig = Rig()
    rig.broker.create_topic("no-partitions", 0)
    follower = ChunkFollower(FakeConsumer(rig.broker), "no-partitions", rig.pipeline, rig.metrics)

    async def scenario() -> None:
        await follower.assign(await rig.producer.partitions_for("no-partitions"))

    with pytest.raises(RestartRequired, match="no-partitions"):
        asyncio.run(scenario())
    assert not follower.caught_up.is_set()


def _http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def test_the_exporter_is_ready_once_the_store_caught_up_and_not_after_it_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Exporter.run with the fakes in place of aiokafka's clients (and no connection probe);
    each instance sweeping alone, as the fakes have no admin client to make a sweeps topic."""
    settings = Settings(metrics_host="127.0.0.1", metrics_port=0, share_sweeps=False)
    broker = FakeBroker()
    for topic in (settings.answers_topic, settings.verdicts_topic, settings.dlq_topic):
        broker.create_topic(topic, 1)
    broker.create_topic(settings.chunks_topic, 2)
    broker.create_topic(settings.control_topic, 1)
    for ordinal in range(12):
        key, value = _chunk("doc", ordinal)
        broker.append(settings.chunks_topic, value, key, partition=ordinal % 2)

    def make_consumer(_: KafkaConnection, role: str, group_id: str | None = None) -> FakeConsumer:
        return FakeConsumer(broker, group_id=group_id, fetch_max_records=1)

    async def no_problem(_: KafkaConnection) -> None:
        return None

    clients = runtime.KafkaClients(
        consumer=make_consumer, producer=lambda _: FakeProducer(broker), diagnose=no_problem
    )
    exporter = runtime.Exporter(settings, clients=clients)
    state = exporter.state

    def gauge() -> float | None:
        return exporter.registry.get_sample_value("citation_exporter_ready")

    async def scenario() -> list[tuple[bool, float | None, int]]:
        stop = asyncio.Event()
        running = asyncio.create_task(exporter.run(stop))
        seen: list[tuple[bool, float | None, int]] = []
        for _ in range(STEPS):
            seen.append((state.ready, gauge(), state.store.chunk_count if state.store else 0))
            if state.ready:
                break
            await asyncio.sleep(0)
        url = f"http://127.0.0.1:{exporter.http.port}/readyz"
        assert await asyncio.to_thread(_http_status, url) == 200
        broker.append(settings.answers_topic, _answer("a0", doc="doc"))
        checked = await _until(lambda: _total(exporter.registry, "citation_checks_total") > 0)
        stop.set()
        await running
        assert checked
        return seen

    seen = asyncio.run(scenario())
    assert seen[-1][:2] == (True, 1.0)
    assert all(chunks == 12 for ready, _, chunks in seen if ready), "ready only once loaded"
    assert any(0 < chunks < 12 and (ready, value) == (False, 0.0) for ready, value, chunks in seen)
    assert (state.ready, gauge()) == (False, 0.0), "not ready once stopped"
    assert broker.committed(settings.group_id) == {TopicPartition(settings.answers_topic, 0): 1}


def test_sigterm_while_shared_sweeps_wait_for_the_broker_ends_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found by the chaos test: the broker stopped just after the store was loaded, while the
    sweeps topic was being made, and SIGTERM then waited for ever (the run never got to the
    loop that watches for it). Here the sweeps topic never comes."""
    settings = Settings(metrics_host="127.0.0.1", metrics_port=0)
    broker = FakeBroker()
    for topic in (settings.answers_topic, settings.verdicts_topic, settings.dlq_topic):
        broker.create_topic(topic, 1)
    broker.create_topic(settings.chunks_topic, 1)
    broker.create_topic(settings.control_topic, 1)
    waiting = asyncio.Event()

    async def broker_away(_: KafkaConnection, topic: str, replicas: int | None) -> None:
        waiting.set()
        await asyncio.Event().wait()

    async def no_problem(_: KafkaConnection) -> None:
        return None

    def make_consumer(_: KafkaConnection, role: str, group_id: str | None = None) -> FakeConsumer:
        return FakeConsumer(broker, group_id=group_id)

    monkeypatch.setattr(runtime, "SHUTDOWN_GRACE_SECONDS", 0.01)
    clients = runtime.KafkaClients(
        consumer=make_consumer,
        producer=lambda _: FakeProducer(broker),
        diagnose=no_problem,
        prepare_sweeps_topic=broker_away,
    )
    exporter = runtime.Exporter(settings, clients=clients)

    async def scenario() -> bool:
        stop = asyncio.Event()
        running = asyncio.create_task(exporter.run(stop))
        assert await _until(waiting.is_set)
        stop.set()
        done, _ = await asyncio.wait({running}, timeout=5)  # a bound on a hang, not a timing
        if not done:
            running.cancel()
        return bool(done)

    assert asyncio.run(scenario()), "the run ends once stopped"


# -- the control topic -------------------------------------------------------------------------


def test_a_request_is_committed_only_after_a_sweep_started_after_it_completed() -> None:
    rig = Rig()
    _archive(rig)
    releases = asyncio.Semaphore(0)  # one for each sweep the test lets start
    runner = rig.sweeps(held=releases)
    consumer = FakeConsumer(rig.broker, group_id=f"{GROUP}.control")
    listener = ControlListener(consumer, CONTROL, runner, rig.metrics, rig.publisher)
    listener.subscribe()

    def committed() -> int | None:
        return rig.broker.committed(f"{GROUP}.control").get(C0)

    async def goes_round(times: int = 3) -> None:
        fetches = consumer.fetches
        assert await _until(lambda: consumer.fetches >= fetches + times)

    async def scenario() -> None:
        stop = asyncio.Event()
        listening = asyncio.create_task(listener.run(stop))
        rig.broker.append(CONTROL, _sweep_request("first"))
        assert await _until(lambda: runner.running)
        await goes_round()
        rig.broker.append(CONTROL, _sweep_request("second"))  # during the first sweep
        await goes_round()
        assert committed() is None, "the first sweep has not completed"
        releases.release()
        assert await _until(lambda: committed() == 1), "the first request, answered"
        await goes_round()
        assert runner.completed == 1 and committed() == 1, "the second waits for a sweep of its own"
        releases.release()
        assert await _until(lambda: committed() == 2)
        stop.set()
        await listening
        await runner.stop()

    asyncio.run(scenario())
    assert runner.completed == 2


def test_an_invalid_control_message_is_dead_lettered_and_committed_past() -> None:
    rig = Rig()
    runner = rig.sweeps()
    consumer = FakeConsumer(rig.broker, group_id=f"{GROUP}.control")
    listener = ControlListener(consumer, CONTROL, runner, rig.metrics, rig.publisher)
    listener.subscribe()
    rig.broker.append(CONTROL, b"not json", b"k1")
    rig.broker.append(CONTROL, b'{"type": "reindex"}', b"k2")

    async def scenario() -> None:
        stop = asyncio.Event()
        listening = asyncio.create_task(listener.run(stop))
        assert await _until(lambda: rig.broker.committed(f"{GROUP}.control") == {C0: 2})
        stop.set()
        await listening

    asyncio.run(scenario())
    letters = rig.broker.records(DLQ)
    assert [(r.key, r.value) for r in letters] == [
        (b"k1", b"not json"),
        (b"k2", b'{"type": "reindex"}'),
    ]
    for offset, letter in enumerate(letters):
        headers = dict(letter.headers)
        assert headers["source_topic"] == CONTROL.encode()
        assert headers["source_offset"] == str(offset).encode()
        assert headers["reason"] == b"invalid_record"
    assert rig.total("citation_exporter_invalid_events_total", topic=CONTROL) == 2
    assert runner.completed == 0 and not runner.running
