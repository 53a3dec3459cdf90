"""The progress of sweeps the consumer group shares, as records of a compacted topic.

Every instance of a deployment reads every sweep request and follows the progress topic, so
each keeps the same :class:`SweepBook`: which sweeps were requested, and how far each answer
partition's part of each got. An instance sweeps the partitions it owns and writes their
progress after every delivered batch; a partition that changes owner (a rebalance, a killed
instance) is resumed by its new owner from the last position written. See docs/group-sweep.md.

Two kinds of record, keyed so compaction keeps the last of each:

- a sweep: ``{"type": "sweep", "sweep_id", "reason", "requested_at", "partitions"}``, the
  answer topic's partition count when it was requested;
- a partition's part: ``{"type": "partition", "sweep_id", "partition", "start", "target",
  "position", "done", "counts", "owner", "done_at"}``, where ``counts`` are the citations
  checked so far by status, cumulative (a new owner goes on from them), and ``done_at`` when
  the part was done (the sweep completed at its last part's).

Pure: no I/O. Records from the topic are untrusted (anyone with write access may write one):
each is decoded bounded and validated, and one that is not usable raises RecordError.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import orjson

from exporter.checks.verdict import Status
from exporter.outputs.state import SWEEP_PARTITION_STATES
from exporter.records.decode import RecordError, parse_json
from exporter.records.limits import MAX_ID_CHARS

__all__ = [
    "MAX_PROGRESS_RECORD_BYTES",
    "MAX_SWEEP_ID_CHARS",
    "Deleted",
    "PartitionProgress",
    "ProgressRecord",
    "SweepBook",
    "SweepRecord",
    "decode_progress",
    "encode_progress",
    "sweep_id",
]

# A record is a few hundred bytes; anything much larger is not one of ours.
MAX_PROGRESS_RECORD_BYTES = 16_384
# Kafka allows far fewer partitions per topic in practice; a bound for what a record may say.
_MAX_PARTITIONS = 1 << 20
_MAX_OFFSET = (1 << 63) - 1
_MAX_COUNT = (1 << 53) - 1
_MAX_OWNER_CHARS = 256
# A sweep's id is logged, and shown on the info gauge of the latest sweep.
MAX_SWEEP_ID_CHARS = 200
_MAX_TIME = 253_402_300_799.0  # 9999-12-31T23:59:59Z, the last second a datetime holds
_STATUSES = frozenset(status.value for status in Status)


@dataclass(frozen=True, slots=True)
class SweepRecord:
    """A sweep requested of the group."""

    sweep_id: str
    reason: str
    requested_at: float  # seconds since the epoch
    partitions: int  # of the answer topic when it was requested


@dataclass(frozen=True, slots=True)
class PartitionProgress:
    """How far one answer partition's part of a sweep got."""

    sweep_id: str
    partition: int
    start: int  # the first offset of the sweep's range
    target: int  # one past the last (the end offset when the part was first started)
    position: int  # everything before it is checked and its verdicts delivered
    done: bool
    counts: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    owner: str = ""
    done_at: float | None = None  # when its owner finished it (seconds since the epoch)


ProgressRecord = SweepRecord | PartitionProgress


def _key(record: ProgressRecord) -> bytes:
    if isinstance(record, SweepRecord):
        return orjson.dumps(["sweep", record.sweep_id])
    return orjson.dumps(["partition", record.sweep_id, record.partition])


def encode_progress(record: ProgressRecord) -> tuple[bytes, bytes]:
    """The record's key and value on the progress topic."""
    if isinstance(record, SweepRecord):
        value: dict[str, Any] = {
            "type": "sweep",
            "sweep_id": record.sweep_id,
            "reason": record.reason,
            "requested_at": record.requested_at,
            "partitions": record.partitions,
        }
    else:
        value = {
            "type": "partition",
            "sweep_id": record.sweep_id,
            "partition": record.partition,
            "start": record.start,
            "target": record.target,
            "position": record.position,
            "done": record.done,
            "counts": dict(record.counts),
            "owner": record.owner,
            "done_at": record.done_at,
        }
    return _key(record), orjson.dumps(value)


def _text(obj: dict[str, Any], name: str, limit: int, *, empty: bool = False) -> str:
    value = obj.get(name)
    if type(value) is not str or (not value and not empty):
        raise RecordError(f"'{name}' must be a non-empty string")
    if len(value) > limit:
        raise RecordError(f"'{name}' is longer than {limit:,} characters")
    return value


