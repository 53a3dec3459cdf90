"""A real Prometheus, a real Alertmanager and a webhook receiver, on 127.0.0.1, for one test."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml
from kafka_support import free_port
from prometheus_client import CollectorRegistry

from exporter.outputs.metrics import ExporterMetrics, SourceLabels

REPO = Path(__file__).resolve().parent.parent
SHIPPED_RULES = REPO / "rules" / "citation-drift.rules.yml"

# Another deployment of the mixin: its own job name, a namespace kept in every aggregation,
# its own runbooks and windows. Rendered by `python -m mixin --config` in the tests.
ANOTHER_DEPLOYMENT = """
job = "citations-prod"
aggregation_labels = ["namespace"]
runbook_url = "https://runbooks.example.com/citations/{alert}"
rate_window = "30m"
drift_for = "10m"
namespace = "rag"
operator_labels = { release = "kube-prometheus-stack" }
dashboard_uid = "citations-prod"
"""


def render_mixin(directory: Path, config_text: str, suffix: str = ".toml") -> Path:
    """``python -m mixin --config`` for ``config_text``; the directory it rendered into."""
    config = directory / f"mixin-config{suffix}"
    config.write_text(config_text)
    out = directory / "rendered"
    done = subprocess.run(
        [sys.executable, "-m", "mixin", "--config", str(config), "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return out


_BRACES = re.compile(r"\{[^}]*\}")
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def series_selectors(expr: str, metric_names: set[str]) -> list[tuple[str, str]]:
    """(metric, its matchers between braces, or "") for every series selector of ``expr``."""
    braces = [(m.start(), m.end()) for m in _BRACES.finditer(expr)]
    found = []
    for match in _NAME.finditer(expr):
        if match.group() not in metric_names or any(a < match.start() < b for a, b in braces):
            continue
        following = _BRACES.match(expr, match.end())
        found.append((match.group(), following.group()[1:-1] if following else ""))
    return found


def series_names(rule_file: dict[str, Any]) -> set[str]:
    """Every series name the exporter exposes, up, and what the rules of ``rule_file`` record."""
    registry = CollectorRegistry()
    ExporterMetrics(registry, SourceLabels(), "0")
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}
    names = {f.name + suffix for f in registry.collect() for suffix in suffixes[f.type]}
    rules = [rule for group in rule_file["groups"] for rule in group["rules"]]
    return names | {"up"} | {r["record"] for r in rules if "record" in r}


def grafana_substitute(expr: str, board: dict[str, Any], range_: str = "1h") -> str:
    """A board query as Grafana sends it with every variable on All and 1m intervals."""
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            expr = expr.replace(f"${variable['name']}", variable["allValue"])
    for interval in ("$__rate_interval", "$__interval"):
        expr = expr.replace(interval, "1m")
    return expr.replace("$__range", range_)


def _binary(*names: str) -> str:
    import shutil

    for name in names:
        found = shutil.which(name)
        if found:
            return found
    raise FileNotFoundError(f"none of {names} is installed")


class Daemon:
    """A server process with a readiness URL, stopped on exit."""

    def __init__(self, command: list[str], log: Path, ready_url: str) -> None:
        self._log = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT)
        self._ready_url = ready_url

    def wait_ready(self, seconds: float = 30.0) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"{self.process.args[0]} exited: see {self._log.name}")
            try:
                with urllib.request.urlopen(self._ready_url, timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"{self._ready_url} not ready in time")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self._log.close()


class WebhookReceiver:
    """Collects the alerts Alertmanager posts to it."""

    def __init__(self) -> None:
        received: list[dict[str, Any]] = []
        self.received = received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def alerts(self) -> list[dict[str, Any]]:
        return [alert for post in self.received for alert in post["alerts"]]

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def rules_test_copy(directory: Path, for_duration: str) -> Path:
    """The shipped rules with every ``for:`` shortened (expressions untouched)."""
    rules = yaml.safe_load(SHIPPED_RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = for_duration
    path = directory / "rules.yml"
    path.write_text(yaml.safe_dump(rules, sort_keys=False))
    return path


class MonitoringStack:
    """Prometheus scraping one exporter with the shipped rules, alerting to Alertmanager,
    which routes everything to a webhook receiver."""

    def __init__(self, directory: Path, exporter_port: int, job: str) -> None:
        self.webhook = WebhookReceiver()
        self.alertmanager_port = free_port()
        self.prometheus_port = free_port()
        (directory / "am").mkdir()
        (directory / "prom").mkdir()
        am_config = directory / "alertmanager.yml"
        am_config.write_text(
            yaml.safe_dump(
                {
                    "route": {
                        "receiver": "webhook",
                        "group_by": ["alertname"],
                        "group_wait": "1s",
                        "group_interval": "1s",
                        "repeat_interval": "1h",
                    },
                    "receivers": [
                        {
                            "name": "webhook",
                            "webhook_configs": [
                                {
                                    "url": f"http://127.0.0.1:{self.webhook.port}/",
                                    "send_resolved": False,
                                }
                            ],
                        }
                    ],
                }
            )
        )
        rules = rules_test_copy(directory, "10s")
        prom_config = directory / "prometheus.yml"
        prom_config.write_text(
            yaml.safe_dump(
                {
                    "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                    "rule_files": [str(rules)],
                    "alerting": {
                        "alertmanagers": [
                            {
                                "static_configs": [
                                    {"targets": [f"127.0.0.1:{self.alertmanager_port}"]}
                                ]
                            }
                        ]
                    },
                    "scrape_configs": [
                        {
                            "job_name": job,
                            "static_configs": [{"targets": [f"127.0.0.1:{exporter_port}"]}],
                        }
                    ],
                }
            )
        )
        self.alertmanager = Daemon(
            [
                _binary("prometheus-alertmanager", "alertmanager"),
                f"--config.file={am_config}",
                f"--storage.path={directory / 'am'}",
                f"--web.listen-address=127.0.0.1:{self.alertmanager_port}",
                "--cluster.listen-address=",
            ],
            directory / "alertmanager.log",
            f"http://127.0.0.1:{self.alertmanager_port}/-/ready",
        )
        self.prometheus = Daemon(
            [
                _binary("prometheus"),
                f"--config.file={prom_config}",
                f"--storage.tsdb.path={directory / 'prom'}",
                f"--web.listen-address=127.0.0.1:{self.prometheus_port}",
            ],
            directory / "prometheus.log",
            f"http://127.0.0.1:{self.prometheus_port}/-/ready",
        )

    def wait_ready(self, seconds: float = 60.0) -> None:
        """Both servers up, and the exporter scraped (discovery takes Prometheus a few s)."""
        self.alertmanager.wait_ready()
        self.prometheus.wait_ready()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.query("up == 1"):
                return
            time.sleep(0.3)
        raise AssertionError("Prometheus never scraped the exporter")

    def query(self, expr: str) -> list[dict[str, Any]]:
        url = f"http://127.0.0.1:{self.prometheus_port}/api/v1/query?" + urllib.parse.urlencode(
            {"query": expr}
        )
        with urllib.request.urlopen(url, timeout=10) as response:
            answer = json.loads(response.read())
        assert answer["status"] == "success", answer
        result = answer["data"]["result"]
        return result if isinstance(result, list) else [result]

    def wait_for_alert(self, name: str, seconds: float) -> list[dict[str, Any]]:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            found = [a for a in self.webhook.alerts() if a["labels"]["alertname"] == name]
            if found:
                return found
            time.sleep(0.5)
        return []

    def stop(self) -> None:
        self.prometheus.stop()
        self.alertmanager.stop()
        self.webhook.stop()
