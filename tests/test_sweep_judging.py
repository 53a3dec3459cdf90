"""The sweep's judged sample, end to end through the command: summary, --judge-out, flags."""

from __future__ import annotations

import argparse
import json
import os
import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REFUND_TEXT, claims_archive
from judge_server import JudgeServer, Reply, completion

from exporter.checks.verdict import Action, FailedCheck, Repair, Status, Verdict
from exporter.cli import main
from exporter.cli import sweep as sweep_command
from exporter.entailment.drawing import Candidate
from exporter.pipeline.outcome import JudgeInput
from exporter.settings import load_judge_settings
from exporter.simulate.files import write_scenario
from exporter.simulate.scenario import ScenarioConfig, build_scenario

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


def test_a_sample_of_2000_by_default_and_none_on_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    entailment = _sweep(tmp_path, capsys)["entailment"]
    assert isinstance(entailment, dict)
    assert entailment["sample_size"] == 2000 == entailment["sampled"]
    assert _sweep(tmp_path, capsys, "--judge-sample", "0")["entailment"] is None
    monkeypatch.setenv("CITATION_EXPORTER_JUDGE_SWEEP_SAMPLE", "0")  # as the service reads it
    assert _sweep(tmp_path, capsys)["entailment"] is None
    summary = _sweep(tmp_path, capsys, "--judge-sample", "7")  # a flag wins over the variable
    assert isinstance(summary["entailment"], dict) and summary["entailment"]["sampled"] == 7


def _no_judge_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("CITATION_EXPORTER_JUDGE"):
            monkeypatch.delenv(name)


def test_a_sweep_nobody_configured_judges_as_the_settings_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the sweep skips loading the service's settings then; their defaults must agree
    _no_judge_variables(monkeypatch)
    no_flags = argparse.Namespace(**dict.fromkeys(sweep_command._JUDGE_FLAGS))
    assert sweep_command._sweep_judging(no_flags) == load_judge_settings({}).sweep_judging


@pytest.mark.parametrize(
    "variable", ["CITATION_EXPORTER_JUDGE_SWEEP_SAMPLE", "citation_exporter_judge_sweep_sample"]
)
def test_a_judge_variable_in_any_case_is_read(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
) -> None:
    _no_judge_variables(monkeypatch)
    monkeypatch.setenv(variable, "0")
    assert _sweep(tmp_path, capsys)["entailment"] is None


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("CITATION_EXPORTER_JUDGE_SWEEP_SAMPLE", "lots", "judge_sweep_sample"),
        ("CITATION_EXPORTER_JUDGE_TIMEOUT_SECONDS", "-1", "judge_timeout_seconds"),
        ("CITATION_EXPORTER_JUDGE_SWEEP_BUDGET_USD", "inf", "judge_sweep_budget_usd"),
        ("CITATION_EXPORTER_JUDGE_MODLE", "m", "did you mean CITATION_EXPORTER_JUDGE_MODEL"),
    ],
)
def test_a_bad_judge_variable_is_named_before_the_sweep(
    variable: str,
    value: str,
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SystemExit, match="2"):
        main(["sweep", "--example"])
    error = capsys.readouterr().err
    assert message in error and error.count("\n") <= 2


def test_a_judge_out_without_a_sample_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "judged.jsonl"
    with pytest.raises(SystemExit, match="2"):
        main(["sweep", "--example", "--judge-sample", "0", "--judge-out", str(out)])
    assert "--judge-out needs a sample to judge" in capsys.readouterr().err
    assert not out.exists()


def test_the_service_s_other_variables_do_not_concern_the_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CITATION_EXPORTER_METRICS_PORT", "not a port")
    monkeypatch.setenv("CITATION_EXPORTER_JUDGE_SWEEP_SAMPLE", "30")
    summary = _sweep(tmp_path, capsys)
    assert isinstance(summary["entailment"], dict) and summary["entailment"]["sampled"] == 30