def sweep_id(value: object) -> str:
    """A sweep's id, as a request names it or a progress record carries it: a printable
    string of 1 to MAX_SWEEP_ID_CHARS characters (it is logged, and a label of the latest
    sweep); RecordError otherwise."""
    if type(value) is not str or not 0 < len(value) <= MAX_SWEEP_ID_CHARS:
        raise RecordError(f"'id' must be a string of 1 to {MAX_SWEEP_ID_CHARS} characters")
    if not value.isprintable():
        raise RecordError("'id' must be printable (it is logged and shown as a label)")
    return value


def _integer(obj: dict[str, Any], name: str, low: int, high: int) -> int:
    value = obj.get(name)
    if type(value) is not int or not low <= value <= high:
        raise RecordError(f"'{name}' must be an integer from {low:,} to {high:,}")
    return value


def _time(value: object, name: str) -> float:
    """A time in seconds since the epoch that a datetime can hold (a forged year 33658 must
    not reach one: it raises there)."""
    if (type(value) is int or type(value) is float) and 0 <= value <= _MAX_TIME:  # not NaN
        return float(value)
    raise RecordError(f"'{name}' must be a time in seconds since the epoch")


def _counts(value: object) -> Mapping[str, int]:
    if type(value) is not dict or len(value) > len(_STATUSES):
        raise RecordError("'counts' must be an object of citation statuses")
    counts: dict[str, int] = {}
    for status, count in value.items():
        if status not in _STATUSES:
            raise RecordError("'counts' must be an object of citation statuses")
        if type(count) is not int or not 0 <= count <= _MAX_COUNT:
            raise RecordError("'counts' must hold whole numbers of citations")
        counts[status] = count
    return MappingProxyType(counts)


@dataclass(frozen=True, slots=True)
class Deleted:
    """A tombstone: the record of this key is gone (an old sweep's, cleaned up)."""

    sweep_id: str
    partition: int | None  # None: the sweep's own record


def decode_progress(key: bytes | None, value: bytes | None) -> ProgressRecord | Deleted:
    """One record of the progress topic; RecordError for anything that is not a usable one,
    including a record whose key is not its own (compaction would keep the wrong one)."""
    if key is None or len(key) > MAX_PROGRESS_RECORD_BYTES:
        raise RecordError("a progress record needs the key its sweep and partition make")
    if value is None:
        return _deleted(key)
    record = _decode_value(value)
    if _key(record) != key:
        raise RecordError("a progress record's key does not match its sweep and partition")
    return record


def _deleted(key: bytes) -> Deleted:
    parts = parse_json(key)
    if type(parts) is list and len(parts) == 2 and parts[0] == "sweep":
        return Deleted(sweep_id(parts[1]), None)
    if type(parts) is list and len(parts) == 3 and parts[0] == "partition":
        partition = _integer({"partition": parts[2]}, "partition", 0, _MAX_PARTITIONS - 1)
        return Deleted(sweep_id(parts[1]), partition)
    raise RecordError("a progress tombstone's key names no sweep or partition")


def _decode_value(value: bytes) -> ProgressRecord:
    if len(value) > MAX_PROGRESS_RECORD_BYTES:
        raise RecordError(f"a progress record of {len(value):,} bytes; they are small")
    obj = parse_json(value)
    if type(obj) is not dict:
        raise RecordError("a progress record must be a JSON object")
    kind = obj.get("type")
    name = sweep_id(obj.get("sweep_id"))
    if kind == "sweep":
        return SweepRecord(
            name,
            _text(obj, "reason", MAX_ID_CHARS, empty=True),
            _time(obj.get("requested_at"), "requested_at"),
            _integer(obj, "partitions", 1, _MAX_PARTITIONS),
        )
    if kind != "partition":
        raise RecordError("'type' must be 'sweep' or 'partition'")
    start = _integer(obj, "start", 0, _MAX_OFFSET)
    target = _integer(obj, "target", start, _MAX_OFFSET)
    done = obj.get("done")
    if type(done) is not bool:
        raise RecordError("'done' must be true or false")
    return PartitionProgress(
        name,
        _integer(obj, "partition", 0, _MAX_PARTITIONS - 1),
        start,
        target,
        _integer(obj, "position", start, target),
        done,
        _counts(obj.get("counts")),
        _text(obj, "owner", _MAX_OWNER_CHARS, empty=True),
        None if obj.get("done_at") is None else _time(obj["done_at"], "done_at"),
    )


