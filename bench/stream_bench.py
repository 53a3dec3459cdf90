"""Benchmark: citations per second through a real broker, and inline check latency.

Prints figures; asserts nothing.

    python bench/stream_bench.py [--answers 60000] [--partitions 4] [--one-per-message]

Uses the broker named by $CITATION_KAFKA_BOOTSTRAP, or starts one with scripts/kafka-local.
The whole scenario (live chunks, then every answer) is produced to fresh topics first; then one
``citation-exporter run`` process is started and timed from ready (chunk store loaded) until its
``citation_checks_total`` reaches the number of citations: consuming, checking, publishing every
failing verdict and committing, end to end. The latency figures are estimated from the
exporter's own ``citation_check_duration_seconds`` histogram, as Prometheus'
``histogram_quantile`` would. ``--steady`` measures a day's traffic without a re-index (few
citations failing) instead of the default re-index scenario. With ``--one-per-message`` every
citation is sent as a message of its own (the shape of a producer that emits citations, not
answer events), which measures the per-message cost rather than the per-citation one.

Then, in the same run and on the same topic, two plain aiokafka consumers (``async for`` and
``getmany()``) read and decode every message with orjson and nothing else: the exporter's rate
is printed as a share of each.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer

from exporter.cli.common import ratio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from judge_server import JudgeServer, Reply, completion  # noqa: E402
from kafka_support import (  # noqa: E402
    ExporterProcess,
    answer_messages,
    chunk_messages,
    create_topics,
    expected_verdicts,
    kafka_broker,
    produce,
    total,
)


def _quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """histogram_quantile over cumulative (upper bound, count) pairs."""
    count = buckets[-1][1]
    rank = q * count
    lower, below = 0.0, 0.0
    for upper, cumulative in buckets:
        if cumulative >= rank:
            if upper == float("inf"):
                return lower
            share = (rank - below) / (cumulative - below) if cumulative > below else 0.0
            return lower + (upper - lower) * share
        lower, below = upper, cumulative
    return lower


# Scenario shares of a day without a re-index: a few documents changed, none re-chunked.
STEADY = (
    "--resize-share=0.005",
    "--retypeset-share=0.01",
    "--refresh-share=0.01",
    "--silent-edit-share=0.005",
    "--delete-share=0.002",
)


# Between two scrapes of the exporter's metrics. A scrape costs the exporter milliseconds of
# CPU (every histogram rendered), so scraping every 20 ms took a sixth of the CPU it was
# measured on, and every 250 ms still a twentieth (a sampling profile, 2026-12-08: 5% of its
# CPU in the metrics server, where Prometheus' 15 s would cost a thousandth); a crossing
# between two scrapes is placed by linear interpolation instead.
_SCRAPE_EVERY = 1.0


def _until_checked(exporter: ExporterProcess, at_least: float) -> tuple[float, float]:
    """(citations checked, when) once ``citation_checks_total`` reaches ``at_least``: when is
    interpolated between the scrape before and the scrape that saw it reached."""
    deadline = time.monotonic() + 600
    before: tuple[float, float] | None = None
    while time.monotonic() < deadline:
        checked = total(exporter.scrape(), "citation_checks_total", mode="inline")
        now = time.monotonic()
        if checked >= at_least:
            if before is None or checked <= before[0]:
                return checked, now
            share = (at_least - before[0]) / (checked - before[0])
            return at_least, before[1] + share * (now - before[1])
        before = (checked, now)
        time.sleep(_SCRAPE_EVERY)
    raise SystemExit(f"citation_checks_total did not reach {at_least} in 600 s")


def _split(line: bytes | None) -> list[bytes]:
    """The citations of one answer event, each as a message of its own."""
    value = orjson.loads(line or b"{}")
    if isinstance(value, dict) and isinstance(value.get("citations"), list):
        shared = {k: value[k] for k in ("answer_id", "topic", "emitted_at") if k in value}
        return [orjson.dumps({**shared, **citation}) for citation in value["citations"]]
    return [line or b""]


def _citations_in(value: bytes) -> int:
    decoded = orjson.loads(value)
    return len(decoded["citations"]) if "citations" in decoded else 1


async def _plain_consumer(
    bootstrap: str, topic: str, messages: int, *, batched: bool
) -> tuple[int, float]:
    """The anchor: a plain aiokafka consumer reading the topic from the start and decoding every
    value with orjson, nothing else; ``batched`` with ``getmany()``, else a record at a time
    (``async for``, the loop aiokafka's documentation starts with). Returns (citations decoded,
    seconds from its first record to its last); bounded in time."""
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest"
    )
    await consumer.start()
    seen = citations = 0
    first = time.perf_counter()
    deadline = time.monotonic() + 300
    try:
        if batched:
            while seen < messages and time.monotonic() < deadline:
                fetched = await consumer.getmany(timeout_ms=1000)
                if not seen:
                    first = time.perf_counter()
                for records in fetched.values():
                    citations += sum(_citations_in(record.value) for record in records)
                    seen += len(records)
        else:
            async for record in consumer:
                if not seen:
                    first = time.perf_counter()
                citations += _citations_in(record.value)
                seen += 1
                if seen >= messages or time.monotonic() > deadline:
                    break
        return citations, time.perf_counter() - first
    finally:
        await consumer.stop()


def _plain_consumers(bootstrap: str, topic: str, messages: int) -> dict[bool, tuple[int, float]]:
    """Both plain consumers, a record at a time and batched, one after the other."""
    return {
        batched: asyncio.run(_plain_consumer(bootstrap, topic, messages, batched=batched))
        for batched in (False, True)
    }


def _print_against_plain(checking: float, plain: dict[bool, tuple[int, float]]) -> None:
    """The exporter's rate from its first check as a share of each plain consumer's."""
    for batched, (decoded, seconds) in plain.items():
        rate = decoded / seconds if seconds > 0 else float("nan")
        loop = "getmany()" if batched else "async for"
        print(
            f"a plain aiokafka consumer ({loop}) decoding the same messages with orjson: "
            f"{rate:,.0f} citations/s; the exporter from its first check: {checking / rate:.3f}"
            " of it"
        )


def _exporter_options(args: argparse.Namespace) -> tuple[JudgeServer | None, dict[str, Any]]:
    """The exporter's settings from the options (its profile, a model judge behind the
    response), with the judge's server when one was asked for (started here)."""
    profile = Path(args.profile).resolve() if args.profile else None
    options: dict[str, Any] = {"profile": profile} if profile is not None else {}
    if args.judge_latency is None:
        return None, options
    server = JudgeServer(Reply(body=completion("unknown"), delay=args.judge_latency)).start()
    options |= {
        "judge": "openai",
        "judge_base_url": server.base_url,
        "judge_model": "bench",
        "judge_sample_rate": f"{args.judge_sample_rate:%}",
    }
    return server, options


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=60000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument(
        "--one-per-message", action="store_true", help="one citation per message, not answers"
    )
    parser.add_argument(
        "--steady",
        action="store_true",
        help="a day without a re-index (about 2%% of citations failing), not the default "
        "re-index scenario (about 17%%: every failing citation is folded and relocated)",
    )
    parser.add_argument(
        "--profile", metavar="FILE", help="run the exporter under cProfile, stats written here"
    )
    parser.add_argument(
        "--judge-latency",
        type=float,
        metavar="SECONDS",
        help="judge a sample behind the response with a model judge: a local "
        "OpenAI-compatible server (tests/judge_server.py) answering after this many seconds; "
        "the inline rate is then compared with the same run's rate without a judge",
    )
    parser.add_argument(
        "--judge-sample-rate",
        type=ratio,
        default=0.01,
        metavar="F",
        help="with --judge-latency: share of citations sampled (default: %(default)s)",
    )
    args = parser.parse_args()
    # the commands as an installed package runs them, with their bytecode cached: where
    # writing bytecode is switched off, every start would compile every module again
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

    with tempfile.TemporaryDirectory() as workdir, kafka_broker() as bootstrap:
        scenario = Path(workdir) / "scenario"
        subprocess.run(
            [
                "citation-exporter",
                "simulate",
                "--out",
                str(scenario),
                "--answers",
                str(args.answers),
                "--seed",
                str(args.seed),
                *(STEADY if args.steady else ()),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        citations = len(expected_verdicts(scenario / "expected.jsonl"))
        topics = create_topics(bootstrap, answer_partitions=args.partitions)
        produce(bootstrap, topics.chunks, chunk_messages(scenario / "chunks.jsonl"))
        messages = answer_messages(scenario / "citations.jsonl")
        if args.one_per_message:
            messages = [(None, citation) for _, line in messages for citation in _split(line)]
        produced = produce(bootstrap, topics.answers, messages)

        server, profiled = _exporter_options(args)
        exporter = ExporterProcess(bootstrap, topics, Path(workdir) / "exporter.log", **profiled)
        try:
            exporter.wait_ready(120)
            ready = time.monotonic()
            first_checked, first_at = _until_checked(exporter, 1)
            last_checked, last_at = _until_checked(exporter, citations)
            elapsed = last_at - ready
            samples = exporter.scrape()
        finally:
            exporter.stop()
            if server is not None:
                server.stop()
        # in the same run, on the same topic: what reading and decoding alone costs here
        plain = _plain_consumers(bootstrap, topics.answers, produced)

    buckets = sorted(
        (float(dict(labels)["le"]), value)
        for (name, labels), value in samples.items()
        if name == "citation_check_duration_seconds_bucket"
    )
    failing = (
        total(samples, "citation_drift_failures_total", mode="inline")
        + total(samples, "citation_superseded_failures_total", mode="inline")
        + total(samples, "citation_document_missing_total", mode="inline")
    )
    checking = (last_checked - first_checked) / (last_at - first_at)
    print(
        f"{citations:,} citations in {produced:,} messages on {args.partitions} partitions "
        f"({failing:,.0f} failing verdicts published), one exporter process, "
        f"{os.cpu_count()} CPUs"
    )
    print(
        f"end to end: {elapsed:.2f} s from ready to the last check: "
        f"{citations / elapsed:,.0f} citations/s"
    )
    print(
        f"of which {first_at - ready:.2f} s joining the consumer group before the first check; "
        f"from then on {checking:,.0f} citations/s"
    )
    _print_against_plain(checking, plain)
    print(
        f"inline check latency per citation: p50 {_quantile(0.5, buckets) * 1e6:.0f} us, "
        f"p99 {_quantile(0.99, buckets) * 1e6:.0f} us (histogram estimate)"
    )
    if args.judge_latency is not None:
        judged = total(samples, "citation_entailment_checks_total", mode="inline")
        dropped = total(samples, "citation_entailment_dropped_total")
        print(
            f"behind the response: {args.judge_sample_rate:.2%} sampled, a judge answering in "
            f"{args.judge_latency:.3f} s: {judged:,.0f} judged and {dropped:,.0f} dropped by "
            "the time the last citation was checked (compare the rate with a run without "
            "--judge-latency)"
        )


if __name__ == "__main__":
    main()
