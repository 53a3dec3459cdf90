"""``citation-exporter sweep``: an archive of citations against the live store, a deploy gate."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures.process import BrokenProcessPool
from contextlib import ExitStack, closing, contextmanager, nullcontext
from typing import IO, Any

from exporter.checks.claims import DEFAULT_CLASSIFIER, SentenceClassifier, load_classifier
from exporter.checks.store import ChunkStore
from exporter.cli.common import (
    EXIT_CODES,
    EXIT_GATE_FAILED,
    EXIT_OK,
    UsageError,
    add_gate_options,
    add_limit_options,
    available_cpus,
    count,
    dollars,
    limits_from,
    positive,
    print_summary,
    refuse_overwriting,
    sweep_gate,
    sweep_inputs,
    sweep_policy,
    threshold,
    timestamp,
    topics,
)
from exporter.cli.report import (
    add_report_options,
    audit_assumptions,
    previous_sweep,
    write_report,
)
from exporter.cli.sources import (
    add_chunk_store_arguments,
    add_citation_table_arguments,
    chunk_source,
    citation_source,
    refuse_chunk_store,
)
from exporter.config.sweep_judging import SweepJudging
from exporter.defaults import (
    DEFAULT_HIGH_SEVERITY_TOPICS,
    DEFAULT_JUDGE_SWEEP_SAMPLE,
    DEFAULT_THRESHOLD,
    ENV_PREFIX,
)
from exporter.entailment.drawing import PackedCandidate
from exporter.entailment.judging import SampleJudging, sample_judging
from exporter.entailment.sampling import StratifiedSample
from exporter.errors import InvalidJson, SettingsError
from exporter.file_sweep import CoverageOutputError, load_store, run_sweep
from exporter.files.jsonl import (
    InputError,
    OutputError,
    open_output,
)
from exporter.memory import freeze_long_lived
from exporter.outputs.verdicts import entailment_json
from exporter.pipeline.changes import Changes, PreviousSummary
from exporter.pipeline.summary import SweepSummary
from exporter.records.decode import parse_json
from exporter.sources import ChunkSource, CitationSource, RecordSource
from exporter.sources.jsonl import JsonLines

EXAMPLES = """\
examples:
  # check an archive after a re-index; fail the deploy when more than 1% drifted
  citation-exporter sweep --chunks chunks.jsonl.gz --citations citations.jsonl.gz \\
      --out verdicts.jsonl.gz

  # also say which answers assert claims no citation backs (coverage)
  citation-exporter sweep --chunks chunks.jsonl --citations answers.jsonl \\
      --coverage-out coverage.jsonl

  # judge the stratified sample (2,000 by default) with a model for what the lexical judge
  # cannot settle, spending at most $2; the judged citations written for review
  CITATION_EXPORTER_JUDGE_API_KEY=... citation-exporter sweep --chunks chunks.jsonl \\
      --citations answers.jsonl --judge openai --judge-base-url http://127.0.0.1:8000/v1 \\
      --judge-model qwen2.5-7b-instruct --judge-budget-usd 2 --judge-out judged.jsonl

  # the page of the sweep, with what changed since Monday's (its verdicts compare
  # citation by citation; its summary JSON, only the counts per status)
  citation-exporter sweep --chunks chunks.jsonl.gz --citations citations.jsonl.gz \\
      --out verdicts.jsonl.gz --report sweep.html --previous monday/verdicts.jsonl.gz

  # the same as a JSON summary, for a CI step to parse
  citation-exporter sweep --chunks chunks.jsonl --citations - --format json < answers.jsonl

  # try it on built-in example data (a re-chunked, re-extracted and refreshed store)
  citation-exporter sweep --example

  # the same checks run by Spark, for archives beyond one machine (pip install
  # 'citation-drift-exporter[spark]', Java 17+); any path Spark reads, a local Spark here
  citation-exporter sweep --engine spark --master 'local[*]' --chunks chunks.jsonl.gz \\
      --citations citations.jsonl.gz --out verdicts.jsonl.gz

