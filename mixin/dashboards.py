"""The "Citation drift" board, for the minutes after a parser or chunker deploy.

Built as plain Grafana dashboard JSON (schema 39) from small helpers, so the committed JSON is
reviewable and every query can be tested against a real Prometheus. Every panel reads the
``datasource`` variable (no datasource uid is hard-coded), every series selector carries the
config's job selector and the ``instance`` variable (and one variable per aggregation label),
every rate uses ``$__rate_interval``, heatmaps ``increase()`` over ``$__interval`` (cells that
do not overlap, so counts are not inflated), and every panel has a unit.
"""

from __future__ import annotations

from typing import Any

from exporter import alerting as c
from mixin.config import DEFAULT, MixinConfig
from mixin.rules import Names, spoken

__all__ = ["citation_drift_dashboard", "panel_queries"]

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def _target(
    expr: str, legend: str = "", *, ref: str = "A", instant: bool = False, heatmap: bool = False
) -> dict[str, Any]:
    target: dict[str, Any] = {
        "datasource": DATASOURCE,
        "expr": expr,
        "legendFormat": legend or "__auto",
        "refId": ref,
        "range": not instant,
        "instant": instant,
    }
    if heatmap:
        target["format"] = "heatmap"
    return target


def _panel(  # noqa: PLR0917 - read like a table of panels
    kind: str,
    title: str,
    description: str,
    targets: list[dict[str, Any]],
    unit: str,
    grid: tuple[int, int, int, int],
    **extra: Any,
) -> dict[str, Any]:
    x, y, w, h = grid
    for i, target in enumerate(targets):
        target["refId"] = chr(ord("A") + i)
    defaults: dict[str, Any] = {"unit": unit}
    defaults.update(extra.pop("defaults", {}))
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "targets": targets,
        "fieldConfig": {"defaults": defaults, "overrides": extra.pop("overrides", [])},
        "options": extra.pop("options", {}),
        **extra,
    }


def _thresholds(*steps: tuple[float | None, str]) -> dict[str, Any]:
    return {
        "mode": "absolute",
        "steps": [{"value": value, "color": color} for value, color in steps],
    }


def _row(title: str, y: int) -> dict[str, Any]:
    return {
        "type": "row",
        "title": title,
        "collapsed": False,
        "gridPos": {"x": 0, "y": y, "w": 24, "h": 1},
        "panels": [],
    }


def _heatmap(  # noqa: PLR0917 - read like a table of panels
    title: str,
    description: str,
    expr: str,
    unit: str,
    grid: tuple[int, int, int, int],
    min_interval: str,
) -> dict[str, Any]:
    return _panel(
        "heatmap",
        title,
        description,
        [_target(expr, "{{le}}", heatmap=True)],
        unit,
        grid,
        # $__interval is never shorter than this, so each cell holds two scrapes or more
        interval=min_interval,
        options={
            "calculate": False,
            "yAxis": {"unit": unit},
            "cellGap": 1,
            "color": {"mode": "scheme", "scheme": "Oranges", "exponent": 0.5},
            "tooltip": {"mode": "single", "yHistogram": True},
        },
    )


class _Queries:
    """The selectors and label lists every query of one config's board is built from."""

    def __init__(self, config: MixinConfig) -> None:
        filters = [f'{label}=~"${label}"' for label in config.aggregation_labels]
        # every series selector: the job, each aggregation label's variable, the instances
        self.select = ", ".join([config.selector, *filters, 'instance=~"$instance"'])
        self.inline = f'mode="inline", {self.select}'
        self.by = config.by()
        self.legend = " ".join(f"{{{{{label}}}}}" for label in (*config.aggregation_labels, "job"))
        names = Names(config)
        self.drift = self._ratio(names.instance_drift, names.instance_checks)
        self.superseded = self._ratio(names.instance_superseded, names.instance_checks)
        self.uncited = self._ratio(names.instance_uncited, names.instance_claims)
        self.not_entailed = self._ratio(names.instance_not_entailed, names.instance_judged)

    def _ratio(self, numerator: str, denominator: str) -> str:
        """Summed per job from the per-instance rules, so the instance filter applies."""
        return (
            f"sum by {self.by} ({numerator}{{{self.select}}})\n/\n"
            f"sum by {self.by} ({denominator}{{{self.select}}})"
        )


