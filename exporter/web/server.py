"""``/metrics``, ``/healthz`` and ``/readyz`` over HTTP(S), served from a background thread.

It keeps answering while Kafka is down: a scrape that fails says nothing, a scrape that shows
``citation_exporter_ready 0`` and a growing lag says what is wrong. The server is
prometheus_client's ``ThreadingWSGIServer`` (as in its ``start_wsgi_server``) with two
changes: the TLS handshake runs in the connection's own thread, so one client that connects and
stays silent cannot hold up every scrape behind it, and a silent client is dropped after
CLIENT_TIMEOUT_SECONDS. Requests are not logged: scrapes are too frequent.
"""

from __future__ import annotations

import logging
import socket
import ssl
import sys
import threading
from collections.abc import Callable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import ThreadingWSGIServer

from exporter.web.app import make_app
from exporter.web.auth import BasicAuth
from exporter.web.config import WebConfig
from exporter.web.health import Health
from exporter.web.heartbeat import Heartbeat
from exporter.web.tls import server_context

__all__ = ["CLIENT_TIMEOUT_SECONDS", "MetricsServer"]

log = logging.getLogger(__name__)

# A client that sends nothing for this long (handshake or request) is dropped.
CLIENT_TIMEOUT_SECONDS = 30.0
# How long stop() may wait for the serving thread to notice.
_POLL_SECONDS = 0.1


class MetricsServer:
    """The HTTP(S) endpoint of one registry; ``is_ready`` decides ``/readyz``.

    ``heartbeat``, when given, makes ``/healthz`` fail once the event loop stops beating;
    ``web_config`` adds TLS and basic auth.
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        is_ready: Callable[[], bool],
        host: str,
        port: int,
        problem: Callable[[], str | None] = lambda: None,
        *,
        heartbeat: Heartbeat | None = None,
        web_config: WebConfig | None = None,
    ) -> None:
        users = web_config.basic_auth_users if web_config is not None else {}
        tls = web_config.tls if web_config is not None else None
        app = make_app(
            registry, Health(is_ready, problem, heartbeat), BasicAuth(users) if users else None
        )
        self._server = _Server(host, port, server_context(tls) if tls is not None else None)
        self._server.set_app(app)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": _POLL_SECONDS},
            name="metrics-http",
            daemon=True,
        )

    @property
    def port(self) -> int:
        """The bound port (useful when asked for port 0)."""
        return int(self._server.server_address[1])

    @property
    def scheme(self) -> str:
        return "https" if self._server.tls is not None else "http"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and release the port (also when never started)."""
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()


class _QuietHandler(WSGIRequestHandler):
    timeout = CLIENT_TIMEOUT_SECONDS

    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are too frequent to log."""


class _Server(ThreadingWSGIServer):
    def __init__(self, host: str, port: int, tls: ssl.SSLContext | None) -> None:
        # IPv6 hosts too, as prometheus_client's _get_best_family
        family, _, _, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        self.address_family = family
        self.tls = tls
        super().__init__((str(address[0]), port), _QuietHandler)

    def get_request(self) -> tuple[socket.socket, Any]:
        connection, address = self.socket.accept()
        connection.settimeout(CLIENT_TIMEOUT_SECONDS)
        if self.tls is not None:
            connection = self.tls.wrap_socket(
                connection, server_side=True, do_handshake_on_connect=False
            )
        return connection, address

    def finish_request(self, request: Any, client_address: Any) -> None:
        if isinstance(request, ssl.SSLSocket):
            request.do_handshake()  # in this connection's thread, not the accepting one
        super().finish_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A failed handshake or a client gone away: no traceback on stderr."""
        log.debug("request from %s failed: %r", client_address, sys.exc_info()[1])
