"""Every ratio a person types reads ``1%`` and ``0.01`` alike, and refuses a bare 1 or more.

Reproduces issue 22, part 3: ``--fail-above 1``, meant as 1%, was read as 100% (exit 0 at 10.6%
drift), and ``--fail-above 1%`` was refused.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import sweep_json
from hypothesis import given
from hypothesis import strategies as st

from exporter.defaults import ratio_value
from exporter.settings import SettingsError, load_judge_settings, load_settings
from exporter.simulate.files import write_scenario
from exporter.simulate.scenario import ScenarioConfig, build_scenario


@pytest.fixture(scope="module")
def drifting(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A scenario whose drift ratio is far above 1% and far below 100%."""
    out = tmp_path_factory.mktemp("ratios")
    return write_scenario(build_scenario(ScenarioConfig(documents=60, seed=3)), out)


def _gate(
    scenario: dict[str, Path], fail_above: str, capsys: pytest.CaptureFixture[str]
) -> dict[str, Any]:
    code, summary = sweep_json(scenario, capsys, "--fail-above", fail_above)
    return summary | {"exit": code}


@pytest.mark.parametrize("typed", ["1%", "0.01", " 1 %", "1.0%"])
def test_one_percent_is_read_as_one_percent_however_it_is_written(
    drifting: dict[str, Path], typed: str, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = _gate(drifting, typed, capsys)
    assert 0.05 < summary["drift_ratio"] < 0.5  # the scenario drifts well above the line
    assert summary["fail_above"] == pytest.approx(0.01)
    assert summary["exit"] == 1


def test_a_bare_one_is_refused_naming_both_readings(
    drifting: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        _gate(drifting, "1", capsys)
    assert stopped.value.code == 2
    [line] = capsys.readouterr().err.strip().splitlines()[-1:]
    assert "--fail-above" in line
    assert "1 would mean 100%: write 1% or 0.01" in line


@pytest.mark.parametrize(
    ("command", "option"),
    [
        (["report", "VERDICTS", "--out", "x.html"], "--fail-above"),
        (["report", "VERDICTS", "--out", "x.html"], "--reviewer-catch-rate"),
        (["simulate", "--out", "DIR"], "--resize-share"),
        (["simulate", "--out", "DIR"], "--hint-share"),
    ],
)
def test_every_ratio_option_reads_percentages_and_refuses_a_bare_one(
    command: list[str], option: str, tmp_path: Path
) -> None:
    args = [a.replace("VERDICTS", str(tmp_path / "none.jsonl")) for a in command]
    args = [a.replace("DIR", str(tmp_path / "out")) for a in args]
    refused = subprocess.run(
        [sys.executable, "-m", "exporter.cli", *args, option, "2"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert refused.returncode == 2
    assert f"{option}: 2 would mean 200%: write 2% or 0.02" in refused.stderr


def test_the_judge_sample_rate_variable_reads_percentages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CITATION_EXPORTER_JUDGE_SAMPLE_RATE", "5%")
    assert load_judge_settings({}).judge_sample_rate == pytest.approx(0.05)
    monkeypatch.setenv("CITATION_EXPORTER_JUDGE_SAMPLE_RATE", "0.05")
    assert load_judge_settings({}).judge_sample_rate == pytest.approx(0.05)
    monkeypatch.setenv("CITATION_EXPORTER_JUDGE_SAMPLE_RATE", "1")
    with pytest.raises(SettingsError, match=r"1 would mean 100%: write 1% or 0\.01"):
        load_judge_settings({})


@given(st.floats(min_value=0.0, max_value=1.0, exclude_max=True))
def test_a_share_reads_the_same_as_its_percentage(share: float) -> None:
    assert ratio_value(repr(share)) == share
    assert ratio_value(f"{share * 100!r}%") == pytest.approx(share, abs=1e-12)


@given(st.text(max_size=60))
def test_any_text_is_a_ratio_in_range_or_one_short_error(text: str) -> None:
    try:
        value = ratio_value(text)
    except ValueError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 160
    else:
        assert 0.0 <= value <= 1.0


@pytest.mark.parametrize("typed", ["100%", "0%", "0", "0.999"])
def test_the_ends_of_the_range_are_written_as_people_write_them(typed: str) -> None:
    assert 0.0 <= ratio_value(typed) <= 1.0


@pytest.mark.parametrize(
    ("percent", "share"), [("0.7%", "0.007"), ("14.3%", "0.143"), ("99.9%", "0.999")]
)
def test_a_percentage_is_exactly_the_share_it_names(percent: str, share: str) -> None:
    """0.7 / 100 in floating point is 0.006999...: a line typed as 0.7% failed a sweep at exactly
    0.7% that the same line typed as 0.007 passed (found by a hostile review)."""
    assert ratio_value(percent) == ratio_value(share)


@pytest.mark.parametrize("typed", ["0.5" + "0" * 40 + "%", "1_0%", "\u0665%", "nan", "0x1p-3"])
def test_what_is_not_a_decimal_in_ascii_digits_is_refused(typed: str) -> None:
    with pytest.raises(ValueError, match="must be a ratio"):
        ratio_value(typed)


@pytest.mark.parametrize(
    "written",
    ["1" + "0" * 400, "-" + "1" * 400, "1e400", "inf", "nan", "true", "[0.5]", '"50"', "2"],
)
def test_a_ratio_in_a_toml_file_is_read_or_refused_in_one_line(
    written: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever a TOML file holds for a ratio (an integer of 400 digits overflowed a float and
    crashed the settings with a traceback), the value is refused naming the setting."""
    monkeypatch.delenv("CITATION_EXPORTER_JUDGE_SAMPLE_RATE", raising=False)
    config = tmp_path / "exporter.toml"
    config.write_text(f"judge_sample_rate = {written}\n")
    with pytest.raises(SettingsError) as refused:
        load_settings(config)
    message = str(refused.value)
    assert "judge_sample_rate" in message and "\n" not in message and len(message) < 400


@given(st.one_of(st.integers(), st.floats(allow_nan=True), st.booleans()))
def test_any_number_is_a_ratio_in_range_or_one_short_error(value: float) -> None:
    try:
        share = ratio_value(value)
    except ValueError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 160
    else:
        assert 0.0 <= share < 1.0
