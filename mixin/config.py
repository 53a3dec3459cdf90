"""Every setting of the mixin in one place, like kubernetes-mixin's ``_config``.

The defaults render the committed files (rules/, grafana/, deploy/kubernetes/). Another
deployment writes only the keys it changes into a TOML or YAML file and renders with
``python -m mixin --config FILE --out DIR``; an unknown key or a malformed value is an error that
names it. Thresholds are not here: they stay in :mod:`exporter.alerting`, shared with the demo.
"""

from __future__ import annotations

import dataclasses
import re
import string
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exporter import alerting
from exporter.small_files import (
    UnusableFile,
    described,
    load_toml,
    load_yaml,
    read_small_file,
    shown,
)

__all__ = [
    "DEFAULT",
    "MAX_CONFIG_BYTES",
    "ConfigError",
    "MixinConfig",
    "config_from_mapping",
    "duration_seconds",
    "load_config",
]

# A mixin config is a dozen lines.
MAX_CONFIG_BYTES = 64 * 1024
# Longest string setting: a URL or an image reference fits; a megabyte in a manifest does not.
_MAX_STRING_CHARS = 1024
_DURATION = re.compile(r"(?:\d{1,9}(?:ms|s|m|h|d|w|y)){1,8}")
_DURATION_PART = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_QUANTITY = re.compile(r"\d+(\.\d+)?(Ki|Mi|Gi|Ti|k|M|G|T)?")
_GRAFANA_UID = re.compile(r"[a-zA-Z0-9_-]{1,40}")
# kept anyway (job), or the unit the rules aggregate over (instance), or the histogram's (le)
_RESERVED_AGGREGATION = {"job", "instance", "le"}
# Kubernetes label keys ([prefix/]name) and values, as the API server checks them.
_LABEL_KEY_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_LABEL_KEY_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
# Labels the manifests set themselves (mixin/kubernetes.py): an operator label may not replace them.
_OWN_LABELS = {"app.kubernetes.io/name", "app.kubernetes.io/instance", "role"}


class ConfigError(ValueError):
    """A setting that cannot be used; the message names it."""


