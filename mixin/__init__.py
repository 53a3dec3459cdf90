"""Monitoring as code: the alerting rules (rules/) and Grafana boards (grafana/) of the exporter.

``python -m mixin`` regenerates the committed files from these modules; ``python -m mixin
--check`` fails when they differ (the tests run it). Thresholds live in :mod:`exporter.alerting`.
"""
