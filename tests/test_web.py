"""The HTTP endpoint, over real HTTP(S) on 127.0.0.1: negotiation, probes, TLS, basic auth."""

from __future__ import annotations

import asyncio
import base64
import gzip
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import bcrypt
import pytest
from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from prometheus_client.parser import text_string_to_metric_families as text_families
from tls_support import openssl_certificate

from exporter.checks.verdict import Action, Repair, Status, Verdict
from exporter.config.web import WebConfig, load_web_config
from exporter.outputs.metrics import ExporterMetrics, SourceLabels
from exporter.pipeline.outcome import CheckedCitation, Mode, Origin, Outcome
from exporter.settings import Settings, SettingsError, load_settings
from exporter.web.auth import BasicAuth
from exporter.web.heartbeat import Heartbeat
from exporter.web.server import MetricsServer

OPENMETRICS = "application/openmetrics-text; version=1.0.0"

# -- helpers -----------------------------------------------------------------------------------


def _exporter_registry() -> CollectorRegistry:
    """The exporter's metrics with a few outcomes recorded, and the process collectors."""
    registry = CollectorRegistry(auto_describe=True)  # as the exporter's
    metrics = ExporterMetrics(registry, SourceLabels(), "1.2.3")
    repaired = Verdict(
        "c",
        "a",
        "d",
        Status.DRIFT_REPAIRED,
        Action.REWRITE_OFFSETS,
        reason="chunk_missing",
        repair=Repair("d#1", 0, 5, 100.0, "exact", -112),
        source="acme",
    )
    superseded = Verdict(
        "c",
        "a",
        "d",
        Status.SUPERSEDED,
        Action.PIN_ARCHIVED_VERSION,
        reason="quote_mismatch",
        similarity=40.0,
        source="acme",
    )
    ok = Verdict("c", "a", "d", Status.OK, Action.KEEP, similarity=100.0, source="acme")
    origin = Origin("rag.answers", 0, 1)
    metrics.record(
        [
            Outcome(origin, Mode.INLINE, [CheckedCitation(v, 0.0002) for v in (repaired, ok)]),
            Outcome(origin, Mode.SWEEP, [CheckedCitation(superseded, 0.0002)]),
        ]
    )
    for collector in (ProcessCollector, PlatformCollector, GCCollector):
        collector(registry=registry)
    return registry


