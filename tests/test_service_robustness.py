"""The service's edges under hostile conditions, on the in-memory broker of tests/fake_kafka.py.

The fake keeps the behaviours of aiokafka the code relies on (named in its docstring); the
real-broker tests (test_kafka_*.py) check the same paths against Kafka itself.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import TopicPartition
from aiokafka.errors import (
    CorruptRecordException,
    KafkaConnectionError,
    SaslAuthenticationFailed,
    UnsupportedCodecError,
)
from conftest import chunk_record, store_of
from fake_kafka import FakeBroker, FakeConsumer, FakeProducer
from prometheus_client import CollectorRegistry

import exporter.kafka.answers
from exporter.checks.engine import Policy
from exporter.errors import RestartRequired
from exporter.kafka.answers import AnswerChecker
from exporter.kafka.diagnose import bootstrap_hosts, explain
from exporter.kafka.fetching import Fetcher, unreadable_reason
from exporter.kafka.publish import MAX_DEAD_LETTER_VALUE, Publisher
from exporter.outputs.metrics import ExporterMetrics, SourceLabels
from exporter.pipeline.core import Pipeline
from exporter.pipeline.messages import DeadLetter, Origin
from exporter.pipeline.outcome import Mode
from exporter.settings import Settings, SettingsError, load_settings
from exporter.web.server import MetricsServer

TOPIC = "answers"
P0, P1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
Offset = tuple[TopicPartition, int]


def _consumer(logs: dict[TopicPartition, list[bytes]], bad: Iterable[Offset] = ()) -> FakeConsumer:
    """A consumer of group "g" assigned the partitions of ``logs``, fetched in that order; the
    ``bad`` offsets cannot be read (a codec the client lacks)."""
    broker = FakeBroker()
    for topic, partitions in ((TOPIC, 2), ("verdicts", 1), ("dlq", 1)):
        broker.create_topic(topic, partitions)
    for tp, values in logs.items():
        for value in values:
            broker.append(TOPIC, value, partition=tp.partition)
    for tp, offset in bad:
        broker.poison(tp, offset)
    consumer = FakeConsumer(broker, group_id="g")
    consumer.assign(list(logs))
    return consumer


def _metrics() -> tuple[CollectorRegistry, ExporterMetrics]:
    registry = CollectorRegistry()
    return registry, ExporterMetrics(registry, SourceLabels(), "test")


def test_an_unreadable_batch_is_isolated_counted_and_stepped_past() -> None:
    logs = {P0: [b"m%d" % i for i in range(10)], P1: [b"n%d" % i for i in range(3)]}
    consumer = _consumer(logs, bad={(P0, 5), (P0, 6)})
    registry, metrics = _metrics()
    fetcher = Fetcher(consumer, metrics)
    got = asyncio.run(fetcher.getmany(timeout_ms=10, max_records=100))
    assert [r.offset for r in got[P0]] == [0, 1, 2, 3, 4, 7, 8, 9]
    assert [r.offset for r in got[P1]] == [0, 1, 2]
    skipped = registry.get_sample_value(
        "citation_exporter_unreadable_messages_total",
        {"topic": TOPIC, "reason": "unsupported_codec"},
    )
    assert skipped == 2
    assert asyncio.run(fetcher.getmany(timeout_ms=10, max_records=100)) == {}


def test_records_drained_before_the_error_in_the_same_fetch_are_not_lost() -> None:
    """P1 is drained first, then P0's bad record raises: P1's records must come back."""
    logs = {P1: [b"n%d" % i for i in range(4)], P0: [b"m0", b"m1"]}
    consumer = _consumer(logs, bad={(P0, 1)})
    _, metrics = _metrics()
    got = asyncio.run(Fetcher(consumer, metrics).getmany(timeout_ms=10, max_records=100))
    assert [r.offset for r in got[P1]] == [0, 1, 2, 3]
    assert [r.offset for r in got[P0]] == [0]


def test_a_bad_batch_at_the_end_of_a_partition_is_committed_past() -> None:
    consumer = _consumer(
        {P0: [_answer(i) for i in range(3)] + [b"bad", b"bad"]}, {(P0, 3), (P0, 4)}
    )
    checker = _checker(consumer)
    assert asyncio.run(checker.poll()) == 3
    assert consumer.broker.committed("g") == {P0: 5}, "past the bad batch, or it is read again"


def test_errors_a_retry_can_fix_are_raised_for_the_backoff() -> None:
    assert unreadable_reason(KafkaConnectionError("broker away")) is None
    assert unreadable_reason(CorruptRecordException()) == "corrupt_record"
    assert unreadable_reason(UnsupportedCodecError()) == "unsupported_codec"
    assert unreadable_reason(ValueError("garbled batch")) == "undecodable"


def _dlq(max_message_bytes: int = 1_048_588) -> tuple[FakeBroker, Publisher]:
    broker = FakeBroker(max_message_bytes=max_message_bytes)
    broker.create_topic("dlq")
    return broker, Publisher(FakeProducer(broker), "verdicts", "dlq")


def _letter(size: int) -> DeadLetter:
    return DeadLetter(Origin("answers", 2, 41), b"v" * size, b"k", "invalid_json", "not JSON")


def test_a_dead_letter_refused_as_too_large_goes_again_cut_to_its_head() -> None:
    broker, publisher = _dlq(max_message_bytes=100_000)

    async def run() -> None:
        await publisher.delivered([await publisher.dead_letter(_letter(300_000))])

    asyncio.run(run())
    [again] = broker.records("dlq")  # the whole value was refused
    assert again.value == b"v" * 1024
    headers = dict(again.headers)
    assert headers["value_truncated"] == b"300000" and headers["source_offset"] == b"41"


def test_dead_letter_values_are_bounded_before_sending() -> None:
    broker, publisher = _dlq()

    async def run() -> None:
        await publisher.delivered([await publisher.dead_letter(_letter(2_000_000))])

    asyncio.run(run())
    [letter] = broker.records("dlq")
    assert letter.value is not None and len(letter.value) == MAX_DEAD_LETTER_VALUE
    assert dict(letter.headers)["value_truncated"] == b"2000000"


def _answer(index: int) -> bytes:
    return orjson.dumps(
        {
            "citation_id": f"c{index}",
            "answer_id": f"a{index}",
            "doc_id": "d",
            "doc_version": "v1",
            "chunk_id": "d#0",
            "chunk_span": [4, 17],
            "quote": "refund window",
        }
    )


class SlowPipeline(Pipeline):
    """Each answer costs 10 ms of blocking work, like an expensive relocation."""

    def answer(self, record: Any, mode: Mode = Mode.INLINE) -> Any:
        time.sleep(0.01)
        return super().answer(record, mode)


def _checker(consumer: FakeConsumer) -> AnswerChecker:
    _, metrics = _metrics()
    store = store_of(chunk_record("d", 0, "The refund window is thirty days."))
    pipeline = SlowPipeline(store, Policy())
    publisher = Publisher(FakeProducer(consumer.broker), "verdicts", "dlq")
    return AnswerChecker(consumer, TOPIC, pipeline=pipeline, metrics=metrics, publisher=publisher)


def test_checking_a_batch_lets_the_event_loop_run_heartbeats() -> None:
    consumer = _consumer({P0: [_answer(i) for i in range(30)]})
    checker = _checker(consumer)
    beats = 0

    async def heartbeat(done: asyncio.Event) -> None:
        nonlocal beats
        while not done.is_set():
            beats += 1
            await asyncio.sleep(0)

    async def run() -> int:
        done = asyncio.Event()
        beating = asyncio.create_task(heartbeat(done))
        await asyncio.sleep(0)
        before = beats
        checked = await checker.poll()
        during = beats - before
        done.set()
        await beating
        assert during >= 3, "the loop ran while 300 ms of checks were done"
        return checked

    assert asyncio.run(run()) == 30
    assert consumer.broker.committed("g") == {P0: 30}


def test_a_batch_stops_after_its_time_and_the_rest_is_fetched_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(exporter.kafka.answers, "BATCH_SECONDS", 0.05)
    consumer = _consumer({P0: [_answer(i) for i in range(40)]})
    checker = _checker(consumer)
    first = asyncio.run(checker.poll())
    assert 1 <= first < 40
    assert asyncio.run(consumer.position(P0)) == first
    assert consumer.broker.committed("g") == {P0: first}
    total = first
    for _ in range(100):
        if total == 40:
            break
        total += asyncio.run(checker.poll())
    assert total == 40 and consumer.broker.committed("g") == {P0: 40}


# -- why Kafka cannot be reached ------------------------------------------------------------


def _sasl_settings(**extra: Any) -> Settings:
    return Settings(
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="exporter",
        sasl_password="hunter2",  # type: ignore[arg-type]
        **extra,
    )


def _tls_error(reason: str) -> KafkaConnectionError:
    cause = ssl.SSLError(1, f"[SSL: {reason}] alert")
    cause.reason = reason  # type: ignore[misc]
    error = KafkaConnectionError("Connection at 127.0.0.1:19095 closed")
    error.__cause__ = cause
    return error


def _unverified() -> ssl.SSLCertVerificationError:
    error = ssl.SSLCertVerificationError(1, "certificate verify failed")
    error.verify_message = "self-signed certificate in certificate chain"
    return error


@pytest.mark.parametrize(
    ("error", "settings", "fragments"),
    [
        pytest.param(
            SaslAuthenticationFailed("invalid credentials"),
            _sasl_settings(),
            ["rejected the SASL SCRAM-SHA-512 login of user 'exporter'", "sasl_password"],
            id="wrong password",
        ),
        pytest.param(
            _unverified(),
            _sasl_settings(),
            ["is not trusted", "self-signed certificate", "ssl_cafile"],
            id="untrusted CA",
        ),
        pytest.param(
            _tls_error("SSLV3_ALERT_BAD_CERTIFICATE"),
            Settings(security_protocol="SSL"),
            ["requires a client certificate", "ssl_certfile"],
            id="no client certificate",
        ),
        pytest.param(
            ConnectionResetError(),
            _sasl_settings(),
            ["closed the connection during the SASL_SSL handshake", "security_protocol"],
            id="TLS to a plaintext port",
        ),
        pytest.param(
            ConnectionRefusedError(111, "refused"),
            Settings(),
            ["nothing accepts connections at 127.0.0.1:19094", "bootstrap_servers"],
            id="nothing listening",
        ),
    ],
)
def test_each_connection_failure_is_one_sentence_naming_the_setting(
    error: BaseException, settings: Settings, fragments: list[str]
) -> None:
    sentence = explain(error, "127.0.0.1", 19094, settings.kafka)
    for fragment in fragments:
        assert fragment in sentence
    assert "hunter2" not in sentence and "\n" not in sentence


def test_bootstrap_servers_are_split_into_hosts() -> None:
    assert bootstrap_hosts("k1:9093, [::1]:19092,k3") == [
        ("k1", 9093),
        ("::1", 19092),
        ("k3", 9092),
    ]


def test_health_bodies_say_what_is_wrong() -> None:
    import urllib.error
    import urllib.request

    problem: list[str | None] = ["Kafka at 127.0.0.1:1 rejected the SASL login"]
    server = MetricsServer(
        CollectorRegistry(), lambda: False, "127.0.0.1", 0, problem=lambda: problem[0]
    )
    server.start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        with urllib.request.urlopen(base + "/healthz", timeout=5) as response:
            assert response.status == 200
            assert b"ok, but Kafka at 127.0.0.1:1 rejected" in response.read()
        with pytest.raises(urllib.error.HTTPError) as not_ready:
            urllib.request.urlopen(base + "/readyz", timeout=5)
        assert not_ready.value.code == 503
        assert b"not ready: Kafka at 127.0.0.1:1 rejected" in not_ready.value.read()
        problem[0] = None
        with urllib.request.urlopen(base + "/healthz", timeout=5) as response:
            assert response.read() == b"ok\n"
    finally:
        server.stop()


# -- strict settings ------------------------------------------------------------------------


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    import os

    for name in list(os.environ):
        if name.upper().startswith("CITATION_EXPORTER_"):
            monkeypatch.delenv(name)
    return monkeypatch


def test_a_misspelt_variable_stops_start_up_with_a_suggestion(
    clean_environment: pytest.MonkeyPatch,
) -> None:
    clean_environment.setenv("CITATION_EXPORTER_TRESHOLD", "5")
    with pytest.raises(SettingsError) as error:
        load_settings()
    assert "unknown variable CITATION_EXPORTER_TRESHOLD" in str(error.value)
    assert "did you mean CITATION_EXPORTER_THRESHOLD?" in str(error.value)


def test_a_misspelt_key_in_the_file_gets_a_suggestion(tmp_path: Path) -> None:
    config = tmp_path / "exporter.toml"
    config.write_text("max_quote_char = 10\n")
    with pytest.raises(SettingsError, match="did you mean max_quote_chars"):
        load_settings(config)


def test_kubernetes_service_links_are_not_settings(clean_environment: pytest.MonkeyPatch) -> None:
    for name, value in {
        "CITATION_EXPORTER_SERVICE_HOST": "10.0.0.7",
        "CITATION_EXPORTER_SERVICE_PORT": "9877",
        "CITATION_EXPORTER_SERVICE_PORT_METRICS": "9877",
        "CITATION_EXPORTER_PORT": "tcp://10.0.0.7:9877",
        "CITATION_EXPORTER_PORT_9877_TCP": "tcp://10.0.0.7:9877",
        "CITATION_EXPORTER_PORT_9877_TCP_ADDR": "10.0.0.7",
    }.items():
        clean_environment.setenv(name, value)
    assert load_settings().metrics_port == 9877


@pytest.mark.parametrize(
    ("variables", "named"),
    [
        pytest.param(
            {"SECURITY_PROTOCOL": "SSL", "SSL_CAFILE": "/nonexistent/ca.pem"},
            "ssl_cafile /nonexistent/ca.pem does not exist",
            id="missing CA file",
        ),
        pytest.param(
            {"SECURITY_PROTOCOL": "SSL", "SSL_CAFILE": "{not_pem}"},
            "holds no usable CA certificate",
            id="not a certificate",
        ),
        pytest.param(
            {"SECURITY_PROTOCOL": "SSL", "SSL_CERTFILE": "{not_pem}"},
            "not a usable client certificate",
            id="bad client certificate",
        ),
        pytest.param(
            {"SECURITY_PROTOCOL": "SASL_SSL", "SASL_USERNAME": "u"},
            "needs sasl_username and sasl_password",
            id="SASL without a password",
        ),
    ],
)
def test_unusable_security_settings_are_named_at_start_up(
    clean_environment: pytest.MonkeyPatch, tmp_path: Path, variables: dict[str, str], named: str
) -> None:
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello\n")
    for name, value in variables.items():
        clean_environment.setenv(f"CITATION_EXPORTER_{name}", value.format(not_pem=not_pem))
    with pytest.raises(SettingsError, match=named):
        load_settings()


# -- no broker at all -------------------------------------------------------------------------


def _closed_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_without_a_broker_run_names_the_cause_once_and_leaks_no_client(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    port = _closed_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CITATION_EXPORTER_")},
        "CITATION_EXPORTER_BOOTSTRAP_SERVERS": f"127.0.0.1:{port}",
        "CITATION_EXPORTER_METRICS_HOST": "127.0.0.1",
        "CITATION_EXPORTER_METRICS_PORT": "0",
    }
    log = tmp_path / "exporter.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "exporter.cli", "run"], env=env, stdout=out, stderr=out
        )
        try:
            time.sleep(6)  # several retries with backoff
        finally:
            process.send_signal(signal.SIGTERM)
            status = process.wait(30)
    text = log.read_text()
    assert status == 0
    assert "Unclosed" not in text, "a client that failed to start was never closed"
    causes = [line for line in text.splitlines() if "nothing accepts connections" in line]
    assert len(causes) == 1 and f"127.0.0.1:{port} (bootstrap_servers)" in causes[0]


def test_produce_without_a_broker_exits_2_naming_the_cause(tmp_path: Path) -> None:
    import subprocess
    import sys

    from exporter.simulate.files import write_scenario
    from exporter.simulate.scenario import ScenarioConfig, build_scenario

    write_scenario(build_scenario(ScenarioConfig(answers=20)), tmp_path)
    port = _closed_port()
    command = ["produce", "--scenario", str(tmp_path), "--bootstrap-servers", f"127.0.0.1:{port}"]
    done = subprocess.run(
        [sys.executable, "-m", "exporter.cli", *command],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert f"nothing accepts connections at 127.0.0.1:{port}" in done.stderr
    assert "Unclosed" not in done.stderr and "Traceback" not in done.stderr


def test_a_broker_lost_after_start_up_is_named_once_and_its_return_too(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Found by walking the README: after start-up an outage changed nothing /healthz said."""
    from exporter.kafka import runtime
    from exporter.kafka.runtime import Exporter

    causes = iter(["nothing accepts connections at 127.0.0.1:1 (bootstrap_servers)"] * 3)

    async def diagnose(connection: object) -> str | None:
        return next(causes, None)

    monkeypatch.setattr(runtime, "CONNECTION_CHECK_SECONDS", 0.01)
    settings = Settings(metrics_port=0, metrics_host="127.0.0.1")
    running = Exporter(settings, clients=runtime.KafkaClients(diagnose=diagnose))
    running.state.problem = None
    seen: list[str | None] = []

    async def watch() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(running._watch_connection(stop))
        for _ in range(200):
            await asyncio.sleep(0.005)
            seen.append(running.problem)
            if len(seen) > 20 and running.problem is None and any(seen):
                break
        stop.set()
        await task

    with caplog.at_level("WARNING", logger="exporter.kafka.runtime"):
        try:
            asyncio.run(watch())
        finally:
            running.http.stop()
    assert any(problem and "nothing accepts connections" in problem for problem in seen)
    assert running.problem is None, "cleared once the broker can be used again"
    named = [r for r in caplog.records if "nothing accepts connections" in r.getMessage()]
    assert len(named) == 2, "logged once when it began, once when it ended"
    assert "can be used again" in named[-1].getMessage()


