"""What the exporter is doing right now, kept in one place and read at scrape time.

The loops write plain attributes (ready, the live store, consumer lag, the running sweep);
:class:`StateCollector` turns them into gauges when Prometheus scrapes, as prometheus_client's
own process and GC collectors do, so a gauge can never disagree with the state it reports, and
``/readyz`` and ``citation_exporter_ready`` read the same flag. Writes happen on the event loop
and reads on the HTTP thread: collections are replaced, never mutated, so a scrape sees a whole
value.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from exporter.checks.lookup_cache import LookupCache
from exporter.checks.store import ChunkStore
from exporter.checks.verdict import Status

__all__ = ["ExporterState", "StateCollector", "SweepResult"]


@dataclass(frozen=True, slots=True)
class SweepResult:
    """The last completed sweep: citations per status, when it ended, how long it took."""

    statuses: Mapping[str, int]
    completed_at: float
    duration_seconds: float


@dataclass(slots=True)
class ExporterState:
    """The exporter's state; every field is replaced whole by the one loop that owns it."""

    ready: bool = False
    problem: str | None = None
    store: ChunkStore | None = None
    consumer_lag: Mapping[tuple[str, int], int] = field(default_factory=dict)
    sweep_running: bool = False
    sweep_progress: float = 0.0
    last_sweep: SweepResult | None = None
    # a sweep the group shares: this instance's partitions of the latest one, by state
    sweep_partitions: Mapping[str, int] = field(default_factory=dict)
    last_chunker_change: float = 0.0
    entailment_queue_depth: int = 0  # samples waiting for the judge behind the response

    def set_lag(self, lags: Mapping[tuple[str, int], int]) -> None:
        """Merge fresh lag figures in (a new mapping, so a scrape never sees it half-built)."""
        self.consumer_lag = {**self.consumer_lag, **lags}

    def forget_lag(self, partitions: set[tuple[str, int]]) -> None:
        """Drop the lag of partitions another group member now owns (it reports them)."""
        self.consumer_lag = {
            tp: lag for tp, lag in self.consumer_lag.items() if tp not in partitions
        }


# The states of an answer partition's part of a sweep the group shares.
SWEEP_PARTITION_STATES = ("pending", "running", "done")


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


class StateCollector(Collector):
    """The state gauges, computed from :class:`ExporterState` at every scrape."""

    def __init__(self, state: ExporterState) -> None:
        self._state = state

    def describe(self) -> Iterator[GaugeMetricFamily]:
        """The families without values, so the registry can refuse a clashing name."""
        yield from self._families(ExporterState())

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield from self._families(self._state)

    @staticmethod
    def _families(state: ExporterState) -> Iterator[GaugeMetricFamily]:
        store = state.store
        yield _gauge(
            "citation_exporter_ready",
            "1 once the chunk store has caught up and citations are checked.",
            1.0 if state.ready else 0.0,
        )
        yield _gauge(
            "citation_store_chunks",
            "Live chunks held in memory.",
            store.chunk_count if store is not None else 0,
        )
        yield _gauge(
            "citation_store_documents",
            "Live documents held in memory.",
            store.document_count if store is not None else 0,
        )
        cache = store if isinstance(store, LookupCache) else None
        yield _gauge(
            "citation_lookup_cache_bytes",
            "Lookup mode: what the documents held for recent batches cost, as bounded by "
            "chunk_lookup_cache_bytes (0 with a mirror of the store).",
            cache.held_bytes if cache is not None else 0,
        )
        yield _gauge(
            "citation_lookup_cache_documents",
            "Lookup mode: documents held for recent batches, looked-up missing ones included.",
            cache.held_documents if cache is not None else 0,
        )
        yield _gauge(
            "citation_store_last_chunker_change_timestamp_seconds",
            "When chunks cut by a chunker fingerprint not seen before last arrived, after the "
            "initial load (Unix time; 0 until one does): a re-index started.",
            state.last_chunker_change,
        )
        lag = GaugeMetricFamily(
            "citation_exporter_consumer_lag_messages",
            "Messages between the consumer's position and the partition's high water mark.",
            labels=["topic", "partition"],
        )
        for (topic, partition), messages in sorted(state.consumer_lag.items()):
            lag.add_metric([topic, str(partition)], messages)
        yield lag
        yield _gauge(
            "citation_entailment_queue_depth",
            "Sampled citations waiting for the entailment judge behind the response.",
            state.entailment_queue_depth,
        )
        yield _gauge("citation_sweep_in_progress", "1 while a sweep runs.", state.sweep_running)
        yield _gauge(
            "citation_sweep_progress_ratio",
            "Share of the archive the running sweep has checked (0-1); of this instance's "
            "partitions of the latest sweep when the group shares sweeps.",
            state.sweep_progress,
        )
        partitions = GaugeMetricFamily(
            "citation_sweep_partitions",
            "Answer partitions this instance owns, by their state in the latest sweep the "
            "group shares (pending, running, done); summed over the group, the sweep's.",
            labels=["state"],
        )
        for name in SWEEP_PARTITION_STATES:
            partitions.add_metric([name], state.sweep_partitions.get(name, 0))
        yield partitions
        last = state.last_sweep
        statuses = GaugeMetricFamily(
            "citation_sweep_citations",
            "Citations per status in the last completed sweep.",
            labels=["status"],
        )
        for status in Status:
            statuses.add_metric([status.value], last.statuses.get(status, 0) if last else 0)
        yield statuses
        yield _gauge(
            "citation_sweep_last_completed_timestamp_seconds",
            "When the last sweep completed (Unix time).",
            last.completed_at if last else 0.0,
        )
        yield _gauge(
            "citation_sweep_duration_seconds",
            "How long the last completed sweep took.",
            last.duration_seconds if last else 0.0,
        )
