"""The sweep the group shares, on the in-memory broker of tests/fake_kafka.py (no broker).

Two or three instances, each with its own book, follower, metrics and sweeper, share one fake
broker: the answer topic's partitions are split between them as the group would. Waiting for
the other tasks is a loop bounded in steps, never a timed assertion.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable

import orjson
from conftest import chunk_record, store_of, until
from fake_kafka import FakeBroker, FakeConsumer, FakeProducer
from prometheus_client import CollectorRegistry
from sweep_watch import WatchedStep

from exporter.checks.engine import Policy
from exporter.entailment.drawing import Drawing
from exporter.entailment.judging import SampleJudging
from exporter.entailment.lexical import LexicalJudge
from exporter.kafka.group_sweep import GroupSweeper, ProgressFollower, RequestListener
from exporter.kafka.publish import Publisher
from exporter.kafka.sweep_progress import (
    PartitionProgress,
    SweepBook,
    SweepRecord,
    encode_progress,
)
from exporter.outputs.metrics import ExporterMetrics, SourceLabels
from exporter.pipeline.core import Pipeline, Record
from exporter.pipeline.outcome import Origin
from exporter.pipeline.sweep import SweepStep

ANSWERS, VERDICTS, DLQ, PROGRESS = "answers", "verdicts", "dlq", "sweeps"
TEXT = "The refund window is thirty days."
PARTITIONS = 4
STEPS = 5_000  # ~1 ms each


class CountingPipeline(Pipeline):
    """The real pipeline; remembers every message it checked in a sweep."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.swept: list[tuple[int, int]] = []
        self.on_sweep: Callable[[Origin], None] | None = None

    def sweep_step(self, drawing: Drawing | None = None) -> SweepStep:
        return WatchedStep(super().sweep_step(drawing), self._swept)

    def _swept(self, record: Origin) -> None:
        self.swept.append((record.partition, record.offset))
        if self.on_sweep is not None:
            self.on_sweep(record)


def _broker(answers: int) -> FakeBroker:
    broker = FakeBroker()
    for topic, partitions in ((ANSWERS, PARTITIONS), (VERDICTS, 1), (DLQ, 1), (PROGRESS, 1)):
        broker.create_topic(topic, partitions)
    for i in range(answers):
        doc = "gone" if i % 10 == 9 else "d"  # one in ten cites a missing document: published
        citation = {
            "citation_id": f"a{i}",
            "doc_id": doc,
            "doc_version": "v1",
            "chunk_id": f"{doc}#0",
            "chunk_span": [4, 17],
            "quote": "refund window",
            "claim": "The refund window is thirty days.",
        }
        answer = {"answer_id": f"a{i}", "citations": [citation]}
        broker.append(ANSWERS, orjson.dumps(answer), partition=i % PARTITIONS)
    return broker


class Instance:
    """One exporter instance's share of the group sweep: its book, follower and sweeper."""

    def __init__(
        self,
        broker: FakeBroker,
        name: str,
        owned: set[int],
        sample: int | None = None,
        clock: float = 1_000.0,
    ) -> None:
        self.owned = set(owned)
        self.registry = CollectorRegistry()
        self.metrics = ExporterMetrics(self.registry, SourceLabels(), "test")
        self.pipeline = CountingPipeline(
            store_of(chunk_record("d", 0, TEXT)),
            Policy(),
            sweep_judge_rate=0.0 if sample is None else 1.0,
        )
        judging = None
        if sample is not None:
            judging = SampleJudging(sample, LexicalJudge(), None, frozenset())
        self.producer = FakeProducer(broker)
        self.book = SweepBook()
        producer = self.producer

        async def write(key: bytes, value: bytes) -> None:
            await (await producer.send(PROGRESS, value, key))

        async def partitions() -> set[int]:
            return broker.partitions(ANSWERS)

        self.sweeper = GroupSweeper(
            book=self.book,
            answers_topic=ANSWERS,
            make_consumer=lambda: FakeConsumer(broker, fetch_max_records=3),
            owned=lambda: self.owned,
            partitions=partitions,
            write=write,
            pipeline=lambda: self.pipeline,
            metrics=self.metrics,
            publisher=Publisher(self.producer, VERDICTS, DLQ),
            owner=name,
            judging=judging,
            clock=lambda: clock,
        )
        self.follower = ProgressFollower(
            FakeConsumer(broker), PROGRESS, self.book, self.metrics, self.sweeper.refresh
        )

    async def start(self, stop: asyncio.Event) -> list[asyncio.Task[None]]:
        await self.follower.assign({0})
        await self.follower.load()
        return [
            asyncio.create_task(self.follower.run(stop)),
            asyncio.create_task(self.sweeper.run(stop)),
        ]

    def checks(self, name: str = "citation_checks_total") -> float:
        return sum(
            sample.value
            for family in self.registry.collect()
            for sample in family.samples
            if sample.name == name and sample.labels.get("mode") == "sweep"
        )

    def gauge(self, name: str, **labels: str) -> float:
        value = self.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value


