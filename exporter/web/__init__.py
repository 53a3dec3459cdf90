"""The HTTP edge: ``/metrics``, ``/healthz`` and ``/readyz``, with optional TLS and basic auth.

``server`` serves ``app`` (the WSGI router) from a thread; ``health`` and ``heartbeat`` decide
the probes, ``auth`` basic auth (the web configuration file and TLS are ``exporter.config``).
"""
