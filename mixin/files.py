"""Every generated file of one config, by path relative to the output directory (the repo)."""

from __future__ import annotations

from typing import Any

from mixin.config import DEFAULT, MixinConfig
from mixin.dashboards import citation_drift_dashboard
from mixin.kubernetes import deployment, prometheus_rule, service, service_monitor
from mixin.render import to_json, to_yaml, to_yaml_documents
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


def _workload(config: MixinConfig) -> str:
    notes = {
        "apiVersion: apps/v1": [
            "An example to adapt: kubectl apply -f deploy/kubernetes/ -f rules/kubernetes/",
            "(the second directory needs the Prometheus Operator).",
        ],
        "replicas:": [
            "One replica. Every replica loads the whole chunk store (its memory each), while the",
            "consumer group shares the answers among them: add replicas for check throughput,",
            "never to save memory.",
        ],
        "strategy:": [
            "The new pod loads its store before the old one stops: twice the memory meanwhile.",
        ],
        "enableServiceLinks:": [
            "No service-link variables: a Service named citation-exporter would inject some",
            "with the CITATION_EXPORTER_ prefix of the settings.",
        ],
        "env:": [
            "Kafka security (SASL, TLS) takes further CITATION_EXPORTER_* variables; put",
            "secrets in a Secret and use valueFrom.secretKeyRef. The replicas share each",
            "sweep through a compacted topic, citation-drift-exporter.sweeps, created at",
            "start-up when missing: without the right to create topics, create it beforehand",
            "(docs/kafka.md).",
        ],
        "livenessProbe:": [
            "/healthz answers 200 while the event loop runs (503 once it is stuck for 30 s): a",
            "restart fixes no broker outage and only throws the chunk store away.",
        ],
        "readinessProbe:": [
            "/readyz answers 503 until the chunk store has caught up. Prometheus still scrapes",
            "a pod that is not ready, so CitationExporterNotReady sees it.",
        ],
        "resources:": [
            "Memory scales with the chunk store: about 1 GiB per million chunks, plus up to",
            "~0.3 GiB of document views and ~0.1 GiB for the process (docs/performance.md).",
            "These fit about a million chunks; set memory_request/memory_limit in the mixin",
            "config from your store's size. CPU only bounds how fast checks run.",
        ],
        "apiVersion: v1": [
            f"Named {config.job}, the job the rules select: the Prometheus Operator makes the",
            "Service's name the job label of its targets.",
        ],
    }
    return to_yaml_documents([deployment(config), service(config)], notes)


def _service_monitor(config: MixinConfig) -> str:
    notes = {
        "spec:": [
            "No jobLabel: the Prometheus Operator then sets job to the name of the Service,",
            f'{config.job}, which is what the rules select (job="{config.job}").',
        ]
    }
    return to_yaml_documents([service_monitor(config)], notes)


def generated_files(config: MixinConfig = DEFAULT) -> dict[str, str]:
    return {
        "rules/citation-drift.rules.yml": to_yaml(rule_groups(config)),
        "rules/tests/citation-drift.test.yml": to_yaml(rule_tests(config)),
        "rules/kubernetes/citation-drift.prometheusrule.yaml": to_yaml(prometheus_rule(config)),
        "rules/kubernetes/citation-drift.servicemonitor.yaml": _service_monitor(config),
        "deploy/kubernetes/citation-drift-exporter.yaml": _workload(config),
        "grafana/dashboards/citation-drift.json": to_json(citation_drift_dashboard(config)),
        "grafana/provisioning/datasources/prometheus.yml": to_yaml(_datasources(config)),
        "grafana/provisioning/dashboards/citation-drift.yml": to_yaml(DASHBOARD_PROVIDERS),
    }
