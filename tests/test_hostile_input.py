"""No single input stops the monitor: each reported attack, reproduced, and what it gets now.

Each test starts from an input that crashed, stalled or misled version one (issue 8) and states
what must happen instead: a bounded, named error for that input, and every other input checked.
"""

from __future__ import annotations

import gzip
import os
import random
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import chunk_record, citation, store_of
from prometheus_client import CollectorRegistry

import exporter.checks.engine
from exporter.checks.engine import Policy, check_citation
from exporter.checks.verdict import Status
from exporter.cli import main
from exporter.file_sweep import _batches, load_store
from exporter.files.jsonl import read_lines
from exporter.outputs.metrics import MAX_LABEL_LENGTH, ExporterMetrics, SourceLabels
from exporter.pipeline.core import LocalRecord, Pipeline
from exporter.pipeline.messages import Origin, check_message
from exporter.pipeline.replay import SkippedLine, records_of
from exporter.pipeline.summary import SweepSummary
from exporter.records.decode import RecordError, decode_chunk, decode_citations
from exporter.records.limits import Limits, Oversized
from exporter.records.schema import Citation, InvalidCitation
from exporter.sources.jsonl import JsonLines

REPO = Path(__file__).resolve().parent.parent


def _jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def _good_citation(**extra: Any) -> dict[str, Any]:
    return {
        "citation_id": "c1",
        "answer_id": "a1",
        "doc_id": "d",
        "doc_version": "v1",
        "chunk_id": "d#0",
        "chunk_span": [4, 17],
        "quote": "refund window",
        **extra,
    }


GOOD_CHUNK = chunk_record("d", 0, "The refund window is thirty days.", doc_offset=0)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    return {
        "chunks": _jsonl(tmp_path / "chunks.jsonl", [GOOD_CHUNK]),
        "citations": _jsonl(tmp_path / "citations.jsonl", [_good_citation()]),
    }


def _sweep_args(files: dict[str, Path], *extra: str) -> list[str]:
    return [
        "sweep",
        "--chunks",
        str(files["chunks"]),
        "--citations",
        str(files["citations"]),
        "--no-progress",
        "--jobs",
        "1",
        *extra,
    ]


# -- poison pills ---------------------------------------------------------------------------


