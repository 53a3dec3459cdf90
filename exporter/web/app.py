"""The WSGI application: ``/metrics`` from prometheus_client, health, auth, and ``HEAD``.

``/metrics`` is prometheus_client's own ``make_wsgi_app``, so content negotiation (OpenMetrics
for ``Accept: application/openmetrics-text``), gzip and ``name[]`` filtering behave as in every
other Python exporter. Around it: ``/healthz`` and ``/readyz``, which stay open when basic auth
is on (a kubelet probe carries no password; their bodies hold a status sentence, no metrics and
no secrets), a landing page at ``/``, and ``HEAD`` for all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from http import HTTPStatus
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from prometheus_client import CollectorRegistry, make_wsgi_app

from exporter.web.auth import REALM, BasicAuth
from exporter.web.health import Health

__all__ = ["make_app"]

_Headers = list[tuple[str, str]]
_Response = tuple[str, _Headers, bytes]
_TEXT = "text/plain; charset=utf-8"
_LANDING = b'<html><body><a href="/metrics">metrics</a></body></html>\n'


def make_app(
    registry: CollectorRegistry, health: Health, auth: BasicAuth | None = None
) -> WSGIApplication:
    """The whole endpoint as one WSGI application; ``auth`` guards all but the probes."""
    metrics: WSGIApplication = make_wsgi_app(registry)

    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        method = environ["REQUEST_METHOD"]
        path = environ.get("PATH_INFO", "")
        if method not in ("GET", "HEAD"):
            status, headers, body = _text(405, "method not allowed\n")
            headers.append(("Allow", "GET, HEAD"))
        elif path in ("/healthz", "/readyz"):
            status, headers, body = _text(*_probe(health, path))
        elif auth is not None and not auth.allows(environ.get("HTTP_AUTHORIZATION")):
            status, headers, body = _text(401, "unauthorized\n")
            headers.append(("WWW-Authenticate", f'Basic realm="{REALM}", charset="UTF-8"'))
        elif path == "/metrics":
            status, headers, body = _call(metrics, {**environ, "REQUEST_METHOD": "GET"})
        elif path == "/":
            status, headers, body = _reply(200, _LANDING, "text/html; charset=utf-8")
        else:
            status, headers, body = _text(404, "not found\n")
        headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
        start_response(status, [*headers, ("Content-Length", str(len(body)))])
        return [] if method == "HEAD" else [body]

    return app


def _probe(health: Health, path: str) -> tuple[int, str]:
    return health.liveness() if path == "/healthz" else health.readiness()


def _text(code: int, text: str) -> _Response:
    return _reply(code, text.encode(), _TEXT)


def _reply(code: int, body: bytes, content_type: str) -> _Response:
    return f"{code} {HTTPStatus(code).phrase}", [("Content-Type", content_type)], body


def _call(app: WSGIApplication, environ: WSGIEnvironment) -> _Response:
    """Run ``app`` and keep its answer, so that HEAD can send the headers alone."""
    answer: list[tuple[str, _Headers]] = []

    def start_response(
        status: str, headers: _Headers, exc_info: object = None
    ) -> Callable[[bytes], object]:
        answer.append((status, list(headers)))
        return lambda data: None  # prometheus_client returns its body, it never writes

    body = b"".join(app(environ, start_response))
    status, headers = answer[-1]
    return status, headers, body