def test_judged_citations_on_standard_output_send_the_summary_to_standard_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["sweep", "--example", "--judge-sample", "5", "--judge-out", "-", "--now", NOW])
    assert code == 1
    captured = capsys.readouterr()
    lines = [json.loads(line) for line in captured.out.splitlines()]
    assert len(lines) == 5 and {line["check"] for line in lines} == {"entailment"}
    assert "drift ratio" in captured.err


def test_a_bad_now_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match="2"):
        main(["sweep", "--example", "--judge-sample", "5", "--now", "yesterday"])
    assert "must be an RFC 3339 time" in capsys.readouterr().err


TEXT = REFUND_TEXT


@pytest.fixture
def judge_server() -> Iterator[JudgeServer]:
    running = JudgeServer(
        Reply(
            body=completion(
                "not_entailed",
                usage={"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105},
            )
        )
    ).start()
    try:
        yield running
    finally:
        running.stop()


def test_the_model_judge_is_asked_what_the_lexical_judge_cannot_settle_within_budget(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    judge_server: JudgeServer,
) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CITATION_EXPORTER_JUDGE_API_KEY", "sk-test-key-42")
    monkeypatch.setenv("CITATION_EXPORTER_JUDGE_PRICE_INPUT_PER_1K", "0.5")
    monkeypatch.setenv("CITATION_EXPORTER_JUDGE_PRICE_OUTPUT_PER_1K", "1.5")
    monkeypatch.setenv("CITATION_EXPORTER_JUDGE_CONCURRENCY", "1")
    claims = [
        "Refunds take 60 days.",  # the lexical judge settles it: not entailed
        "You get your money back within a month of buying.",  # paraphrases: the model's
        "Money is returned to customers within thirty days.",
        "Purchases can be refunded for a while.",
        "A refund arrives some weeks after a purchase.",
    ]
    chunks, citations = claims_archive(tmp_path, claims)
    out = tmp_path / "judged.jsonl"
    base = ["sweep", "--chunks", str(chunks), "--citations", str(citations), "--jobs", "1"]
    judging = ["--judge-sample", "10", "--judge", "openai", "--judge-model", "test-model"]
    code = main(
        [
            *base,
            *judging,
            "--judge-base-url",
            judge_server.base_url,
            "--judge-budget-usd",
            "0.1",
            "--judge-out",
            str(out),
            "--format",
            "json",
        ]
    )
    assert code == 0
    entailment = json.loads(capsys.readouterr().out)["entailment"]
    # 0.0575 a call: the first two calls spend 0.115 and the budget stops the rest
    assert entailment["calls"] == 2 == len(judge_server.requests)
    assert entailment["tokens"] == {"prompt": 200, "completion": 10}
    assert entailment["cost_usd"] == pytest.approx(0.115)
    assert entailment["results"] == {
        "entailed": 0,
        "not_entailed": 3,
        "unknown": 0,
        "error": 0,
        "skipped": 2,
    }
    judged = {line["citation_id"]: line for line in map(json.loads, out.read_text().splitlines())}
    assert judged["c0"]["entailment"]["judge"] == "lexical"
    asked = [judged[c]["entailment"] for c in ("c1", "c2", "c3", "c4")]
    assert {e["judge"] for e in asked} == {"openai"}
    assert sorted(e["result"] for e in asked) == [
        "not_entailed",
        "not_entailed",
        "skipped",
        "skipped",
    ]
    assert [e["reason"] for e in asked if e["result"] == "skipped"] == ["budget", "budget"]
    assert all(
        e["action"] == ("suppress_claim" if judged[c]["topic"] == "pricing" else "flag_for_review")
        for c, e in zip(("c1", "c2", "c3", "c4"), asked, strict=True)
        if e["result"] == "not_entailed"
    )
    assert all(
        r.headers.get("authorization") == "Bearer sk-test-key-42" for r in judge_server.requests
    )
    assert "sk-test-key-42" not in out.read_text()


def test_the_openai_judge_needs_its_endpoint_before_the_sweep_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit, match="2"):
        main(["sweep", "--example", "--judge-sample", "5", "--judge", "openai"])
    error = capsys.readouterr().err
    assert "judge openai needs judge_base_url and judge_model" in error
    assert "--judge* flags" in error


