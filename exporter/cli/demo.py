"""``citation-exporter demo``: the main job on built-in traffic, without Kafka."""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

from exporter.cli.common import EXIT_OK, UsageError, positive
from exporter.defaults import DEFAULT_METRICS_PORT


def add_parser(commands: Any) -> None:
    demo = commands.add_parser(
        "demo",
        help="the exporter on built-in traffic, no Kafka needed: watch drift appear live",
        description="Run the exporter's pipeline in-process on simulated traffic: a "
        "baseline, then a chunk-size change, then a content refresh. /metrics is served on "
        "its usual port while the terminal shows the drift and superseded ratios against the "
        "alert thresholds, the shift clusters as they form, and the share of claims the "
        "answers make with no citation (coverage).",
    )
    demo.add_argument(
        "--metrics-port",
        type=int,
        default=DEFAULT_METRICS_PORT,
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
        type=positive,
        default=3000,
        metavar="N",
        help="answers in the simulated traffic (default: %(default)s)",
    )
    demo.add_argument(
        "--serve", action="store_true", help="keep serving /metrics after the demo, until Ctrl-C"
    )


def run(args: argparse.Namespace) -> int:
    from prometheus_client import disable_created_metrics  # noqa: PLC0415

    from exporter.checks.lexical import LexicalJudge  # noqa: PLC0415
    from exporter.cli.offline import OfflineExporter  # noqa: PLC0415
    from exporter.pipeline.demo import run_demo  # noqa: PLC0415
    from exporter.pipeline.outcome import Mode  # noqa: PLC0415
    from exporter.settings import SettingsError, load_settings  # noqa: PLC0415

    disable_created_metrics()  # type: ignore[no-untyped-call]
    try:
        # every judgeable citation is judged by the lexical judge (microseconds), to show flags
        settings = load_settings(
            None,
            metrics_host="127.0.0.1",
            metrics_port=args.metrics_port,
            judge_sample_rate=1.0,
        )
    except SettingsError as exc:
        raise UsageError(str(exc)) from None
    try:
        exporter = OfflineExporter(settings)
        exporter.http.start()
    except OSError as exc:
        raise UsageError(f"cannot serve metrics on port {args.metrics_port}: {exc}") from None
    url = f"http://127.0.0.1:{exporter.http.port}/metrics"
    try:
        summary = run_demo(
            exporter.pipeline,
            sys.stdout,
            record=exporter.record,
            url=url,
            chunks_topic=settings.chunks_topic,
            answers_topic=settings.answers_topic,
            seconds_per_phase=args.seconds_per_phase,
            answers=args.answers,
            judge=LexicalJudge(),
            record_judged=lambda judged: exporter.metrics.judged(
                Mode.INLINE, judged, [False] * len(judged)
            ),
        )
        print(summary.render_text(None, title="demo, all phases"))
        print(
            "\nThe chunk-size change made citations drift: repaired with their shift, and paging;"
            "\nthe content refresh made others superseded: pinned, never moved, never paging;"
            f"\n{summary.coverage.uncited:,} claims had no citation at all (coverage): marked "
            "uncited, never dropped."
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
