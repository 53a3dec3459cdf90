"""The Grafana board by structure, and every query by a real PromQL parser (promtool)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from exporter.outputs.metrics import ExporterMetrics, SourceLabels
from mixin.dashboards import DASHBOARD_UID, panel_queries

REPO = Path(__file__).resolve().parent.parent
BOARD = json.loads((REPO / "grafana" / "dashboards" / "citation-drift.json").read_text())

# Grafana's variables, as Grafana would substitute them, for parsing the queries outside it.
_VARIABLES = {"$__rate_interval": "1m", "$__range": "1h", "$job": ".+"}
_PROMQL_WORDS = {
    "sum",
    "by",
    "without",
    "rate",
    "increase",
    "topk",
    "max",
    "min",
    "count",
    "vector",
    "changes",
    "and",
    "or",
    "unless",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "scalar",
    "histogram_quantile",
    "delta",
    "deriv",
    "time",
    "absent",
    "bool",
    "offset",
    "le",
    "mode",
    "job",
    "source",
    "status",
    "topic",
    "reason",
    "kind",
    "outcome",
    "partition",
    "inf",
}


def substitute(expr: str) -> str:
    for variable, value in _VARIABLES.items():
        expr = expr.replace(variable, value)
    return expr


def exported_names() -> set[str]:
    """Every series name the exporter exposes, plus the recording rules."""
    registry = CollectorRegistry()
    ExporterMetrics(registry, SourceLabels(), "0")
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}
    names = {
        family.name + suffix for family in registry.collect() for suffix in suffixes[family.type]
    }
    rules = yaml.safe_load((REPO / "rules" / "citation-drift.rules.yml").read_text())
    names |= {r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r}
    return names


def _panels() -> list[dict[str, Any]]:
    return [p for p in BOARD["panels"] if p["type"] != "row"]


def test_board_identity_and_datasource_variable() -> None:
    assert BOARD["uid"] == DASHBOARD_UID and BOARD["title"] == "Citation drift"
    variables = {v["name"]: v for v in BOARD["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    text = json.dumps(BOARD)
    assert "${DS_" not in text
    uids = re.findall(r'"uid": "([^"]+)"', text)
    assert set(uids) == {DASHBOARD_UID, "${datasource}"}, "no hard-coded datasource uid"


def test_every_panel_has_a_unit_a_description_and_queries() -> None:
    for panel in _panels():
        assert panel["fieldConfig"]["defaults"].get("unit"), panel["title"]
        assert panel["description"], panel["title"]
        assert panel["targets"], panel["title"]
        assert panel["datasource"]["uid"] == "${datasource}"
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}"


def test_every_rate_uses_the_rate_interval() -> None:
    for title, expr in panel_queries(BOARD):
        for window in re.findall(r"(?:rate|increase)\([^\[]*\[([^\]]+)\]", expr):
            assert window in ("$__rate_interval", "$__range"), f"{title}: [{window}]"


def test_the_board_shows_what_on_call_needs() -> None:
    titles = " | ".join(p["title"] for p in _panels()).lower()
    for wanted in (
        "drift and superseded ratios",
        "shift of repaired drift",
        "shift distribution of the sweeps",
        "similarity",
        "last sweep completed",
        "sweep duration",
        "citations per status",
        "sweep drift ratio",
        "failure reasons",
        "top sources by drift ratio",
        "consumer lag",
        "ready",
        "invalid events",
    ):
        assert wanted in titles, wanted
    heatmaps = [p for p in _panels() if p["type"] == "heatmap"]
    assert all(
        t["format"] == "heatmap" and t["legendFormat"] == "{{le}}"
        for p in heatmaps
        for t in p["targets"]
    )
    ratios = next(p for p in _panels() if p["title"].startswith("Drift and superseded"))
    exprs = [t["expr"] for t in ratios["targets"]]
    assert any("drift_failures_per_check" in e for e in exprs)
    assert any("superseded_failures_per_check" in e for e in exprs)
    assert "vector(0.02)" in exprs and "vector(0.003)" in exprs
    names = {a["name"] for a in BOARD["annotations"]["list"]}
    assert names == {"Sweep completed", "Chunker changed"}


def test_queries_name_only_exported_metrics() -> None:
    exported = exported_names()
    for title, expr in panel_queries(BOARD):
        bare = re.sub(r'"[^"]*"', "", substitute(expr))  # label values
        bare = re.sub(r"\{[^}]*\}", "", bare)  # matchers
        bare = re.sub(r"\[[^\]]*\]", "", bare)  # ranges
        for name in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", bare):
            if name.lower() in _PROMQL_WORDS:
                continue
            assert name in exported, f"{title}: {name} is not exported"


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_every_query_parses(tmp_path: Path) -> None:
    """promtool parses each query as the expression of a recording rule."""
    rules = {
        "groups": [
            {
                "name": "dashboard-queries",
                "rules": [
                    {"record": f"dashboard:query_{i}:check", "expr": substitute(expr)}
                    for i, (_, expr) in enumerate(panel_queries(BOARD))
                ],
            }
        ]
    }
    path = tmp_path / "queries.yml"
    path.write_text(yaml.safe_dump(rules))
    done = subprocess.run(
        ["promtool", "check", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_provisioning_files() -> None:
    datasources = yaml.safe_load(
        (REPO / "grafana/provisioning/datasources/prometheus.yml").read_text()
    )
    assert datasources["apiVersion"] == 1
    assert datasources["datasources"][0]["type"] == "prometheus"
    providers = yaml.safe_load(
        (REPO / "grafana/provisioning/dashboards/citation-drift.yml").read_text()
    )
    assert providers["apiVersion"] == 1 and providers["providers"][0]["type"] == "file"


def test_readme_metrics_table_lists_exactly_the_exported_metrics() -> None:
    readme = (REPO / "README.md").read_text()
    table = readme[readme.index("### Metrics") : readme.index("## Run the whole stack")]
    documented = set(re.findall(r"`(citation_[a-z_]+)`", table))
    registry = CollectorRegistry()
    ExporterMetrics(registry, SourceLabels(), "0")
    exported = {
        family.name + ("_total" if family.type == "counter" else "")
        for family in registry.collect()
    }
    assert documented == exported
