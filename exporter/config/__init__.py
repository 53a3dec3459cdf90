"""Each adapter's typed configuration, and what its values must hold: Kafka's client options
and files, the HTTP endpoint's web configuration file and TLS, the model judge's endpoint.

Apart from the adapters so that :mod:`exporter.settings`, which builds these from variables and
TOML, imports no adapter, and the adapters take these, never the settings.
"""
