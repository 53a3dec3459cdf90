"""Soak benchmark: sustained answer traffic for minutes, with RSS and consumer lag sampled.

Prints figures; asserts nothing (the exporter's exit status is checked, as a run that did not
stop cleanly measured nothing worth reading).

    python bench/soak.py [--minutes 10] [--rate 2000] [--sample-seconds 10] [--partitions 4]
                         [--chunk-updates 20] [--csv FILE]

Uses the broker named by $CITATION_KAFKA_BOOTSTRAP, or starts one with scripts/kafka-local
(which honours KAFKA_PORT and KAFKA_STATE, so ``KAFKA_PORT=49092 KAFKA_STATE=/tmp/soak-kafka``
gives a private broker) and stops it at the end.

1. Builds a simulated scenario (as ``citation-exporter simulate`` does), produces its live store
   (the original chunks, then the changes) to a fresh compacted chunk topic and starts one
   ``citation-exporter run`` process, which loads it.
2. From ready on, produces answer messages at ``--rate`` citations per second for ``--minutes``:
   the scenario's answer events and standalone citations in a cycle, every pass with fresh
   answer and citation ids, and the scenario's malformed lines on every pass (dead letters);
   besides, ``--chunk-updates`` live chunks per second re-sent unchanged (each one invalidates
   its document's cached view), and one sweep requested on the control topic half-way.
3. Every ``--sample-seconds`` prints the exporter's RSS (VmRSS of /proc/<pid>/status) and, from
   its /metrics, the summed consumer lag of the answer topic, the citations checked inline and
   their rate since the previous sample; at the end, a summary of the curve over the steady
   phase (after the first minute): RSS at its start, max and end, the slope of a least-squares
   fit in MiB per minute, the max lag and the mean rate.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import itertools
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaProducer

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from kafka_support import (  # noqa: E402
    ExporterProcess,
    Topics,
    create_topics,
    kafka_broker,
    produce,
    total,
)

from exporter.records.chunk_messages import chunk_message  # noqa: E402
from exporter.simulate.scenario import ScenarioConfig, build_scenario  # noqa: E402

# How often the producer tops traffic up to the target rate.
TICK_SECONDS = 0.05
# The steady phase starts after this much traffic (first document views built, buffers grown).
WARM_UP_SECONDS = 60.0
# Bounds on every wait.
READY_SECONDS = 300.0
SEND_SECONDS = 60.0
DRAIN_SECONDS = 120.0
MIB = 1024 * 1024

Message = tuple[bytes | None, bytes | None]


@dataclass
class Traffic:
    """What the producer has sent so far."""

    citations: int = 0
    messages: int = 0
    malformed: int = 0
    chunk_updates: int = 0
    sweep_requested_at: float | None = None


@dataclass
class Sample:
    elapsed: float
    rss_mib: float
    lag: float
    checked: float
    rate: float
    swept: float


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _answer_stream(lines: list[dict[str, Any] | bytes]) -> Iterator[tuple[bytes, int]]:
    """(value, citations in it) for ever: the scenario's lines, with fresh ids on every pass."""
    for number in itertools.count(1):
        tag = f".p{number}"
        for line in lines:
            if isinstance(line, bytes):
                yield line, 0
            elif "citations" in line:
                answer = line | {"answer_id": line["answer_id"] + tag, "emitted_at": _now()}
                answer["citations"] = [
                    c | {"citation_id": c["citation_id"] + tag} for c in line["citations"]
                ]
                yield orjson.dumps(answer), len(answer["citations"])
            else:
                yield (
                    orjson.dumps(
                        line
                        | {
                            "citation_id": line["citation_id"] + tag,
                            "answer_id": line["answer_id"] + tag,
                            "emitted_at": _now(),
                        }
                    ),
                    1,
                )


def _store_messages(records: list[dict[str, Any]]) -> tuple[list[Message], list[Message]]:
    """The chunk topic as a compacted topic replays it, and the live chunks left at its end."""
    messages: list[Message] = []
    live: dict[str, bytes] = {}
    for record in records:
        message = chunk_message(orjson.dumps(record))
        assert message is not None, "the scenario writes chunk records only"
        value = message[1]
        messages.append(message)
        if value is None:
            live.pop(record["chunk_id"], None)
        else:
            live[record["chunk_id"]] = value
    return messages, [(key.encode(), value) for key, value in live.items()]