_until = functools.partial(until, steps=STEPS)


def _run(instances: list[Instance], scenario: Callable[[asyncio.Event], object]) -> None:
    async def main() -> None:
        stop = asyncio.Event()
        tasks = [task for instance in instances for task in await instance.start(stop)]
        try:
            await scenario(stop)  # type: ignore[misc]
        finally:
            stop.set()
            await asyncio.gather(*tasks)

    asyncio.run(main())


def _sweep_verdicts(broker: FakeBroker) -> list[str]:
    return [
        orjson.loads(record.value or b"{}")["citation_id"]
        for record in broker.records(VERDICTS)
        if orjson.loads(record.value or b"{}").get("mode") == "sweep"
    ]


def test_one_request_is_swept_once_across_the_group() -> None:
    broker = _broker(answers=40)
    a, b = Instance(broker, "a", {0, 1}), Instance(broker, "b", {2, 3})

    async def scenario(stop: asyncio.Event) -> None:
        assert await a.sweeper.request("s1", "re-index", 900.0)
        assert await _until(lambda: a.book.complete("s1") and b.book.complete("s1"))
        assert not await b.sweeper.request("s1", "the same request, seen by b", 901.0), "known"

    _run([a, b], scenario)
    assert sorted(a.pipeline.swept + b.pipeline.swept) == sorted(
        (i % PARTITIONS, i // PARTITIONS) for i in range(40)
    ), "every archived message checked exactly once, by its partition's owner"
    assert {p for p, _ in a.pipeline.swept} == {0, 1} and {p for p, _ in b.pipeline.swept} == {2, 3}
    assert a.checks() + b.checks() == 40
    assert sorted(_sweep_verdicts(broker)) == sorted(f"a{i}" for i in range(9, 40, 10))
    # each instance reports its own partitions; the group's sum is the sweep's
    for state in ("pending", "running"):
        assert a.gauge("citation_sweep_partitions", state=state) == 0
    assert a.gauge("citation_sweep_partitions", state="done") == 2
    assert b.gauge("citation_sweep_partitions", state="done") == 2
    assert a.gauge("citation_sweep_progress_ratio") == b.gauge("citation_sweep_progress_ratio") == 1
    statuses = [("ok", 36), ("document_missing", 4)]
    for status, count in statuses:
        both = a.gauge("citation_sweep_citations", status=status) + b.gauge(
            "citation_sweep_citations", status=status
        )
        assert both == count
    assert a.gauge("citation_sweep_last_completed_timestamp_seconds") == 1_000.0
    assert a.gauge("citation_sweep_duration_seconds") == 100.0


def test_a_partition_that_changes_owner_is_resumed_where_its_last_batch_ended() -> None:
    broker = _broker(answers=60)
    a, b = Instance(broker, "a", {0, 1, 2, 3}), Instance(broker, "b", set())

    def rebalance(record: Record) -> None:
        if len(a.pipeline.swept) == 20:  # a is part-way through its first partitions
            a.owned, b.owned = {0, 1}, {2, 3}

    a.pipeline.on_sweep = rebalance

    async def scenario(stop: asyncio.Event) -> None:
        await a.sweeper.request("s1", "control", 900.0)
        assert await _until(lambda: a.book.complete("s1") and b.book.complete("s1"))

    _run([a, b], scenario)
    everything = {(i % PARTITIONS, i // PARTITIONS) for i in range(60)}
    swept = a.pipeline.swept + b.pipeline.swept
    assert set(swept) == everything, "every message at least once"
    assert len(swept) - len(everything) <= 3, "at most the batch in hand twice"
    assert b.pipeline.swept and {p for p, _ in b.pipeline.swept} <= {2, 3}
    # the persisted counts follow one chain per partition: each citation counted once
    assert a.book.counts("s1", {0, 1, 2, 3}) == {"ok": 54, "document_missing": 6}


def test_a_sweep_requested_before_an_instance_started_is_taken_up_by_it() -> None:
    """The progress topic is read to its end at start-up: a sweep the group knows of is
    carried out on a new instance's partitions, and one complete is not repeated."""
    broker = _broker(answers=20)
    first = Instance(broker, "a", {0, 1, 2, 3})

    async def before(stop: asyncio.Event) -> None:
        await first.sweeper.request("s1", "control", 900.0)
        assert await _until(lambda: first.book.complete("s1"))
        first.owned = set()
        await first.sweeper.request("s2", "control", 950.0)

    _run([first], before)
    later = Instance(broker, "b", {0, 1, 2, 3})

    async def after(stop: asyncio.Event) -> None:
        assert later.book.complete("s1") and later.book.knows("s2")
        assert await _until(lambda: later.book.complete("s2"))

    _run([later], after)
    assert sorted(later.pipeline.swept) == sorted((i % 4, i // 4) for i in range(20)), "s2 once"


def test_each_instance_judges_its_share_of_the_sweep_s_sample() -> None:
    """A sample of 20 over four partitions, two instances with two each: each draws from the
    batches it checked and judges its share, 10, once the whole sweep is complete."""
    broker = _broker(answers=80)
    a = Instance(broker, "a", {0, 1}, sample=20)
    b = Instance(broker, "b", {2, 3}, sample=20)

    async def scenario(stop: asyncio.Event) -> None:
        await a.sweeper.request("s1", "re-index", 900.0)
        judged = "citation_entailment_checks_total"
        assert await _until(lambda: a.checks(judged) + b.checks(judged) >= 20)
        assert await _until(lambda: not a.sweeper.judge_tasks and not b.sweeper.judge_tasks)

    _run([a, b], scenario)
    judged = "citation_entailment_checks_total"
    assert (a.checks(judged), b.checks(judged)) == (10, 10)


def test_a_forged_target_past_the_log_does_not_hold_a_partition_forever() -> None:
    """Anyone who may write to the progress topic may claim a partition's range ends far
    beyond its log: the owner sweeps to the end that exists, and the sweep completes."""
    broker = _broker(answers=20)
    key, value = encode_progress(PartitionProgress("s1", 0, 0, 10**12, 0, False, {}, "mallory"))
    broker.append(PROGRESS, value, key)  # there before the instance starts: read at load
    a = Instance(broker, "a", {0, 1, 2, 3})

    async def scenario(stop: asyncio.Event) -> None:
        await a.sweeper.request("s1", "control", 900.0)
        assert await _until(lambda: a.book.complete("s1"))

    _run([a], scenario)
    assert sorted(a.pipeline.swept) == sorted((i % 4, i // 4) for i in range(20))


def test_a_forged_request_time_neither_stops_the_sweeper_nor_hides_later_sweeps() -> None:
    """Found by review: a sweep record from year 33658 killed the sweeper drawing its sample
    (and the service with it, at every start), and stayed the latest sweep for good."""
    broker = _broker(answers=20)
    for forged in (
        SweepRecord("year-33658", "x", 1e12, 4),
        SweepRecord("year-8941", "x", 2.2e11, 4),
    ):
        key, value = encode_progress(forged)
        broker.append(PROGRESS, value, key)
    a = Instance(broker, "a", {0, 1, 2, 3}, sample=5)

    async def scenario(stop: asyncio.Event) -> None:
        assert not a.book.knows("year-33658"), "no time a datetime cannot hold"
        assert await _until(lambda: a.book.complete("year-8941"))
        await a.sweeper.request("s1", "control", 900.0)
        assert await _until(lambda: a.book.complete("s1"))
        latest = a.book.latest()
        assert latest is not None and latest.sweep_id == "s1", "the last requested, in order"

    _run([a], scenario)
    assert len(a.pipeline.swept) == 2 * 20


def test_a_sweep_overtaken_by_a_newer_request_is_still_judged() -> None:
    """Found by review: only the latest sweep was judged once complete; one that completed
    after a newer one was requested kept its sample in memory, never judged."""
    broker = _broker(answers=40)
    a = Instance(broker, "a", {0, 1, 2, 3}, sample=10)

    def request_again(record: Record) -> None:
        if len(a.pipeline.swept) == 5:
            asyncio.get_running_loop().create_task(a.sweeper.request("s2", "control", 950.0))

    a.pipeline.on_sweep = request_again
    judged = "citation_entailment_checks_total"

    async def scenario(stop: asyncio.Event) -> None:
        await a.sweeper.request("s1", "control", 900.0)
        assert await _until(lambda: a.book.complete("s1") and a.book.complete("s2"))
        assert await _until(lambda: a.checks(judged) >= 20 and not a.sweeper.judge_tasks)

    _run([a], scenario)
    assert a.checks(judged) == 20, "both sweeps' samples"


def test_members_report_one_completion_time_whatever_their_clocks() -> None:
    """Found by review: each member reported when it noticed the completion (a restarted one,
    its restart), so the group's newest completion was no sweep's."""
    broker = _broker(answers=20)
    a = Instance(broker, "a", {0, 1}, clock=1_000.0)
    b = Instance(broker, "b", {2, 3}, clock=1_050.0)

    async def scenario(stop: asyncio.Event) -> None:
        await a.sweeper.request("s1", "control", 900.0)
        assert await _until(lambda: a.book.complete("s1") and b.book.complete("s1"))

    _run([a, b], scenario)
    completed = "citation_sweep_last_completed_timestamp_seconds"
    assert a.gauge(completed) == b.gauge(completed) == 1_050.0, "the last part's own time"
    assert a.gauge("citation_sweep_duration_seconds") == 150.0


def test_a_batch_that_could_not_be_delivered_is_swept_again_not_the_end_of_the_sweeper() -> None:
    """Found by review: a failed delivery raised out of the sweeper's task, which stopped the
    service; the part is resumed from its last persisted batch instead."""
    broker = _broker(answers=40)
    a = Instance(broker, "a", {0, 1, 2, 3})

    async def scenario(stop: asyncio.Event) -> None:
        await a.sweeper.request("s1", "control", 900.0)
        a.producer.fail_next(1)  # the sweeper's next write: its first progress record
        assert await _until(lambda: a.book.complete("s1"))

    _run([a], scenario)
    assert set(a.pipeline.swept) == {(i % 4, i // 4) for i in range(40)}
    assert a.book.counts("s1", {0, 1, 2, 3}) == {"ok": 36, "document_missing": 4}


# -- the requests every instance reads -------------------------------------------------------

CONTROL = "control"
NOW = 2_000_000.0  # seconds since the epoch, by the listener's clock
DAY = 86_400.0


class RecordingSweeper:
    """Stands for the GroupSweeper a RequestListener hands requests to: remembers them, and
    knows the ids in its book."""

    def __init__(self) -> None:
        self.book = SweepBook()
        self.requests: list[tuple[str, str, float]] = []

    async def request(self, sweep_id: str, reason: str, requested_at: float) -> None:
        self.requests.append((sweep_id, reason, requested_at))


def _control(*messages: tuple[bytes, float]) -> FakeBroker:
    """A control topic of one partition holding (value, sent at) messages."""
    broker = FakeBroker()
    broker.create_topic(CONTROL, 1)
    for value, sent_at in messages:
        broker.append(CONTROL, value, partition=0, timestamp_ms=int(sent_at * 1000))
    return broker


def _listen(broker: FakeBroker, sweeper: RecordingSweeper) -> float:
    """A RequestListener reads the whole control topic; returns the invalid events it counted."""
    registry = CollectorRegistry()
    consumer = FakeConsumer(broker)
    listener = RequestListener(
        consumer,
        CONTROL,
        sweeper,  # type: ignore[arg-type]
        ExporterMetrics(registry, SourceLabels(), "test"),
        max_age_seconds=DAY,
        clock=lambda: NOW,
    )

    async def scenario() -> None:
        stop = asyncio.Event()
        await listener.assign({0})
        task = asyncio.create_task(listener.run(stop))
        assert await until(lambda: consumer.fetches >= 2), "a fetch after the topic's end"
        stop.set()
        await task

    asyncio.run(scenario())
    labels = {"topic": CONTROL, "reason": "invalid_record"}
    return registry.get_sample_value("citation_exporter_invalid_events_total", labels) or 0.0


def _sweep(**fields: object) -> bytes:
    return orjson.dumps({"type": "sweep", **fields})


def test_every_request_is_handed_on_with_its_id_or_its_place_in_the_topic() -> None:
    sent = NOW - 60
    broker = _control((_sweep(id="reindex-7", reason="new parser"), sent), (_sweep(), sent))
    sweeper = RecordingSweeper()
    assert _listen(broker, sweeper) == 0
    assert sweeper.requests == [
        ("reindex-7", "new parser", sent),
        ("control/0/1", sweeper.requests[1][1], sent),
    ]


def test_a_request_older_than_the_bound_is_not_carried_out_unless_the_group_knows_it() -> None:
    old = NOW - 2 * DAY
    broker = _control((_sweep(id="forgotten"), old), (_sweep(id="known"), old))
    sweeper = RecordingSweeper()
    sweeper.book.apply(SweepRecord("known", "earlier", old, PARTITIONS))
    _listen(broker, sweeper)
    assert [request[0] for request in sweeper.requests] == ["known"]


def test_a_request_claiming_the_future_counts_as_sent_now() -> None:
    broker = _control((_sweep(id="ahead"), NOW + 10 * DAY))
    sweeper = RecordingSweeper()
    _listen(broker, sweeper)
    assert sweeper.requests == [("ahead", sweeper.requests[0][1], NOW)]


def test_a_message_that_is_no_request_is_counted_and_the_next_is_still_read() -> None:
    broker = _control(
        (b"{not json", NOW), (_sweep(id=7), NOW), (b'{"type": "nap"}', NOW), (_sweep(id="ok"), NOW)
    )
    sweeper = RecordingSweeper()
    assert _listen(broker, sweeper) == 3
    assert [request[0] for request in sweeper.requests] == ["ok"]