def test_a_chunk_placed_a_terabyte_into_its_document_is_rejected_by_name(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    poison = chunk_record("d", 1, "Poison.", doc_offset=10**12)
    _jsonl(files["chunks"], [GOOD_CHUNK, poison])
    out = tmp_path / "verdicts.jsonl"
    assert main(_sweep_args(files, "--out", str(out))) == 0
    [verdict] = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert verdict["status"] == "ok"
    report = capsys.readouterr().out
    assert "invalid chunk records: 1" in report and "max_doc_offset" in report


def test_offsets_far_apart_are_not_padded_into_memory() -> None:
    """Below max_doc_offset, a gap larger than the chunks' own text is still not built."""
    store = store_of(
        chunk_record("d", 0, "The refund window is thirty days.", doc_offset=0),
        chunk_record("d", 1, "Poison.", doc_offset=90_000_000),
    )
    view = store.document("d")
    assert view is not None
    assert len(view.text) < 100, "joined in order instead of padded to 90 million characters"
    assert not view.has_doc_offsets


def test_a_drifted_citation_of_a_poisoned_document_still_gets_its_verdict() -> None:
    store = store_of(
        chunk_record("d", 0, "The refund window is thirty days.", doc_offset=0),
        chunk_record("d", 1, "Poison.", doc_offset=90_000_000),
    )
    verdict = check_citation(citation("refund window", "d#0", 0), store, Policy())
    assert verdict.status is Status.DRIFT_REPAIRED


def test_a_check_that_raises_becomes_one_invalid_verdict_and_the_sweep_goes_on(
    files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    real = exporter.checks.engine.check_citation

    def fragile(item: Citation, *args: Any) -> Any:
        if item.citation_id == "bomb":
            raise MemoryError("a terabyte of padding")
        return real(item, *args)

    monkeypatch.setattr(exporter.checks.engine, "check_citation", fragile)
    _jsonl(files["citations"], [_good_citation(citation_id="bomb"), _good_citation()])
    out = tmp_path / "verdicts.jsonl"
    # one citation in two could not be checked: the gate's invalid-records line fails it
    assert main(_sweep_args(files, "--out", str(out))) == 1
    bomb, good = (orjson.loads(line) for line in out.read_bytes().splitlines())
    assert (bomb["status"], bomb["reason"]) == ("invalid", "check_failed")
    assert "MemoryError" in bomb["error"] and good["status"] == "ok"


def test_in_the_service_a_message_whose_check_raises_is_dead_lettered_and_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def explode(*args: Any) -> Any:
        raise MemoryError("boom")

    registry = CollectorRegistry()
    metrics = ExporterMetrics(registry, SourceLabels(), "test")
    pipeline = Pipeline(store_of(GOOD_CHUNK), Policy())
    monkeypatch.setattr("exporter.checks.engine.check_citation", explode)
    outcome = pipeline.answer(LocalRecord("answers", 0, 5, None, orjson.dumps(_good_citation())))
    metrics.record([outcome])
    letter = outcome.dead_letter
    assert letter is not None
    assert letter.reason == "check_failed" and "MemoryError" in letter.error
    count = registry.get_sample_value(
        "citation_exporter_invalid_events_total", {"topic": "answers", "reason": "check_failed"}
    )
    assert count == 1


def test_a_chunk_record_that_breaks_the_store_is_a_dead_letter_not_a_crash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pipeline = Pipeline(store_of(), Policy())

    def explode(record: object) -> None:
        raise MemoryError("boom")

    monkeypatch.setattr(pipeline.store, "apply", explode)
    outcome = pipeline.chunk(LocalRecord("chunks", 0, 1, b"d#0", orjson.dumps(GOOD_CHUNK)))
    assert outcome.dead_letter is not None and outcome.dead_letter.reason == "check_failed"


# -- CPU ------------------------------------------------------------------------------------


def _long_quote_store(length: int) -> tuple[str, Any]:
    words = [
        "the",
        "refund",
        "policy",
        "applies",
        "to",
        "every",
        "plan",
        "within",
        "days",
        "of",
        "purchase",
    ]
    rng = random.Random(length)
    quote = " ".join(rng.choice(words) for _ in range(length // 4))[:length]
    near = "".join(c for i, c in enumerate(quote) if i % 100 != 50)  # a near-copy
    store = store_of(
        chunk_record("d", 0, "Introduction. " + near, doc_offset=0),
        chunk_record("d", 1, "x" * 200, doc_offset=len("Introduction. " + near)),
    )
    return quote, store


def test_a_quote_above_max_quote_chars_is_never_searched_approximately() -> None:
    quote, store = _long_quote_store(10_000)
    stale = citation(quote, "d#1", 0, 199)
    verdict = check_citation(stale, store, Policy())
    assert (verdict.status, verdict.reason) == (Status.DRIFT_UNREPAIRED, "quote_too_long")
    assert verdict.similarity is None


def test_a_long_quote_present_verbatim_is_still_repaired() -> None:
    quote, store = _long_quote_store(10_000)
    store = store_of(chunk_record("d", 0, "Introduction. " + quote, doc_offset=0))
    verdict = check_citation(citation(quote, "d#0", 0, len(quote)), store, Policy())
    assert verdict.status is Status.DRIFT_REPAIRED and verdict.repair is not None
    assert verdict.repair.start == len("Introduction. ")


def test_relocation_stops_at_its_budget() -> None:
    quote, store = _long_quote_store(800)
    tiny = Policy(limits=Limits(relocation_budget_ms=1e-6))
    verdict = check_citation(citation(quote, "d#1", 0, 199), store, tiny)
    assert (verdict.status, verdict.reason) == (
        Status.DRIFT_UNREPAIRED,
        "relocation_budget_exceeded",
    )
    generous = check_citation(citation(quote, "d#1", 0, 199), store, Policy())
    assert generous.status is Status.DRIFT_REPAIRED and generous.repair is not None
    assert generous.repair.method == "fuzzy"


def test_a_quote_whose_pieces_occur_everywhere_is_never_given_one_place() -> None:
    """Periodic text holds the quote almost everywhere; a capped search must not pick one."""
    store = store_of(chunk_record("d", 0, "ab" * 50_000), chunk_record("d", 1, "z" * 100))
    quote = "ab" * 199 + "x"
    verdict = check_citation(citation(quote, "d#1", 0, 100), store, Policy())
    assert (verdict.status, verdict.reason) == (Status.DRIFT_UNREPAIRED, "ambiguous")


def test_a_long_stored_context_is_compared_near_the_quote_only() -> None:
    """Context of 175,000 characters: aligning it whole would take minutes of CPU."""
    before = "filler " * 25_000 + "Alpha says: the refund window. Beta says: "
    text = before + "the refund window."
    store = store_of(chunk_record("d", 0, text))
    cited = citation("the refund window", "d#0", 3, prefix=before, suffix=".")
    verdict = check_citation(cited, store, Policy())
    assert verdict.status is Status.DRIFT_REPAIRED and verdict.repair is not None
    assert verdict.repair.start == len(before)


# -- files ----------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["citations", "chunks"])
def test_out_naming_an_input_is_refused_and_the_input_survives(
    files: dict[str, Path], which: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = files[which].read_bytes()
    with pytest.raises(SystemExit) as exit_info:
        main(_sweep_args(files, "--out", str(files[which])))
    assert exit_info.value.code == 2
    assert "same file as the input" in capsys.readouterr().err
    assert files[which].read_bytes() == before


def test_out_through_a_hard_link_or_a_symlink_is_the_same_file(
    files: dict[str, Path], tmp_path: Path
) -> None:
    hard = tmp_path / "hard.jsonl"
    os.link(files["citations"], hard)
    soft = tmp_path / "soft.jsonl"
    soft.symlink_to(files["chunks"])
    for alias in (hard, soft):
        with pytest.raises(SystemExit):
            main(_sweep_args(files, "--out", str(alias)))
    assert files["citations"].read_bytes() and files["chunks"].read_bytes()


def test_out_naming_the_file_behind_stdin_is_refused(files: dict[str, Path]) -> None:
    citations = files["citations"]
    before = citations.read_bytes()
    with citations.open("rb") as stdin:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "exporter.cli",
                "sweep",
                "--chunks",
                str(files["chunks"]),
                "--citations",
                "-",
                "--out",
                str(citations),
            ],
            stdin=stdin,
            capture_output=True,
            text=True,
            check=False,
        )
    assert done.returncode == 2 and "standard input" in done.stderr
    assert citations.read_bytes() == before


def test_a_failed_sweep_leaves_no_partial_verdict_file(
    files: dict[str, Path], tmp_path: Path
) -> None:
    truncated = tmp_path / "citations.jsonl.gz"
    many = b"".join(orjson.dumps(_good_citation(citation_id=f"c{i}")) + b"\n" for i in range(5000))
    truncated.write_bytes(gzip.compress(many)[:-200])
    out = tmp_path / "verdicts.jsonl"
    out.write_bytes(b"yesterday's verdicts\n")
    files["citations"] = truncated
    with pytest.raises(SystemExit) as exit_info:
        main(_sweep_args(files, "--out", str(out)))
    assert exit_info.value.code == 2
    assert out.read_bytes() == b"yesterday's verdicts\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "chunks.jsonl",
        "citations.jsonl",
        "citations.jsonl.gz",
        "verdicts.jsonl",
    ]


def test_out_to_a_device_is_written_in_place(files: dict[str, Path]) -> None:
    assert main(_sweep_args(files, "--out", os.devnull)) == 0
    assert Path(os.devnull).exists()


# -- exit codes -----------------------------------------------------------------------------


def _cli(*args: str, **options: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "exporter.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        **options,
    )


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        pytest.param(lambda data: data[: len(data) // 2], "truncated", id="truncated gzip"),
        pytest.param(
            lambda data: data[:20] + bytes(b ^ 0x5A for b in data[20:60]) + data[60:],
            "corrupt",
            id="corrupt deflate",
        ),
        pytest.param(lambda data: b"not gzip at all", "not a gzip file", id="not gzip"),
    ],
)
def test_a_damaged_gzip_exits_2_with_one_line(
    files: dict[str, Path], tmp_path: Path, damage: Any, message: str
) -> None:
    many = b"".join(orjson.dumps(_good_citation(citation_id=f"c{i}")) + b"\n" for i in range(3000))
    damaged = tmp_path / "citations.jsonl.gz"
    damaged.write_bytes(damage(gzip.compress(many)))
    done = _cli("sweep", "--chunks", str(files["chunks"]), "--citations", str(damaged))
    assert done.returncode == 2, done.stderr
    error = done.stderr.strip().splitlines()
    assert len(error) == 1 and message in error[0] and str(damaged) in error[0]


def test_a_closed_stdin_exits_2(files: dict[str, Path]) -> None:
    done = subprocess.run(
        f"{sys.executable} -m exporter.cli sweep --chunks {files['chunks']} --citations - <&-",
        shell=True,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and "standard input is closed" in done.stderr


def test_a_full_disk_on_stdout_exits_2(files: dict[str, Path]) -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "exporter.cli", *_sweep_args(files)],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
    assert done.returncode == 2
    assert "No space left on device" in done.stderr and "Traceback" not in done.stderr


def test_verdicts_to_a_full_disk_exit_2(files: dict[str, Path]) -> None:
    done = _cli(*_sweep_args(files, "--out", "/dev/full"))
    assert done.returncode == 2 and "Traceback" not in done.stderr


@pytest.mark.parametrize("command", [["run", "--source", "-"], ["demo", "--answers", "10"]])
def test_a_metrics_port_in_use_exits_2(command: list[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "CITATION_EXPORTER_METRICS_HOST": "127.0.0.1"}
        done = _cli(*command, "--metrics-port", str(port), env=env, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    assert "cannot serve metrics on" in done.stderr and "Traceback" not in done.stderr


def test_an_internal_error_exits_3_never_1(
    files: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def bug(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr("exporter.cli.sweep.run_sweep", bug)
    assert main(_sweep_args(files)) == 3
    assert "internal error (RuntimeError)" in capsys.readouterr().err


# -- sizes ----------------------------------------------------------------------------------


def test_a_ten_megabyte_span_gives_a_short_error() -> None:
    [item] = decode_citations(_good_citation(chunk_span=list(range(2_500_000))))
    assert isinstance(item, InvalidCitation)
    assert "'chunk_span'" in item.error and len(item.error) < 300


@pytest.mark.parametrize(
    "field", ["citation_id", "doc_id", "chunk_id", "doc_version", "answer_id", "topic"]
)
def test_identifiers_are_bounded(field: str) -> None:
    [item] = decode_citations(_good_citation(**{field: "x" * 1_000_000}))
    assert isinstance(item, InvalidCitation)
    assert field in item.error and "1,000,000 characters" in item.error
    assert len(item.error) < 200
    assert all(len(value or "") < 2000 for value in (item.citation_id, item.doc_id))


def test_a_mismatched_answer_id_is_quoted_in_short() -> None:
    answer = {"answer_id": "a" * 500, "citations": [_good_citation(answer_id="b" * 900)]}
    [item] = decode_citations(answer)
    assert isinstance(item, InvalidCitation) and len(item.error) < 400


def test_a_megabyte_of_empty_citations_is_one_error() -> None:
    answer = {"answer_id": "a1", "citations": [{}] * 340_000}
    [item] = decode_citations(answer)
    assert isinstance(item, InvalidCitation)
    assert item.reason == "oversized" and "max_citations_per_answer=500" in item.error


def test_many_invalid_citations_make_one_dead_letter_listing_them() -> None:
    answer = {"answer_id": "a1", "citations": [_good_citation(answer_id="a1"), *[{}] * 50]}
    checked = check_message(
        orjson.dumps(answer), None, Origin("t", 0, 9), store=store_of(GOOD_CHUNK), policy=Policy()
    )
    assert len(checked.verdicts) == 1
    letter = checked.dead_letter
    assert letter is not None
    assert letter.indexes == list(range(1, 51))
    assert "50 invalid citations" in letter.error and len(letter.error) < 500


def test_chunk_text_and_offset_limits_are_named() -> None:
    with pytest.raises(RecordError, match="max_chunk_chars=200,000"):
        decode_chunk(chunk_record("d", 0, "x" * 200_001))
    with pytest.raises(RecordError, match="max_doc_offset=100,000,000"):
        decode_chunk(chunk_record("d", 0, "x", doc_offset=100_000_001))
    limits = Limits(max_chunk_chars=10)
    with pytest.raises(RecordError, match="max_chunk_chars=10"):
        decode_chunk(chunk_record("d", 0, "x" * 11), limits)


def test_an_oversized_line_is_skipped_unread(tmp_path: Path) -> None:
    path = tmp_path / "lines.jsonl"
    path.write_bytes(b'{"a": 1}\n' + b"x" * 5000 + b"\n" + b"y" * 100 + b"\n")
    with path.open("rb") as stream:
        lines = list(read_lines(stream, max_bytes=100))
    assert lines == [(1, b'{"a": 1}'), (2, Oversized(5000)), (3, b"y" * 100)]


def test_sweep_batches_are_bounded_in_bytes(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    line = b'"' + b"x" * 1_000_000 + b'"\n'
    path.write_bytes(line * 20)
    records = JsonLines(str(path)).records(2_000_000)
    sizes = [sum(len(item) for _, item in batch) for batch in _batches(records)]
    assert len(sizes) > 1 and max(sizes) <= 5_100_000


def test_an_oversized_citation_line_gets_one_invalid_verdict(
    files: dict[str, Path], tmp_path: Path
) -> None:
    big = _good_citation(quote="q" * 3000)
    _jsonl(files["citations"], [big, _good_citation()])
    out = tmp_path / "verdicts.jsonl"
    # one invalid in two is 50%: the invalid-records line set there lets the exit say "handled"
    lenient = ("--fail-invalid-above", "50%")
    assert main(_sweep_args(files, "--out", str(out), "--max-message-bytes", "1000", *lenient)) == 0
    first, second = (orjson.loads(line) for line in out.read_bytes().splitlines())
    assert (first["status"], first["reason"], first["line"]) == ("invalid", "oversized", 1)
    assert second["status"] == "ok"


def test_oversized_chunk_lines_are_counted(tmp_path: Path) -> None:
    chunks = _jsonl(tmp_path / "chunks.jsonl", [GOOD_CHUNK, chunk_record("d", 1, "x" * 5000)])
    summary = SweepSummary()
    store = load_store(JsonLines(str(chunks)), summary, limits=Limits(max_message_bytes=1000))
    assert store.chunk_count == 1 and summary.invalid_chunk_records == 1
    assert "max_message_bytes=1,000" in summary.errors[0]


def test_jobs_are_capped_at_the_cpus_available(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*_sweep_args(files)[:-2], "--jobs", "1000"]) == 0
    assert "capped at the" in capsys.readouterr().err


def test_label_values_are_bounded_in_length() -> None:
    labels = SourceLabels()
    assert len(labels("s" * 100_000)) == MAX_LABEL_LENGTH
    registry = CollectorRegistry()
    metrics = ExporterMetrics(registry, SourceLabels(limit=25), "test")
    for n in range(25):
        metrics.sources(f"{n}" + "s" * 1_000_000)
    from prometheus_client import generate_latest

    assert len(generate_latest(registry)) < 200_000


# -- replay ---------------------------------------------------------------------------------


def test_replay_never_takes_a_citation_with_extra_fields_for_a_chunk(tmp_path: Path) -> None:
    lines = [
        GOOD_CHUNK,
        _good_citation(text="an extra field", deleted=True),
        {"answer_id": "a2", "text": "x", "citations": [_good_citation(answer_id="a2")]},
        {"chunk_id": "d#9", "deleted": True},
    ]
    path = _jsonl(tmp_path / "events.jsonl", lines)
    records = list(records_of(JsonLines(str(path)), "chunks", "answers", 10_000))
    assert [r.topic for r in records if isinstance(r, LocalRecord)] == [
        "chunks",
        "answers",
        "answers",
        "chunks",
    ]


def test_replay_accounts_for_a_line_too_long_to_read(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(orjson.dumps(GOOD_CHUNK) + b"\n" + b"z" * 5000 + b"\n")
    records = list(records_of(JsonLines(str(path)), "chunks", "answers", 1000))
    assert records[1] == SkippedLine(2, 5000)


def test_store_gauges_are_read_at_scrape_time_in_a_replay() -> None:
    from exporter.cli.offline import OfflineExporter
    from exporter.settings import Settings

    replaying = OfflineExporter(Settings(metrics_port=0, metrics_host="127.0.0.1"))
    try:
        replaying.pipeline.chunk(LocalRecord("rag.chunks", 0, 1, b"d#0", orjson.dumps(GOOD_CHUNK)))
        assert replaying.registry.get_sample_value("citation_store_chunks") == 1
        assert replaying.registry.get_sample_value("citation_store_documents") == 1
        assert replaying.registry.get_sample_value("citation_exporter_ready") == 1
    finally:
        replaying.http.stop()


def test_decoded_citations_inherit_limits_in_the_sweep_and_the_service_alike() -> None:
    answer = {"answer_id": "a1", "citations": [_good_citation(answer_id="a1")] * 3}
    tight = Policy(limits=Limits(max_citations_per_answer=2))
    checked = check_message(
        orjson.dumps(answer), None, Origin("t", 0, 1), store=store_of(GOOD_CHUNK), policy=tight
    )
    assert checked.verdicts == []
    assert checked.dead_letter is not None and checked.dead_letter.reason == "oversized"
    assert [type(i) for i in decode_citations(answer, tight.limits)] == [InvalidCitation]


def test_offsets_beyond_what_json_readers_keep_exactly_are_rejected(
    files: dict[str, Path], tmp_path: Path
) -> None:
    """Found by the fuzzer: a span at 2**64 - 2 made a shift that orjson could not write."""
    _jsonl(
        files["citations"],
        [_good_citation(chunk_span=[2**64 - 2, 2**64 - 1]), _good_citation(citation_id="c2")],
    )
    out = tmp_path / "verdicts.jsonl"
    assert main(_sweep_args(files, "--out", str(out), "--fail-invalid-above", "50%")) == 0
    first, second = (orjson.loads(line) for line in out.read_bytes().splitlines())
    assert first["status"] == "invalid" and "2**53 - 1" in first["error"]
    assert second["status"] == "ok"


def test_a_verdict_with_a_value_beyond_64_bits_is_still_written() -> None:
    from exporter.checks.verdict import Action, Repair, Verdict
    from exporter.outputs.verdicts import verdict_json

    repair = Repair("d#0", 0, 1, 100.0, "exact", -(2**70))
    verdict = Verdict("c", "a", "d", Status.DRIFT_REPAIRED, Action.REWRITE_OFFSETS, repair=repair)
    assert orjson.loads(verdict_json(verdict))["repair"]["shift"] == -(2**70)


@pytest.mark.parametrize(
    ("which", "content", "said"),
    [
        pytest.param("citations", b"", "no valid citations", id="empty .gz (a failed copy)"),
        pytest.param(
            "citations", gzip.compress(b"1\n2\n[]\n"), "no valid citations", id="all invalid"
        ),
        pytest.param("chunks", b"", "no chunk was loaded", id="empty chunk store"),
        pytest.param("chunks", gzip.compress(b"{}\n"), "no chunk was loaded", id="no good chunk"),
    ],
)
def test_a_sweep_with_nothing_to_judge_by_does_not_pass_the_gate(
    files: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    *,
    which: str,
    content: bytes,
    said: str,
) -> None:
    damaged = tmp_path / f"{which}.jsonl.gz"
    damaged.write_bytes(content)
    files[which] = damaged
    with pytest.raises(SystemExit) as exit_info:
        main(_sweep_args(files, "--format", "json"))
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert said in captured.err
    assert orjson.loads(captured.out)["passed"] is False, "the summary says what the status does"
    assert main(_sweep_args(files, "--allow-empty")) == 0


def test_errors_are_short_in_bytes_too() -> None:
    """Found by the fuzzer: 480 characters of four-byte emoji made a 1,227-byte error."""
    answer = {"answer_id": "\U0001f600" * 100, "citations": [_good_citation()] * 3}
    items = list(decode_citations(answer))
    assert all(isinstance(i, InvalidCitation) for i in items)
    assert all(len(i.error.encode()) <= 1000 for i in items if isinstance(i, InvalidCitation))


def test_both_decoders_take_quotes_of_any_length() -> None:
    """Found by the fuzzer: the field-by-field decoder held quotes to the 1,024 of an id."""
    [item] = decode_citations(_good_citation(quote="q" * 1500, sentence_index=-1))
    assert isinstance(item, InvalidCitation) and "sentence_index" in item.error


def test_a_span_far_longer_than_its_quote_is_judged_without_folding_it() -> None:
    """Found by the fuzzer: 200,000 characters that NFKC folds 18-fold were folded to see
    that they do not match a one-character quote."""
    store = store_of(chunk_record("d", 0, "\ufdfa" * 200_000))
    verdict = check_citation(citation("x", "d#0", 0, 200_000), store, Policy())
    assert verdict.status is Status.DRIFT_UNREPAIRED
    assert verdict.similarity is not None and verdict.similarity < 0.01


def test_chained_anchor_hits_never_make_one_window_of_the_whole_document() -> None:
    """Found by the fuzzer: every piece of a quote planted 64 times, each copy a few
    characters after the last, chained into one 100,000-character window aligned in full."""
    rng = random.Random(4)
    quote = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(1000))
    slack = 40
    pieces, length = slack + 1, 1000 // (slack + 1)
    text = ["#"] * ((64 * pieces + 2) * (slack + 1) + 1100)
    for k in range(pieces):
        for j in range(64):
            at = (k * 64 + j) * (slack + 1) + k * length
            text[at : at + length] = quote[k * length : (k + 1) * length]
    store = store_of(chunk_record("d", 0, "".join(text)), chunk_record("d", 1, "z" * 1000))
    verdict = check_citation(citation(quote, "d#1", 0, 1000), store, Policy())
    assert verdict.status is Status.DRIFT_UNREPAIRED and verdict.repair is None
    assert verdict.reason in {"ambiguous", "quote_not_found"}


def test_a_flood_of_combining_marks_is_folded_in_bounded_units() -> None:
    """Found by the fuzzer: canonical reordering of one run of 60,000 marks took seconds."""
    from exporter.checks.normalize import fold, fold_with_map

    flood = "a" + "\u0301\u0316" * 30_000
    folded = fold(flood)
    assert folded == fold_with_map(flood).text
    assert len(folded) >= len(flood) - 1 - len(flood) // 31  # at most one composition per unit


def test_a_compressed_archive_on_stdin_is_read_as_what_it_is(files: dict[str, Path]) -> None:
    """Found by walking the README: `--citations - < archive.jsonl.gz` gave 799 lines of
    'not valid JSON'. Compression is told by gzip's magic bytes, not by the name."""
    packed = gzip.compress(files["citations"].read_bytes())
    command = ["sweep", "--chunks", str(files["chunks"]), "--citations", "-", "--format", "json"]
    done = subprocess.run(
        [sys.executable, "-m", "exporter.cli", *command],
        input=packed,
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["statuses"]["ok"] == 1
