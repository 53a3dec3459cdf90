"""The Kubernetes manifests the mixin renders, held together by parsing them: the Deployment's
pods, the Service, the ServiceMonitor, the probes, and the job label Prometheus would give the
targets, which must be what the rules select. For the shipped config and another one."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from monitoring_support import ANOTHER_DEPLOYMENT, render_mixin, series_names, series_selectors

from exporter.defaults import DEFAULT_METRICS_PORT
from exporter.settings import ENV_PREFIX, Settings
from mixin.config import DEFAULT

REPO = Path(__file__).resolve().parent.parent
WORKLOAD = Path("deploy/kubernetes/citation-drift-exporter.yaml")
SERVICE_MONITOR = Path("rules/kubernetes/citation-drift.servicemonitor.yaml")
PROMETHEUS_RULE = Path("rules/kubernetes/citation-drift.prometheusrule.yaml")
RULES = Path("rules/citation-drift.rules.yml")


class Rendered:
    """The resources rendered into one directory, by kind."""

    def __init__(self, root: Path) -> None:
        documents = list(yaml.safe_load_all((root / WORKLOAD).read_text()))
        documents += list(yaml.safe_load_all((root / SERVICE_MONITOR).read_text()))
        documents += list(yaml.safe_load_all((root / PROMETHEUS_RULE).read_text()))
        self.by_kind = {d["kind"]: d for d in documents}
        assert len(self.by_kind) == len(documents) == 4, "one resource of each kind"
        self.rules = yaml.safe_load((root / RULES).read_text())
        self.text = (root / WORKLOAD).read_text()

    def __getitem__(self, kind: str) -> dict[str, Any]:
        return self.by_kind[kind]

    @property
    def container(self) -> dict[str, Any]:
        [container] = self["Deployment"]["spec"]["template"]["spec"]["containers"]
        return container  # type: ignore[no-any-return]


def operator_job_label(service: dict[str, Any], monitor: dict[str, Any]) -> str:
    """The job label the Prometheus Operator gives the targets of ``monitor``: the value of the
    Service's label named by ``spec.jobLabel`` when both exist, else the Service's name."""
    job_label = monitor["spec"].get("jobLabel")
    labels = service["metadata"].get("labels", {})
    if job_label and labels.get(job_label):
        return str(labels[job_label])
    return str(service["metadata"]["name"])


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(key) == value for key, value in selector.items())


@pytest.fixture(scope="module")
def another(tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    return Rendered(render_mixin(tmp_path_factory.mktemp("another"), ANOTHER_DEPLOYMENT))


@pytest.fixture(params=["shipped", "another"])
def rendered(request: pytest.FixtureRequest) -> Rendered:
    if request.param == "shipped":
        return Rendered(REPO)
    return request.getfixturevalue("another")  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("job_label", "labels", "expected"),
    [
        pytest.param(None, {"app": "x"}, "svc", id="no-jobLabel-the-service-name"),
        pytest.param("app", {"app": "x"}, "x", id="jobLabel-the-label-value"),
        pytest.param("team", {"app": "x"}, "svc", id="jobLabel-missing-the-service-name"),
    ],
)
def test_the_operators_job_label_rule(
    job_label: str | None, labels: dict[str, str], expected: str
) -> None:
    """The model of the Operator the tests below rely on (its ServiceMonitor API docs)."""
    monitor: dict[str, Any] = {"spec": {"jobLabel": job_label} if job_label else {}}
    service = {"metadata": {"name": "svc", "labels": labels}}
    assert operator_job_label(service, monitor) == expected


def test_the_service_selects_the_deployments_pods(rendered: Rendered) -> None:
    deployment, service = rendered["Deployment"], rendered["Service"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert _selects(deployment["spec"]["selector"]["matchLabels"], pod_labels)
    assert _selects(service["spec"]["selector"], pod_labels)
    assert service["metadata"].get("namespace") == deployment["metadata"].get("namespace")


def test_the_service_monitor_scrapes_the_services_metrics_port(rendered: Rendered) -> None:
    service, monitor = rendered["Service"], rendered["ServiceMonitor"]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert _selects(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
    # without a namespaceSelector a ServiceMonitor looks in its own namespace only
    assert "namespaceSelector" not in monitor["spec"]
    assert monitor["metadata"].get("namespace") == service["metadata"].get("namespace")
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "metrics" and endpoint["path"] == "/metrics"
    [port] = [p for p in service["spec"]["ports"] if p["name"] == endpoint["port"]]
    container_ports = {p["name"]: p["containerPort"] for p in rendered.container["ports"]}
    assert container_ports[port["targetPort"]] == DEFAULT_METRICS_PORT


def test_the_job_prometheus_gives_the_targets_is_the_one_the_rules_select(
    rendered: Rendered,
) -> None:
    job = operator_job_label(rendered["Service"], rendered["ServiceMonitor"])
    rules = [r for g in rendered.rules["groups"] for r in g["rules"]]
    names = series_names(rendered.rules)
    for rule in rules:
        selectors = series_selectors(rule["expr"], names)
        assert selectors, rule
        for metric, matchers in selectors:
            assert f'job="{job}"' in matchers, f"{rule['expr']}: {metric} selects no {job}"
    assert rendered["PrometheusRule"]["spec"] == rendered.rules


def test_the_probes_use_the_exporters_health_endpoints(rendered: Rendered) -> None:
    container = rendered.container
    port_names = {p["name"] for p in container["ports"]}
    liveness, readiness = container["livenessProbe"], container["readinessProbe"]
    assert liveness["httpGet"]["path"] == "/healthz"
    assert readiness["httpGet"]["path"] == "/readyz"
    assert {liveness["httpGet"]["port"], readiness["httpGet"]["port"]} <= port_names
    env = {e["name"]: e["value"] for e in container["env"]}
    assert int(env[f"{ENV_PREFIX}METRICS_PORT"]) == DEFAULT_METRICS_PORT
    for name in env:
        assert name.removeprefix(ENV_PREFIX).lower() in Settings.model_fields, name
    assert env[f"{ENV_PREFIX}BOOTSTRAP_SERVERS"] == DEFAULT.bootstrap_servers


def test_the_pod_is_hardened_and_sized(rendered: Rendered) -> None:
    deployment = rendered["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    # the Dockerfile's USER
    dockerfile = (REPO / "Dockerfile").read_text()
    assert f"USER {pod['securityContext']['runAsUser']}:" in dockerfile
    container = rendered.container
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["image"] == DEFAULT.image
    assert f"EXPOSE {container['ports'][0]['containerPort']}" in dockerfile
    resources = container["resources"]
    assert _mebibytes(resources["requests"]["memory"]) <= _mebibytes(resources["limits"]["memory"])
    assert deployment["spec"]["replicas"] == 1
    assert "whole chunk store" in rendered.text and "per million chunks" in rendered.text


def _mebibytes(quantity: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(Mi|Gi)", quantity).groups()  # type: ignore[union-attr]
    return float(number) * (1024 if unit == "Gi" else 1)


def test_another_deployment_is_namespaced_and_labelled_for_its_operator(
    another: Rendered,
) -> None:
    for kind in ("Deployment", "Service", "ServiceMonitor", "PrometheusRule"):
        assert another[kind]["metadata"]["namespace"] == "rag", kind
    assert another["Service"]["metadata"]["name"] == "citations-prod"
    for kind in ("ServiceMonitor", "PrometheusRule"):
        assert another[kind]["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert 'job="citations-prod"' in str(another.rules)


def test_the_shipped_manifests_leave_the_namespace_to_kubectl() -> None:
    shipped = Rendered(REPO)
    for kind in ("Deployment", "Service", "ServiceMonitor", "PrometheusRule"):
        assert "namespace" not in shipped[kind]["metadata"], kind