--out and --coverage-out are written under a temporary name and renamed into place when the
sweep completes, so a failed sweep never leaves a partial verdict file; neither may be one of
the inputs.

--engine spark writes the same verdicts, summary and exit status; it does not judge coverage or
the entailment sample yet (reported as not judged), so --coverage-out, --judge-out and the judge
options need the in-process engine.
"""


def add_parser(commands: Any) -> None:
    sweep = commands.add_parser(
        "sweep",
        # short, so a usage error shows its one line at once (the options are in --help), and
        # naming the two inputs a sweep needs (they are flags only because --example exists)
        usage="%(prog)s --chunks FILE --citations FILE [options]\n"
        "       %(prog)s --example [options]",
        help="check an archive of citations against the live chunk store (a deploy gate)",
        description="Check every stored citation against the live chunk store. Writes one "
        "verdict per input citation and prints a summary with the drift ratio and the "
        "superseded ratio shown apart.",
        epilog=EXAMPLES + "\n" + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    inputs = sweep.add_argument_group("inputs (.jsonl, .jsonl.gz, or - for stdin)")
    inputs.add_argument(
        "--chunks",
        metavar="FILE|URI",
        help="live chunk records; last per chunk_id wins; or a postgresql:// URI of the store "
        "(with --chunks-layout or --chunks-query, below)",
    )
    inputs.add_argument(
        "--citations",
        metavar="FILE|URI",
        help="citation records and answer events, mixed; or a postgresql:// URI (with "
        "--citations-table or --citations-query, below)",
    )
    inputs.add_argument(
        "--example",
        action="store_true",
        help="generate a built-in example scenario and sweep it (no files needed)",
    )
    add_chunk_store_arguments(sweep)
    add_citation_table_arguments(sweep)
    sweep.add_argument(
        "--out", metavar="FILE", help="write verdicts as JSONL here (.gz compresses, - is stdout)"
    )
    sweep.add_argument(
        "--report",
        metavar="FILE",
        help="write the sweep's HTML report here: one self-contained page (no script, nothing "
        "fetched) with the gate's verdict, the store's chunker fingerprint and when it was "
        "read, what changed since --previous, counts per status, reason and source, the shift "
        "chart with its clusters and examples, superseded documents, coverage, entailment",
    )
    sweep.add_argument(
        "--coverage-out",
        metavar="FILE",
        help="write one coverage verdict per answer event that carried its sentences here "
        "(JSONL; .gz compresses, - is stdout): which sentences are claims, which are uncited",
    )
    sweep.add_argument(
        "--coverage-classifier",
        default=DEFAULT_CLASSIFIER,
        metavar="SPEC",
        help="what tells claims from framing: 'hybrid' (built-in rules, then a built-in "
        "learned model; offline), 'rules' (the rules alone) or 'module:attribute' of your own "
        "classifier (default: %(default)s)",
    )
    sweep.add_argument(
        "--no-coverage",
        action="store_true",
        help="do not judge coverage (answer events' sentences are then ignored)",
    )
    sweep.add_argument(
        "--threshold",
        type=threshold,
        default=DEFAULT_THRESHOLD,
        metavar="N",
        help="minimum folded similarity (0-100) for a quote to match (default: %(default)s)",
    )
    sweep.add_argument(
        "--high-severity-topics",
        type=topics,
        default=DEFAULT_HIGH_SEVERITY_TOPICS,
        metavar="LIST",
        help="comma-separated topics whose unrepairable claims are suppressed rather than "
        "degraded to a document citation (default: legal,pricing,security)",
    )
    _add_judge_options(sweep)
    sweep.add_argument("--format", choices=("text", "json"), default="text", help="summary format")
    sweep.add_argument(
        "--jobs",
        type=positive,
        default=available_cpus(),
        metavar="N",
        help="worker processes checking citations, at most the CPUs available "
        "(default: %(default)s)",
    )
    sweep.add_argument(
        "--no-progress", action="store_true", help="no progress bar, even on a terminal"
    )
    _add_engine_options(sweep)
    sweep.add_argument(
        "--allow-empty",
        action="store_true",
        help="pass the gate when no valid citation was read (by default that is exit 2: an "
        "empty or entirely broken archive is far more often a wrong or truncated file)",
    )
    add_gate_options(sweep, gated_by_default=True)
    add_report_options(sweep)
    add_limit_options(sweep)


def _spark_conf(text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"must be KEY=VALUE, got {text[:60]!r}")
    return key.strip(), value


def _add_engine_options(sweep: Any) -> None:
    engine = sweep.add_argument_group(
        "engine: who runs the checks",
        "The in-process engine checks with --jobs worker processes on this machine. Spark "
        "(the spark extra, Java 17+) checks each document's citations in Spark tasks, with "
        "the same verdicts, summary and exit status; it reads any path Spark reads, and does "
        "not judge coverage or the entailment sample yet.",
    )
    engine.add_argument(
        "--engine",
        choices=("process", "spark"),
        default="process",
        help="process (default) or spark",
    )
    engine.add_argument(
        "--master",
        metavar="URL",
        help="the Spark master, with --engine spark (default: local[*]; a Spark session "
        "already active in this process is used as it is)",
    )
    engine.add_argument(
        "--spark-conf",
        type=_spark_conf,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting, with --engine spark (repeatable)",
    )
    engine.add_argument(
        "--citations-per-task",
        type=positive,
        metavar="N",
        help="with --engine spark: a document cited more often is split into tasks of about "
        "N citations, each given the document's chunks (default: 10,000)",
    )


# The sweep's judge flags and the settings (and CITATION_EXPORTER_* variables) they override.
_JUDGE_FLAGS = {
    "judge": "--judge",
    "judge_base_url": "--judge-base-url",
    "judge_model": "--judge-model",
    "judge_sweep_sample": "--judge-sample",
    "judge_sweep_budget_usd": "--judge-budget-usd",
}


def _sweep_judging(args: argparse.Namespace) -> SweepJudging:
    """How the sweep judges its sample: the service's CITATION_EXPORTER_JUDGE_* variables,
    overridden by the flags given. With neither (the usual sweep), the settings' defaults
    without loading them: the service's settings import pydantic-settings and httpx, 0.12 s of
    every sweep's start (tests/test_sweep_judging.py holds the two equal)."""
    overrides: dict[str, object] = {
        name: getattr(args, name) for name in _JUDGE_FLAGS if getattr(args, name) is not None
    }
    if not overrides and not _judge_variables(os.environ):
        return SweepJudging(DEFAULT_JUDGE_SWEEP_SAMPLE)
    from exporter.settings import load_judge_settings  # noqa: PLC0415 - the service's (Kafka) imports

    try:
        return load_judge_settings(overrides, _JUDGE_FLAGS).sweep_judging
    except SettingsError as exc:
        raise UsageError(
            f"{exc} (the sweep's judge is set by its --judge* flags, else by the "
            "CITATION_EXPORTER_JUDGE_* variables)"
        ) from None


