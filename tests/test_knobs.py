"""Each knob is declared once: the sweep's flags agree with the service's settings.

The sweep command and the streaming service judge citations with the same policy; a default
that drifted apart between a flag and its setting would make the gate and the alerts disagree on
the same archive. The limits' flags are generated from ``Limits`` itself; the other shared knobs
are checked here against the settings' declarations.
"""

from __future__ import annotations

import dataclasses

import pytest

from exporter.cli import _build_parser
from exporter.cli.sweep import _JUDGE_FLAGS
from exporter.records.limits import DEFAULT_LIMITS, Limits
from exporter.settings import JudgeSettings, Settings


@pytest.fixture(scope="module")
def sweep_defaults() -> dict[str, object]:
    return vars(_build_parser().parse_args(["sweep", "--example"]))


def test_every_limit_has_its_flag_with_the_declared_default(
    sweep_defaults: dict[str, object],
) -> None:
    for field in dataclasses.fields(Limits):
        assert field.name in sweep_defaults, f"no --{field.name.replace('_', '-')} flag"
        assert sweep_defaults[field.name] == getattr(DEFAULT_LIMITS, field.name), field.name


def test_the_service_reads_the_same_limits_by_default() -> None:
    assert Settings().limits == DEFAULT_LIMITS


@pytest.mark.parametrize("knob", ["threshold", "high_severity_topics", "coverage_classifier"])
def test_a_knob_the_sweep_and_the_service_share_has_one_default(
    sweep_defaults: dict[str, object], knob: str
) -> None:
    assert sweep_defaults[knob] == getattr(Settings(), knob)


def test_every_judge_flag_overrides_a_setting_of_its_name() -> None:
    declared = set(JudgeSettings.model_fields)
    assert set(_JUDGE_FLAGS) <= declared, set(_JUDGE_FLAGS) - declared
