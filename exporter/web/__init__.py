"""The HTTP edge: ``/metrics``, ``/healthz`` and ``/readyz``."""
