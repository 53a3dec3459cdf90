"""Benchmark: model-judge judgements per second against a local scripted endpoint.

Prints figures; asserts nothing. The endpoint is tests/judge_server.py on 127.0.0.1 answering
every request after ``--latency`` seconds (a stand-in for a model's time to answer), so the
figures show the client's own overhead and how concurrency hides latency:
judgements/s approaches ``concurrency / latency`` while the client keeps up. The server runs in
a process of its own (stdlib, a thread per connection: at zero latency it is the bottleneck).

    python bench/judge_bench.py [--judgements 400] [--latency 0.05] [--concurrency 1 4 16]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from exporter.config.judge import OpenAIJudgeConfig  # noqa: E402
from exporter.entailment.openai import OpenAIJudge  # noqa: E402
from exporter.entailment.results import EntailmentResult  # noqa: E402
from tests.judge_server import JudgeServer, Reply  # noqa: E402

EVIDENCE = "Refunds are accepted within 30 days of purchase, with the receipt. " * 8


async def _run(base_url: str, judgements: int, concurrency: int) -> tuple[float, list[float]]:
    config = OpenAIJudgeConfig(
        base_url=base_url, model="bench", concurrency=concurrency, timeout_seconds=60
    )
    async with OpenAIJudge(config) as judge:
        started = time.perf_counter()
        results = await asyncio.gather(
            *(judge.judge(f"Refunds within {i} days.", EVIDENCE) for i in range(judgements))
        )
        elapsed = time.perf_counter() - started
    failed = [r for r in results if r.result is not EntailmentResult.ENTAILED]
    if failed:
        raise SystemExit(f"{len(failed)} judgements failed, e.g. {failed[0]}")
    return elapsed, sorted(r.seconds for r in results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judgements", type=int, default=400, help="default: %(default)s")
    parser.add_argument(
        "--latency", type=float, default=0.05, help="the server's seconds per reply (%(default)s)"
    )
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    args = parser.parse_args()

    # the server in its own process: in this one its threads would compete for the GIL
    here, there = multiprocessing.Pipe()
    server = multiprocessing.Process(target=_serve, args=(there, args.latency), daemon=True)
    server.start()
    base_url = here.recv()
    try:
        print(f"{args.judgements} judgements, server latency {args.latency * 1000:.0f} ms")
        print(f"{'concurrency':>11} {'judgements/s':>13} {'ideal':>8} {'p50 ms':>8} {'p99 ms':>8}")
        for concurrency in args.concurrency:
            elapsed, seconds = _run_sync(base_url, args.judgements, concurrency)
            rate = args.judgements / elapsed
            ideal = concurrency / args.latency if args.latency > 0 else float("inf")
            p50 = statistics.median(seconds) * 1000
            p99 = seconds[min(len(seconds) - 1, int(len(seconds) * 0.99))] * 1000
            print(f"{concurrency:>11} {rate:>13.1f} {ideal:>8.0f} {p50:>8.1f} {p99:>8.1f}")
    finally:
        here.send("stop")
        print(f"most requests in flight at once: {here.recv()}")
        server.join(10)


def _serve(pipe: Connection, latency: float) -> None:
    server = JudgeServer(Reply(delay=latency)).start()
    pipe.send(server.base_url)
    pipe.recv()
    server.stop()
    pipe.send(server.max_in_flight)


def _run_sync(base_url: str, judgements: int, concurrency: int) -> tuple[float, list[float]]:
    return asyncio.run(_run(base_url, judgements, concurrency))


if __name__ == "__main__":
    main()