def _judge_variables(environment: Mapping[str, str]) -> bool:
    """Whether any variable of ``environment`` may set the judge (the settings read their
    names in any case)."""
    prefix = ENV_PREFIX + "JUDGE"
    return any(name.upper().startswith(prefix) for name in environment)


def _add_judge_options(sweep: Any) -> None:
    judging = sweep.add_argument_group(
        "entailment: does each quote establish its claim? A stratified sample is judged",
        "The lexical judge (offline, plain disagreements of numbers and negations) judges the "
        "sample; a model judge is asked only what it cannot settle. A judge errs: a "
        "not_entailed result is a prompt to look, not a verdict.",
    )
    judging.add_argument(
        "--judge-sample",
        dest="judge_sweep_sample",
        type=count,
        metavar="N",
        help="citations to judge, drawn from strata of answer age and near-miss family; 0 "
        "judges none (default: $CITATION_EXPORTER_JUDGE_SWEEP_SAMPLE, else 2000)",
    )
    judging.add_argument(
        "--judge",
        choices=("lexical", "openai"),
        help="lexical alone, or a model behind an OpenAI-compatible endpoint for what the "
        "lexical judge cannot settle (default: $CITATION_EXPORTER_JUDGE, else lexical)",
    )
    judging.add_argument(
        "--judge-base-url",
        metavar="URL",
        help="the endpoint, e.g. http://127.0.0.1:8000/v1 (default: "
        "$CITATION_EXPORTER_JUDGE_BASE_URL); the key is read from "
        "$CITATION_EXPORTER_JUDGE_API_KEY, never from a flag; timeouts, concurrency, prices "
        "and retries from the other CITATION_EXPORTER_JUDGE_* variables, as the service reads "
        "them",
    )
    judging.add_argument(
        "--judge-model",
        metavar="NAME",
        help="the model (default: $CITATION_EXPORTER_JUDGE_MODEL)",
    )
    judging.add_argument(
        "--judge-budget-usd",
        dest="judge_sweep_budget_usd",
        type=dollars,
        metavar="USD",
        help="stop calling the model once this much was spent; the rest of the sample is "
        "skipped (reason budget) (default: $CITATION_EXPORTER_JUDGE_SWEEP_BUDGET_USD, else "
        "no limit)",
    )
    judging.add_argument(
        "--judge-out",
        metavar="FILE",
        help="write every judged citation as JSONL here (its verdict, its stratum, and an "
        '"entailment" object)',
    )
    judging.add_argument(
        "--seed", type=int, default=0, metavar="N", help="the sample's seed (default: 0)"
    )
    judging.add_argument(
        "--now",
        type=timestamp,
        metavar="ISO",
        help="the time answer ages are measured from (default: the clock), for a sample "
        "that can be drawn again",
    )


