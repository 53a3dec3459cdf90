"""An exporter without Kafka, for ``run --source`` and ``demo``: pipeline, metrics, /metrics.

Built from the settings like the Kafka runtime, but without constructing it: the store is
empty and ready at once, outcomes are recorded as the replay or the demo hands them on.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector

from exporter import __version__
from exporter.checks.store import ChunkStore
from exporter.outputs.metrics import ExporterMetrics, SourceLabels
from exporter.outputs.state import ExporterState
from exporter.pipeline.core import Pipeline
from exporter.pipeline.outcome import Outcome
from exporter.settings import Settings
from exporter.web.config import load_web_config
from exporter.web.server import MetricsServer

__all__ = ["OfflineExporter"]


class OfflineExporter:
    """A pipeline over a fresh store, its metrics, and the server that exposes them.

    Raises OSError when the metrics port cannot be bound.
    """

    def __init__(self, settings: Settings) -> None:
        self.registry = CollectorRegistry(auto_describe=True)  # as the Kafka runtime's
        for collector in (ProcessCollector, PlatformCollector, GCCollector):
            collector(registry=self.registry)
        store = ChunkStore()
        self.state = ExporterState(ready=True, store=store)
        self.metrics = ExporterMetrics(
            self.registry,
            SourceLabels(settings.sources, settings.max_sources),
            __version__,
            self.state,
        )
        self.metrics.initialise_topics([settings.chunks_topic, settings.answers_topic])
        self.pipeline = Pipeline(store, settings.policy, publish_all=settings.publish_all_verdicts)
        self.http = MetricsServer(
            self.registry,
            lambda: self.state.ready,
            settings.metrics_host,
            settings.metrics_port,
            problem=lambda: self.state.problem,
            web_config=load_web_config(web) if (web := settings.web_config_file) else None,
        )

    def record(self, outcomes: Sequence[Outcome]) -> None:
        self.metrics.record(outcomes)
