"""The shipped rules: up to date, valid for promtool, unit-tested, and documented."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from exporter import alerting as config

REPO = Path(__file__).resolve().parent.parent
RULES = REPO / "rules" / "citation-drift.rules.yml"

needs_promtool = pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="promtool not installed (scripts/test installs Debian's prometheus package)",
)


def _rules() -> list[dict[str, object]]:
    document = yaml.safe_load(RULES.read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def test_generated_files_are_up_to_date() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mixin", "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


@needs_promtool
def test_promtool_checks_the_rules() -> None:
    done = subprocess.run(
        ["promtool", "check", "rules", str(RULES)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


@needs_promtool
def test_promtool_unit_tests_pass() -> None:
    done = subprocess.run(
        ["promtool", "test", "rules", "citation-drift.test.yml"],
        cwd=REPO / "rules" / "tests",
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_recording_rules_are_named_level_metric_operations() -> None:
    records = [r["record"] for r in _rules() if "record" in r]
    assert "citation:drift_failures_per_check:ratio_rate15m" in records
    assert "citation:superseded_failures_per_check:ratio_rate15m" in records
    assert "citation:sweep_drift_failures_per_citation:ratio" in records
    for name in records:
        assert re.fullmatch(r"[a-z_]+:[a-z_]+:[a-z0-9_]+", str(name)), name


def test_every_alert_has_severity_summary_description_and_a_runbook_in_the_readme() -> None:
    readme = (REPO / "README.md").read_text()
    anchors = {heading.strip().lower() for heading in re.findall(r"^#{2,4} (.+)$", readme, re.M)}
    alerts = [r for r in _rules() if "alert" in r]
    assert {a["alert"] for a in alerts} >= {
        "CitationDriftRateHigh",
        "CitationSweepDriftHigh",
        "CitationContentRefreshDetected",
        "CitationExporterDown",
        "CitationExporterAbsent",
        "CitationExporterNotReady",
        "CitationExporterStalled",
        "CitationInvalidEventsHigh",
        "CitationNoSweepSinceChunkerChange",
    }
    for alert in alerts:
        labels, annotations = alert["labels"], alert["annotations"]
        assert labels["severity"] in ("critical", "warning")  # type: ignore[index]
        assert "{{" not in annotations["summary"]  # type: ignore[index]
        assert "{{" in annotations["description"]  # type: ignore[index]
        runbook = annotations["runbook_url"]  # type: ignore[index]
        assert runbook == config.runbook(str(alert["alert"]))
        assert str(alert["alert"]).lower() in anchors, f"README has no runbook for {alert}"


def test_only_drift_pages() -> None:
    critical = {r["alert"] for r in _rules() if r.get("labels", {}).get("severity") == "critical"}  # type: ignore[union-attr]
    assert critical == {"CitationDriftRateHigh", "CitationSweepDriftHigh"}