@contextmanager
def _progress_bar(source: RecordSource, enabled: bool) -> Iterator[Callable[[int], None] | None]:
    size = source.size()
    if not enabled or size is None or not sys.stderr.isatty():
        yield None
        return
    from tqdm import tqdm  # noqa: PLC0415 - only on a terminal: 10 ms of every start otherwise

    with tqdm(total=size, unit="B", unit_scale=True, desc="sweep", file=sys.stderr) as bar:

        def update(position: int) -> None:
            bar.update(position - bar.n)

        yield update


def _judge(
    judging: SampleJudging,
    sample: StratifiedSample[PackedCandidate],
    store: ChunkStore,
    summary: SweepSummary,
    out: IO[bytes] | None,
) -> None:
    """Judge the sample drawn during the sweep; write the judged citations to ``out``."""
    judged, entailment = asyncio.run(judging.judge(sample, store))
    summary.entailment = entailment
    if out is None:
        return
    try:
        for item in judged:
            stratum = {"age": item.stratum.age, "family": item.stratum.family}
            out.write(
                entailment_json(
                    item.candidate.verdict,
                    item.judgement,
                    item.action,
                    claim=item.candidate.judge_input.claim,
                    topic=item.candidate.judge_input.topic,
                    stratum=stratum,
                    line=item.candidate.line,
                )
            )
    except OSError as exc:
        raise OutputError(f"cannot write the judged citations: {exc.strerror or exc}") from None


@contextmanager
def _judge_output(path: str | None, inputs: tuple[str, str]) -> Iterator[IO[bytes] | None]:
    """--judge-out (None when not given), opened before the sweep: a path that cannot be
    written is named before the checks and the model's spending, not after them. Its errors
    (opening, writing, renaming into place) are usage errors naming it."""
    if not path:
        yield None
        return
    try:
        with open_output(path, inputs) as out:
            yield out
    except OutputError as exc:
        where = "standard output" if path == "-" else path
        raise UsageError(f"--judge-out {where}: {exc}") from None


