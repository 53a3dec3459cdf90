"""The sweep's judged sample, end to end through the command: summary, --judge-out, flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from exporter.cli import main

NOW = "2026-11-30T00:00:00Z"


def _sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, object]:
    code = main(["sweep", "--example", "--format", "json", "--jobs", "2", "--now", NOW, *extra])
    assert code == 1  # the example drifts past the gate
    summary: dict[str, object] = json.loads(capsys.readouterr().out)
    return summary


def test_a_judged_sample_is_summarised_and_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "judged.jsonl"
    summary = _sweep(tmp_path, capsys, "--judge-sample", "50", "--judge-out", str(out))
    entailment = summary["entailment"]
    assert isinstance(entailment, dict)
    assert entailment["judge"] == "lexical" and entailment["sampled"] == 50
    strata = entailment["strata"]
    assert sum(s["sampled"] for s in strata) == 50
    assert sum(s["total"] for s in strata) == entailment["judgeable"] > 1_000
    assert all(s["sampled"] >= 1 for s in strata)  # every non-empty stratum represented
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 50
    assert all(line["check"] == "entailment" and line["claim"] for line in lines)
    assert {line["entailment"]["judge"] for line in lines} == {"lexical"}
    assert all(set(line["stratum"]) == {"age", "family"} for line in lines)
    _sweep(tmp_path, capsys, "--judge-sample", "50", "--judge-out", str(out))
    again = [json.loads(line) for line in out.read_text().splitlines()]
    for line in (*lines, *again):
        del line["entailment"]["seconds"]  # measured: the one thing that may differ
    assert again == lines  # the same input, seed and --now: the same sample, judged alike


def test_no_sample_by_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _sweep(tmp_path, capsys)["entailment"] is None


def test_a_bad_now_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match="2"):
        main(["sweep", "--example", "--judge-sample", "5", "--now", "yesterday"])
    assert "must be an RFC 3339 time" in capsys.readouterr().err
