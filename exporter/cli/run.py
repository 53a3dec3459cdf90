"""``citation-exporter run``: the streaming exporter, or a replay of a file through it."""

from __future__ import annotations

import argparse
import asyncio
import errno
import os
import signal
import stat
import sys
import time
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from exporter.cli.common import EXIT_OK, UsageError, refuse_unwritable
from exporter.errors import InputError
from exporter.files.jsonl import OutputError, open_output
from exporter.outputs.report import summary_text

EXAMPLES = """\
examples:
  CITATION_EXPORTER_BOOTSTRAP_SERVERS=kafka-1:9092,kafka-2:9092 citation-exporter run
  citation-exporter run --config /etc/citation-exporter.toml --metrics-port 9877
  citation-exporter run --web-config-file /etc/citation-exporter/web.yml   # HTTPS, basic auth

exit status: 0 after SIGTERM/SIGINT (the batch in hand is finished and committed), 2 for an
invalid setting or a metrics port in use, 3 for an internal error. A broker outage is retried
with backoff, and no message can end the process: each one that cannot be handled is
dead-lettered, counted and committed past.
"""


def add_parser(commands: Any) -> None:
    run = commands.add_parser(
        "run",
        help="the streaming exporter: Kafka in, Prometheus metrics and verdicts out",
        description="Follow the chunk topic into an in-memory store, check every citation of "
        "the answer topic inline, publish failing verdicts and dead letters, and serve "
        "/metrics, /healthz and /readyz. Settings come from CITATION_EXPORTER_* environment "
        "variables or a TOML file; the options below override both.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("--config", type=Path, metavar="FILE", help="TOML file of settings")
    run.add_argument("--bootstrap-servers", metavar="HOSTS", help="Kafka brokers, host:port,...")
    run.add_argument("--group-id", metavar="ID", help="consumer group of the answer consumer")
    run.add_argument("--metrics-port", type=int, metavar="PORT", help="port of /metrics")
    run.add_argument(
        "--web-config-file",
        type=Path,
        metavar="FILE",
        help="TLS and basic auth of the HTTP endpoint, in the Prometheus exporter-toolkit's "
        "format (docs/exporter.md, The HTTP endpoint)",
    )
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


def run(args: argparse.Namespace) -> int:
    # imported here: Kafka, Prometheus and pydantic cost a sweep 0.2 s of start-up it never uses
    from prometheus_client import disable_created_metrics  # noqa: PLC0415

    from exporter.kafka.logs import configure_logging  # noqa: PLC0415
    from exporter.kafka.runtime import Exporter  # noqa: PLC0415
    from exporter.settings import SettingsError, load_settings  # noqa: PLC0415

    overrides = {
        key: value
        for key, value in (
            ("bootstrap_servers", args.bootstrap_servers),
            ("group_id", args.group_id),
            ("metrics_port", args.metrics_port),
            ("web_config_file", args.web_config_file),
        )
        if value is not None
    }
    try:
        settings = load_settings(args.config, **overrides)
    except SettingsError as exc:
        raise UsageError(str(exc)) from None
    configure_logging(args.log_level)
    disable_created_metrics()  # type: ignore[no-untyped-call]
    if args.source:
        return _replay_source(args, settings)

    exporter = _exporter(lambda s: Exporter(s, freeze_store=True), settings)

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await exporter.run(stop)

    asyncio.run(serve())
    return EXIT_OK


def _exporter(exporter_type: Any, settings: Any) -> Any:
    """The exporter, its metrics port bound: a port in use is a usage error, named."""
    try:
        return exporter_type(settings)
    except OSError as exc:
        raise UsageError(
            f"cannot serve metrics on {settings.metrics_host}:{settings.metrics_port}: {exc}"
        ) from None


def _replay_source(args: argparse.Namespace, settings: Any) -> int:
    """``run --source``: the pipeline fed from a file, /metrics served while it runs."""
    from exporter.cli.offline import OfflineExporter  # noqa: PLC0415
    from exporter.outputs.verdicts import verdict_json  # noqa: PLC0415
    from exporter.pipeline.outcome import Mode, Outcome  # noqa: PLC0415
    from exporter.pipeline.replay import records_of, replay  # noqa: PLC0415
    from exporter.sources.jsonl import JsonLines  # noqa: PLC0415

    # the inputs and the output first: nothing is opened (no port bound) for a replay that
    # cannot happen
    _refuse_unreadable(args.source)
    if args.out:
        refuse_unwritable("--out", args.out, [args.source])
    exporter = _exporter(OfflineExporter, settings)
    exporter.http.start()
    print(
        f"metrics on {exporter.http.scheme}://{settings.metrics_host}:{exporter.http.port}/metrics",
        file=sys.stderr,
    )
    try:
        output = open_output(args.out, (args.source,)) if args.out else nullcontext(None)
        with output as out:

            def handle(outcomes: Sequence[Outcome]) -> None:
                exporter.record(outcomes)
                if out is not None:
                    for outcome in outcomes:
                        line = outcome.origin.offset
                        for verdict in outcome.publish:
                            out.write(verdict_json(verdict, mode=Mode.INLINE, line=line))

            records = records_of(
                JsonLines(args.source),
                settings.chunks_topic,
                settings.answers_topic,
                settings.max_message_bytes,
            )
            started = time.perf_counter()
            summary = replay(records, exporter.pipeline, settings.chunks_topic, handle)
            summary.took(time.perf_counter() - started)
        sys.stderr.write(summary_text(summary, None, title="replay") + "\n")
        if args.serve:
            print("replay done; serving /metrics until SIGTERM or Ctrl-C", file=sys.stderr)
            signal.sigwait({signal.SIGTERM, signal.SIGINT})
    except OutputError as exc:
        raise UsageError(str(exc)) from None
    except InputError as exc:  # its message names the file
        raise UsageError(f"cannot replay --source {exc}") from None
    except OSError as exc:
        raise UsageError(f"cannot replay --source {args.source}: {exc}") from None
    finally:
        exporter.http.stop()
    return EXIT_OK


def _refuse_unreadable(path: str) -> None:
    """Exit 2 before anything is opened when the file to replay cannot be. Asked of the file
    system, never by opening it: a pipe (``<(zcat ...)``, a FIFO) opened to look would lose
    what was read, or wait for a writer (standard input is read as it comes)."""
    if path == "-":
        return
    try:
        if stat.S_ISDIR(os.stat(path).st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        if not os.access(path, os.R_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
    except OSError as exc:
        raise UsageError(f"cannot replay --source {path}: {exc.strerror or exc}") from None
