"""The Grafana board by structure, and every query by a real PromQL parser (promtool); the
board of another deployment's config too."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kafka_support import free_port
from monitoring_support import (
    ANOTHER_DEPLOYMENT,
    MonitoringStack,
    grafana_substitute,
    render_mixin,
    series_selectors,
)
from prometheus_client import CollectorRegistry, start_http_server

from exporter import alerting
from exporter.outputs.metrics import ExporterMetrics, SourceLabels
from mixin.config import DEFAULT
from mixin.dashboards import panel_queries

REPO = Path(__file__).resolve().parent.parent
BOARD_FILE = Path("grafana") / "dashboards" / "citation-drift.json"
BOARD = json.loads((REPO / BOARD_FILE).read_text())
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
    "judge",
    "result",
    "direction",
}


@pytest.fixture(scope="module")
def another(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What `python -m mixin --config` renders for another deployment."""
    return render_mixin(tmp_path_factory.mktemp("another"), ANOTHER_DEPLOYMENT)


@pytest.fixture(scope="module")
def another_board(another: Path) -> dict[str, Any]:
    board: dict[str, Any] = json.loads((another / BOARD_FILE).read_text())
    return board


def substitute(expr: str) -> str:
    return grafana_substitute(expr, BOARD)


def exported_names(repo: Path = REPO) -> set[str]:
    """Every series name the exporter exposes, plus the recording rules rendered into repo."""
    registry = CollectorRegistry()
    ExporterMetrics(registry, SourceLabels(), "0")
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}
    names = {
        family.name + suffix for family in registry.collect() for suffix in suffixes[family.type]
    }
    rules = yaml.safe_load((repo / "rules" / "citation-drift.rules.yml").read_text())
    names |= {r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r}
    return names


def _panels() -> list[dict[str, Any]]:
    return [p for p in BOARD["panels"] if p["type"] != "row"]


