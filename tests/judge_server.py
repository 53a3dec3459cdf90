"""A scripted OpenAI-compatible endpoint on 127.0.0.1 for the model judge's tests and bench.

A real HTTP/1.1 server (stdlib, one thread per connection, keep-alive) on an ephemeral port.
Each POST takes the next :class:`Reply` from the script (the default reply once the script is
used up) and is recorded: path, headers, JSON body, arrival time. The server also tracks the
most requests it has held at once, counted from a request's arrival until its reply begins (a
client may send its next request only after reading a reply, so the count never includes a
request whose reply the client already has).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["JudgeServer", "Recorded", "Reply", "completion"]


def completion(content: Any = "entailed", usage: Any = ..., **extra: Any) -> dict[str, Any]:
    """A chat-completions reply whose first choice says ``content``; ``usage`` defaults to 10
    prompt and 1 completion tokens (pass None to leave it out)."""
    reply: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": "test-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        **extra,
    }
    if usage is ...:
        usage = {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}
    if usage is not None:
        reply["usage"] = usage
    return reply


@dataclass
class Reply:
    """One scripted reply. ``body`` as bytes is sent as is, a str as UTF-8, anything else as
    JSON; None is :func:`completion`'s default (``entailed``)."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before the status line
    drip: float = 0.0  # when set, the body goes out one byte per this many seconds
    length: bool = True  # Content-Length; else the body ends when the connection closes
    close: bool = False  # close the connection at once, sending nothing

    def payload(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode("utf-8")
        return json.dumps(completion() if self.body is None else self.body).encode("utf-8")


@dataclass(frozen=True)
class Recorded:
    path: str
    headers: dict[str, str]  # names in lower case
    body: Any  # the request's JSON, or None when it was not JSON
    at: float  # time.monotonic() on arrival


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # socketserver's 5 drops connections a burst opens (1 s SYN retry)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that goes away mid-reply (a timeout, a cut body) is what some tests do:
        not worth a traceback in the test output. Anything else is printed as usual."""
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class JudgeServer:
    def __init__(self, default: Reply | None = None) -> None:
        self.default = default or Reply()
        self.requests: list[Recorded] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self.port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )

    def start(self) -> JudgeServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    def _next(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            return self._script.popleft() if self._script else self.default

    def _done(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body go out in two writes: with Nagle the body would wait for the
            # client's delayed ACK of the headers (40 ms a reply on Linux)
            disable_nagle_algorithm = True

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                headers = {name.lower(): value for name, value in self.headers.items()}
                reply = server._next(Recorded(self.path, headers, body, time.monotonic()))
                try:
                    self._reply(reply)
                except OSError:  # the client gave up (a timeout, a cut body): expected
                    self.close_connection = True

            def _reply(self, reply: Reply) -> None:
                try:
                    if reply.delay and server._stopping.wait(reply.delay):
                        return
                finally:
                    server._done()
                if reply.close:
                    self.close_connection = True
                    return
                payload = reply.payload()
                self.send_response(reply.status)
                headers = {"Content-Type": "application/json", **reply.headers}
                if reply.length:
                    headers.setdefault("Content-Length", str(len(payload)))
                else:
                    headers["Connection"] = "close"
                    self.close_connection = True
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if reply.drip:
                    for i in range(len(payload)):
                        self.wfile.write(payload[i : i + 1])
                        self.wfile.flush()
                        if server._stopping.wait(reply.drip):
                            return
                else:
                    for start in range(0, len(payload), 65_536):
                        self.wfile.write(payload[start : start + 65_536])
                self.wfile.flush()

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler
