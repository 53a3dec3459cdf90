"""Sweeping in worker processes: same results, and a dead worker is an error, not a hang."""

from __future__ import annotations

import io
import os
from concurrent.futures.process import BrokenProcessPool
from datetime import UTC, datetime
from pathlib import Path

import pytest

import exporter.file_sweep
from exporter.checks.engine import Policy
from exporter.entailment.drawing import PackedCandidate, chosen_candidates
from exporter.entailment.sampling import StratifiedSample
from exporter.file_sweep import load_store, run_sweep
from exporter.pipeline.summary import SweepSummary
from exporter.simulate.files import write_scenario
from exporter.simulate.scenario import ScenarioConfig, build_scenario
from exporter.sources.jsonl import JsonLines


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_scenario(
        build_scenario(ScenarioConfig(seed=2, answers=1500, invalid_lines=2)),
        tmp_path_factory.mktemp("sweep"),
    )


def _sweep(scenario: dict[str, Path], jobs: int) -> tuple[bytes, SweepSummary]:
    summary = SweepSummary()
    store = load_store(JsonLines(str(scenario["chunks"])), summary)
    out = io.BytesIO()
    run_sweep(store, JsonLines(str(scenario["citations"])), Policy(), summary, out=out, jobs=jobs)
    return out.getvalue(), summary


def test_workers_and_in_process_agree(scenario: dict[str, Path]) -> None:
    one, one_summary = _sweep(scenario, 1)
    three, three_summary = _sweep(scenario, 3)
    assert one == three
    assert one_summary.statuses == three_summary.statuses
    assert one_summary.shifts == three_summary.shifts
    assert one_summary.errors == three_summary.errors


def _die(lines: object, thresholds: object = None) -> object:
    os._exit(3)


def test_a_dead_worker_fails_the_sweep(
    scenario: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(exporter.file_sweep, "_check_batch", _die)
    with pytest.raises(BrokenProcessPool):
        _sweep(scenario, 2)


def _sampled(scenario: dict[str, Path], jobs: int, seed: int) -> list[tuple[str, str, str]]:
    summary = SweepSummary()
    store = load_store(JsonLines(str(scenario["chunks"])), summary)
    sample: StratifiedSample[PackedCandidate] = StratifiedSample(60, seed)
    run_sweep(
        store,
        JsonLines(str(scenario["citations"])),
        Policy(judge_rate=1.0),
        summary,
        jobs=jobs,
        sample=sample,
        now=datetime(2026, 11, 30, tzinfo=UTC),
    )
    assert sum(sample.totals.values()) > 1_000
    return [
        (stratum.family, candidate.verdict.citation_id or "", candidate.judge_input.claim)
        for stratum, candidate in chosen_candidates(sample)
    ]


def test_the_judges_sample_is_the_same_in_workers_and_in_process(
    scenario: dict[str, Path],
) -> None:
    """Workers offer only candidates below the thresholds they were sent; the sample is the
    same as in one process, and changes with the seed."""
    one = _sampled(scenario, 1, seed=5)
    assert one == _sampled(scenario, 3, seed=5)
    assert len(one) == 60 and len({family for family, _, _ in one}) >= 3
    assert one != _sampled(scenario, 1, seed=6)
