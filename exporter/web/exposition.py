"""The metrics of one exporter and the server that exposes them, built from its exposure.

The Kafka runtime and the exporter without Kafka (``run --source``, ``demo``) expose the same
metrics the same way; this is where that is put together, once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector

from exporter import __version__
from exporter.checks.plugins import AnswerCheck, CitationCheck
from exporter.config.web import Exposure, load_web_config
from exporter.outputs.metrics import ExporterMetrics, SourceLabels
from exporter.outputs.state import ExporterState
from exporter.web.heartbeat import Heartbeat
from exporter.web.server import MetricsServer

__all__ = ["Exposition", "expose"]


@dataclass(frozen=True, slots=True)
class Exposition:
    """A registry, the exporter's metrics on it, and the (not yet started) HTTP server."""

    registry: CollectorRegistry
    metrics: ExporterMetrics
    http: MetricsServer


def expose(
    exposure: Exposure,
    state: ExporterState,
    topics: Iterable[str],
    *,
    registry: CollectorRegistry | None = None,
    heartbeat: Heartbeat | None = None,
    checks: Iterable[AnswerCheck | CitationCheck] = (),
) -> Exposition:
    """Metrics over ``state`` (every series of ``topics`` at 0; the counters of the plug-in
    ``checks`` declared) and a server for them.

    Raises OSError when the metrics port cannot be bound, SettingsError for a web
    configuration file that cannot be used.
    """
    # auto_describe: a scrape with ?name[]= finds the process collectors' metrics too
    registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
    for collector in (ProcessCollector, PlatformCollector, GCCollector):
        collector(registry=registry)  # the chunk store's memory, CPU, GC pauses
    metrics = ExporterMetrics(
        registry,
        SourceLabels(exposure.sources, exposure.max_sources),
        __version__,
        state,
        SourceLabels(exposure.topics, exposure.max_topics),
        checks=checks,
    )
    metrics.initialise_topics(topics)
    http = MetricsServer(
        registry,
        lambda: state.ready,
        exposure.host,
        exposure.port,
        problem=lambda: state.problem,
        heartbeat=heartbeat,
        web_config=load_web_config(web) if (web := exposure.web_config_file) else None,
    )
    return Exposition(registry, metrics, http)