def test_the_lexical_judge_flags_exactly_the_simulated_misclaims(tmp_path: Path) -> None:
    """The scenario misstates a number in 2% of cited claims: judging every judgeable citation,
    the lexical judge flags those and nothing else."""
    paths = write_scenario(build_scenario(ScenarioConfig(seed=8, answers=1500)), tmp_path)
    out = tmp_path / "judged.jsonl"
    code = main(
        [
            "sweep", "--chunks", str(paths["chunks"]), "--citations", str(paths["citations"]),
            "--judge-sample", "10000", "--judge-out", str(out), "--now", NOW, "--jobs", "2",
        ]
    )  # fmt: skip
    assert code == 1
    judged = {
        line["citation_id"]: line["entailment"]["result"]
        for line in map(json.loads, out.read_text().splitlines())
    }
    misclaims = {json.loads(line)["citation_id"] for line in paths["misclaims"].open()}
    flagged = {citation for citation, result in judged.items() if result == "not_entailed"}
    assert flagged == misclaims & set(judged) and len(flagged) > 20


@pytest.mark.parametrize("budget", ["-1", "nan", "inf", "ten"])
def test_a_budget_must_be_dollars(budget: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match="2"):
        main(["sweep", "--example", "--judge-sample", "5", "--judge-budget-usd", budget])
    assert "must be an amount of dollars" in capsys.readouterr().err


def test_the_judged_sample_may_not_overwrite_another_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    same = str(tmp_path / "same.jsonl")
    with pytest.raises(SystemExit, match="2"):
        main(["sweep", "--example", "--judge-sample", "5", "--out", same, "--judge-out", same])
    assert "--out and --judge-out name the same file" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="2"):
        main(
            ["sweep", "--example", "--judge-sample", "5", "--coverage-out", "-", "--judge-out", "-"]
        )
    assert "only one of --coverage-out and --judge-out" in capsys.readouterr().err


def test_a_candidate_crosses_processes_whole() -> None:
    """Candidates travel from worker processes as plain tuples: every field comes back."""
    verdict = Verdict(
        "c1", "a1", "d1", Status.DRIFT_REPAIRED, Action.REWRITE_OFFSETS, "quote_mismatch",
        FailedCheck.QUOTE_MISMATCH, 97.5, "v1", "v2", Repair("d1#3", 4, 40, 99.0, "exact", -12),
        "pricing", "help-center", None,
    )  # fmt: skip
    candidate = Candidate(7, verdict, JudgeInput("claim", "d1#3", 4, 40, "2026-11-01", "x", 36, 7))
    packed = pickle.loads(pickle.dumps(candidate.pack()))
    assert Candidate.unpack(packed) == candidate
    assert not any(isinstance(value, Verdict | Repair | JudgeInput) for value in packed)


def test_a_long_claim_is_kept_for_the_judge_only_in_part(tmp_path: Path) -> None:
    """A sweep's sample holds thousands of claims: a megabyte of claim keeps 2,000 characters
    (the lexical judge reads at most 1,000, and says unknown to more)."""
    chunks, citations = claims_archive(tmp_path, ["Refunds take 60 days. " + "x" * 1_000_000])
    out = tmp_path / "judged.jsonl"
    files = ["--chunks", str(chunks), "--citations", str(citations)]
    assert main(["sweep", *files, "--judge-out", str(out), "--jobs", "1"]) == 0
    (judged,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert judged["claim"].startswith("Refunds take 60 days. xxx")
    assert judged["claim"].endswith(" [truncated]") and len(judged["claim"]) == 2_012
    assert judged["entailment"]["result"] == "unknown"