@contextmanager
def _coverage_output(path: str, inputs: tuple[str, str]) -> Iterator[IO[bytes]]:
    """``open_output`` for --coverage-out, whose errors (opening, writing, renaming into
    place) say that it was --coverage-out that failed."""
    body_failed = False  # an error of the sweep's body passes through as it is
    try:
        with open_output(path, inputs) as out:
            try:
                yield out
            except BaseException:
                body_failed = True
                raise
    except OutputError as exc:
        if body_failed or isinstance(exc, CoverageOutputError):
            raise
        raise CoverageOutputError(str(exc)) from None


def _jobs(requested: int) -> int:
    """More workers than CPUs only add memory (each holds a batch) and switching."""
    available = available_cpus()
    if requested > available:
        print(
            f"sweep: --jobs {requested} capped at the {available} CPUs available", file=sys.stderr
        )
    return min(requested, available)


def _refuse_spark_options(args: argparse.Namespace) -> None:
    for option, value in (
        ("--master", args.master),
        ("--spark-conf", args.spark_conf),
        ("--citations-per-task", args.citations_per_task),
    ):
        if value:
            raise UsageError(f"{option} needs --engine spark")


def _on_spark(args: argparse.Namespace) -> int:
    """The sweep on Spark: PySpark is imported now, and only now."""
    refuse_chunk_store(args, "--engine spark")
    try:
        from exporter.cli import sweep_spark  # noqa: PLC0415 - the optional spark extra
    except ImportError as exc:
        raise UsageError(
            f"--engine spark needs PySpark: pip install 'citation-drift-exporter[spark]' ({exc})"
        ) from None
    return sweep_spark.run(args)


def _classifier(spec: str) -> SentenceClassifier:
    try:
        return load_classifier(spec)
    except SettingsError as exc:
        raise UsageError(f"--coverage-classifier: {exc}") from None


# Fields of a citation or an answer event that no chunk record has: a --chunks file whose first
# record holds one was most likely given for --citations.
_CITATION_FIELDS = ("chunk_span", "quote", "citations")


def _refuse_swapped(chunks: str, max_bytes: int) -> None:
    """Exit 2 naming the likely swap when no chunk loaded from a --chunks file whose first
    record is a citation or an answer event. Read again, so a regular file's only: standard
    input, a pipe or a FIFO cannot be (opened again, a FIFO would wait for a writer)."""
    if not os.path.isfile(chunks):
        return
    source = JsonLines(chunks)
    with closing(source.records(max_bytes)) as records:
        try:
            first = next(records, None)
        except InputError:
            return
    if first is None or not isinstance(first[1], bytes):
        return
    try:
        record = parse_json(first[1])
    except InvalidJson:
        return
    found = [name for name in _CITATION_FIELDS if type(record) is dict and name in record]
    if found:
        raise UsageError(
            f"no chunk was loaded from --chunks {chunks}: its first record is a citation (it "
            f"has '{found[0]}', no chunk does): were --chunks and --citations swapped?"
        )


def _previous(args: argparse.Namespace) -> Changes | PreviousSummary | None:
    """--previous, read whole: the sweep it is compared with (in the report)."""
    if args.previous and not args.report:
        raise UsageError("--previous is compared with in the report: give --report FILE too")
    return previous_sweep(args.previous)


def _refuse_unused_outputs(args: argparse.Namespace, judging: SampleJudging | None) -> None:
    """An output that nothing of this sweep would write is a mistake, said before the work."""
    if args.no_coverage and args.coverage_out:
        raise UsageError("--coverage-out needs coverage: drop --no-coverage")
    if judging is None and args.judge_out:
        raise UsageError(
            "--judge-out needs a sample to judge: --judge-sample is 0 (by the flag, or "
            "CITATION_EXPORTER_JUDGE_SWEEP_SAMPLE)"
        )


