"""Kubernetes resources: the exporter's Deployment and Service, and for the Prometheus Operator a
ServiceMonitor and the rules as a PrometheusRule, all from one config.

How the job label is made to match the rules: the Prometheus Operator sets ``job`` of every
target of a ServiceMonitor to the name of the Service behind it, unless ``spec.jobLabel`` names
a label of that Service (then that label's value, falling back to the Service name when the
Service lacks it). The ServiceMonitor sets no ``jobLabel`` and the Service is named after
``config.job``, the job the rules select, so both follow the one setting.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from exporter.defaults import DEFAULT_METRICS_PORT
from exporter.settings import ENV_PREFIX
from mixin.config import DEFAULT, MixinConfig
from mixin.rules import rule_groups

__all__ = [
    "METRICS_PORT_NAME",
    "deployment",
    "pod_labels",
    "prometheus_rule",
    "service",
    "service_monitor",
]

METRICS_PORT_NAME = "metrics"
APP = "citation-drift-exporter"


def pod_labels(config: MixinConfig) -> dict[str, str]:
    """The labels that tie the Deployment, its pods, the Service and the ServiceMonitor."""
    return {"app.kubernetes.io/name": APP, "app.kubernetes.io/instance": config.job}


def _metadata(
    config: MixinConfig, name: str, labels: Mapping[str, str] | None = None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if config.namespace:
        metadata["namespace"] = config.namespace
    metadata["labels"] = {**pod_labels(config), **(labels or {})}
    return metadata


def _probe(path: str, period: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": METRICS_PORT_NAME},
        "periodSeconds": period,
        "timeoutSeconds": 3,
        "failureThreshold": failures,
    }


def deployment(config: MixinConfig = DEFAULT) -> dict[str, Any]:
    """One exporter pod: hardened, probed, sized by the chunk store."""
    container = {
        "name": "exporter",
        "image": config.image,
        "args": ["run"],
        "ports": [{"name": METRICS_PORT_NAME, "containerPort": DEFAULT_METRICS_PORT}],
        "env": [
            {"name": f"{ENV_PREFIX}BOOTSTRAP_SERVERS", "value": config.bootstrap_servers},
            {"name": f"{ENV_PREFIX}METRICS_PORT", "value": str(DEFAULT_METRICS_PORT)},
        ],
        "livenessProbe": _probe("/healthz", period=20, failures=3),
        "readinessProbe": _probe("/readyz", period=10, failures=1),
        "resources": {
            "requests": {"cpu": "500m", "memory": config.memory_request},
            "limits": {"cpu": "2", "memory": config.memory_limit},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(config, config.job),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": pod_labels(config)},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            },
            "template": {
                "metadata": {"labels": pod_labels(config)},
                "spec": {
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 10001,
                        "runAsGroup": 10001,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "terminationGracePeriodSeconds": 30,
                    "containers": [container],
                },
            },
        },
    }


def service(config: MixinConfig = DEFAULT) -> dict[str, Any]:
    """The metrics port, named after the job: the Operator's job label is this name."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(config, config.job),
        "spec": {
            "selector": pod_labels(config),
            "ports": [
                {
                    "name": METRICS_PORT_NAME,
                    "port": DEFAULT_METRICS_PORT,
                    "targetPort": METRICS_PORT_NAME,
                }
            ],
        },
    }


def service_monitor(config: MixinConfig = DEFAULT) -> dict[str, Any]:
    """Scrapes the Service's metrics port; no jobLabel, so job is the Service's name."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": _metadata(config, config.job, config.operator_labels),
        "spec": {
            "selector": {"matchLabels": pod_labels(config)},
            "endpoints": [
                {
                    "port": METRICS_PORT_NAME,
                    "path": "/metrics",
                    "interval": config.scrape_interval,
                }
            ],
        },
    }


def prometheus_rule(config: MixinConfig = DEFAULT) -> dict[str, Any]:
    """The same groups as the plain rule file, as a prometheus-operator resource."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": _metadata(
            config, config.job, {"role": "alert-rules", **config.operator_labels}
        ),
        "spec": rule_groups(config),
    }
