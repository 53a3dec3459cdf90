"""Monitoring as code: the alerting rules (rules/), the Grafana board (grafana/) and the
Kubernetes manifests (deploy/kubernetes/, rules/kubernetes/) of the exporter.

``python -m mixin`` regenerates the committed files from these modules; ``python -m mixin
--check`` fails when they differ (the tests run it). Every setting is in :mod:`mixin.config`
(``--config FILE --out DIR`` renders another deployment); thresholds live in
:mod:`exporter.alerting`.
"""