def _inputs(
    args: argparse.Namespace,
) -> tuple[ChunkSource, CitationSource, tempfile.TemporaryDirectory[str] | None]:
    """The chunk source, the citation source and the example's directory (if any)."""
    chunks, citations, workdir = sweep_inputs(args)
    if workdir is not None:
        return JsonLines(chunks), JsonLines(citations), workdir
    return chunk_source(args), citation_source(args), workdir


def run(args: argparse.Namespace) -> int:
    if args.engine == "spark":
        return _on_spark(args)
    _refuse_spark_options(args)
    previous = _previous(args)  # read whole before any work: a bad one is exit 2
    changes = previous if isinstance(previous, Changes) else None
    store_source, citations_source, workdir = _inputs(args)
    # a database without its password, from here on
    chunks, citations = store_source.name, citations_source.name
    limits, gate = limits_from(args), sweep_gate(args)
    classifier = _classifier(args.coverage_classifier)
    # a judge the settings cannot make was refused with them, before the sweep
    judging = sample_judging(_sweep_judging(args), args.high_severity_topics, args.seed)
    policy = sweep_policy(
        args, coverage=not args.no_coverage, judged=judging is not None, classifier=classifier
    )
    sample: StratifiedSample[PackedCandidate] | None = (
        None if judging is None else StratifiedSample(judging.size, judging.seed)
    )
    _refuse_unused_outputs(args, judging)
    jobs = _jobs(args.jobs)
    audit = audit_assumptions(args)  # refused before the sweep, not after it
    summary = SweepSummary(coverage_judged=not args.no_coverage)
    with workdir or nullcontext(), ExitStack() as outputs:
        refuse_overwriting(args, chunks, citations)
        judge_out = outputs.enter_context(_judge_output(args.judge_out, (chunks, citations)))
        try:
            store = load_store(store_source, summary, limits=limits)
        except InputError as exc:
            raise UsageError(f"cannot read --chunks {exc}") from None
        if not store.chunk_count and summary.invalid_chunk_records and not args.allow_empty:
            _refuse_swapped(chunks, limits.max_message_bytes)
        freeze_long_lived()  # before the workers fork: they share the store, untouched
        try:
            inputs = (chunks, citations)
            output = open_output(args.out, inputs) if args.out else nullcontext(None)
            coverage_output = (
                _coverage_output(args.coverage_out, inputs)
                if args.coverage_out
                else nullcontext(None)
            )
            with (
                output as out,
                coverage_output as coverage_out,
                _progress_bar(citations_source, not args.no_progress) as progress,
            ):
                run_sweep(
                    store,
                    citations_source,
                    policy,
                    summary,
                    out=out,
                    coverage_out=coverage_out,
                    progress=progress,
                    jobs=jobs,
                    sample=sample,
                    now=args.now,
                    changes=changes,
                )
        except BrokenProcessPool:
            raise UsageError(
                "a worker process died (killed, or out of memory?); retry with --jobs 1"
            ) from None
        except InputError as exc:
            raise UsageError(f"cannot read --citations {exc}") from None
        except OutputError as exc:
            option, path = (
                ("--coverage-out", args.coverage_out)
                if isinstance(exc, CoverageOutputError)
                else ("--out", args.out)
            )
            where = "standard output" if path == "-" else path
            raise UsageError(f"{option} {where}: {exc}") from None
        if judging is not None and sample is not None:
            _judge(judging, sample, store, summary, judge_out)
        if args.report:
            label = "the built-in example" if args.example else f"{chunks} and {citations}"
            write_report(
                "--report",
                args.report,
                summary,
                [chunks, citations],
                label,
                gate=gate,
                assumptions=audit,
                previous=previous,
                previous_name=args.previous or "",
            )
    print_summary(args, summary, gate)
    missing = summary.missing_input()
    if missing is not None and not args.allow_empty:
        raise UsageError(f"{missing} (--allow-empty passes a sweep with nothing to judge by)")
    return EXIT_OK if summary.passed(gate) else EXIT_GATE_FAILED
