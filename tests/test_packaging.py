"""The container, the local stack and the Kubernetes rendering, checked without a Docker engine
(none runs here): by parsing them and holding them to the exporter's own settings. The package's
metadata (license, links, classifiers) is checked in pyproject.toml, in the image's labels and
in a wheel and sdist built for real."""

from __future__ import annotations

import email
import json
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from dockerfile_parse import DockerfileParser
from trove_classifiers import classifiers as known_classifiers
from trove_classifiers import deprecated_classifiers

from exporter import alerting as config
from exporter.defaults import DEFAULT_METRICS_PORT
from exporter.settings import Settings

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def dockerfile() -> DockerfileParser:
    parser = DockerfileParser(path=str(REPO / "Dockerfile"))
    parser.content = (REPO / "Dockerfile").read_text()
    return parser


def _instructions(parser: DockerfileParser, name: str) -> list[dict[str, object]]:
    return [i for i in parser.structure if i["instruction"] == name]


def _final_stage(parser: DockerfileParser) -> list[dict[str, object]]:
    froms = [i["startline"] for i in _instructions(parser, "FROM")]
    return [i for i in parser.structure if i["startline"] >= froms[-1]]


def test_dockerfile_is_multi_stage_on_a_slim_python_base(dockerfile: DockerfileParser) -> None:
    froms = [str(i["value"]) for i in _instructions(dockerfile, "FROM")]
    assert len(froms) >= 2
    assert all("python:" in f and "-slim" in f for f in froms)
    assert dockerfile.baseimage.startswith("python:")
    final = _final_stage(dockerfile)
    assert any(i["instruction"] == "COPY" and "--from=build" in str(i["value"]) for i in final)


