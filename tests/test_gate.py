"""The gate fails on what readers would see broken (issue 22, part 2).

Reproduces a re-index that lost 30% of the documents: ``document_missing`` 29.9% of the
citations, drift 0%, exit 0, and the report's verdict box said "Gate passed" in green.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import sweep_json
from test_html_report import Page

from exporter.checks.verdict import Status
from exporter.cli import main
from exporter.outputs.report import summary_text
from exporter.pipeline.gate import Gate
from exporter.pipeline.summary import SweepSummary
from exporter.simulate.files import write_scenario
from exporter.simulate.scenario import ScenarioConfig, build_scenario

NO_CHANGE = {
    "resize_share": 0.0,
    "retypeset_share": 0.0,
    "refresh_share": 0.0,
    "silent_edit_share": 0.0,
    "delete_share": 0.0,
}


def _scenario(directory: Path, **shares: float) -> dict[str, Path]:
    config = ScenarioConfig(answers=1200, seed=11, **(NO_CHANGE | shares))
    return write_scenario(build_scenario(config), directory)


@pytest.fixture(scope="module")
def lost(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A re-index that lost 30% of the documents and changed nothing else."""
    return _scenario(tmp_path_factory.mktemp("lost"), delete_share=0.3)


@pytest.fixture(scope="module")
def rechunked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A re-chunking: drift, nearly all of it repairable."""
    return _scenario(tmp_path_factory.mktemp("rechunked"), resize_share=0.3)


def test_vanished_documents_fail_the_gate_by_default(
    lost: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, summary = sweep_json(lost, capsys)
    assert summary["drift_ratio"] == 0.0
    assert 0.2 < summary["document_missing_ratio"] < 0.4
    assert code == 1 and summary["passed"] is False
    assert summary["gate"]["crossed"] == ["missing documents"]
    assert summary["fail_missing_above"] == 0.01
    assert "missing documents" in summary["gate"]["why"]


def test_the_missing_line_is_its_own_option(
    lost: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, summary = sweep_json(lost, capsys, "--fail-missing-above", "50%")
    assert code == 0 and summary["passed"] is True
    assert summary["gate"]["crossed"] == []


def test_the_missing_line_follows_the_drift_line_when_not_given(
    lost: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, summary = sweep_json(lost, capsys, "--fail-above", "50%")
    assert (code, summary["fail_missing_above"]) == (0, 0.5)


def test_the_text_summary_names_the_line_that_was_crossed(
    lost: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = ["--chunks", str(lost["chunks"]), "--citations", str(lost["citations"])]
    code = main(["sweep", *inputs, "--no-progress"])
    text = capsys.readouterr().out
    assert code == 1
    [missing] = [line for line in text.splitlines() if "missing documents" in line][:1]
    assert missing.endswith("-> FAIL")
    [verdict] = [line for line in text.splitlines() if line.strip().startswith("gate:")]
    assert "FAIL" in verdict and "missing documents" in verdict


def test_the_report_says_gate_failed_and_why(
    lost: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "sweep.html"
    code, _ = sweep_json(lost, capsys, "--report", str(page))
    assert code == 1
    html = Page(page.read_text(encoding="utf-8"))
    assert "Gate failed" in html.text and "Gate passed" not in html.text
    assert html.by_id["gate-missing"]["data-crossed"] == "true"
    assert html.by_id["gate-drift"]["data-crossed"] == "false"


def test_the_report_from_verdicts_gates_on_missing_documents_too(
    lost: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    verdicts = tmp_path / "verdicts.jsonl"
    sweep_json(lost, capsys, "--out", str(verdicts))
    page = tmp_path / "report.html"
    code = main(["report", str(verdicts), "--out", str(page), "--fail-above", "1%"])
    assert code == 1
    html = Page(page.read_text(encoding="utf-8"))
    assert "Gate failed" in html.text and html.by_id["gate-missing"]["data-crossed"] == "true"


def test_repaired_and_unrepaired_drift_are_told_apart(
    rechunked: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, summary = sweep_json(rechunked, capsys)
    repaired, unrepaired = summary["repaired_drift_ratio"], summary["unrepaired_drift_ratio"]
    assert repaired > 0.01 and repaired + unrepaired == pytest.approx(summary["drift_ratio"])
    assert code == 1 and summary["gate"]["crossed"] == ["drift"]


def test_a_team_that_applies_repairs_gates_on_unrepaired_drift_alone(
    rechunked: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, summary = sweep_json(
        rechunked, capsys, "--gate-drift", "unrepaired", "--fail-above", "5%"
    )
    assert summary["gate_drift"] == "unrepaired drift"
    # the scenario: drift far above the line, nearly all of it repaired
    assert summary["unrepaired_drift_ratio"] <= 0.05 < summary["drift_ratio"]
    assert code == 0
    assert [line["name"] for line in summary["gate"]["lines"]] == [
        "unrepaired drift",
        "missing documents",
        "invalid records",
    ]


def test_gate_options_need_a_gate_in_report(tmp_path: Path) -> None:
    verdicts, page = tmp_path / "v.jsonl", tmp_path / "r.html"
    verdicts.write_text("")
    with pytest.raises(SystemExit) as stopped:
        main(["report", str(verdicts), "--out", str(page), "--gate-drift", "unrepaired"])
    assert stopped.value.code == 2


def test_every_line_is_judged_apart() -> None:
    summary = SweepSummary(chunks_loaded=10)
    summary.statuses.update({"ok": 97, "drift_repaired": 2, "document_missing": 1})
    result = summary.judge(Gate(drift_above=0.01, missing_above=0.01))
    assert [line.name for line in result.crossed] == ["drift"]
    assert summary.judge(Gate(drift_above=0.01, unrepaired_only=True)).passed
    assert not summary.judge(Gate(drift_above=0.05, missing_above=0.005)).passed


def test_allow_empty_passes_a_sweep_of_an_empty_store_whose_documents_are_all_missing() -> None:
    """With no chunk loaded every document is missing: that is the nothing-to-judge-by case
    --allow-empty lets pass, not a re-index that lost them."""
    summary = SweepSummary()
    summary.statuses.update({"document_missing": 10})
    assert summary.judge(Gate(allow_empty=True)).passed
    assert not summary.judge(Gate(allow_empty=False)).passed
    assert "not gated (no chunk was loaded" in summary_text(summary, Gate(allow_empty=True))


# --- invalid records (found by a new user: 19 of 20 citations broken, and the gate passed) ---


def _mostly_broken(directory: Path) -> dict[str, Path]:
    """One citation that checks out and nineteen whose span is a string: 95% invalid."""
    chunks = directory / "chunks.jsonl"
    chunks.write_text(
        '{"doc_id": "refunds", "doc_version": "v3", "chunk_id": "refunds#0", '
        '"text": "Refunds are issued within 30 days of purchase."}\n'
    )
    good = (
        '{"citation_id": "c-0", "answer_id": "a", "doc_id": "refunds", "doc_version": "v3", '
        '"chunk_id": "refunds#0", "chunk_span": [0, 33], '
        '"quote": "Refunds are issued within 30 days"}\n'
    )
    broken = good.replace("[0, 33]", '"0-33"')
    citations = directory / "citations.jsonl"
    citations.write_text(good + "".join(broken.replace("c-0", f"c-{i}") for i in range(1, 20)))
    return {"chunks": chunks, "citations": citations}


def test_an_archive_of_mostly_broken_records_fails_the_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, summary = sweep_json(_mostly_broken(tmp_path), capsys)
    assert summary["statuses"]["invalid"] == 19 and summary["drift_ratio"] == 0.0
    assert summary["invalid_ratio"] == pytest.approx(0.95)
    assert code == 1 and summary["gate"]["crossed"] == ["invalid records"]
    assert "invalid records 95.00% above 1.00%" in summary["gate"]["why"]
    assert summary["fail_invalid_above"] == 0.01


def test_the_invalid_line_is_its_own_option_and_follows_the_drift_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = _mostly_broken(tmp_path)
    assert sweep_json(scenario, capsys, "--fail-invalid-above", "96%")[0] == 0
    code, summary = sweep_json(scenario, capsys, "--fail-above", "99%")
    assert (code, summary["fail_invalid_above"]) == (0, 0.99)


def test_the_text_summary_shows_the_invalid_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = _mostly_broken(tmp_path)
    inputs = ["--chunks", str(scenario["chunks"]), "--citations", str(scenario["citations"])]
    assert main(["sweep", *inputs, "--no-progress"]) == 1
    text = capsys.readouterr().out
    assert "  invalid records    95.00%   gate: fail above 1.00% -> FAIL" in text
    assert "gate: FAIL (invalid records 95.00% above 1.00%)" in text


def test_allow_empty_waits_the_invalid_line_when_nothing_valid_was_read() -> None:
    summary = SweepSummary()
    summary.chunks_loaded = 1
    summary.statuses[Status.INVALID] = 3
    result = summary.judge(Gate(allow_empty=True))
    assert result.passed, result.why()
    assert not summary.judge(Gate(allow_empty=False)).passed


def test_report_says_which_line_failed_its_gate(
    lost: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found by a new user: `report --fail-above 1%` exited 1 and said only the drift ratio."""
    verdicts = tmp_path / "verdicts.jsonl"
    sweep_json(lost, capsys, "--out", str(verdicts))
    page = str(tmp_path / "report.html")
    assert main(["report", str(verdicts), "--out", page, "--fail-above", "1%"]) == 1
    said = capsys.readouterr().err.splitlines()
    assert said[-1].startswith("gate: FAIL (missing documents ") and "above 1.00%" in said[-1]
    assert main(["report", str(verdicts), "--out", page, "--fail-above", "50%"]) == 0
    assert capsys.readouterr().err.splitlines()[-1] == "gate: PASS"
