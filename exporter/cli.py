"""The ``citation-exporter`` command: arguments in, wiring out; no business logic here.

Exit codes are part of the contract, so a deploy pipeline can gate on ``sweep``:
0 drift within the gate, 1 drift above ``--fail-above``, 2 usage error or unreadable input.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import IO, Any, NoReturn

import orjson
from tqdm import tqdm

from exporter import __version__
from exporter.checks.engine import DEFAULT_HIGH_SEVERITY_TOPICS, Policy
from exporter.outputs.report import SweepSummary
from exporter.records.jsonl import input_size, open_output
from exporter.simulate.files import write_scenario
from exporter.simulate.scenario import ScenarioConfig, build_scenario
from exporter.sweep import load_store, run_sweep

__all__ = ["main"]

EXIT_OK = 0
EXIT_GATE_FAILED = 1
EXIT_USAGE = 2

_SWEEP_EXAMPLES = """\
examples:
  # check an archive after a re-index; fail the deploy when more than 1% drifted
  citation-exporter sweep --chunks chunks.jsonl.gz --citations citations.jsonl.gz \\
      --out verdicts.jsonl.gz

  # the same as a JSON summary, for a CI step to parse
  citation-exporter sweep --chunks chunks.jsonl --citations - --format json < answers.jsonl

  # try it on built-in example data (a re-chunked, re-extracted and refreshed store)
  citation-exporter sweep --example

exit status: 0 drift ratio <= --fail-above, 1 above it, 2 usage error or unreadable input.
"""

_RUN_EXAMPLES = """\
examples:
  CITATION_EXPORTER_BOOTSTRAP_SERVERS=kafka-1:9092,kafka-2:9092 citation-exporter run
  citation-exporter run --config /etc/citation-exporter.toml --metrics-port 9877

exit status: 0 after SIGTERM/SIGINT (the batch in hand is finished and committed), 2 for an
invalid setting. A broker outage is retried with backoff; it never ends the process.
"""

_PRODUCE_EXAMPLES = """\
examples:
  citation-exporter simulate --out /tmp/scenario --answers 20000
  citation-exporter produce --scenario /tmp/scenario --bootstrap-servers 127.0.0.1:19092 \\
      --create-topics 4 --rate 2000
"""

_SIMULATE_EXAMPLES = """\
examples:
  citation-exporter simulate --out /tmp/scenario --answers 5000 --seed 42
  citation-exporter sweep --chunks /tmp/scenario/chunks.jsonl \\
      --citations /tmp/scenario/citations.jsonl --out /tmp/scenario/verdicts.jsonl