class SweepBook:
    """What the progress topic says, applied in its order: the same in every instance.

    A sweep's first record stands (a second instance that saw the same request says the same).
    A partition's part moves forward only: a record with a position behind the one known is
    an earlier owner's late write, and ignored; at an equal position the later record wins.
    """

    def __init__(self) -> None:
        self._sweeps: dict[str, SweepRecord] = {}
        self._parts: dict[tuple[str, int], PartitionProgress] = {}

    def apply(self, record: ProgressRecord | Deleted) -> None:
        if isinstance(record, Deleted):
            if record.partition is None:
                self._sweeps.pop(record.sweep_id, None)
            else:
                self._parts.pop((record.sweep_id, record.partition), None)
            return
        if isinstance(record, SweepRecord):
            self._sweeps.setdefault(record.sweep_id, record)
            return
        key = (record.sweep_id, record.partition)
        known = self._parts.get(key)
        if known is None or record.position >= known.position:
            self._parts[key] = record

    def knows(self, sweep_id: str) -> bool:
        return sweep_id in self._sweeps

    def sweep(self, sweep_id: str) -> SweepRecord | None:
        return self._sweeps.get(sweep_id)

    def part(self, sweep_id: str, partition: int) -> PartitionProgress | None:
        return self._parts.get((sweep_id, partition))

    def sweeps(self) -> Iterator[SweepRecord]:
        """Every sweep known, in the topic's order: the same in every instance, whatever a
        record says of its own time (a forged one must not jump the queue)."""
        yield from list(self._sweeps.values())

    def complete(self, sweep_id: str) -> bool:
        """Every partition of the sweep is done."""
        sweep = self._sweeps.get(sweep_id)
        if sweep is None:
            return False
        return all(
            (part := self._parts.get((sweep_id, p))) is not None and part.done
            for p in range(sweep.partitions)
        )

    def pending(self, partition: int) -> list[SweepRecord]:
        """The sweeps this partition still has a part of to do, oldest first (a partition the
        topic did not have when a sweep was requested has no part of it)."""
        return [
            sweep
            for sweep in self.sweeps()
            if partition < sweep.partitions
            and not ((part := self._parts.get((sweep.sweep_id, partition))) and part.done)
        ]

    def latest(self) -> SweepRecord | None:
        """The sweep requested last, in the topic's order."""
        return next(reversed(self._sweeps.values()), None)

    def completed_at(self, sweep_id: str) -> float | None:
        """When the sweep's last part was done (the same for every instance), once complete."""
        if not self.complete(sweep_id):
            return None
        sweep = self._sweeps[sweep_id]
        times = [self._parts[sweep_id, p].done_at for p in range(sweep.partitions)]
        return max((t for t in times if t is not None), default=sweep.requested_at)

    def states(self, sweep_id: str, partitions: set[int]) -> dict[str, int]:
        """Of ``partitions`` (an instance's own), how many are pending, running or done in
        the sweep: running once a part has a record and is not done."""
        states = dict.fromkeys(SWEEP_PARTITION_STATES, 0)
        sweep = self._sweeps.get(sweep_id)
        for partition in partitions:
            if sweep is None or partition >= sweep.partitions:
                continue
            part = self._parts.get((sweep_id, partition))
            state = "pending" if part is None else "done" if part.done else "running"
            states[state] += 1
        return states

    def progress(self, sweep_id: str, partitions: set[int]) -> float | None:
        """Of ``partitions`` (an instance's own) in the sweep, the mean share checked: a
        pending part 0 (its range is unknown until its first owner starts it), a done one 1.
        None when the sweep is unknown or covers none of them."""
        sweep = self._sweeps.get(sweep_id)
        covered = [p for p in partitions if sweep is not None and p < sweep.partitions]
        if not covered:
            return None
        shares = []
        for partition in covered:
            part = self._parts.get((sweep_id, partition))
            if part is None or part.done:
                shares.append(0.0 if part is None else 1.0)
            else:
                span = part.target - part.start
                shares.append((part.position - part.start) / span if span else 1.0)
        return sum(shares) / len(shares)

    def counts(self, sweep_id: str, partitions: set[int]) -> dict[str, int]:
        """Citations checked so far by status, over ``partitions`` (an instance's own)."""
        counts: dict[str, int] = {}
        for partition in partitions:
            part = self._parts.get((sweep_id, partition))
            if part is None:
                continue
            for status, count in part.counts.items():
                counts[status] = counts.get(status, 0) + count
        return counts
