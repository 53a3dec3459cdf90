"""What happens to every message, whatever brought it: no Kafka, no HTTP, no files.

The Kafka adapter (:mod:`exporter.kafka`), ``run --source`` replays and the demo all feed
records through :class:`~exporter.pipeline.core.Pipeline`, so they judge and count alike.
"""