# -- found by walking the README ----------------------------------------------------------------


@pytest.mark.parametrize("value", ["0.98", "1"])
def test_a_threshold_given_as_a_ratio_is_refused_with_the_likely_meaning(
    clean_environment: pytest.MonkeyPatch, value: str
) -> None:
    clean_environment.setenv("CITATION_EXPORTER_THRESHOLD", value)
    with pytest.raises(SettingsError, match="looks like a ratio"):
        load_settings()


def test_an_empty_tls_file_setting_means_none(clean_environment: pytest.MonkeyPatch) -> None:
    clean_environment.setenv("CITATION_EXPORTER_SSL_CAFILE", "")
    assert load_settings().ssl_cafile is None


def test_a_sasl_mechanism_the_broker_lacks_is_said_plainly() -> None:
    from aiokafka.errors import UnsupportedSaslMechanismError

    error = UnsupportedSaslMechanismError("<AIOKafkaConnection host=127.0.0.1 port=1>")
    sentence = explain(error, "127.0.0.1", 19094, _sasl_settings().kafka)
    assert sentence == "Kafka at 127.0.0.1:19094 does not offer SASL SCRAM-SHA-512 (sasl_mechanism)"


def test_a_missing_topic_is_named_with_its_setting() -> None:
    from exporter.kafka.clients import topic_partitions

    settings = Settings(bootstrap_servers="k1:9092")
    with pytest.raises(RestartRequired) as error:
        no_topics = FakeProducer(FakeBroker())
        asyncio.run(topic_partitions(no_topics, "rag.chunk", "chunks_topic", settings.kafka))  # type: ignore[arg-type]
    assert str(error.value) == "topic 'rag.chunk' does not exist at k1:9092 (chunks_topic)"
