"""The HTTP edge: ``/metrics``, ``/healthz`` and ``/readyz``, with optional TLS and basic auth.

``server`` serves ``app`` (the WSGI router) from a thread; ``health`` and ``heartbeat`` decide
the probes, ``config``, ``tls`` and ``auth`` the web configuration file.
"""
