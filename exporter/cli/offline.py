"""An exporter without Kafka, for ``run --source`` and ``demo``: pipeline, metrics, /metrics.

Built from the settings like the Kafka runtime, but without constructing it: the store is
empty and ready at once, outcomes are recorded as the replay or the demo hands them on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from exporter.checks.store import ChunkStore
from exporter.outputs.state import ExporterState
from exporter.pipeline.core import Pipeline
from exporter.pipeline.outcome import Outcome
from exporter.settings import Settings
from exporter.web.exposition import expose

__all__ = ["OfflineExporter"]


class OfflineExporter:
    """A pipeline over a fresh store, its metrics, and the server that exposes them.

    Raises OSError when the metrics port cannot be bound.
    """

    def __init__(self, settings: Settings, *, keep_evidence: bool = False) -> None:
        """``keep_evidence``: drifted citations keep their quote and spans (for a report)."""
        store = ChunkStore()
        self.state = ExporterState(ready=True, store=store)
        topics = [settings.chunks_topic, settings.answers_topic]
        exposed = expose(settings.exposure, self.state, topics)
        self.registry, self.metrics, self.http = exposed.registry, exposed.metrics, exposed.http
        policy = dataclasses.replace(settings.policy, keep_evidence=keep_evidence)
        self.pipeline = Pipeline(
            store,
            policy,
            publish_all=settings.publish_all_verdicts,
            change_columns=settings.change_columns,
        )

    def record(self, outcomes: Sequence[Outcome]) -> None:
        self.metrics.record(outcomes)