files written: chunks.before.jsonl (the store the answers were written against), chunks.jsonl
(that store followed by the changes, as a compacted topic replays it), citations.jsonl (answer
events and standalone citations mixed), expected.jsonl (the verdict each citation should get),
scenario.json (parameters and counts).
"""


class _UsageError(Exception):
    """A problem with the command line or its files: exit 2 with a one-line message."""


def _ratio(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a ratio between 0 and 1, got {text}")
    return value


def _threshold(text: str) -> float:
    value = float(text)
    if not 0.0 < value <= 100.0:
        raise argparse.ArgumentTypeError(f"must be a similarity in (0, 100], got {text}")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _available_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _topics(text: str) -> frozenset[str]:
    return frozenset(t.strip() for t in text.split(",") if t.strip())


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="citation-exporter",
        description="Keep the citations of a RAG system honest: check stored citations against "
        "the live document store, repair drifted offsets, and tell drift from superseded "
        "documents.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sweep = commands.add_parser(
        "sweep",
        help="check an archive of citations against the live chunk store (a deploy gate)",
        description="Check every stored citation against the live chunk store. Writes one "
        "verdict per input citation and prints a summary with the drift ratio and the "
        "superseded ratio shown apart.",
        epilog=_SWEEP_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    inputs = sweep.add_argument_group("inputs (.jsonl, .jsonl.gz, or - for stdin)")
    inputs.add_argument(
        "--chunks", metavar="FILE", help="live chunk records; last per chunk_id wins"
    )
    inputs.add_argument(
        "--citations", metavar="FILE", help="citation records and answer events, mixed"
    )
    inputs.add_argument(
        "--example",
        action="store_true",
        help="generate a built-in example scenario and sweep it (no files needed)",
    )
    sweep.add_argument(
        "--out", metavar="FILE", help="write verdicts as JSONL here (.gz compresses, - is stdout)"
    )
    sweep.add_argument(
        "--fail-above",
        type=_ratio,
        default=0.01,
        metavar="RATIO",
        help="exit 1 when drift / valid citations exceeds this (default: %(default)s)",
    )
    sweep.add_argument(
        "--threshold",
        type=_threshold,
        default=98.0,
        metavar="N",
        help="minimum folded similarity (0-100) for a quote to match (default: %(default)s)",
    )
    sweep.add_argument(
        "--high-severity-topics",
        type=_topics,
        default=DEFAULT_HIGH_SEVERITY_TOPICS,
        metavar="LIST",
        help="comma-separated topics whose unrepairable claims are suppressed rather than "
        "degraded to a document citation (default: legal,pricing,security)",
    )
    sweep.add_argument("--format", choices=("text", "json"), default="text", help="summary format")
    sweep.add_argument(
        "--jobs",
        type=_positive,
        default=_available_cpus(),
        metavar="N",
        help="worker processes checking citations (default: the CPUs available, %(default)s)",
    )
    sweep.add_argument(
        "--no-progress", action="store_true", help="no progress bar, even on a terminal"
    )

    demo = commands.add_parser(
        "demo",
        help="the exporter on built-in traffic, no Kafka needed: watch drift appear live",
        description="Run the exporter's pipeline in-process on simulated traffic: a "
        "baseline, then a chunk-size change, then a content refresh. /metrics is served on "
        "its usual port while the terminal shows the drift and superseded ratios against the "
        "alert thresholds, and the shift clusters as they form.",
    )
    demo.add_argument(
        "--metrics-port",
        type=int,
        default=9877,
        metavar="PORT",
        help="port of /metrics (default: %(default)s; 0 picks a free one)",
    )
    demo.add_argument(
        "--seconds-per-phase",
        type=float,
        default=10.0,
        metavar="S",
        help="how long each phase lasts (default: %(default)s)",
    )
    demo.add_argument(
        "--answers",
        type=_positive,
        default=3000,
        metavar="N",
        help="answers in the simulated traffic (default: %(default)s)",
    )
    demo.add_argument(
        "--serve", action="store_true", help="keep serving /metrics after the demo, until Ctrl-C"
    )

    run = commands.add_parser(
        "run",
        help="the streaming exporter: Kafka in, Prometheus metrics and verdicts out",
        description="Follow the chunk topic into an in-memory store, check every citation of "
        "the answer topic inline, publish failing verdicts and dead letters, and serve "
        "/metrics, /healthz and /readyz. Settings come from CITATION_EXPORTER_* environment "
        "variables or a TOML file; the options below override both.",
        epilog=_RUN_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("--config", type=Path, metavar="FILE", help="TOML file of settings")
    run.add_argument("--bootstrap-servers", metavar="HOSTS", help="Kafka brokers, host:port,...")
    run.add_argument("--group-id", metavar="ID", help="consumer group of the answer consumer")
    run.add_argument("--metrics-port", type=int, metavar="PORT", help="port of /metrics")
    run.add_argument(
        "--source",
        metavar="FILE",
        help="replay a JSONL file of chunk records and answer events (.gz, - for stdin) "
        "through the same pipeline instead of reading Kafka, then print a summary",
    )
    run.add_argument(
        "--out", metavar="FILE", help="with --source: write the verdicts it would publish here"
    )
    run.add_argument(
        "--serve",
        action="store_true",
        help="with --source: keep serving /metrics after the replay, until SIGTERM/SIGINT",
    )
    run.add_argument(
        "--log-level",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        default="INFO",
        help="default: %(default)s",
    )

    produce = commands.add_parser(
        "produce",
        help="send a simulated scenario to the Kafka topics, to watch the exporter react",
        description="Send a scenario written by 'simulate' to the topics the exporter reads: "
        "the original chunks and half of the answers, then the re-index (new chunker, "
        "re-extraction, refresh, deletions), then the other half of the answers. Topic names "
        "and security come from the same settings as 'run'.",
        epilog=_PRODUCE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    produce.add_argument(
        "--scenario",
        type=Path,
        metavar="DIR",
        required=True,
        help="a directory written by 'citation-exporter simulate'",
    )
    produce.add_argument("--config", type=Path, metavar="FILE", help="TOML file of settings")
    produce.add_argument("--bootstrap-servers", metavar="HOSTS", help="Kafka brokers")
    produce.add_argument(
        "--rate",
        type=float,
        default=0.0,
        metavar="N",
        help="citations per second (default: as fast as possible)",
    )
    produce.add_argument(
        "--create-topics",
        type=int,
        metavar="PARTITIONS",
        help="create the topics first, with this many partitions",
    )
    produce.add_argument(
        "--sweep", action="store_true", help="finish with a sweep request on the control topic"
    )

    simulate = commands.add_parser(
        "simulate",
        help="write a seeded, realistic scenario with expected verdicts",
        description="Generate documents, chunks, answers with citations, the live store after "
        "a chunk-size change, a re-extraction, a content refresh, silent edits and deletions, "
        "and the expected verdict for every citation.",
        epilog=_SIMULATE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    defaults = ScenarioConfig()
    simulate.add_argument("--out", metavar="DIR", required=True, help="directory to write into")
    simulate.add_argument("--seed", type=int, default=defaults.seed, help="default: %(default)s")
    simulate.add_argument(
        "--answers", type=_positive, default=defaults.answers, help="default: %(default)s"
    )
    simulate.add_argument(
        "--documents", type=_positive, default=None, help="default: answers / 40, at least 10"
    )
    simulate.add_argument(
        "--chunk-size",
        type=_positive,
        default=defaults.chunk_size,
        metavar="CHARS",
        help="chunk size before the change (default: %(default)s)",
    )
    simulate.add_argument(
        "--new-chunk-size",
        type=_positive,
        default=defaults.new_chunk_size,
        metavar="CHARS",
        help="chunk size of re-chunked documents (default: %(default)s)",
    )
    for change in ("resize", "retypeset", "refresh", "silent-edit", "delete"):
        key = f"{change.replace('-', '_')}_share"
        simulate.add_argument(
            f"--{change}-share",
            type=_ratio,
            default=getattr(defaults, key),
            metavar="F",
            help=f"share of documents that get the {change} change (default: %(default)s)",
        )
    simulate.add_argument(
        "--context-share",
        type=_ratio,
        default=defaults.context_share,
        metavar="F",
        help="share of citations stored with prefix/suffix (default: %(default)s)",
    )
    simulate.add_argument(
        "--invalid-lines",
        type=int,
        default=0,
        metavar="N",
        help="malformed citation lines to mix in (default: %(default)s)",
    )
    simulate.add_argument("--gzip", action="store_true", help="write .jsonl.gz files")
    return parser


@contextmanager
def _progress_bar(path: str, enabled: bool) -> Iterator[Callable[[int], None] | None]:
    size = input_size(path)
    if not enabled or size is None or not sys.stderr.isatty():
        yield None
        return
    with tqdm(total=size, unit="B", unit_scale=True, desc="sweep", file=sys.stderr) as bar:

        def update(position: int) -> None:
            bar.update(position - bar.n)

        yield update


def _sweep_files(
    args: argparse.Namespace,
) -> tuple[str, str, tempfile.TemporaryDirectory[str] | None]:
    if args.example:
        if args.chunks or args.citations:
            raise _UsageError("--example generates its own inputs; drop --chunks/--citations")
        workdir = tempfile.TemporaryDirectory(prefix="citation-example-")
        paths = write_scenario(build_scenario(ScenarioConfig(answers=4000)), Path(workdir.name))
        print(
            f"example: 4,000 answers over a store where some documents were re-chunked, "
            f"re-extracted, refreshed, silently edited or deleted ({workdir.name})",
            file=sys.stderr,
        )
        return str(paths["chunks"]), str(paths["citations"]), workdir
    if not args.chunks or not args.citations:
        raise _UsageError("sweep needs --chunks FILE and --citations FILE (or --example)")
    if args.chunks == "-" and args.citations == "-":
        raise _UsageError("only one of --chunks and --citations can read stdin")
    return args.chunks, args.citations, None


def _run_sweep(args: argparse.Namespace) -> int:
    chunks, citations, workdir = _sweep_files(args)
    policy = Policy(threshold=args.threshold, high_severity_topics=args.high_severity_topics)
    summary = SweepSummary()
    with workdir or nullcontext():
        try:
            store = load_store(chunks, summary)
        except OSError as exc:
            raise _UsageError(f"cannot read --chunks {chunks}: {exc}") from None
        output = open_output(args.out) if args.out else nullcontext(None)
        try:
            with output as out, _progress_bar(citations, not args.no_progress) as progress:
                run_sweep(
                    store, citations, policy, summary, out=out, progress=progress, jobs=args.jobs
                )
        except BrokenProcessPool:
            raise _UsageError(
                "a worker process died (killed, or out of memory?); retry with --jobs 1"
            ) from None
        except OSError as exc:
            raise _UsageError(
                f"cannot read --citations {citations} or write --out: {exc}"
            ) from None
    report_to: IO[str] = sys.stderr if args.out == "-" else sys.stdout
    if args.format == "json":
        report_to.write(orjson.dumps(summary.to_json(args.fail_above)).decode() + "\n")
    else:
        report_to.write(summary.render_text(args.fail_above) + "\n")
    return EXIT_OK if summary.passed(args.fail_above) else EXIT_GATE_FAILED


def _run_exporter(args: argparse.Namespace) -> int:
    # imported here: Kafka, Prometheus and pydantic cost a sweep 0.2 s of start-up it never uses
    from prometheus_client import disable_created_metrics  # noqa: PLC0415

    from exporter.service.logs import configure_logging  # noqa: PLC0415
    from exporter.service.runtime import Exporter  # noqa: PLC0415
    from exporter.settings import SettingsError, load_settings  # noqa: PLC0415

    overrides = {
        key: value
        for key, value in (
            ("bootstrap_servers", args.bootstrap_servers),
            ("group_id", args.group_id),
            ("metrics_port", args.metrics_port),
        )
        if value is not None
    }
    try:
        settings = load_settings(args.config, **overrides)
    except SettingsError as exc:
        raise _UsageError(str(exc)) from None
    configure_logging(args.log_level)
    disable_created_metrics()  # type: ignore[no-untyped-call]
    if args.source:
        return _replay_source(args, settings)

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await Exporter(settings).run(stop)

    try:
        asyncio.run(serve())
    except OSError as exc:  # the metrics port is taken, typically
        raise _UsageError(f"cannot serve metrics on port {settings.metrics_port}: {exc}") from None
    return EXIT_OK


def _replay_source(args: argparse.Namespace, settings: Any) -> int:
    """``run --source``: the pipeline fed from a file, /metrics served while it runs."""
    from exporter.outputs.verdicts import verdict_json  # noqa: PLC0415
    from exporter.service.local import records_of, replay  # noqa: PLC0415
    from exporter.service.runtime import Exporter  # noqa: PLC0415

    exporter = Exporter(settings)
    pipeline = exporter.offline_pipeline()
    exporter.http.start()
    print(
        f"metrics on http://{settings.metrics_host}:{exporter.http.port}/metrics", file=sys.stderr
    )
    output = open_output(args.out) if args.out else nullcontext(None)
    try:
        with output as out:

            def publish(checked: Any) -> None:
                if out is not None:
                    for verdict in checked.publish:
                        out.write(verdict_json(verdict, mode="inline", line=checked.origin.offset))

            records = records_of(args.source, settings.chunks_topic, settings.answers_topic)
            started = time.perf_counter()
            summary = replay(records, pipeline, settings.chunks_topic, publish, lambda _: None)
            summary.elapsed_seconds = time.perf_counter() - started
        sys.stderr.write(summary.render_text(None, title="replay") + "\n")
        if args.serve:
            print("replay done; serving /metrics until SIGTERM or Ctrl-C", file=sys.stderr)
            signal.sigwait({signal.SIGTERM, signal.SIGINT})
    except OSError as exc:
        raise _UsageError(f"cannot replay {args.source}: {exc}") from None
    finally:
        exporter.http.stop()
    return EXIT_OK


def _run_demo(args: argparse.Namespace) -> int:
    from prometheus_client import disable_created_metrics  # noqa: PLC0415

    from exporter.service.demo import run_demo  # noqa: PLC0415
    from exporter.service.runtime import Exporter  # noqa: PLC0415
    from exporter.settings import SettingsError, load_settings  # noqa: PLC0415

    disable_created_metrics()  # type: ignore[no-untyped-call]
    try:
        settings = load_settings(None, metrics_host="127.0.0.1", metrics_port=args.metrics_port)
    except SettingsError as exc:
        raise _UsageError(str(exc)) from None
    exporter = Exporter(settings)
    try:
        exporter.http.start()
    except OSError as exc:
        raise _UsageError(f"cannot serve metrics on port {args.metrics_port}: {exc}") from None
    url = f"http://127.0.0.1:{exporter.http.port}/metrics"
    try:
        summary = run_demo(
            exporter.offline_pipeline(),
            sys.stdout,
            url=url,
            chunks_topic=settings.chunks_topic,
            answers_topic=settings.answers_topic,
            seconds_per_phase=args.seconds_per_phase,
            answers=args.answers,
        )
        print(summary.render_text(None, title="demo, all phases"))
        print(
            "\nThe chunk-size change made citations drift: repaired with their shift, and paging;"
            "\nthe content refresh made others superseded: pinned, never moved, never paging."
            "\nNext: citation-exporter sweep --help, and the README's 'The streaming exporter'."
        )
        if args.serve:
            print(f"serving {url} until Ctrl-C")
            signal.sigwait({signal.SIGTERM, signal.SIGINT})
    except KeyboardInterrupt:
        pass
    finally:
        exporter.http.stop()
    return EXIT_OK


def _run_produce(args: argparse.Namespace) -> int:
    # imported here for the same reason as in _run_exporter
    from exporter.service.logs import configure_logging  # noqa: PLC0415
    from exporter.service.produce import (  # noqa: PLC0415
        ProducePlan,
        create_topics,
        produce_scenario,
    )
    from exporter.settings import SettingsError, load_settings  # noqa: PLC0415

    overrides = {"bootstrap_servers": args.bootstrap_servers} if args.bootstrap_servers else {}
    try:
        settings = load_settings(args.config, **overrides)
        plan = ProducePlan.from_scenario(args.scenario)
    except SettingsError as exc:
        raise _UsageError(str(exc)) from None
    except OSError as exc:
        raise _UsageError(f"cannot read the scenario in {args.scenario}: {exc}") from None
    configure_logging("INFO")

    async def send() -> dict[str, int]:
        if args.create_topics:
            await create_topics(settings, args.create_topics)
        return await produce_scenario(settings, plan, rate=args.rate, sweep_after=args.sweep)

    counts = asyncio.run(send())
    print(", ".join(f"{name.replace('_', ' ')}: {count:,}" for name, count in counts.items()))
    return EXIT_OK


def _run_simulate(args: argparse.Namespace) -> int:
    config = ScenarioConfig(
        seed=args.seed,
        answers=args.answers,
        documents=args.documents,
        chunk_size=args.chunk_size,
        new_chunk_size=args.new_chunk_size,
        resize_share=args.resize_share,
        retypeset_share=args.retypeset_share,
        refresh_share=args.refresh_share,
        silent_edit_share=args.silent_edit_share,
        delete_share=args.delete_share,
        context_share=args.context_share,
        invalid_lines=args.invalid_lines,
    )
    try:
        config.validate()
    except ValueError as exc:
        raise _UsageError(str(exc)) from None
    try:
        paths = write_scenario(build_scenario(config), Path(args.out), compress=args.gzip)
    except OSError as exc:
        raise _UsageError(f"cannot write scenario to {args.out}: {exc}") from None
    summary = orjson.loads(paths["summary"].read_bytes())
    print(
        f"wrote {summary['citations']:,} citations over {summary['documents']:,} documents "
        f"to {args.out}; expected: "
        + ", ".join(f"{k} {v:,}" for k, v in sorted(summary["expected_statuses"].items()))
    )
    return EXIT_OK


def _fail(message: str) -> NoReturn:
    print(f"citation-exporter: error: {message}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    args = _build_parser().parse_args(argv)
    try:
        if args.command == "sweep":
            return _run_sweep(args)
        if args.command == "run":
            return _run_exporter(args)
        if args.command == "demo":
            return _run_demo(args)
        if args.command == "produce":
            return _run_produce(args)
        return _run_simulate(args)
    except _UsageError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        print("citation-exporter: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
