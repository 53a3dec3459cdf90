"""``citation-exporter demo``: the main job on built-in traffic, without Kafka."""

from __future__ import annotations

import argparse
import signal
import sys
from typing import TYPE_CHECKING, Any

from exporter.cli.common import EXIT_OK, UsageError, positive
from exporter.defaults import DEFAULT_METRICS_PORT
from exporter.outputs.report import summary_text

if TYPE_CHECKING:
    from exporter.entailment.thread import JudgeThread
    from exporter.settings import Settings

# The judge's settings the demo's flags override (by setting name; each flag is its name).
_JUDGE_FLAGS = ("judge", "judge_base_url", "judge_model")
# The model judge's queue in the demo: what waits for it at most; more is dropped (counted).
_MODEL_QUEUE_SIZE = 100


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
    demo.add_argument(
        "--report",
        metavar="FILE",
        help="write the HTML report of what the demo ran here (as sweep --report writes one)",
    )
    _add_judge_options(demo)


def _add_judge_options(demo: Any) -> None:
    judging = demo.add_argument_group(
        "entailment: does each quote establish its claim?",
        "The lexical judge (offline, microseconds) judges every judgeable citation; a model "
        "judge, when one is configured, is asked behind the traffic what the lexical judge "
        "cannot settle (the demo never waits for it). Its timeout, concurrency, prices and "
        "budget are read from the CITATION_EXPORTER_JUDGE_* variables, as the service reads "
        "them.",
    )
    judging.add_argument(
        "--judge",
        choices=("lexical", "openai"),
        help="lexical alone, or also a model behind an OpenAI-compatible endpoint "
        "(default: $CITATION_EXPORTER_JUDGE, else lexical)",
    )
    judging.add_argument(
        "--judge-base-url",
        metavar="URL",
        help="the model's endpoint, e.g. http://127.0.0.1:8000/v1 (default: "
        "$CITATION_EXPORTER_JUDGE_BASE_URL); the key is read from "
        "$CITATION_EXPORTER_JUDGE_API_KEY, never from a flag",
    )
    judging.add_argument(
        "--judge-model",
        metavar="NAME",
        help="the model to ask (default: $CITATION_EXPORTER_JUDGE_MODEL)",
    )


def _settings(args: argparse.Namespace) -> Settings:
    """The service's settings for the demo: served on 127.0.0.1, every judgeable citation
    judged by the lexical judge (microseconds, to show flags), the --judge* flags over the
    CITATION_EXPORTER_JUDGE_* variables."""
    from exporter.settings import SettingsError, load_settings  # noqa: PLC0415

    judging = {
        name: getattr(args, name) for name in _JUDGE_FLAGS if getattr(args, name) is not None
    }
    try:
        return load_settings(
            None,
            metrics_host="127.0.0.1",
            metrics_port=args.metrics_port,
            judge_sample_rate="100%",
            **judging,
        )
    except SettingsError as exc:
        raise UsageError(_with_judge_hint(str(exc))) from None


def _with_judge_hint(message: str) -> str:
    """A judge's error that names no flag says where the judge is set."""
    if "judge" not in message or "--judge" in message:
        return message
    return (
        f"{message} (the demo's judge is set by its --judge* flags, else by the "
        "CITATION_EXPORTER_JUDGE_* variables)"
    )


def _model_judge(settings: Settings) -> tuple[JudgeThread, str] | None:
    """The model judge the settings configure, in a thread of its own, and its name; None
    for the lexical judge alone."""
    # imported here: the demo starts without the HTTP client unless it calls a model
    from exporter.entailment.background import HourlyBudget  # noqa: PLC0415
    from exporter.entailment.judging import model_judge  # noqa: PLC0415
    from exporter.entailment.thread import JudgeThread  # noqa: PLC0415

    make, concurrency = model_judge(settings.model_judge)  # settings that loaded make it
    if make is None:
        return None
    thread = JudgeThread(
        make,
        queue_size=min(settings.judge_queue_size, _MODEL_QUEUE_SIZE),
        concurrency=concurrency,
        budget=HourlyBudget(settings.judge_budget_usd_per_hour),
    )
    return thread, f"{settings.judge_model} at {settings.judge_base_url}"


def run(args: argparse.Namespace) -> int:
    from prometheus_client import disable_created_metrics  # noqa: PLC0415

    from exporter.cli.offline import OfflineExporter  # noqa: PLC0415
    from exporter.demo.entailment import DemoEntailment  # noqa: PLC0415
    from exporter.demo.traffic import run_demo  # noqa: PLC0415
    from exporter.entailment.lexical import LexicalJudge  # noqa: PLC0415

    settings = _settings(args)
    if args.report:
        from exporter.cli.common import refuse_unwritable  # noqa: PLC0415

        refuse_unwritable("--report", args.report, [])
    model = _model_judge(settings)
    disable_created_metrics()  # type: ignore[no-untyped-call]
    try:
        exporter = OfflineExporter(settings, keep_evidence=args.report is not None)
        exporter.http.start()
    except OSError as exc:
        raise UsageError(f"cannot serve metrics on port {args.metrics_port}: {exc}") from None
    url = f"http://127.0.0.1:{exporter.http.port}/metrics"
    thread, model_name = model if model is not None else (None, "")
    entailment = DemoEntailment(
        LexicalJudge(),
        exporter.pipeline.store,
        exporter.metrics,
        model=thread,
        model_name=model_name,
    )
    try:
        if thread is not None:
            thread.start()
        summary = run_demo(
            exporter.pipeline,
            sys.stdout,
            record=exporter.record,
            url=url,
            chunks_topic=settings.chunks_topic,
            answers_topic=settings.answers_topic,
            seconds_per_phase=args.seconds_per_phase,
            answers=args.answers,
            entailment=entailment,
        )
        print(summary_text(summary, None, title="demo, all phases"))
        print(f"\n  {entailment.summary()}")
        print(
            "\nThe chunk-size change made citations drift: repaired with their shift, and paging;"
            "\nthe content refresh made others superseded: pinned, never moved, never paging;"
            f"\n{summary.coverage.uncited:,} claims had no citation at all (coverage): marked "
            "uncited, never dropped."
            "\nNext: citation-exporter sweep --help, and docs/exporter.md (the streaming exporter)."
        )
        if args.report:
            from exporter.cli.report import write_report  # noqa: PLC0415 - Jinja2 when asked

            write_report(
                "--report",
                args.report,
                summary,
                [],
                "the demo's simulated traffic, all phases",
                gate=None,
                title="Citation drift demo report",
            )
            print(f"report: {args.report}")
        if args.serve:
            print(f"serving {url} until Ctrl-C")
            signal.sigwait({signal.SIGTERM, signal.SIGINT})
    except KeyboardInterrupt:
        pass
    finally:
        if thread is not None:
            thread.finish(0)  # at once: the demo waited for it already, or was interrupted
        exporter.http.stop()
    return EXIT_OK
