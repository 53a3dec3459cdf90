"""The Kafka adapter: consumers, the producer, the control topic, sweeps over the answer topic,
and the long-running runtime that wires them to the pure :mod:`exporter.pipeline`.

The only package that imports aiokafka.
"""