async def _produce_traffic(
    bootstrap: str,
    topics: Topics,
    args: argparse.Namespace,
    traffic: Traffic,
    *,
    lines: list[dict[str, Any] | bytes],
    live_chunks: list[Message],
) -> None:
    """Send answers at the rate, chunk updates and one sweep request, until the time is up."""
    duration = args.minutes * 60.0
    answers = _answer_stream(lines)
    chunks = itertools.cycle(live_chunks)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        started = time.monotonic()
        while (elapsed := time.monotonic() - started) < duration:
            sent = []
            while traffic.citations < args.rate * elapsed:
                value, count = next(answers)
                sent.append(await producer.send(topics.answers, value))
                traffic.messages += 1
                traffic.citations += count
                if count == 0:
                    traffic.malformed += 1
            while traffic.chunk_updates < args.chunk_updates * elapsed:
                key, value = next(chunks)
                sent.append(await producer.send(topics.chunks, value, key=key))
                traffic.chunk_updates += 1
            if traffic.sweep_requested_at is None and elapsed >= duration / 2:
                request = orjson.dumps({"type": "sweep", "reason": "soak benchmark"})
                sent.append(await producer.send(topics.control, request))
                traffic.sweep_requested_at = elapsed
            await asyncio.wait_for(asyncio.gather(*sent), SEND_SECONDS)
            await asyncio.sleep(TICK_SECONDS)
    finally:
        await producer.stop()


def _rss_mib(pid: int, field_name: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) / 1024  # kB
    raise LookupError(f"no {field_name} for process {pid}")


def _observe(exporter: ExporterProcess) -> tuple[float, float, float, float]:
    """RSS in MiB, the answer topic's summed lag, citations checked inline and by sweeps."""
    rss = _rss_mib(exporter.process.pid)
    samples = exporter.scrape()
    lag = total(samples, "citation_exporter_consumer_lag_messages", topic=exporter.topics.answers)
    checked = total(samples, "citation_checks_total", mode="inline")
    swept = total(samples, "citation_checks_total", mode="sweep")
    return rss, lag, checked, swept


async def _sample(exporter: ExporterProcess, args: argparse.Namespace, rows: list[Sample]) -> None:
    """One row every ``--sample-seconds`` from the start of traffic, and one at its end."""
    started = time.monotonic()
    duration = args.minutes * 60.0
    print(
        f"{'elapsed s':>9} {'RSS MiB':>8} {'lag':>8} {'checked':>10} {'citations/s':>11} "
        f"{'swept':>9}",
        flush=True,
    )
    every = args.sample_seconds
    for at in [*(n * every for n in range(math.ceil(duration / every))), duration]:
        await asyncio.sleep(max(0.0, started + at - time.monotonic()))
        if exporter.process.poll() is not None:
            raise SystemExit(f"exporter exited with {exporter.process.returncode} mid-run")
        rss, lag, checked, swept = await asyncio.to_thread(_observe, exporter)
        elapsed = time.monotonic() - started
        previous = rows[-1] if rows else None
        rate = (checked - previous.checked) / (elapsed - previous.elapsed) if previous else 0.0
        rows.append(Sample(elapsed, rss, lag, checked, rate, swept))
        print(
            f"{elapsed:9.0f} {rss:8.1f} {lag:8.0f} {checked:10,.0f} {rate:11,.0f} {swept:9,.0f}",
            flush=True,
        )


async def _soak(
    bootstrap: str,
    exporter: ExporterProcess,
    args: argparse.Namespace,
    *,
    lines: list[dict[str, Any] | bytes],
    live_chunks: list[Message],
) -> tuple[Traffic, list[Sample]]:
    """Traffic and sampling side by side; either failing ends both (asyncio.run cancels)."""
    traffic, rows = Traffic(), []
    await asyncio.gather(
        _produce_traffic(
            bootstrap, exporter.topics, args, traffic, lines=lines, live_chunks=live_chunks
        ),
        _sample(exporter, args, rows),
    )
    return traffic, rows


def _drain(exporter: ExporterProcess) -> float | None:
    """Seconds until the answer topic's lag is 0 after traffic stopped (None: not in time)."""
    started = time.monotonic()
    while time.monotonic() - started < DRAIN_SECONDS:
        if _observe(exporter)[1] == 0:
            return time.monotonic() - started
        time.sleep(0.5)
    return None


def _slope(rows: list[Sample]) -> float:
    """MiB per minute, least squares."""
    fit = statistics.linear_regression([s.elapsed / 60 for s in rows], [s.rss_mib for s in rows])
    return fit.slope


