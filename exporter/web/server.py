"""``/metrics``, ``/healthz`` and ``/readyz`` over HTTP, served from a background thread.

It keeps answering while Kafka is down: a scrape that fails says nothing, a scrape that shows
``citation_exporter_ready 0`` and a growing lag says what is wrong. ``/healthz`` is liveness:
it answers 200 while the process runs (restarting does not fix a wrong password or a broker
outage, it only loses the chunk store), with the current problem, if any, in its body.
``/readyz`` answers 503 with the same sentence until the chunk store has caught up.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

__all__ = ["MetricsServer"]


class MetricsServer:
    """An HTTP server for one registry; ``is_ready`` decides ``/readyz``."""

    def __init__(
        self,
        registry: CollectorRegistry,
        is_ready: Callable[[], bool],
        host: str,
        port: int,
        problem: Callable[[], str | None] = lambda: None,
    ) -> None:
        registry_, ready_, problem_ = registry, is_ready, problem

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._reply(200, generate_latest(registry_), CONTENT_TYPE_LATEST)
                elif path == "/healthz":
                    trouble = problem_()
                    self._reply(
                        200, b"ok\n" if trouble is None else f"ok, but {trouble}\n".encode()
                    )
                elif path == "/readyz":
                    if ready_():
                        self._reply(200, b"ready\n")
                    else:
                        why = problem_() or "catching up with the chunk store"
                        self._reply(503, f"not ready: {why}\n".encode())
                elif path == "/":
                    self._reply(200, b'<a href="/metrics">metrics</a>\n', "text/html")
                else:
                    self._reply(404, b"not found\n")

            def _reply(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                """Scrapes are too frequent to log."""

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="metrics-http", daemon=True
        )

    @property
    def port(self) -> int:
        """The bound port (useful when asked for port 0)."""
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and release the port (also when never started)."""
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
