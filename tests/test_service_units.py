"""Service pieces that need no broker: re-index detection, control messages, client options."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from exporter.checks.engine import Policy
from exporter.checks.store import ChunkStore
from exporter.kafka.clients import connection_options
from exporter.kafka.control import SweepRequest, sweep_request
from exporter.pipeline.messages import Origin, check_message
from exporter.pipeline.reindex import ReindexWatch
from exporter.records.decode import RecordError
from exporter.records.limits import Limits
from exporter.settings import Settings


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_reindex_is_due_once_the_new_chunker_has_gone_quiet() -> None:
    clock = Clock()
    watch = ReindexWatch(quiet_seconds=10, clock=clock)
    watch.saw("chunker-a")  # the initial load: known, not a re-index
    watch.arm()
    watch.saw("chunker-a")
    assert watch.due() is None
    watch.saw("chunker-b")
    clock.now += 5
    watch.touched()
    clock.now += 9
    assert watch.due() is None, "chunks still arrived 9 s ago"
    clock.now += 2
    assert watch.due() == "chunker-b"
    assert watch.due() is None, "one sweep per re-index"


CONTROL = Origin("rag.control", 2, 41)


@pytest.mark.parametrize(
    ("value", "asked"),
    [
        (
            b'{"type": "sweep", "reason": "after deploy 42"}',
            SweepRequest("control/2/41", "after deploy 42"),
        ),
        (b'{"type": "sweep"}', SweepRequest("control/2/41", "requested")),
        (
            b'{"type": "sweep", "id": "reindex-2026-11", "reason": "r"}',
            SweepRequest("reindex-2026-11", "r"),
        ),
    ],
)
def test_sweep_requests(value: bytes, asked: SweepRequest) -> None:
    """A request's id is its own, or where it was read: the same for every instance."""
    assert sweep_request(value, CONTROL) == asked


@pytest.mark.parametrize(
    "value",
    [
        None,
        b"not json",
        b'{"type": "reboot"}',
        b'{"type": "sweep", "reason": 7}',
        b"[]",
        b'{"type": "sweep", "id": 7}',
        b'{"type": "sweep", "id": ""}',
        b'{"type": "sweep", "id": "a\\nb"}',
        b'{"type": "sweep", "id": "' + b"i" * 201 + b'"}',
    ],
)
def test_other_control_messages_are_rejected(value: bytes | None) -> None:
    with pytest.raises(RecordError):
        sweep_request(value, CONTROL)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(b'{"type": "sweep", "reason": "' + b"x" * 100_000 + b'"}', id="huge"),
        pytest.param(b"[" * 5000 + b"]" * 5000, id="deeply nested"),
    ],
)
def test_hostile_control_messages_get_a_short_error(value: bytes) -> None:
    with pytest.raises(RecordError) as error:
        sweep_request(value, CONTROL)
    assert len(str(error.value)) < 200


def test_sasl_ssl_options_reach_the_clients() -> None:
    settings = Settings(
        bootstrap_servers="k:9093",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="exporter",
        sasl_password=SecretStr("s3cret"),
    )
    options = connection_options(settings.kafka)
    assert options["security_protocol"] == "SASL_SSL"
    assert options["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (options["sasl_plain_username"], options["sasl_plain_password"]) == (
        "exporter",
        "s3cret",
    )
    assert options["ssl_context"] is not None


def test_plaintext_has_no_tls_or_sasl() -> None:
    options = connection_options(Settings().kafka)
    assert set(options) == {"bootstrap_servers", "security_protocol"}


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "empty"),
        (b"x" * 100, "oversized"),
        (b"{oops", "invalid_json"),
        (b'{"citation_id": "c"}', "invalid_record"),
    ],
)
def test_every_bad_message_becomes_a_dead_letter(value: bytes | None, reason: str) -> None:
    policy = Policy(limits=Limits(max_message_bytes=50))
    checked = check_message(value, b"key", Origin("t", 0, 7), store=ChunkStore(), policy=policy)
    assert checked.verdicts == []
    letter = checked.dead_letter
    assert letter is not None
    assert (letter.reason, letter.origin.offset, letter.key) == (reason, 7, b"key")
    if reason == "oversized":
        assert letter.value == b"x" * 50
