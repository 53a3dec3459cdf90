"""The command line: files in, verdicts and a summary out, exit codes a deploy gate can use."""

from __future__ import annotations

import gzip
import io
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

import exporter.cli
from exporter.cli import main
from exporter.simulate.files import write_scenario
from exporter.simulate.scenario import ScenarioConfig, build_scenario


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    config = ScenarioConfig(seed=13, answers=600, invalid_lines=3)
    return write_scenario(build_scenario(config), tmp_path_factory.mktemp("cli"))


def _verdicts(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as lines:
        return [orjson.loads(line) for line in lines]


def _sweep(scenario: dict[str, Path], *extra: str) -> list[str]:
    return [
        "sweep",
        "--chunks",
        str(scenario["chunks"]),
        "--citations",
        str(scenario["citations"]),
        "--no-progress",
        *extra,
    ]


def _exits_2(arguments: list[str]) -> None:
    """Run the command, which must end as a usage error (exit 2)."""
    with pytest.raises(SystemExit) as exit_info:
        main(arguments)
    assert exit_info.value.code == 2


def test_sweep_writes_one_verdict_per_citation_and_gates(
    scenario: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "verdicts.jsonl"
    assert main(_sweep(scenario, "--out", str(out))) == 1
    verdicts = _verdicts(out)
    expected = scenario["expected"].read_bytes().count(b"\n")
    assert len(verdicts) == expected + 3
    invalid = [v for v in verdicts if v["status"] == "invalid"]
    assert len(invalid) == 3 and all(isinstance(v["line"], int) for v in invalid)
    for verdict in verdicts:
        assert set(verdict) >= {
            "citation_id",
            "answer_id",
            "doc_id",
            "status",
            "reason",
            "similarity",
            "recorded_version",
            "live_version",
            "action",
            "repair",
        }
    report = capsys.readouterr().out
    assert "drift ratio" in report and "superseded ratio" in report
    assert "-> FAIL" in report
    assert "shift of repaired drift" in report


def test_sweep_passes_the_gate_under_a_looser_limit(scenario: dict[str, Path]) -> None:
    assert main(_sweep(scenario, "--fail-above", "0.9")) == 0


def test_json_summary_agrees_with_the_verdicts(
    scenario: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "verdicts.jsonl.gz"
    main(_sweep(scenario, "--out", str(out), "--format", "json"))
    summary = orjson.loads(capsys.readouterr().out)
    counts = Counter(v["status"] for v in _verdicts(out))
    assert {k: v for k, v in summary["statuses"].items() if v} == dict(counts)
    valid = summary["valid_citations"]
    drift = counts["drift_repaired"] + counts["drift_unrepaired"]
    assert summary["drift_ratio"] == pytest.approx(drift / valid)
    assert summary["superseded_ratio"] == pytest.approx(counts["superseded"] / valid)
    assert summary["passed"] is False and summary["fail_above"] == 0.01
    assert summary["shift"]["histogram"] and summary["citations_per_second"] > 0


def test_worker_processes_give_the_same_verdicts_in_the_same_order(
    scenario: dict[str, Path], tmp_path: Path
) -> None:
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    main(_sweep(scenario, "--out", str(one), "--jobs", "1"))
    main(_sweep(scenario, "--out", str(two), "--jobs", "2"))
    assert one.read_bytes() == two.read_bytes()


def test_gzip_inputs_and_stdin(
    scenario: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    chunks = tmp_path / "chunks.jsonl.gz"
    with gzip.open(chunks, "wb") as zipped:
        zipped.write(scenario["chunks"].read_bytes())
    with io.TextIOWrapper(open(scenario["citations"], "rb")) as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        status = main(
            ["sweep", "--chunks", str(chunks), "--citations", "-", "--out", "-", "--format", "json"]
        )
    assert status == 1
    captured = capsysbinary.readouterr()
    verdict_lines = captured.out.splitlines()
    assert len(verdict_lines) == scenario["expected"].read_bytes().count(b"\n") + 3
    assert orjson.loads(captured.err.splitlines()[-1])["citations"] == len(verdict_lines)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        pytest.param(
            ["sweep", "--chunks", "/nonexistent.jsonl", "--citations", "x"],
            "cannot read --chunks /nonexistent.jsonl",
            id="missing chunks file",
        ),
        pytest.param(["sweep"], "needs --chunks FILE and --citations FILE", id="no inputs"),
        pytest.param(["sweep", "--chunks", "-", "--citations", "-"], "only one of", id="stdin"),
        pytest.param(["sweep", "--example", "--chunks", "x"], "--example generates", id="both"),
        pytest.param(
            ["sweep", "--chunks", "x", "--citations", "y", "--master", "local[2]"],
            "--master needs --engine spark",
            id="spark option without spark",
        ),
        pytest.param(
            ["simulate", "--out", "/tmp/x", "--resize-share", "0.8", "--refresh-share", "0.5"],
            "add up to at most 1",
            id="shares",
        ),
    ],
)
def test_usage_errors_exit_2_with_one_line(
    arguments: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(arguments)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip()
    assert message in error and "\n" not in error and error.startswith("citation-exporter: ")


def test_the_spark_engine_names_its_extra_when_pyspark_is_missing(
    scenario: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # as if PySpark were not installed (and whether or not another test imported it)
    monkeypatch.setitem(sys.modules, "exporter.cli.sweep_spark", None)
    monkeypatch.delattr(exporter.cli, "sweep_spark", raising=False)
    with pytest.raises(SystemExit) as exit_info:
        main(_sweep(scenario, "--engine", "spark"))
    assert exit_info.value.code == 2
    [error] = capsys.readouterr().err.strip().splitlines()
    assert "pip install 'citation-drift-exporter[spark]'" in error


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param(["--threshold", "0"], id="threshold zero"),
        pytest.param(["--threshold", "101"], id="threshold above 100"),
        pytest.param(["--fail-above", "2"], id="ratio above 1"),
        pytest.param(["--format", "xml"], id="format"),
        pytest.param(["--jobs", "0"], id="jobs"),
    ],
)
def test_bad_option_values_exit_2(
    scenario: dict[str, Path], arguments: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(_sweep(scenario, *arguments))
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_corrupt_gzip_citations_exit_2(
    scenario: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "citations.jsonl.gz"
    broken.write_bytes(b"this is not gzip at all")
    with pytest.raises(SystemExit) as exit_info:
        main(["sweep", "--chunks", str(scenario["chunks"]), "--citations", str(broken)])
    assert exit_info.value.code == 2
    assert "cannot read --citations" in capsys.readouterr().err


def test_malformed_chunk_lines_are_counted_and_reported(
    scenario: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chunks = tmp_path / "chunks.jsonl"
    shutil.copy(scenario["chunks"], chunks)
    with open(chunks, "ab") as extra:
        extra.write(b'{"chunk_id": "x", "text": 5}\nnot json\n')
    main(
        [
            "sweep",
            "--chunks",
            str(chunks),
            "--citations",
            str(scenario["citations"]),
            "--format",
            "json",
        ]
    )
    summary = orjson.loads(capsys.readouterr().out)
    assert summary["invalid_chunk_records"] == 2
    assert any("chunks.jsonl:" in e and "'text' must be a string" in e for e in summary["errors"])


def test_simulate_writes_the_scenario_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", "--out", str(tmp_path), "--answers", "50", "--gzip"]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "chunks.before.jsonl.gz",
        "chunks.jsonl.gz",
        "citations.jsonl.gz",
        "expected-coverage.jsonl.gz",
        "expected.jsonl.gz",
        "misclaims.jsonl.gz",
        "scenario.json",
    ]
    assert "wrote" in capsys.readouterr().out


def test_console_script_help_teaches_exit_codes() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "exporter.cli", "sweep", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "1    the gate failed: drift above --fail-above, missing documents" in done.stdout
    assert "invalid records above --fail-invalid-above" in done.stdout
    assert "3    internal error" in done.stdout
    assert "--example" in done.stdout


@pytest.mark.slow
def test_example_runs_the_whole_job_on_built_in_data() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "exporter.cli", "sweep", "--example", "--format", "json"],
        capture_output=True,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    summary = orjson.loads(done.stdout)
    assert summary["citations"] > 5000
    assert summary["statuses"]["drift_repaired"] > 0 and summary["statuses"]["superseded"] > 0


def test_progress_bar_on_a_terminal(scenario: dict[str, Path]) -> None:
    """stderr on a pseudo-terminal gets a progress bar; a pipe (every test above) does not."""
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    try:
        done = subprocess.run(
            [sys.executable, "-m", "exporter.cli", *_sweep(scenario)[:-1]],
            stdout=subprocess.PIPE,
            stderr=follower,
            check=False,
            timeout=60,
        )
        os.close(follower)
        shown = b""
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:
                break
            if not data:
                break
            shown += data
    finally:
        os.close(leader)
    assert done.returncode == 1
    assert b"sweep: 100%" in shown


def test_run_with_an_invalid_setting_exits_2_naming_it() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "exporter.cli", "run"],
        env={**os.environ, "CITATION_EXPORTER_THRESHOLD": "150"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "threshold (CITATION_EXPORTER_THRESHOLD)" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["sweep", "simulate", "run", "demo", "produce"])
def test_help_examples_keep_their_line_breaks(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An example continued with a backslash must show it: a lone backslash before a newline in
    a Python string joins the lines into one that cannot be pasted."""
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = capsys.readouterr().out
    assert not re.search(r"\S {4,}--", text), text


def test_the_bare_command_lists_the_commands_and_where_to_start(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _exits_2([])
    error = capsys.readouterr().err
    # every command, each with what it is for, and the first one to try
    for command in ("sweep", "report", "demo", "run", "produce", "simulate"):
        assert re.search(rf"^  {command} +\S", error, re.MULTILINE), command
    assert "'citation-exporter demo'" in error and "COMMAND --help" in error


@pytest.mark.parametrize(
    ("arguments", "hint"),
    [
        (["sweep", "chunks.jsonl", "citations.jsonl"], "--chunks FILE --citations FILE"),
        (["run", "archive.jsonl"], "--source FILE"),
        (["sweep", "--no-such-flag"], "see 'citation-exporter sweep --help'"),
    ],
)
def test_stray_words_are_named_under_their_command_with_what_was_meant(
    arguments: list[str], hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _exits_2(arguments)
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith(f"citation-exporter {arguments[0]}: error: unrecognized arguments: ")
    assert hint in error


def test_a_citations_file_that_is_no_json_lines_is_told_the_format_with_a_line(
    scenario: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "citations.csv"
    csv.write_text("citation_id,doc_id,chunk_span\nc1,refunds,0-20\n", encoding="utf-8")
    arguments = ["sweep", "--chunks", str(scenario["chunks"]), "--citations", str(csv)]
    _exits_2([*arguments, "--no-progress"])
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "no line of the --citations file is JSON; it takes JSON Lines" in error
    # the line shown is one the sweep takes
    example = tmp_path / "example.jsonl"
    example.write_text(error.split("such as ", 1)[1].split(" (--allow-empty")[0] + "\n")
    # (its document is not in this store: a valid citation, document_missing, the gate's line)
    assert main(["sweep", "--chunks", str(scenario["chunks"]), "--citations", str(example)]) == 1
    out = capsys.readouterr().out
    assert "invalid citations" not in out and re.search(r"document_missing +1 ", out)


@pytest.mark.parametrize("output_format", ["text", "json"])
def test_a_sweep_ends_saying_which_files_it_wrote(
    scenario: dict[str, Path],
    tmp_path: Path,
    output_format: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    verdicts, report = tmp_path / "verdicts.jsonl", tmp_path / "report.html"
    arguments = _sweep(scenario, "--out", str(verdicts), "--report", str(report))
    main([*arguments, "--format", output_format])
    captured = capsys.readouterr()
    line = f"wrote: verdicts {verdicts}, report {report}"
    if output_format == "json":
        orjson.loads(captured.out)  # standard output stays one JSON document
        assert "wrote:" not in captured.out + captured.err  # and stderr stays empty
    else:
        assert captured.out.strip().splitlines()[-1] == line
    assert verdicts.exists() and report.exists()


def test_a_sweep_that_writes_only_to_standard_output_names_no_file(
    scenario: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    main(_sweep(scenario, "--out", "-"))
    captured = capsys.readouterr()
    assert "wrote:" not in captured.out + captured.err


def test_chunks_and_citations_swapped_are_named_before_the_sweep(
    scenario: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    arguments = ["sweep", "--no-progress"]
    arguments += ["--chunks", str(scenario["citations"]), "--citations", str(scenario["chunks"])]
    _exits_2(arguments)
    captured = capsys.readouterr()
    [error] = captured.err.strip().splitlines()
    assert error.endswith("were --chunks and --citations swapped?")
    assert f"--chunks {scenario['citations']}" in error
    assert "citations checked" not in captured.out  # refused before sweeping anything


def test_a_chunks_file_of_other_records_is_not_taken_for_a_swap(
    scenario: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other.jsonl"
    other.write_text('{"id": 1, "body": "not a chunk"}\n', encoding="utf-8")
    citations = str(scenario["citations"])
    _exits_2(["sweep", "--no-progress", "--chunks", str(other), "--citations", citations])
    error = capsys.readouterr().err
    assert "swapped" not in error and "no chunk was loaded" in error


@pytest.mark.parametrize(
    "first_line",
    [
        b"[" * 100_000 + b"]" * 100_000,  # nested past any parser's depth
        b'{"chunk_span": "' + b"x" * 2_000_000 + b'"}',  # longer than --max-message-bytes
        b"\xff\xfe not text",
    ],
)
def test_a_chunks_file_whose_first_line_is_hostile_is_no_swap_and_no_crash(
    scenario: dict[str, Path], tmp_path: Path, first_line: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    chunks = tmp_path / "chunks.jsonl"
    chunks.write_bytes(first_line + b"\n")
    citations = str(scenario["citations"])
    _exits_2(["sweep", "--no-progress", "--chunks", str(chunks), "--citations", citations])
    [error] = capsys.readouterr().err.strip().splitlines()
    assert "swapped" not in error and len(error) < 400


def test_a_swap_is_named_through_gzip_too(
    scenario: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    compressed = tmp_path / "citations.jsonl.gz"
    compressed.write_bytes(gzip.compress(scenario["citations"].read_bytes()))
    chunks = str(scenario["chunks"])
    _exits_2(["sweep", "--no-progress", "--chunks", str(compressed), "--citations", chunks])
    assert capsys.readouterr().err.strip().endswith("were --chunks and --citations swapped?")


def test_a_usage_error_is_a_few_lines_that_end_with_what_was_wrong() -> None:
    """Found by a new user: a bad --fail-above came after 30 lines of usage."""
    for argv, said in (
        (["sweep", "--fail-above", "1"], "1 would mean 100%: write 1% or 0.01"),
        (["report", "v.jsonl"], "the following arguments are required: --out"),
    ):
        command = [sys.executable, "-m", "exporter.cli", *argv]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        lines = done.stderr.splitlines()
        assert done.returncode == 2 and len(lines) <= 3, done.stderr
        assert said in lines[-1]
    command = [sys.executable, "-m", "exporter.cli", "sweep", "--help"]
    sweep_help = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    assert sweep_help.startswith("usage: citation-exporter sweep --chunks FILE --citations FILE")
