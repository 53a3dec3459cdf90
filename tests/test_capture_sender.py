"""exporter.capture.AnswerSender: answer events to the answer topic on a real broker, and a
caller's path that never waits on a broker that is away (events dropped and counted)."""

from __future__ import annotations

import threading
import uuid

import orjson
from kafka_support import consume, create_topic, free_port, scrape
from prometheus_client import CollectorRegistry, start_http_server

from exporter.capture import Captured, Chunk, Refusal, from_langchain
from exporter.capture.sender import AnswerSender, SenderStats
from exporter.config.kafka import KafkaConnection

REFUNDS = Chunk(
    doc_id="refunds",
    doc_version="v3",
    chunk_id="refunds#0",
    text="Refunds are issued within 30 days. Annual plans renew automatically.",
)


def _captured(number: int) -> Captured:
    answer = {"answer": f"Refunds take 30 days ({number}).", "citations": [0, 4]}
    return from_langchain(answer, [REFUNDS], answer_id=f"answer-{number}")


def _accounted(stats: SenderStats) -> int:
    return stats.queued + stats.in_flight + stats.sent + stats.failed + sum(stats.dropped.values())


def test_events_reach_the_answer_topic_keyed_by_answer(bootstrap: str) -> None:
    topic = f"capture-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 2)
    answers = [_captured(number) for number in range(300)]
    registry = CollectorRegistry()
    sender = AnswerSender(KafkaConnection(bootstrap_servers=bootstrap), topic=topic,
                          registry=registry)  # fmt: skip
    with sender:
        submitted = [sender.submit(answer) for answer in answers]
    stats = sender.stats
    assert all(submitted)
    assert (stats.submitted, stats.sent, stats.failed, stats.queued) == (300, 300, 0, 0)
    assert stats.refused == {"no_such_document": 300}  # each answer's citation of source 4
    records = consume(bootstrap, topic, 300, seconds=30)
    assert sorted(orjson.loads(r.value)["answer_id"] for r in records) == sorted(
        a.event["answer_id"] for a in answers if a.event
    )
    assert all(r.key == orjson.loads(r.value)["answer_id"].encode() for r in records)
    assert {orjson.loads(r.value)["answer_id"]: orjson.loads(r.value) for r in records}[
        "answer-7"
    ] == answers[7].event
    port = free_port()
    start_http_server(port, addr="127.0.0.1", registry=registry)
    scraped = scrape(port)
    assert scraped[("citation_capture_events_sent_total", ())] == 300
    assert scraped[("citation_capture_refusals_total", (("reason", "no_such_document"),))] == 300


def test_a_broker_away_costs_the_caller_nothing_and_every_event_is_counted() -> None:
    away = KafkaConnection(bootstrap_servers=f"127.0.0.1:{free_port()}")
    sender = AnswerSender(away, topic="rag.answers", max_queued=5).start()
    accepted = [sender.submit(_captured(number)) for number in range(20)]
    assert accepted == [True] * 5 + [False] * 15
    assert sender.stats.dropped == {"queue_full": 15}
    stats = sender.close(timeout=1.0)
    assert stats.dropped == {"queue_full": 15, "unsent_at_close": 5}
    assert _accounted(stats) == stats.submitted == 20 and stats.sent == 0
    assert not sender.submit(_captured(21)) and sender.stats.dropped["closed"] == 1


def test_what_cannot_be_sent_is_dropped_by_reason_never_raised() -> None:
    away = KafkaConnection(bootstrap_servers=f"127.0.0.1:{free_port()}", max_message_bytes=2000)
    with AnswerSender(away, max_queued=100, close_timeout=0.5) as sender:
        assert not sender.submit({"answer_id": "x", "sentences": ["y" * 3000], "citations": []})
        assert not sender.submit({"answer_id": "x", "bad": {1, 2}})  # not JSON
        assert not sender.submit(Captured(None, (Refusal("unreadable_response", "no content"),)))
        assert not sender.submit(None)
        assert sender.submit({"answer_id": "x", "sentences": [], "citations": []})
    stats = sender.stats
    assert stats.dropped == {"too_large": 1, "unencodable": 1, "unsent_at_close": 1}
    assert stats.refused == {"unreadable_response": 1}
    assert _accounted(stats) == stats.submitted == 3


def test_submit_is_safe_from_many_threads(bootstrap: str) -> None:
    topic = f"capture-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    with AnswerSender(KafkaConnection(bootstrap_servers=bootstrap), topic=topic) as sender:
        threads = [
            threading.Thread(target=lambda t=t: [sender.submit(_captured(t * 100 + n))
                                                 for n in range(100)])
            for t in range(4)
        ]  # fmt: skip
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    stats = sender.stats
    assert (stats.submitted, stats.sent) == (400, 400)
    assert len({r.value for r in consume(bootstrap, topic, 400, seconds=30)}) == 400