def _panels(config: MixinConfig) -> list[dict[str, Any]]:
    q = _Queries(config)
    select, inline, window = q.select, q.inline, spoken(config.rate_window)
    page, baseline = c.DRIFT_RATIO_PAGE, c.DRIFT_RATIO_BASELINE
    ticket, coverage_window = c.UNCITED_CLAIMS_RATIO_TICKET, spoken(config.coverage_window)
    entailment_window, errors_ticket = spoken(config.entailment_window), c.JUDGE_ERRORS_RATIO_TICKET
    return [
        _row("Drift since the deploy", 0),
        _panel(
            "timeseries",
            f"Drift and superseded ratios (inline, {window})",
            "Drift (the span lost its quote on the live document version) and superseded (the "
            "document was reissued) are separate series: a content refresh raises superseded, "
            f"never drift. Drift pages above {page:.0%}; it normally runs at about "
            f"{baseline:.1%}.",
            [
                _target(q.drift, f"drift {q.legend}"),
                _target(q.superseded, f"superseded {q.legend}"),
                _target(f"vector({page})", f"page threshold {page:.0%}"),
                _target(f"vector({baseline})", f"baseline {baseline:.1%}"),
            ],
            "percentunit",
            (0, 1, 16, 9),
            defaults={
                "min": 0,
                "custom": {"thresholdsStyle": {"mode": "line"}},
                "thresholds": _thresholds((None, "green"), (page, "red")),
            },
        ),
        _panel(
            "stat",
            f"Drift ratio, last {window}",
            f"Inline drift ratio. Pages above {page:.0%} with enough traffic.",
            [_target(q.drift, q.legend)],
            "percentunit",
            (16, 1, 8, 4),
            defaults={
                "thresholds": _thresholds((None, "green"), (baseline * 2, "yellow"), (page, "red")),
                "decimals": 2,
            },
            options={"colorMode": "background", "reduceOptions": {"calcs": ["lastNotNull"]}},
        ),
        _panel(
            "stat",
            "Drift ratio, right now",
            "Drift over the last few scrapes: reacts within a minute of a deploy.",
            [
                _target(
                    f"sum(rate(citation_drift_failures_total{{{inline}}}[$__rate_interval]))\n/\n"
                    f"sum(rate(citation_checks_total{{{inline}}}[$__rate_interval]))"
                )
            ],
            "percentunit",
            (16, 5, 8, 5),
            defaults={"thresholds": _thresholds((None, "green"), (page, "red")), "decimals": 2},
            options={
                "colorMode": "value",
                "graphMode": "area",
                "reduceOptions": {"calcs": ["lastNotNull"]},
            },
        ),
        _heatmap(
            "Shift of repaired drift over time",
            "Signed shift (characters) of every repaired citation: where the quote is now minus "
            "where its span points. A chunk-size change shows as one bright band; scattered "
            "cells mean many unrelated causes.",
            f"sum by (le) (increase(citation_offset_shift_characters_bucket{{{inline}}}"
            "[$__interval]))",
            "short",
            (0, 10, 12, 9),
            config.heatmap_min_interval,
        ),
        _panel(
            "barchart",
            "Shift distribution of the sweeps in range",
            "The same shift, as found by the sweeps of the archive within the time range.",
            [
                _target(
                    "sum by (le) (increase(citation_offset_shift_characters_bucket"
                    f'{{mode="sweep", {select}}}[$__range]))',
                    "{{le}}",
                    instant=True,
                    heatmap=True,
                )
            ],
            "short",
            (12, 10, 12, 9),
            options={"xField": "le", "orientation": "vertical", "showValue": "never"},
        ),
        _heatmap(
            "Similarity at the recorded span",
            "Folded similarity (0-1) between each quote and the text at its span. Typography "
            "changes stay near 1; shifted spans fall far below; the gap between them is why "
            "the threshold sits at 0.98.",
            f"sum by (le) (increase(citation_quote_similarity_ratio_bucket{{{inline}}}"
            "[$__interval]))",
            "percentunit",
            (0, 19, 12, 8),
            config.heatmap_min_interval,
        ),
        _panel(
            "timeseries",
            "Failure reasons (inline)",
            "Why citations failed: chunk_missing, out_of_bounds, quote_mismatch and span_shifted "
            "for drift that was repaired; ambiguous, straddles_chunks and quote_not_found for "
            "drift that was not; the failed check for superseded.",
            [
                _target(
                    "sum by (kind, reason) (rate(citation_failure_reasons_total"
                    f"{{{inline}}}[$__rate_interval]))",
                    "{{kind}} {{reason}}",
                )
            ],
            "cps",
            (12, 19, 12, 8),
            defaults={"custom": {"stacking": {"mode": "normal"}, "fillOpacity": 30}},
        ),
        _row("Last sweep", 27),
        _panel(
            "stat",
            "Last sweep completed",
            "When the last sweep of the archive completed (a re-index, or a control request).",
            [_target(f"max(citation_sweep_last_completed_timestamp_seconds{{{select}}}) * 1000")],
            "dateTimeFromNow",
            (0, 28, 6, 4),
        ),
        _panel(
            "stat",
            "Sweep duration",
            "How long the last completed sweep took.",
            [_target(f"max(citation_sweep_duration_seconds{{{select}}})")],
            "s",
            (6, 28, 6, 4),
        ),
        _panel(
            "stat",
            "Sweep drift and missing documents",
            "Drift, and citations whose document is gone, found by the last completed sweep: "
            f"drift pages above {c.SWEEP_DRIFT_RATIO_PAGE:.0%}, missing documents above "
            f"{c.SWEEP_MISSING_RATIO_PAGE:.0%}.",
            [
                _target(
                    f"sum by {q.by} (citation_sweep_citations"
                    f'{{status=~"drift_repaired|drift_unrepaired", {select}}})\n/\n'
                    f'sum by {q.by} (citation_sweep_citations{{status!="invalid", {select}}})',
                    f"drift {q.legend}",
                ),
                _target(
                    f"sum by {q.by} (citation_sweep_citations"
                    f'{{status="document_missing", {select}}})\n/\n'
                    f'sum by {q.by} (citation_sweep_citations{{status!="invalid", {select}}})',
                    f"missing documents {q.legend}",
                    ref="B",
                ),
            ],
            "percentunit",
            (12, 28, 6, 4),
            defaults={
                "thresholds": _thresholds((None, "green"), (c.SWEEP_DRIFT_RATIO_PAGE, "red")),
                "decimals": 2,
            },
            options={"colorMode": "background", "reduceOptions": {"calcs": ["lastNotNull"]}},
        ),
        _panel(
            "gauge",
            "Sweep progress",
            "Share of the archive the running sweep has checked. A sweep the group shares: "
            "each instance's share of its partitions, weighted by how many it owns; one each "
            "instance runs alone: the furthest.",
            [
                _target(
                    f"(sum(citation_sweep_progress_ratio{{{select}}} * on (job, instance) "
                    f"sum by (job, instance) (citation_sweep_partitions{{{select}}}))"
                    f" / sum(citation_sweep_partitions{{{select}}})) >= 0"
                    f" or max(citation_sweep_progress_ratio{{{select}}})"
                )
            ],
            "percentunit",
            (18, 28, 6, 4),
            defaults={"min": 0, "max": 1},
        ),
        _panel(
            "bargauge",
            "Last sweep: citations per status",
            "Verdicts of the last completed sweep.",
            [
                _target(
                    f"sum by (status) (citation_sweep_citations{{{select}}})",
                    "{{status}}",
                    instant=True,
                )
            ],
            "short",
            (0, 32, 24, 6),
            options={
                "orientation": "horizontal",
                "displayMode": "basic",
                "reduceOptions": {"calcs": ["lastNotNull"]},
            },
        ),
        _row("Coverage", 38),
        _panel(
            "timeseries",
            f"Uncited claims per claim sentence (inline, {coverage_window})",
            "Share of the claim sentences of live answers that no citation supports (framing "
            "sentences are not counted). A model or prompt change that stops citing raises it "
            f"across topics; one topic's retrieval returning nothing raises it by that topic's "
            f"share. Opens a ticket above {ticket:.0%} with enough traffic.",
            [
                _target(q.uncited, f"uncited {q.legend}"),
                _target(f"vector({ticket})", f"ticket threshold {ticket:.0%}"),
            ],
            "percentunit",
            (0, 39, 16, 8),
            defaults={
                "min": 0,
                "custom": {"thresholdsStyle": {"mode": "line"}},
                "thresholds": _thresholds((None, "green"), (ticket, "orange")),
            },
        ),
        _panel(
            "bargauge",
            "Uncited claims by topic, in range",
            "Claim sentences without a citation per answer topic (the answer's subject, not a "
            "Kafka topic) within the time range, worst ten: one topic alone points at its "
            "retrieval, all of them at the generator.",
            [
                _target(
                    "topk(10,\n"
                    "  sum by (topic) (increase(citation_uncited_claims_total"
                    f"{{{inline}}}[$__range]))\n)",
                    "{{topic}}",
                    instant=True,
                )
            ],
            "short",
            (16, 39, 8, 8),
            defaults={"decimals": 0},
            options={"orientation": "horizontal", "reduceOptions": {"calcs": ["lastNotNull"]}},
        ),
        _row("Entailment", 47),
        _panel(
            "timeseries",
            f"Not entailed per judged citation (inline, {entailment_window})",
            "Share of the sampled live citations a judge found not entailed (the quote does not "
            "establish its claim), of those it judged: entailed, not entailed or unknown, every "
            "judge; errors and skipped samples judged nothing and are in neither side. A judge "
            "errs (the model judge about 6 times in 10 on conditional language), so no alert "
            "reads this: a rise is a prompt to look at the claims, never a verdict.",
            [_target(q.not_entailed, f"not entailed {q.legend}")],
            "percentunit",
            (0, 48, 12, 8),
            defaults={"min": 0},
        ),
        _panel(
            "timeseries",
            "Entailment results by judge (inline)",
            "Sampled live citations judged per second, by the judge that decided (lexical "
            "first, the model judge for what it cannot settle) and its result. The model "
            "judge's error share opens a ticket (CitationJudgeErrorsHigh) above "
            f"{errors_ticket:.0%} of its calls; skipped samples called nothing.",
            [
                _target(
                    "sum by (judge, result) (rate(citation_entailment_checks_total"
                    f"{{{inline}}}[$__rate_interval]))",
                    "{{judge}} {{result}}",
                )
            ],
            "cps",
            (12, 48, 12, 8),
            defaults={"custom": {"stacking": {"mode": "normal"}, "fillOpacity": 30}},
        ),
        _panel(
            "timeseries",
            "Model judge cost ($/h)",
            "Dollars an hour the model judge's calls cost, from the tokens it reported and the "
            "configured prices, inline (held under judge_budget_usd_per_hour) and by sweeps.",
            [
                _target(
                    "sum by (mode) (rate(citation_entailment_cost_dollars_total"
                    f"{{{select}}}[$__rate_interval])) * 3600",
                    "{{mode}}",
                )
            ],
            "currencyUSD",
            (0, 56, 8, 7),
            defaults={"min": 0},
        ),
        _panel(
            "timeseries",
            "Model judge tokens per second",
            "Tokens the model judge reported, prompt and completion, inline and by sweeps.",
            [
                _target(
                    "sum by (mode, direction) (rate(citation_entailment_tokens_total"
                    f"{{{select}}}[$__rate_interval]))",
                    "{{mode}} {{direction}}",
                )
            ],
            "short",
            (8, 56, 8, 7),
            defaults={"min": 0},
        ),
        _panel(
            "timeseries",
            "Judge latency p50 and p99",
            "Time to judge one citation by calling a judge, retries included, by judge: near "
            "judge_timeout_seconds the calls are timing out.",
            [
                _target(
                    f"histogram_quantile({quantile},\n"
                    "  sum by (judge, le) (rate(citation_entailment_duration_seconds_bucket"
                    f"{{{select}}}[$__rate_interval]))\n)",
                    f"p{round(quantile * 100)} {{{{judge}}}}",
                )
                for quantile in (0.5, 0.99)
            ],
            "s",
            (16, 56, 8, 7),
        ),
        _panel(
            "timeseries",
            "Judge queue depth",
            "Sampled citations waiting for the judge behind the response. Full at "
            "judge_queue_size, when samples are dropped (queue_full).",
            [_target(f"sum(citation_entailment_queue_depth{{{select}}})", "waiting")],
            "short",
            (0, 63, 12, 6),
            defaults={"min": 0},
        ),
        _panel(
            "timeseries",
            "Samples dropped by reason",
            "Sampled citations not judged behind the response, per second: budget (the hourly "
            "budget is spent; lasting drops open a ticket, CitationJudgeBudgetExhausted) or "
            "queue_full (the judge is behind: on this board only; see the latency and the "
            "queue).",
            [
                _target(
                    "sum by (reason) (rate(citation_entailment_dropped_total"
                    f"{{{select}}}[$__rate_interval]))",
                    "{{reason}}",
                )
            ],
            "cps",
            (12, 63, 12, 6),
            defaults={"min": 0},
        ),
        _row("Where and the exporter's health", 69),
        _panel(
            "bargauge",
            "Top sources by drift ratio",
            "Inline drift ratio per source (collection or vendor), worst ten.",
            [
                _target(
                    "topk(10,\n"
                    f"  sum by (source) (rate(citation_drift_failures_total{{{inline}}}"
                    "[$__rate_interval]))\n"
                    f"  /\n  sum by (source) (rate(citation_checks_total{{{inline}}}"
                    "[$__rate_interval]))\n)",
                    "{{source}}",
                    instant=True,
                )
            ],
            "percentunit",
            (0, 70, 8, 8),
            options={"orientation": "horizontal", "reduceOptions": {"calcs": ["lastNotNull"]}},
            defaults={"thresholds": _thresholds((None, "green"), (page, "red"))},
        ),
        _panel(
            "timeseries",
            "Citations checked",
            "Checks per second, inline (live traffic) and by sweeps.",
            [
                _target(
                    f"sum by (mode) (rate(citation_checks_total{{{select}}}[$__rate_interval]))",
                    "{{mode}}",
                )
            ],
            "cps",
            (8, 70, 8, 8),
        ),
        _panel(
            "timeseries",
            "Consumer lag",
            "Messages between each consumer's position and the high water mark.",
            [
                _target(
                    f"sum by (topic) (citation_exporter_consumer_lag_messages{{{select}}})",
                    "{{topic}}",
                )
            ],
            "short",
            (16, 70, 8, 8),
        ),
        _panel(
            "stat",
            "Exporters ready",
            "Exporters that have loaded the chunk store and check citations, of all scraped.",
            [
                _target(f"sum(citation_exporter_ready{{{select}}})", "ready"),
                _target(f"count(citation_exporter_ready{{{select}}})", "scraped"),
            ],
            "short",
            (0, 78, 8, 5),
        ),
        _panel(
            "timeseries",
            "Invalid events (dead-lettered)",
            "Messages that could not be parsed or validated, per topic and reason.",
            [
                _target(
                    "sum by (topic, reason) (rate(citation_exporter_invalid_events_total"
                    f"{{{select}}}[$__rate_interval]))",
                    "{{topic}} {{reason}}",
                )
            ],
            "cps",
            (8, 78, 8, 5),
        ),
        _panel(
            "stat",
            "Chunk store",
            "Live chunks and documents held in memory.",
            [
                _target(f"sum(citation_store_chunks{{{select}}})", "chunks"),
                _target(f"sum(citation_store_documents{{{select}}})", "documents"),
            ],
            "short",
            (16, 78, 8, 5),
        ),
    ]


