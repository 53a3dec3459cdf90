"""The streaming exporter: the only package that talks to Kafka and serves HTTP."""
