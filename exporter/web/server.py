"""``/metrics``, ``/healthz`` and ``/readyz`` over HTTP(S), served from a background thread.

It keeps answering while Kafka is down: a scrape that fails says nothing, a scrape that shows
``citation_exporter_ready 0`` and a growing lag says what is wrong. The server is
prometheus_client's ``ThreadingWSGIServer`` (as in its ``start_wsgi_server``), hardened
against clients that are slow or many on purpose:

* the TLS handshake runs in the connection's own thread, so one client that connects and stays
  silent cannot hold up every scrape behind it;
* the handshake, the request line and the headers together must arrive within
  CLIENT_TIMEOUT_SECONDS, however slowly they trickle in (a per-read timeout alone lets a client
  that sends one byte every few seconds hold its thread for ever), and within
  MAX_REQUEST_HEAD_BYTES (http.server alone would buffer a hundred 64 KiB headers);
* at most MAX_CONNECTIONS connections are served at once, MAX_CONNECTIONS_PER_CLIENT of them
  from one address, so one host that opens thousands neither exhausts threads nor keeps
  Prometheus, connecting from another address, out; a connection over either limit is closed
  at once.

Requests are not logged: scrapes are too frequent.
"""

from __future__ import annotations

import io
import logging
import socket
import ssl
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import ThreadingWSGIServer

from exporter.config.web import WebConfig, server_context
from exporter.web.app import make_app
from exporter.web.auth import BasicAuth
from exporter.web.health import Health
from exporter.web.heartbeat import Heartbeat

__all__ = [
    "CLIENT_TIMEOUT_SECONDS",
    "MAX_CONNECTIONS",
    "MAX_CONNECTIONS_PER_CLIENT",
    "MAX_REQUEST_HEAD_BYTES",
    "MetricsServer",
]

log = logging.getLogger(__name__)

# A client whose handshake and request head are not complete this long after it was accepted is
# dropped; so is one that takes longer than this for any single write of the answer.
CLIENT_TIMEOUT_SECONDS = 30.0
# The request line and every header together (a scrape sends a few hundred bytes).
MAX_REQUEST_HEAD_BYTES = 128 * 1024
# Connections served at once, in all and from one client address. A Prometheus scrapes a target
# one request at a time; a few HA replicas, probes and a curl fit many times over.
MAX_CONNECTIONS = 64
MAX_CONNECTIONS_PER_CLIENT = 16
# Connections the kernel queues for accept(): socketserver's 5 makes a burst of scrapes wait
# a second for a SYN retransmit.
_LISTEN_BACKLOG = 128
# At most one warning per this many seconds about connections refused over the limits.
_REFUSAL_LOG_SECONDS = 60.0
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


class _HeadReader(io.RawIOBase):
    """The request's socket as read by http.server: every read shares one deadline and one
    byte budget. A read past either raises, which drops the connection."""

    def __init__(self, connection: socket.socket, deadline: float, budget: int) -> None:
        super().__init__()
        self._connection = connection
        self._deadline = deadline
        self._budget = budget

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"request not complete after {CLIENT_TIMEOUT_SECONDS:.0f} s")
        if self._budget <= 0:
            raise ConnectionError(f"request head over {MAX_REQUEST_HEAD_BYTES} bytes")
        view = memoryview(buffer).cast("B")[: self._budget]
        self._connection.settimeout(remaining)
        try:
            received = self._connection.recv_into(view)
        finally:
            self._connection.settimeout(CLIENT_TIMEOUT_SECONDS)  # for writing the answer
        self._budget -= received
        return received


class _QuietHandler(WSGIRequestHandler):
    def setup(self) -> None:
        # CLIENT_TIMEOUT_SECONDS read now, not at import (tests lower it)
        deadline = time.monotonic() + CLIENT_TIMEOUT_SECONDS
        super().setup()
        self.connection.settimeout(CLIENT_TIMEOUT_SECONDS)  # the handshake's, as a whole
        if isinstance(self.connection, ssl.SSLSocket):
            self.connection.do_handshake()  # in this connection's thread, not the accepting one
        self.rfile.close()  # the unbounded reader of StreamRequestHandler; the socket stays open
        self.rfile = io.BufferedReader(
            _HeadReader(self.connection, deadline, MAX_REQUEST_HEAD_BYTES)
        )

    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are too frequent to log."""


class _Server(ThreadingWSGIServer):
    request_queue_size = _LISTEN_BACKLOG

    def __init__(self, host: str, port: int, tls: ssl.SSLContext | None) -> None:
        # IPv6 hosts too, as prometheus_client's _get_best_family
        family, _, _, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        self.address_family = family
        self.tls = tls
        self._lock = threading.Lock()
        self._open: Counter[str] = Counter()  # client address -> connections being served
        self._refusal_logged = -_REFUSAL_LOG_SECONDS
        super().__init__((str(address[0]), port), _QuietHandler)

    def get_request(self) -> tuple[socket.socket, Any]:
        connection, address = self.socket.accept()
        connection.settimeout(CLIENT_TIMEOUT_SECONDS)
        if self.tls is not None:
            connection = self.tls.wrap_socket(
                connection, server_side=True, do_handshake_on_connect=False
            )
        return connection, address

    def process_request(self, request: Any, client_address: Any) -> None:
        client = str(client_address[0])
        if not self._admit(client):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:  # no thread started: nothing else will release the place
            self._release(client)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release(str(client_address[0]))

    def _admit(self, client: str) -> bool:
        with self._lock:
            total = self._open.total()
            if total < MAX_CONNECTIONS and self._open[client] < MAX_CONNECTIONS_PER_CLIENT:
                self._open[client] += 1
                return True
            now = time.monotonic()
            loud = now - self._refusal_logged >= _REFUSAL_LOG_SECONDS
            if loud:
                self._refusal_logged = now
        (log.warning if loud else log.debug)(
            "refused a connection from %s: %d connections open, %d from that address "
            "(limits %d and %d)",
            client,
            total,
            self._open[client],
            MAX_CONNECTIONS,
            MAX_CONNECTIONS_PER_CLIENT,
        )
        return False

    def _release(self, client: str) -> None:
        with self._lock:
            self._open[client] -= 1
            if self._open[client] <= 0:
                del self._open[client]

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A failed handshake, a client too slow or gone away: no traceback on stderr."""
        log.debug("request from %s failed: %r", client_address, sys.exc_info()[1])