def _annotation(name: str, expr: str, color: str) -> dict[str, Any]:
    return {
        "name": name,
        "datasource": DATASOURCE,
        "enable": True,
        "iconColor": color,
        "expr": expr,
        "step": "30s",
        "titleFormat": name,
        "textFormat": "{{job}}",
    }


def _query_variable(name: str, query: str, all_value: str) -> dict[str, Any]:
    """A multi-select variable of label values, with All (sent as ``all_value``)."""
    return {
        "name": name,
        "label": name.capitalize(),
        "type": "query",
        "datasource": DATASOURCE,
        "query": {"query": query, "refId": name},
        "definition": query,
        "includeAll": True,
        "multi": True,
        "allValue": all_value,
        "current": {},
        "refresh": 2,
        "sort": 1,
    }


def _variables(config: MixinConfig) -> list[dict[str, Any]]:
    variables: list[dict[str, Any]] = [
        {
            "name": "datasource",
            "label": "Data source",
            "type": "datasource",
            "query": "prometheus",
            "current": {"selected": True, "text": config.datasource, "value": config.datasource},
            "hide": 0,
        }
    ]
    matchers = [config.selector]
    for label in config.aggregation_labels:
        query = f"label_values(citation_exporter_build_info{{{', '.join(matchers)}}}, {label})"
        # ".*": All also matches series the label is missing from
        variables.append(_query_variable(label, query, ".*"))
        matchers.append(f'{label}=~"${label}"')
    query = f"label_values(citation_exporter_build_info{{{', '.join(matchers)}}}, instance)"
    variables.append(_query_variable("instance", query, ".+"))
    return variables