def duration_seconds(text: str) -> float:
    """Seconds of a Prometheus duration such as ``15m`` or ``1h30m``."""
    return sum(int(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(text))


@dataclass(frozen=True, kw_only=True)
class MixinConfig:
    """The knobs of the rules, the board and the Kubernetes manifests, with their defaults."""

    # --- what Prometheus selects -------------------------------------------------------------
    # The job label of the exporter's targets; every series selector in the rules and the board
    # is job="<job>". It also names the Kubernetes Service, whose name the Prometheus Operator
    # makes the job label, so the ServiceMonitor and the rules cannot disagree.
    job: str = alerting.JOB
    # Labels kept beside job in every aggregation (namespace, cluster): one Prometheus watching
    # several deployments judges each on its own instead of pooling their ratios.
    aggregation_labels: tuple[str, ...] = ()
    # Each alert's runbook; {alert} is the alert name, {anchor} its lower-cased anchor in
    # docs/runbooks.md.
    runbook_url: str = alerting.RUNBOOK_BASE + "#{anchor}"
    # Window of the ratios and rates the drift alerts judge: long enough for ~90 checks at the
    # traffic guard (exporter.alerting.MIN_CHECKS_PER_SECOND), short enough to page in time.
    rate_window: str = "15m"
    # Window in which a consumer that moved nothing while lag grew counts as stalled: longer than
    # a rebalance or a broker restart, which pause consumption briefly.
    stall_window: str = "10m"
    # Window of the coverage ratio (uncited claims per claim sentence) and its traffic guard:
    # coverage moves with model and prompt deploys, not minute by minute, so an hour.
    coverage_window: str = "1h"
    # Window of the not-entailed ratio (board only, no alert: a judge errs): at the 1% inline
    # sample an hour holds enough judged citations for a share to mean something.
    entailment_window: str = "1h"
    # Window in which samples dropped for the judge's budget count as dropping now: short, so
    # CitationJudgeBudgetExhausted clears within minutes of the budget's hourly reset.
    judge_drops_window: str = "5m"
    # How long each condition must hold before it alerts (thresholds: exporter/alerting.py).
    drift_for: str = alerting.DRIFT_FOR  # a deploy's first minutes are noisy; page on a trend
    superseded_for: str = alerting.SUPERSEDED_FOR  # a ticket only: short is fine
    invalid_events_for: str = "15m"  # one bad producer batch is not a ticket, a steady share is
    exporter_down_for: str = alerting.EXPORTER_DOWN_FOR  # rides out a pod restart
    exporter_absent_for: str = alerting.EXPORTER_ABSENT_FOR  # rides out a redeploy
    not_ready_for: str = alerting.NOT_READY_FOR  # loading a large chunk store takes minutes
    stalled_for: str = alerting.STALLED_FOR  # on top of the stall window itself
    coverage_for: str = alerting.UNCITED_CLAIMS_FOR  # a ticket: the change is live and stays
    judge_errors_for: str = alerting.JUDGE_ERRORS_FOR  # a ticket: the fault outlasts a restart
    judge_budget_for: str = alerting.JUDGE_BUDGET_FOR  # the budget ran out, not in the last minutes

    # --- the Grafana board -------------------------------------------------------------------
    dashboard_uid: str = "citation-drift"  # stable, so links and bookmarks survive re-imports
    dashboard_title: str = "Citation drift"  # what on-call searches for in Grafana
    dashboard_refresh: str = "30s"  # two scrapes at the default interval; cheap queries
    # The datasource the board's datasource variable starts on, and the provisioned one's name.
    datasource: str = "Prometheus"
    # URL of the provisioned datasource: the compose stack's Prometheus.
    prometheus_url: str = "http://prometheus:9090"
    # Scrape interval of the exporter: the ServiceMonitor's and Grafana's (timeInterval).
    scrape_interval: str = "15s"
    # Smallest heatmap cell: increase() over $__interval needs two scrapes in every cell.
    heatmap_min_interval: str = "1m"

    # --- Kubernetes (deploy/kubernetes/, rules/kubernetes/) -----------------------------------
    # Namespace of every resource; empty leaves it out, so `kubectl apply -n` decides.
    namespace: str = ""
    image: str = "citation-drift-exporter:latest"  # the Dockerfile's image (docs/deploy.md)
    bootstrap_servers: str = "kafka:9092"  # CITATION_EXPORTER_BOOTSTRAP_SERVERS of the pod
    # Memory scales with the chunk store, ~1.1 GiB per million chunks plus up to ~0.3 GiB of
    # document views (docs/performance.md): these fit about a million chunks.
    memory_request: str = "1536Mi"
    memory_limit: str = "2Gi"  # headroom for a sweep's buffers and a growing store
    # Labels your Prometheus's serviceMonitorSelector and ruleSelector match (for example
    # kube-prometheus-stack's `release: <release name>`); none by default.
    operator_labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            texts = value if isinstance(value, tuple) else [value] if isinstance(value, str) else []
            for text in texts:
                if len(text) > _MAX_STRING_CHARS:
                    _fail(item.name, f"longer than {_MAX_STRING_CHARS} characters")
                if not text.isprintable():
                    _fail(
                        item.name,
                        f"{described(text)} holds a character that is not printable (a control "
                        "character, a newline)",
                    )
        if not _DNS_LABEL.fullmatch(self.job):
            _fail(
                "job",
                f"{described(self.job)} must be a DNS-1035 label (lower-case letters, digits, "
                "'-'): it names the Kubernetes Service, which the Prometheus Operator makes the "
                "job label",
            )
        self._check_aggregation_labels()
        for name in (
            "rate_window",
            "stall_window",
            "coverage_window",
            "entailment_window",
            "judge_drops_window",
            "drift_for",
            "superseded_for",
            "invalid_events_for",
            "exporter_down_for",
            "exporter_absent_for",
            "not_ready_for",
            "stalled_for",
            "coverage_for",
            "judge_errors_for",
            "judge_budget_for",
        ):
            value = getattr(self, name)
            # the generated promtool tests step in whole minutes
            seconds = duration_seconds(value) if _DURATION.fullmatch(value) else 0
            if seconds < 60 or seconds % 60:
                _fail(
                    name, f"{described(value)} must be a whole number of minutes, such as 15m or 1h"
                )
        for name in ("dashboard_refresh", "scrape_interval", "heatmap_min_interval"):
            if not _DURATION.fullmatch(getattr(self, name)):
                _fail(name, f"{described(getattr(self, name))} is not a duration such as 30s or 1m")
        self._check_runbook_url()
        if not _GRAFANA_UID.fullmatch(self.dashboard_uid):
            _fail("dashboard_uid", "1 to 40 letters, digits, '-' or '_'")
        if self.namespace and not _DNS_LABEL.fullmatch(self.namespace):
            _fail("namespace", f"{described(self.namespace)} is not a Kubernetes namespace name")
        for name in ("memory_request", "memory_limit"):
            if not _QUANTITY.fullmatch(getattr(self, name)):
                _fail(
                    name,
                    f"{described(getattr(self, name))} is not a Kubernetes quantity such as 2Gi",
                )
        for name in ("dashboard_title", "datasource", "prometheus_url", "image"):
            if not getattr(self, name):
                _fail(name, "must not be empty")
        self._check_operator_labels()

    def _check_runbook_url(self) -> None:
        """Only ``{alert}`` and ``{anchor}``, as they are: str.format also takes
        ``{alert:>999999999}`` (a gigabyte of padding) and ``{alert.__class__}``.
        """
        try:
            fields = [
                (name, spec, conversion)
                for _, name, spec, conversion in string.Formatter().parse(self.runbook_url)
                if name is not None
            ]
        except ValueError as error:
            _fail("runbook_url", f"is not a format string ({error})")
        for name, spec, conversion in fields:
            if name not in ("alert", "anchor") or spec or conversion:
                _fail("runbook_url", "only {alert} and {anchor} may be filled in")

    def _check_operator_labels(self) -> None:
        for key, value in self.operator_labels.items():
            prefix, slash, name = key.rpartition("/")
            if not _LABEL_KEY_NAME.fullmatch(name) or (
                slash and not _LABEL_KEY_PREFIX.fullmatch(prefix)
            ):
                _fail("operator_labels", f"{described(key)} is not a Kubernetes label key")
            if key in _OWN_LABELS:
                _fail("operator_labels", f"{described(key)} is set by the manifests themselves")
            if not _LABEL_VALUE.fullmatch(value):
                _fail(
                    "operator_labels",
                    f"the value of {described(key)} is not a Kubernetes label value "
                    "(at most 63 letters, digits, '-', '_' or '.')",
                )

    def _check_aggregation_labels(self) -> None:
        for label in self.aggregation_labels:
            if not _LABEL_NAME.fullmatch(label) or label.startswith("__"):
                _fail("aggregation_labels", f"{described(label)} is not a label name")
            if label in _RESERVED_AGGREGATION:
                _fail("aggregation_labels", f"{described(label)} is always handled by the rules")
        if len(set(self.aggregation_labels)) != len(self.aggregation_labels):
            _fail("aggregation_labels", "a label is listed twice")

    @property
    def selector(self) -> str:
        """The label matchers of every series the rules and the board read."""
        return f'job="{self.job}"'

    def by(self, *finer: str) -> str:
        """The ``by``/``on`` label list: the aggregation labels, job, then ``finer`` ones."""
        return "(" + ", ".join((*self.aggregation_labels, "job", *finer)) + ")"

    def runbook(self, alert: str) -> str:
        """The runbook URL of one alert."""
        return self.runbook_url.format(alert=alert, anchor=alert.lower())


DEFAULT = MixinConfig()


def _fail(name: str, problem: str) -> typing.NoReturn:
    raise ConfigError(f"{name}: {problem}")


def _coerce(name: str, hint: Any, value: Any) -> Any:
    """The file's value as the field's type, or a ConfigError naming the key."""
    origin = typing.get_origin(hint)
    if hint is str:
        if not isinstance(value, str):
            _fail(name, f"expected a string, got {described(value)}")
        return value
    if origin is tuple:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            _fail(name, f"expected a list of strings, got {described(value)}")
        return tuple(value)
    if origin is Mapping:
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            _fail(name, f"expected a table of strings, got {described(value)}")
        return dict(value)
    raise TypeError(f"no reader for {name}: {hint}")  # a new field type needs a branch here


def config_from_mapping(values: Mapping[str, Any]) -> MixinConfig:
    """A config from already parsed keys and values (defaults for the rest)."""
    hints = typing.get_type_hints(MixinConfig)
    known = [f.name for f in dataclasses.fields(MixinConfig)]
    unknown = [key for key in values if key not in known]
    if unknown:
        listed = ", ".join(
            f"'{shown(key, 40)}'" if isinstance(key, str) else described(key) for key in unknown[:5]
        )
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise ConfigError(f"unknown key {listed}{more}; the keys are: {', '.join(known)}")
    return MixinConfig(**{key: _coerce(key, hints[key], value) for key, value in values.items()})


def load_config(path: Path) -> MixinConfig:
    """Read a ``.toml`` or ``.yaml``/``.yml`` file of settings: at most MAX_CONFIG_BYTES of a
    regular file, never waiting on a FIFO; every problem one ConfigError naming the file."""
    where = shown(path)
    if path.suffix not in (".toml", ".yaml", ".yml"):
        raise ConfigError(f"{where}: expected a .toml, .yaml or .yml file")
    try:
        data = read_small_file(path, MAX_CONFIG_BYTES)
        if path.suffix == ".toml":
            values: Any = load_toml(data)
        else:
            values = load_yaml(data) or {}
    except UnusableFile as error:
        raise ConfigError(f"{where} {error}") from None
    if not isinstance(values, dict):
        raise ConfigError(f"{where}: expected a table of settings at the top level")
    try:
        return config_from_mapping(values)
    except ConfigError as error:
        raise ConfigError(f"{where}: {error}") from None