@contextmanager
def _serving(registry: CollectorRegistry | None = None, **kwargs: Any) -> Iterator[MetricsServer]:
    is_ready = kwargs.pop("is_ready", lambda: True)
    server = MetricsServer(
        registry if registry is not None else _exporter_registry(),
        is_ready,
        "127.0.0.1",
        0,
        **kwargs,
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _request(
    url: str,
    headers: dict[str, str] | None = None,
    method: str = "GET",
    context: ssl.SSLContext | None = None,
) -> tuple[int, Any, bytes]:
    """Status, headers and body; an HTTP error status is an answer, not an exception."""
    request = urllib.request.Request(url, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def _url(server: MetricsServer, path: str) -> str:
    return f"{server.scheme}://127.0.0.1:{server.port}{path}"


def _basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def _refused(url: str, context: ssl.SSLContext) -> str:
    """The error of a request refused during the TLS handshake, before any HTTP status.

    Which one the client sees is a race (TLS 1.3 finishes the client's side of the handshake
    before the server judges its certificate): the server's alert, an EOF, or a reset.
    """
    with pytest.raises(OSError) as refused:
        _request(url, context=context)
    error: object = refused.value
    if isinstance(error, urllib.error.URLError) and not isinstance(error, urllib.error.HTTPError):
        error = error.reason
    assert isinstance(error, ssl.SSLError | ConnectionResetError), f"not TLS: {error!r}"
    return str(error)


def _strictly_parsed(openmetrics: bytes) -> list[Any]:
    """Families of an OpenMetrics scrape, by prometheus_client's strict parser.

    Without ``citation_offset_shift_characters``: its buckets are negative, so prometheus_client
    leaves out ``_sum`` (in both formats) and its own OpenMetrics parser then rejects the
    ``_count`` without it; Prometheus scrapes it as it is.
    """
    lines = openmetrics.decode().splitlines(keepends=True)
    kept = [line for line in lines if "citation_offset_shift_characters" not in line]
    return list(text_string_to_metric_families("".join(kept)))


needs_promtool = pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="promtool not installed (scripts/test installs Debian's prometheus package)",
)

# -- /metrics through prometheus_client's WSGI app ---------------------------------------------


def test_text_format_by_default_and_openmetrics_when_asked() -> None:
    with _serving() as server:
        status, headers, text = _request(_url(server, "/metrics"))
        _, om_headers, openmetrics = _request(_url(server, "/metrics"), {"Accept": OPENMETRICS})
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert b"# EOF" not in text
    assert om_headers["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
    assert openmetrics.endswith(b"# EOF\n")
    in_text = {f.name for f in text_families(text.decode())}
    in_openmetrics = {f.name: f for f in _strictly_parsed(openmetrics)}
    assert set(in_openmetrics) <= in_text
    assert {"citation_checks", "process_resident_memory_bytes"} <= set(in_openmetrics)
    checks = {
        (s.labels["mode"], s.labels["source"]): s.value
        for s in in_openmetrics["citation_checks"].samples
        if s.name == "citation_checks_total"
    }
    assert checks[("inline", "acme")] == 2.0 and checks[("sweep", "acme")] == 1.0


def test_gzip_only_when_accepted() -> None:
    with _serving() as server:
        _, zipped_headers, zipped = _request(_url(server, "/metrics"), {"Accept-Encoding": "gzip"})
        _, plain_headers, plain = _request(_url(server, "/metrics"))
    assert zipped_headers["Content-Encoding"] == "gzip"
    assert b"citation_checks_total" in gzip.decompress(zipped)
    assert plain_headers["Content-Encoding"] is None
    assert b"citation_checks_total" in plain


def test_name_filter_serves_only_the_named_metrics() -> None:
    with _serving() as server:
        status, _, body = _request(
            _url(
                server, "/metrics?name[]=citation_checks_total&name[]=process_resident_memory_bytes"
            )
        )
    assert status == 200
    names = {f.name for f in text_families(body.decode())}
    assert names == {"citation_checks", "process_resident_memory_bytes"}


def test_head_sends_the_headers_of_get_without_a_body() -> None:
    registry = CollectorRegistry()
    ExporterMetrics(registry, SourceLabels(), "1.2.3")  # no process metrics: a stable length
    with _serving(registry) as server:
        _, got_headers, body = _request(_url(server, "/metrics"))
        status, headers, empty = _request(_url(server, "/metrics"), method="HEAD")
        health_status, _, health_body = _request(_url(server, "/healthz"), method="HEAD")
    assert (status, empty) == (200, b"")
    assert int(headers["Content-Length"]) == len(body) > 0
    assert headers["Content-Type"] == got_headers["Content-Type"]
    assert (health_status, health_body) == (200, b"")


@needs_promtool
@pytest.mark.parametrize("accept", [None, "text/plain", OPENMETRICS])
def test_promtool_finds_nothing_to_lint(accept: str | None) -> None:
    """promtool 2.x reads the text format only: OpenMetrics is checked by its strict parser."""
    with _serving() as server:
        _, headers, body = _request(_url(server, "/metrics"), {"Accept": accept} if accept else {})
    if accept == OPENMETRICS:
        assert len(_strictly_parsed(body)) > 10
        assert headers["Content-Type"].startswith("application/openmetrics-text")
        return
    assert b"process_resident_memory_bytes" in body
    done = subprocess.run(
        ["promtool", "check", "metrics"], input=body, capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout + done.stderr == b""


# -- probes and the rest -----------------------------------------------------------------------


def test_probes_landing_page_and_unknown_paths() -> None:
    ready = [False]
    problem: list[str | None] = ["Kafka at 127.0.0.1:1 rejected the SASL login"]
    with _serving(is_ready=lambda: ready[0], problem=lambda: problem[0]) as server:
        assert _request(_url(server, "/healthz"))[::2] == (
            200,
            b"ok, but Kafka at 127.0.0.1:1 rejected the SASL login\n",
        )
        assert _request(_url(server, "/readyz"))[::2] == (
            503,
            b"not ready: Kafka at 127.0.0.1:1 rejected the SASL login\n",
        )
        problem[0] = None
        assert _request(_url(server, "/readyz"))[::2] == (
            503,
            b"not ready: catching up with the chunk store\n",
        )
        ready[0] = True
        assert _request(_url(server, "/readyz"))[::2] == (200, b"ready\n")
        assert _request(_url(server, "/healthz"))[::2] == (200, b"ok\n")
        status, headers, body = _request(_url(server, "/"))
        assert status == 200 and b'href="/metrics"' in body
        assert headers["Content-Type"].startswith("text/html")
        assert _request(_url(server, "/nope"))[0] == 404
        status, headers, _ = _request(_url(server, "/metrics"), method="POST")
        assert status == 405 and headers["Allow"] == "GET, HEAD"


def test_stop_before_start_releases_the_port() -> None:
    server = MetricsServer(CollectorRegistry(), lambda: True, "127.0.0.1", 0)
    port = server.port
    assert port > 0
    server.stop()
    with socket.socket() as again:
        again.bind(("127.0.0.1", port))


def test_a_stale_heartbeat_fails_healthz_and_readyz() -> None:
    now = [1000.0]
    heartbeat = Heartbeat(stale_after=30.0, clock=lambda: now[0])
    with _serving(heartbeat=heartbeat) as server:
        now[0] += 3600.0
        assert _request(_url(server, "/healthz"))[0] == 200, "not watched before the first beat"
        heartbeat.beat()
        now[0] += 30.0
        assert _request(_url(server, "/healthz"))[::2] == (200, b"ok\n"), "30 s is not stuck yet"
        now[0] += 12.0
        status, _, body = _request(_url(server, "/healthz"))
        assert status == 503
        assert (
            body == b"not ok: the event loop is stuck: no heartbeat for 42 s, nothing is checked\n"
        )
        status, _, body = _request(_url(server, "/readyz"))
        assert status == 503 and b"no heartbeat for 42 s" in body
        assert _request(_url(server, "/metrics"))[0] == 200, "metrics are still served"
        heartbeat.beat()
        assert _request(_url(server, "/healthz"))[0] == 200


def test_a_blocked_event_loop_fails_healthz_until_it_runs_again() -> None:
    heartbeat = Heartbeat(stale_after=0.3)
    beating, blocked, release, done = (threading.Event() for _ in range(4))

    async def loop_that_blocks() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(heartbeat.keep_beating(stop, every=0.05))
        await asyncio.sleep(0.1)
        beating.set()
        blocked.wait(5)
        deadline = time.monotonic() + 5
        while not release.is_set() and time.monotonic() < deadline:
            time.sleep(0.02)  # a blocking call on the event loop
        await asyncio.sleep(0.2)  # the heartbeat runs again
        done.set()
        release.wait(5)
        stop.set()
        await task

    thread = threading.Thread(target=asyncio.run, args=(loop_that_blocks(),), daemon=True)
    with _serving(heartbeat=heartbeat) as server:
        thread.start()
        try:
            assert beating.wait(5)
            assert _request(_url(server, "/healthz"))[0] == 200
            blocked.set()
            statuses = []
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and 503 not in statuses:
                statuses.append(_request(_url(server, "/healthz"))[0])
                time.sleep(0.05)
            assert statuses[-1] == 503
        finally:
            release.set()
        assert done.wait(5)
        assert _request(_url(server, "/healthz"))[0] == 200
    thread.join(5)
    assert not thread.is_alive()


def test_no_heartbeat_means_no_loop_check() -> None:
    """The demo and replays: no event loop beats, none is judged."""
    with _serving(heartbeat=None) as server:
        assert _request(_url(server, "/healthz"))[::2] == (200, b"ok\n")


# -- the exporter's registry -------------------------------------------------------------------


def test_the_exporter_exports_process_metrics_and_beats_while_running(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from exporter.kafka.runtime import Exporter

    async def no_kafka(self: Exporter, stop: asyncio.Event) -> None:
        await asyncio.sleep(0.05)
        stop.set()

    monkeypatch.setattr(Exporter, "_serve", no_kafka)
    settings = Settings(metrics_port=0, metrics_host="127.0.0.1")
    first, second = Exporter(settings), Exporter(settings)  # registries of their own
    try:
        second.http.start()
        base = f"http://127.0.0.1:{second.http.port}/metrics"
        _, _, body = _request(base)
        names = {f.name for f in text_families(body.decode())}
        assert {"process_resident_memory_bytes", "python_info", "python_gc_collections"} <= names
        _, _, body = _request(base + "?name[]=process_resident_memory_bytes")
        (memory,) = text_families(body.decode())
        assert memory.name == "process_resident_memory_bytes" and memory.samples[0].value > 0
        assert first.heartbeat.age() is None
        asyncio.run(first.run(asyncio.Event()))
        assert first.heartbeat.age() is not None, "run() made the loop beat"
        assert second.heartbeat.age() is None
    finally:
        first.http.stop()
        second.http.stop()


def test_the_demo_and_replays_export_process_metrics_too() -> None:
    from exporter.cli.offline import OfflineExporter

    offline = OfflineExporter(Settings(metrics_port=0, metrics_host="127.0.0.1"))
    try:
        memory = offline.registry.get_sample_value("process_resident_memory_bytes")
        assert memory is not None and memory > 0
        assert any(m.name == "python_info" for m in offline.registry.collect())
    finally:
        offline.http.stop()


# -- TLS and basic auth ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Throwaway CAs and certificates: a server CA, a client CA and a stranger CA."""
    directory = tmp_path_factory.mktemp("certs")
    for ca in ("server-ca", "client-ca", "stranger-ca"):
        openssl_certificate(
            directory,
            ca,
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        )
    leaf = ("-addext", "basicConstraints=CA:FALSE")
    openssl_certificate(
        directory,
        "server",
        "-CA",
        "server-ca.crt",
        "-CAkey",
        "server-ca.key",
        "-addext",
        "subjectAltName=IP:127.0.0.1",
        *leaf,
    )
    for client, ca in (("client", "client-ca"), ("stranger", "stranger-ca")):
        openssl_certificate(directory, client, "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key", *leaf)
    return directory


def _web_config(directory: Path, text: str) -> Path:
    path = directory / "web.yml"
    path.write_text(text)
    return path


def _client(certs: Path, cert: str | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=certs / "server-ca.crt")
    if cert is not None:
        context.load_cert_chain(certs / f"{cert}.crt", certs / f"{cert}.key")
    return context


TLS = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"


def test_https_with_a_certificate_from_a_test_ca(certs: Path) -> None:
    config = load_web_config(_web_config(certs, TLS))
    with _serving(web_config=config) as server:
        assert server.scheme == "https"
        status, _, body = _request(_url(server, "/metrics"), context=_client(certs))
        assert status == 200 and b"citation_checks_total" in body
        error = _refused(_url(server, "/metrics"), ssl.create_default_context())
        assert "CERTIFICATE_VERIFY_FAILED" in error
        plain = f"http://127.0.0.1:{server.port}/healthz"
        with pytest.raises(OSError):
            urllib.request.urlopen(plain, timeout=5)


def test_a_silent_client_does_not_hold_up_the_handshakes_of_others(certs: Path) -> None:
    config = load_web_config(_web_config(certs, TLS))
    with (
        _serving(web_config=config) as server,
        socket.create_connection(("127.0.0.1", server.port), timeout=5),
    ):
        started = time.monotonic()
        assert _request(_url(server, "/healthz"), context=_client(certs))[0] == 200
        assert time.monotonic() - started < 3


def test_mutual_tls_lets_in_only_clients_of_the_client_ca(certs: Path) -> None:
    config = load_web_config(
        _web_config(
            certs,
            TLS
            + "  client_ca_file: client-ca.crt\n  client_auth_type: RequireAndVerifyClientCert\n",
        )
    )
    with _serving(web_config=config) as server:
        url = _url(server, "/metrics")
        assert _request(url, context=_client(certs, "client"))[0] == 200
        _refused(url, _client(certs))
        _refused(url, _client(certs, "stranger"))
        assert _request(url, context=_client(certs, "client"))[0] == 200, "still serving"


def test_optional_client_certificates_are_verified_when_given(certs: Path) -> None:
    config = load_web_config(
        _web_config(
            certs,
            TLS + "  client_ca_file: client-ca.crt\n  client_auth_type: VerifyClientCertIfGiven\n",
        )
    )
    with _serving(web_config=config) as server:
        url = _url(server, "/metrics")
        assert _request(url, context=_client(certs))[0] == 200
        assert _request(url, context=_client(certs, "client"))[0] == 200
        _refused(url, _client(certs, "stranger"))


def _hash(password: str) -> str:
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(4)).decode()


def test_basic_auth_guards_all_but_the_probes(tmp_path: Path) -> None:
    config = load_web_config(
        _web_config(tmp_path, f"basic_auth_users:\n  prometheus: '{_hash('s3cret')}'\n")
    )
    with _serving(web_config=config) as server:
        url = _url(server, "/metrics")
        assert _request(url, _basic("prometheus", "s3cret"))[0] == 200
        for headers in (
            _basic("prometheus", "wrong"),
            _basic("nobody", "s3cret"),
            {"Authorization": "Bearer s3cret"},
            {},
        ):
            status, answer, body = _request(url, headers)
            assert status == 401 and b"citation_" not in body
            assert answer["WWW-Authenticate"].startswith('Basic realm="citation-drift-exporter"')
        assert _request(_url(server, "/"), _basic("prometheus", "wrong"))[0] == 401
        assert _request(_url(server, "/healthz"))[0] == 200
        assert _request(_url(server, "/readyz"))[0] == 200


def test_basic_auth_and_https_together(certs: Path) -> None:
    config = load_web_config(
        _web_config(certs, TLS + f"basic_auth_users:\n  prometheus: '{_hash('s3cret')}'\n")
    )
    with _serving(web_config=config) as server:
        url = _url(server, "/metrics")
        assert _request(url, _basic("prometheus", "s3cret"), context=_client(certs))[0] == 200
        assert _request(url, context=_client(certs))[0] == 401


def test_a_verified_password_is_not_hashed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    auth = BasicAuth({"prometheus": _hash("s3cret")})
    calls: list[bytes] = []
    checkpw = bcrypt.checkpw

    def counted(password: bytes, hashed: bytes) -> bool:
        calls.append(password)
        return checkpw(password, hashed)

    monkeypatch.setattr(bcrypt, "checkpw", counted)
    header = _basic("prometheus", "s3cret")["Authorization"]
    assert auth.allows(header) and auth.allows(header) and auth.allows(header)
    assert len(calls) == 1
    wrong = _basic("prometheus", "s3cret!")["Authorization"]
    assert not auth.allows(wrong) and not auth.allows(wrong)
    assert len(calls) == 3, "a wrong password is checked every time"
    assert not auth.allows(_basic("prometheus", "x" * 100)["Authorization"]), "over 72 bytes"
    assert not auth.allows("Basic !!!not-base64")
    assert not auth.allows(None)


# -- the web config file -----------------------------------------------------------------------

GOOD_HASH = "$2b$04$" + "a" * 53


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            "http_server_config:\n  http2: false\n",
            "unknown or unsupported key 'http_server_config'",
        ),
        (TLS + "  client_allowed_sans: [a]\n", "key 'tls_server_config.client_allowed_sans'"),
        (TLS.replace("server.crt", "missing.crt"), "cert_file"),
        (TLS.replace("server.key", "client.key"), "not a usable certificate and key"),
        ("tls_server_config:\n  key_file: server.key\n", "cert_file is missing"),
        (
            TLS + "  client_auth_type: RequireAnyClientCert\n",
            "client_auth_type 'RequireAnyClientCert'",
        ),
        (TLS + "  client_auth_type: RequireAndVerifyClientCert\n", "needs client_ca_file"),
        (TLS + "  client_ca_file: client-ca.crt\n", "client_ca_file is set but client_auth_type"),
        (TLS + "  min_version: TLS10\n", "min_version 'TLS10'"),
        (
            "basic_auth_users:\n  prometheus: hunter2\n",
            "basic_auth_users.prometheus is not a bcrypt",
        ),
        (f"basic_auth_users:\n  'a:b': '{GOOD_HASH}'\n", "'a:b' is not a usable user name"),
        ("basic_auth_users: [prometheus]\n", "basic_auth_users must be a mapping"),
        ("tls_server_config: [\n", "is not valid YAML"),
        ("just words\n", "the file must be a mapping"),
        (TLS + "  client_auth_type: [a, b]\n", "client_auth_type a list is not one of"),
    ],
)
def test_an_invalid_web_config_is_one_line_naming_file_and_key(
    certs: Path, text: str, fragment: str
) -> None:
    path = _web_config(certs, text)
    with pytest.raises(SettingsError) as invalid:
        load_web_config(path)
    message = str(invalid.value)
    assert message.startswith(f"web config file {path}")
    assert fragment in message
    assert "\n" not in message and "hunter2" not in message