def _summary(rows: list[Sample], traffic: Traffic, args: argparse.Namespace) -> None:
    steady = [s for s in rows if s.elapsed >= WARM_UP_SECONDS]
    if len(steady) < 2:
        print(f"(fewer than 2 samples after {WARM_UP_SECONDS:.0f} s: steady phase is every row)")
        steady = rows
    first, last = rows[0], rows[-1]
    print(
        f"RSS: {first.rss_mib:.1f} MiB at ready, {steady[0].rss_mib:.1f} MiB at the start of the "
        f"steady phase ({steady[0].elapsed:.0f} s), max {max(s.rss_mib for s in rows):.1f} MiB, "
        f"end {last.rss_mib:.1f} MiB; slope {_slope(steady):+.2f} MiB per minute (least squares "
        f"over {len(steady)} samples from {steady[0].elapsed:.0f} s to {steady[-1].elapsed:.0f} s)"
    )
    # the sweep is a step, not a trend: the slope on either side of it, where there is enough
    requested = traffic.sweep_requested_at
    segments = {
        "before the sweep": [s for s in steady if requested is None or s.elapsed < requested],
        "after the sweep completed": [s for s in steady if 0 < s.swept == last.swept],
    }
    slopes = [
        f"{name} {_slope(part):+.2f} MiB per minute ({part[0].elapsed:.0f}-"
        f"{part[-1].elapsed:.0f} s, {part[-1].rss_mib - part[0].rss_mib:+.1f} MiB)"
        for name, part in segments.items()
        if len(part) >= 3
    ]
    if slopes:
        print("RSS slope " + "; ".join(slopes))
    print(
        f"lag: max {max(s.lag for s in rows):,.0f} messages (answer topic, summed over "
        f"{args.partitions} partitions), {last.lag:,.0f} at the end of traffic"
    )
    span = last.elapsed - first.elapsed
    print(
        f"rate: {(last.checked - first.checked) / span:,.0f} citations/s checked inline on "
        f"average against {traffic.citations / span:,.0f}/s offered ({args.rate:,.0f}/s asked); "
        f"{traffic.citations:,} citations in {traffic.messages:,} messages, "
        f"{traffic.malformed:,} malformed, {traffic.chunk_updates:,} chunk updates"
    )


def _write_csv(path: str, rows: list[Sample]) -> None:
    with open(path, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["elapsed_s", "rss_mib", "lag", "checked", "citations_per_s", "swept"])
        for s in rows:
            writer.writerow(
                [
                    f"{s.elapsed:.1f}",
                    f"{s.rss_mib:.1f}",
                    f"{s.lag:.0f}",
                    f"{s.checked:.0f}",
                    f"{s.rate:.0f}",
                    f"{s.swept:.0f}",
                ]
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=2000.0, help="citations per second")
    parser.add_argument("--sample-seconds", type=float, default=10.0)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--chunk-updates", type=float, default=20.0, help="per second")
    parser.add_argument("--answers", type=int, default=60000, help="answers in the scenario")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--csv", metavar="FILE", help="write the samples here too")
    args = parser.parse_args()

    scenario = build_scenario(ScenarioConfig(seed=args.seed, answers=args.answers, invalid_lines=5))
    store, live_chunks = _store_messages([*scenario.chunks_before, *scenario.chunk_updates])

    with tempfile.TemporaryDirectory() as workdir, kafka_broker() as bootstrap:
        topics = create_topics(bootstrap, answer_partitions=args.partitions)
        produce(bootstrap, topics.chunks, store)
        log = Path(workdir) / "exporter.log"
        exporter = ExporterProcess(bootstrap, topics, log)
        try:
            exporter.wait_ready(READY_SECONDS)
            print(
                f"store: {len(live_chunks):,} live chunks of {scenario.config.document_count:,} "
                f"documents; traffic: {args.rate:,.0f} citations/s for {args.minutes:g} min "
                f"cycling {len(scenario.expected):,} citations in {len(scenario.citation_lines):,} "
                f"lines on {args.partitions} partitions; exporter pid {exporter.process.pid}, "
                f"{os.cpu_count()} CPUs",
                flush=True,
            )
            traffic, rows = asyncio.run(
                _soak(
                    bootstrap,
                    exporter,
                    args,
                    lines=scenario.citation_lines,
                    live_chunks=live_chunks,
                )
            )
            drained = _drain(exporter)
            samples = exporter.scrape()
            peak = _rss_mib(exporter.process.pid, "VmHWM")
        finally:
            code = exporter.stop()
            if code != 0:
                print(f"exporter exited with {code}; last lines of its log:", file=sys.stderr)
                print(*log.read_text().splitlines()[-20:], sep="\n", file=sys.stderr)

    if code != 0:
        raise SystemExit(1)
    _summary(rows, traffic, args)
    dead = total(samples, "citation_exporter_invalid_events_total", topic=topics.answers)
    swept = total(samples, "citation_checks_total", mode="sweep")
    if total(samples, "citation_sweep_last_completed_timestamp_seconds") > 0:
        took = total(samples, "citation_sweep_duration_seconds")
        sweep = f"{swept:,.0f} citations swept, the last sweep took {took:.1f} s"
    else:
        sweep = f"not completed ({swept:,.0f} citations swept so far)"
    print(
        f"after traffic: {'not drained' if drained is None else f'lag 0 in {drained:.1f} s'}; "
        f"peak RSS (VmHWM) {peak:.1f} MiB; {dead:,.0f} invalid answer records dead-lettered; "
        f"sweep requested at {traffic.sweep_requested_at or 0:.0f} s: {sweep}; exporter exited 0"
    )
    if args.csv:
        _write_csv(args.csv, rows)
        print(f"samples written to {args.csv}")


if __name__ == "__main__":
    main()
