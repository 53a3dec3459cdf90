"""Every generated file of one config, by path relative to the output directory (the repo)."""

from __future__ import annotations

from typing import Any

from mixin.config import DEFAULT, MixinConfig
from mixin.dashboards import citation_drift_dashboard
from mixin.render import to_json, to_yaml
from mixin.rule_tests import rule_tests
from mixin.rules import rule_groups

__all__ = ["generated_files"]


def _datasources(config: MixinConfig) -> dict[str, Any]:
    """Grafana provisioning: a Prometheus datasource with a fixed uid."""
    return {
        "apiVersion": 1,
        "datasources": [
            {
                "name": config.datasource,
                "type": "prometheus",
                "uid": "prometheus",
                "access": "proxy",
                "url": config.prometheus_url,
                "isDefault": True,
                "jsonData": {"timeInterval": config.scrape_interval},
            }
        ],
    }


# Grafana provisioning: the boards from a folder (mount grafana/dashboards there).
DASHBOARD_PROVIDERS = {
    "apiVersion": 1,
    "providers": [
        {
            "name": "citation-drift-exporter",
            "type": "file",
            "folder": "Citations",
            "disableDeletion": True,
            "allowUiUpdates": False,
            "options": {"path": "/var/lib/grafana/dashboards"},
        }
    ],
}


def prometheus_rule(config: MixinConfig) -> dict[str, Any]:
    """The same groups as a prometheus-operator ``PrometheusRule`` resource."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "citation-drift-exporter",
            "labels": {"app.kubernetes.io/name": "citation-drift-exporter", "role": "alert-rules"},
        },
        "spec": rule_groups(config),
    }


def generated_files(config: MixinConfig = DEFAULT) -> dict[str, str]:
    return {
        "rules/citation-drift.rules.yml": to_yaml(rule_groups(config)),
        "rules/tests/citation-drift.test.yml": to_yaml(rule_tests(config)),
        "rules/kubernetes/citation-drift.prometheusrule.yaml": to_yaml(prometheus_rule(config)),
        "grafana/dashboards/citation-drift.json": to_json(citation_drift_dashboard(config)),
        "grafana/provisioning/datasources/prometheus.yml": to_yaml(_datasources(config)),
        "grafana/provisioning/dashboards/citation-drift.yml": to_yaml(DASHBOARD_PROVIDERS),
    }