def test_a_missing_web_config_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"web config file .*nope\.yml does not exist"):
        load_web_config(tmp_path / "nope.yml")


def test_an_empty_web_config_changes_nothing(tmp_path: Path) -> None:
    assert load_web_config(_web_config(tmp_path, "")) == WebConfig(tmp_path / "web.yml")


def test_the_setting_checks_the_file_at_start_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.startswith("CITATION_EXPORTER_"):
            monkeypatch.delenv(name)
    path = _web_config(tmp_path, "basic_auth_users:\n  prometheus: hunter2\n")
    monkeypatch.setenv("CITATION_EXPORTER_WEB_CONFIG_FILE", str(path))
    with pytest.raises(SettingsError) as invalid:
        load_settings()
    assert "web_config_file (CITATION_EXPORTER_WEB_CONFIG_FILE)" in str(invalid.value)
    assert str(path) in str(invalid.value)
    monkeypatch.setenv("CITATION_EXPORTER_WEB_CONFIG_FILE", "")
    assert load_settings().web_config_file is None


def test_run_with_an_invalid_web_config_exits_2_in_one_line(tmp_path: Path) -> None:
    path = _web_config(tmp_path, "tls_server_config:\n  cert_file: nope.crt\n  key_file: k\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CITATION_EXPORTER_")}
    done = subprocess.run(
        [sys.executable, "-m", "exporter.cli", "run", "--web-config-file", str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert f"web config file {path}" in done.stderr and "cert_file" in done.stderr