def test_board_identity_and_datasource_variable() -> None:
    assert BOARD["uid"] == DEFAULT.dashboard_uid == "citation-drift"
    assert BOARD["title"] == "Citation drift" and BOARD["refresh"] == "30s"
    variables = {v["name"]: v for v in BOARD["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["datasource"]["current"]["value"] == "Prometheus"
    text = json.dumps(BOARD)
    assert "${DS_" not in text
    uids = re.findall(r'"uid": "([^"]+)"', text)
    assert set(uids) == {DEFAULT.dashboard_uid, "${datasource}"}, "no hard-coded datasource uid"


def test_instance_variable_lists_the_exporters_of_the_job() -> None:
    variables = [v["name"] for v in BOARD["templating"]["list"]]
    assert variables == ["datasource", "instance"]
    instance = BOARD["templating"]["list"][-1]
    assert instance["type"] == "query" and instance["multi"] and instance["includeAll"]
    assert instance["definition"] == (
        'label_values(citation_exporter_build_info{job="citation-drift-exporter"}, instance)'
    )
    assert instance["query"]["query"] == instance["definition"]


def _assert_every_selector_filters(board: dict[str, Any], names: set[str], *matchers: str) -> None:
    for title, expr in panel_queries(board):
        selectors = series_selectors(expr, names)
        assert selectors or expr.startswith("vector("), f"{title}: {expr} selects nothing"
        for metric, found in selectors:
            for matcher in matchers:
                assert matcher in found, f"{title}: {metric} lacks {matcher}"


def test_every_query_selects_the_job_and_the_instances() -> None:
    _assert_every_selector_filters(
        BOARD, exported_names(), 'job="citation-drift-exporter"', 'instance=~"$instance"'
    )


def test_another_deployments_board(another: Path, another_board: dict[str, Any]) -> None:
    """Its uid and job, and a variable per aggregation label that filters every query."""
    assert another_board["uid"] == "citations-prod"
    variables = {v["name"]: v for v in another_board["templating"]["list"]}
    assert list(variables) == ["datasource", "namespace", "instance"]
    assert variables["namespace"]["definition"] == (
        'label_values(citation_exporter_build_info{job="citations-prod"}, namespace)'
    )
    assert variables["instance"]["definition"] == (
        "label_values(citation_exporter_build_info"
        '{job="citations-prod", namespace=~"$namespace"}, instance)'
    )
    _assert_every_selector_filters(
        another_board,
        exported_names(another),
        'job="citations-prod"',
        'namespace=~"$namespace"',
        'instance=~"$instance"',
    )
    ratios = next(p for p in another_board["panels"] if p["title"].startswith("Drift and"))
    assert ratios["title"] == "Drift and superseded ratios (inline, 30 minutes)"
    assert "sum by (namespace, job)" in ratios["targets"][0]["expr"]
    assert "rate30m" in ratios["targets"][0]["expr"]


def test_every_panel_has_a_unit_a_description_and_queries() -> None:
    for panel in _panels():
        assert panel["fieldConfig"]["defaults"].get("unit"), panel["title"]
        assert panel["description"], panel["title"]
        assert panel["targets"], panel["title"]
        assert panel["datasource"]["uid"] == "${datasource}"
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}"


def test_every_rate_window_is_grafanas_and_heatmap_cells_do_not_overlap() -> None:
    heatmaps = {p["title"] for p in _panels() if p["type"] == "heatmap"}
    assert len(heatmaps) == 2
    for title, expr in panel_queries(BOARD):
        windows = re.findall(r"(?:rate|increase)\([^\[]*\[([^\]]+)\]", expr)
        for window in windows:
            if title in heatmaps:
                # one cell per step: $__rate_interval would overlap cells and inflate counts
                assert expr.startswith("sum by (le) (increase(") and window == "$__interval"
            else:
                assert window in ("$__rate_interval", "$__range"), f"{title}: [{window}]"
    for panel in _panels():
        if panel["type"] == "heatmap":
            # $__interval never below two scrapes (15 s), so every cell has an increase
            assert panel["interval"] == DEFAULT.heatmap_min_interval == "1m"


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
        "sweep drift and missing documents",
        "failure reasons",
        "top sources by drift ratio",
        "consumer lag",
        "ready",
        "invalid events",
        "uncited claims per claim sentence",
        "uncited claims by topic",
        "not entailed per judged citation",
        "entailment results by judge",
        "model judge cost",
        "model judge tokens",
        "judge latency",
        "judge queue depth",
        "samples dropped by reason",
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
    # the alert's ratios, summed per job from the per-instance rules (so $instance applies)
    assert any("instance:citation_drift_failures:rate15m" in e for e in exprs)
    assert any("instance:citation_superseded_failures:rate15m" in e for e in exprs)
    assert "vector(0.02)" in exprs and "vector(0.003)" in exprs
    names = {a["name"] for a in BOARD["annotations"]["list"]}
    assert names == {"Sweep completed", "Chunker changed"}


def test_the_coverage_row_sits_between_the_sweep_and_the_exporters_health() -> None:
    rows = [p["title"] for p in BOARD["panels"] if p["type"] == "row"]
    assert rows == [
        "Drift since the deploy",
        "Last sweep",
        "Coverage",
        "Entailment",
        "Where and the exporter's health",
    ]
    ratio = next(p for p in _panels() if p["title"].startswith("Uncited claims per claim"))
    assert ratio["title"] == "Uncited claims per claim sentence (inline, 1 hour)"
    exprs = [t["expr"] for t in ratio["targets"]]
    # the alert's ratio, summed per job from the per-instance rules (so $instance applies)
    assert "instance:citation_uncited_claims:rate1h" in exprs[0]
    assert "instance:citation_answer_claim_sentences:rate1h" in exprs[0]
    ticket = alerting.UNCITED_CLAIMS_RATIO_TICKET
    assert exprs[1] == f"vector({ticket})"
    steps = ratio["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert steps[-1]["value"] == ticket
    topics = next(p for p in _panels() if p["title"].startswith("Uncited claims by topic"))
    [target] = topics["targets"]
    assert target["expr"].startswith("topk(10,") and target["instant"]
    assert 'citation_uncited_claims_total{mode="inline", ' in target["expr"]


def _row_panels(title: str) -> list[dict[str, Any]]:
    """The panels below the row ``title``, up to the next row."""
    panels, inside = [], False
    for panel in BOARD["panels"]:
        if panel["type"] == "row":
            inside = panel["title"] == title
        elif inside:
            panels.append(panel)
    return panels


def test_the_entailment_row_shows_the_judge_and_no_threshold_on_its_verdicts() -> None:
    panels = {p["title"]: p for p in _row_panels("Entailment")}
    assert list(panels) == [
        "Not entailed per judged citation (inline, 1 hour)",
        "Entailment results by judge (inline)",
        "Model judge cost ($/h)",
        "Model judge tokens per second",
        "Judge latency p50 and p99",
        "Judge queue depth",
        "Samples dropped by reason",
    ]
    ratio = panels["Not entailed per judged citation (inline, 1 hour)"]
    [target] = ratio["targets"]
    # the recorded ratio's parts, summed per job from the per-instance rules ($instance applies)
    assert target["expr"] == (
        "sum by (job) (instance:citation_entailment_not_entailed:rate1h"
        '{job="citation-drift-exporter", instance=~"$instance"})\n/\n'
        "sum by (job) (instance:citation_entailment_judged:rate1h"
        '{job="citation-drift-exporter", instance=~"$instance"})'
    )
    # board only: no alert reads it, so no threshold line or colour step on it
    assert "thresholds" not in ratio["fieldConfig"]["defaults"]
    assert "a judge errs" in ratio["description"].lower()
    results = panels["Entailment results by judge (inline)"]
    assert results["targets"][0]["expr"].startswith(
        'sum by (judge, result) (rate(citation_entailment_checks_total{mode="inline", '
    )
    assert results["fieldConfig"]["defaults"]["custom"]["stacking"]["mode"] == "normal"
    cost = panels["Model judge cost ($/h)"]
    assert cost["targets"][0]["expr"].endswith("[$__rate_interval])) * 3600")
    assert cost["fieldConfig"]["defaults"]["unit"] == "currencyUSD"
    latency = panels["Judge latency p50 and p99"]
    assert [t["expr"].split(",")[0] for t in latency["targets"]] == [
        "histogram_quantile(0.5",
        "histogram_quantile(0.99",
    ]
    assert all("sum by (judge, le)" in t["expr"] for t in latency["targets"])
    assert [t["legendFormat"] for t in latency["targets"]] == ["p50 {{judge}}", "p99 {{judge}}"]
    drops = panels["Samples dropped by reason"]
    assert "citation_entailment_dropped_total" in drops["targets"][0]["expr"]
    assert "citation_entailment_queue_depth" in panels["Judge queue depth"]["targets"][0]["expr"]


@pytest.mark.skipif(
    shutil.which("prometheus") is None, reason="Prometheus and Alertmanager not installed"
)
def test_the_entailment_rows_queries_return_data_with_every_series_at_zero(
    tmp_path: Path,
) -> None:
    """What the e2e test asks of every board query, for the Entailment row, without Kafka: a
    real Prometheus with the shipped rules scrapes the exporter's metrics as they start (every
    entailment series at 0, nothing judged yet). 0/0 and a quantile of empty buckets are NaN,
    which is data; a query that filtered its result away or read a series the exporter does
    not start would return nothing."""
    registry = CollectorRegistry()
    ExporterMetrics(registry, SourceLabels(), "0")
    port = free_port()
    server, _ = start_http_server(port, addr="127.0.0.1", registry=registry)
    stack = MonitoringStack(tmp_path, port, DEFAULT.job)
    try:
        stack.wait_ready()
        queries = [
            (panel["title"], grafana_substitute(target["expr"], BOARD, range_="5m"))
            for panel in _row_panels("Entailment")
            for target in panel["targets"]
        ]
        empty = queries
        deadline = time.monotonic() + 30
        while empty and time.monotonic() < deadline:
            time.sleep(1)  # rates and the recorded ratio need a second scrape and evaluation
            empty = [(title, expr) for title, expr in empty if not stack.query(expr)]
        assert not empty, f"queries without data: {empty}"
    finally:
        stack.stop()
        server.shutdown()
        server.server_close()


def test_panels_tile_the_board_without_overlapping() -> None:
    """Rows span the width; every panel lies within 24 columns, below its row and above
    the next one, and no two panels share a cell."""
    taken: dict[tuple[int, int], str] = {}
    row_y, rows = -1, [p["gridPos"]["y"] for p in BOARD["panels"] if p["type"] == "row"]
    for panel in BOARD["panels"]:
        grid = panel["gridPos"]
        if panel["type"] == "row":
            assert grid["x"] == 0 and grid["w"] == 24 and grid["h"] == 1, panel["title"]
            row_y = grid["y"]
        else:
            assert grid["y"] > row_y and grid["x"] + grid["w"] <= 24, panel["title"]
            next_row = min((y for y in rows if y > row_y), default=None)
            if next_row is not None:
                assert grid["y"] + grid["h"] <= next_row, f"{panel['title']} runs into a row"
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in taken, f"{panel['title']} overlaps {taken[(x, y)]}"
                taken[(x, y)] = panel["title"]


def test_queries_name_only_exported_metrics() -> None:
    exported = exported_names()
    for title, expr in panel_queries(BOARD):
        bare = re.sub(r'"[^"]*"', "", substitute(expr))  # label values
        bare = re.sub(r"\{[^}]*\}", "", bare)  # matchers
        bare = re.sub(r"\[[^\]]*\]", "", bare)  # ranges
        # the label names of a grouping or a vector match
        bare = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", bare)
        for name in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", bare):
            if name.lower() in _PROMQL_WORDS:
                continue
            assert name in exported, f"{title}: {name} is not exported"


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_every_query_parses(tmp_path: Path, another_board: dict[str, Any]) -> None:
    """promtool parses each query of both boards as the expression of a recording rule."""
    exprs = [substitute(expr) for _, expr in panel_queries(BOARD)]
    exprs += [grafana_substitute(expr, another_board) for _, expr in panel_queries(another_board)]
    rules = {
        "groups": [
            {
                "name": "dashboard-queries",
                "rules": [
                    {"record": f"dashboard:query_{i}:check", "expr": expr}
                    for i, expr in enumerate(exprs)
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


def test_the_docs_metrics_table_lists_exactly_the_exported_metrics() -> None:
    page = (REPO / "docs" / "exporter.md").read_text()
    start = page.index("## Metrics\n")
    table = page[start : page.index("\n## ", start + 1)]
    documented = set(re.findall(r"`(citation_[a-z_]+)`", table))
    registry = CollectorRegistry()
    ExporterMetrics(registry, SourceLabels(), "0")
    exported = {
        family.name + ("_total" if family.type == "counter" else "")
        for family in registry.collect()
    }
    assert documented == exported