def citation_drift_dashboard(config: MixinConfig = DEFAULT) -> dict[str, Any]:
    select = _Queries(config).select
    return {
        "uid": config.dashboard_uid,
        "title": config.dashboard_title,
        "description": "Drift and superseded citations, the shift distribution, the last sweep, "
        "the claims no citation supports, the entailment judge and the exporter's health: open "
        "it after every parser, chunker, model or prompt deploy.",
        "tags": ["citations", "rag", "citation-drift-exporter"],
        "timezone": "utc",
        "schemaVersion": 39,
        "version": 1,
        "editable": False,
        "refresh": config.dashboard_refresh,
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": _variables(config)},
        "annotations": {
            "list": [
                _annotation(
                    "Sweep completed",
                    f"changes(citation_sweep_last_completed_timestamp_seconds{{{select}}}[2m]) > 0",
                    "blue",
                ),
                _annotation(
                    "Chunker changed",
                    "changes(citation_store_last_chunker_change_timestamp_seconds"
                    f"{{{select}}}[2m]) > 0",
                    "orange",
                ),
            ]
        },
        "panels": _panels(config),
    }


def panel_queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel or annotation title, expression) for every query of the board."""
    queries = [
        (panel["title"], target["expr"])
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]
    queries += [(a["name"], a["expr"]) for a in dashboard["annotations"]["list"]]
    return queries