def test_dockerfile_runs_as_a_non_root_user(dockerfile: DockerfileParser) -> None:
    users = [str(i["value"]) for i in _final_stage(dockerfile) if i["instruction"] == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")


def test_dockerfile_installs_only_runtime_dependencies(dockerfile: DockerfileParser) -> None:
    runs = " ".join(str(i["value"]) for i in _instructions(dockerfile, "RUN"))
    assert "pip install --no-cache-dir ." in runs
    assert "[test]" not in runs
    for instruction in _instructions(dockerfile, "COPY"):
        source = str(instruction["value"]).split()
        if source[0].startswith("--from"):
            continue
        for path in source[:-1]:
            assert (REPO / path).exists(), f"COPY {path}: not in the repository"


def test_dockerfile_exposes_the_metrics_port_and_checks_healthz(
    dockerfile: DockerfileParser,
) -> None:
    final = _final_stage(dockerfile)
    exposed = [str(i["value"]) for i in final if i["instruction"] == "EXPOSE"]
    assert exposed == [str(DEFAULT_METRICS_PORT)]
    health = [str(i["value"]) for i in final if i["instruction"] == "HEALTHCHECK"]
    assert health and "127.0.0.1:%s/healthz" in health[0]
    assert f"get('CITATION_EXPORTER_METRICS_PORT', '{DEFAULT_METRICS_PORT}')" in health[0]
    entrypoint = [str(i["value"]) for i in final if i["instruction"] == "ENTRYPOINT"]
    assert json.loads(entrypoint[-1]) == ["citation-exporter"]
    assert dockerfile.envs["CITATION_EXPORTER_METRICS_PORT"] == str(DEFAULT_METRICS_PORT)


@pytest.fixture(scope="module")
def compose() -> dict[str, object]:
    return yaml.safe_load((REPO / "compose.yaml").read_text())


def test_compose_has_the_whole_stack(compose: dict[str, object]) -> None:
    services = compose["services"]  # type: ignore[index]
    assert set(services) >= {
        "kafka",
        "exporter",
        "producer",
        "prometheus",
        "alertmanager",
        "grafana",
    }


def test_compose_mounts_only_paths_that_exist(compose: dict[str, object]) -> None:
    for name, service in compose["services"].items():  # type: ignore[attr-defined]
        for volume in service.get("volumes", []):
            host = volume.split(":")[0]
            assert (REPO / host).exists(), f"{name} mounts {host}, which is not in the repo"
        if "build" in service:
            assert (REPO / service["build"] / "Dockerfile").exists()


def test_compose_wiring_matches_the_settings_and_the_rules(compose: dict[str, object]) -> None:
    services = compose["services"]  # type: ignore[index]
    exporter = services["exporter"]
    env = exporter["environment"]
    port = int(env["CITATION_EXPORTER_METRICS_PORT"])
    assert port == DEFAULT_METRICS_PORT
    assert f"{port}:{port}" in exporter["ports"]
    kafka_host = env["CITATION_EXPORTER_BOOTSTRAP_SERVERS"]
    assert (
        f"PLAINTEXT://{kafka_host}"
        == services["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    )
    assert services["producer"]["environment"]["CITATION_EXPORTER_BOOTSTRAP_SERVERS"] == kafka_host
    for key in env:
        assert key.removeprefix("CITATION_EXPORTER_").lower() in Settings.model_fields, key

    prometheus = yaml.safe_load((REPO / "deploy" / "prometheus.yml").read_text())
    [job] = prometheus["scrape_configs"]
    assert job["job_name"] == config.JOB, "the meta alerts select on this job name"
    assert job["static_configs"][0]["targets"] == [f"exporter:{port}"]
    mounts = dict(v.split(":")[:2] for v in services["prometheus"]["volumes"])
    for rule_file in prometheus["rule_files"]:
        host_dir = next(h for h, c in mounts.items() if rule_file.startswith(c + "/"))
        assert (REPO / host_dir / Path(rule_file).name).exists()
    [manager] = prometheus["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    assert manager.split(":")[0] == "alertmanager"
    assert any(p.startswith(manager.split(":")[1]) for p in services["alertmanager"]["ports"])

    datasources = yaml.safe_load(
        (REPO / "grafana/provisioning/datasources/prometheus.yml").read_text()
    )
    assert datasources["datasources"][0]["url"] == "http://prometheus:9090"
    assert "9090:9090" in services["prometheus"]["ports"]
    providers = yaml.safe_load(
        (REPO / "grafana/provisioning/dashboards/citation-drift.yml").read_text()
    )
    grafana_mounts = dict(v.split(":")[:2] for v in services["grafana"]["volumes"])
    assert providers["providers"][0]["options"]["path"] in grafana_mounts.values()


def test_prometheus_rule_resource_equals_the_plain_rule_file() -> None:
    plain = yaml.safe_load((REPO / "rules/citation-drift.rules.yml").read_text())
    resource = yaml.safe_load(
        (REPO / "rules/kubernetes/citation-drift.prometheusrule.yaml").read_text()
    )
    assert resource["apiVersion"] == "monitoring.coreos.com/v1"
    assert resource["kind"] == "PrometheusRule"
    assert resource["spec"] == plain


# ------------------------------------------------------------------ package metadata and image


@pytest.fixture(scope="module")
def project() -> dict[str, Any]:
    table: dict[str, Any] = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return table


def test_the_license_is_apache_2_in_full(project: dict[str, Any]) -> None:
    text = (REPO / "LICENSE").read_text()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "END OF TERMS AND CONDITIONS" in text
    assert "9. Accepting Warranty or Additional Liability." in text
    assert project["license"] == "Apache-2.0", "an SPDX expression (PEP 639)"
    assert project["license-files"] == ["LICENSE"]


def test_classifiers_are_known_and_leave_the_license_to_its_expression(
    project: dict[str, Any],
) -> None:
    listed = project["classifiers"]
    assert listed and set(listed) <= known_classifiers
    assert not set(listed) & set(deprecated_classifiers)
    # setuptools>=77 refuses a License classifier beside a license expression
    assert not [c for c in listed if c.startswith("License ::")]
    assert "Topic :: System :: Monitoring" in listed
    assert any(c.startswith("Development Status ::") for c in listed)


def test_project_urls_point_where_the_runbooks_do(project: dict[str, Any]) -> None:
    urls = project["urls"]
    assert set(urls) == {"Homepage", "Documentation", "Issues", "Source"}
    repository = config.RUNBOOK_BASE.split("/blob/")[0]
    assert urls["Source"] == urls["Homepage"] == repository
    assert urls["Issues"] == f"{repository}/issues"
    # the documentation's home page, in the folder the runbooks are in
    assert urls["Documentation"] == config.RUNBOOK_BASE.replace("runbooks.md", "index.md")


def test_gssapi_is_an_optional_extra(project: dict[str, Any]) -> None:
    assert not [d for d in project["dependencies"] if "gssapi" in d]
    [extra] = project["optional-dependencies"]["gssapi"]
    assert extra.startswith("aiokafka[gssapi]")


def test_the_image_is_labelled_like_the_package(
    dockerfile: DockerfileParser, project: dict[str, Any]
) -> None:
    labels = dockerfile.labels
    oci = "org.opencontainers.image."
    assert labels[oci + "title"] == project["name"]
    assert labels[oci + "description"]
    assert labels[oci + "version"] == project["version"]
    assert labels[oci + "licenses"] == project["license"]
    assert labels[oci + "source"] == project["urls"]["Source"]
    assert labels[oci + "url"] == project["urls"]["Homepage"]
    assert labels[oci + "documentation"] == project["urls"]["Documentation"]
    assert labels[oci + "vendor"]
    # the build stage has the license file the package metadata names
    copies = " ".join(str(i["value"]) for i in _instructions(dockerfile, "COPY"))
    assert "LICENSE" in copies.split()


@pytest.fixture(scope="module")
def distributions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A wheel and an sdist built by ``python -m build`` from a copy of the sources (a build
    leaves an egg-info behind, which must not land in the work tree)."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(
        REPO / "exporter", source / "exporter", ignore=shutil.ignore_patterns("__pycache__")
    )
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [wheel] = out.glob("*.whl")
    [sdist] = out.glob("*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


@pytest.mark.slow
def test_the_wheel_carries_the_license_and_the_links(
    distributions: dict[str, Path], project: dict[str, Any]
) -> None:
    with zipfile.ZipFile(distributions["wheel"]) as wheel:
        names = wheel.namelist()
        [metadata_name] = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = email.message_from_bytes(wheel.read(metadata_name))
        [license_name] = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert wheel.read(license_name) == (REPO / "LICENSE").read_bytes()
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata.get_all("License-File") == ["LICENSE"]
    links = dict(link.split(", ", 1) for link in metadata.get_all("Project-URL"))
    assert links == project["urls"]
    assert set(metadata.get_all("Classifier")) == set(project["classifiers"])


@pytest.mark.slow
def test_the_wheel_carries_the_report_s_template(distributions: dict[str, Path]) -> None:
    """Package data, not code: without it, every --report fails where the package is installed."""
    with zipfile.ZipFile(distributions["wheel"]) as wheel:
        assert "exporter/outputs/templates/sweep_report.html.j2" in wheel.namelist()


@pytest.mark.slow
def test_the_sdist_carries_the_license(distributions: dict[str, Path]) -> None:
    with tarfile.open(distributions["sdist"]) as sdist:
        [license_member] = [m for m in sdist.getmembers() if m.name.endswith("/LICENSE")]
        extracted = sdist.extractfile(license_member)
        assert extracted is not None
        assert extracted.read() == (REPO / "LICENSE").read_bytes()
