"""The exporter over SASL_SSL, mutual TLS and SASL OAUTHBEARER against a real broker, and what
it says when the password, the CA, the client certificate or the token is wrong: one log line
naming the cause, /readyz 503 and /healthz saying why, no exit, and the secret nowhere to be seen.

The listeners are those ``scripts/kafka-local start`` opens (SASL_SSL with SCRAM-SHA-512 on
KAFKA_PORT+2, TLS with required client certificates on KAFKA_PORT+3, SASL_PLAINTEXT with
OAUTHBEARER and Kafka's validator of unsecured JWTs on KAFKA_PORT+4); an external broker
(``CITATION_KAFKA_BOOTSTRAP``) has none of them, so these tests skip there.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from kafka_support import (
    KAFKA_LOCAL,
    ExporterProcess,
    answer_messages,
    chunk_messages,
    consume,
    consume_citation_verdicts,
    create_topics,
    expected_verdicts,
    free_port,
    produce,
    total,
    unsecured_jwt,
)

from exporter.simulate.files import write_scenario
from exporter.simulate.scenario import ScenarioConfig, build_scenario

pytestmark = pytest.mark.kafka

INVALID_LINES = 3
# How long a failing exporter is watched: several retries with backoff (0.5, 1, 2, 4, 8 s).
FAILURE_WATCH_SECONDS = 12.0
# "2026-11-30 08:09:07,311 ERROR exporter.kafka.runtime: message"
LOG_LINE = re.compile(r"^\S+ \S+ (?P<level>[A-Z]+) (?P<logger>[\w.]+): (?P<message>.*)$")
STILL_RETRYING = "; retrying with backoff until it is fixed"


@dataclass(frozen=True)
class Security:
    """What ``scripts/kafka-local security`` prints, with the password read from its file."""

    sasl_ssl_bootstrap: str
    mtls_bootstrap: str
    ca_file: str
    other_ca_file: str
    client_cert: str
    client_key: str
    sasl_mechanism: str
    sasl_username: str
    sasl_password: str
    oauthbearer_bootstrap: str

    def sasl_ssl(self, **changes: str) -> dict[str, str]:
        """Exporter settings for the SASL_SSL listener (``changes`` override them)."""
        return {
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": self.sasl_mechanism,
            "sasl_username": self.sasl_username,
            "sasl_password": self.sasl_password,
            "ssl_cafile": self.ca_file,
            **changes,
        }

    def mtls(self, client_certificate: bool = True) -> dict[str, str]:
        """Exporter settings for the mutual-TLS listener."""
        settings = {"security_protocol": "SSL", "ssl_cafile": self.ca_file}
        if client_certificate:
            settings |= {"ssl_certfile": self.client_cert, "ssl_keyfile": self.client_key}
        return settings

    def oauthbearer(self, token_file: Path) -> dict[str, str]:
        """Exporter settings for the OAUTHBEARER listener, logging in with ``token_file``."""
        return {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "OAUTHBEARER",
            "sasl_oauth_token_file": str(token_file),
        }


@pytest.fixture(scope="module")
def security(bootstrap: str) -> Security:
    if os.environ.get("CITATION_KAFKA_BOOTSTRAP"):
        pytest.skip(
            "CITATION_KAFKA_BOOTSTRAP names an external broker, which has none of the SASL_SSL "
            "and mutual-TLS listeners of scripts/kafka-local"
        )
    done = subprocess.run(
        [str(KAFKA_LOCAL), "security"], capture_output=True, text=True, timeout=30, check=False
    )
    if done.returncode != 0:
        pytest.skip(
            f"scripts/kafka-local security failed (exit {done.returncode}): "
            f"{done.stderr.strip() or done.stdout.strip()}"
        )
    values = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    return Security(
        sasl_ssl_bootstrap=values["SASL_SSL_BOOTSTRAP"],
        mtls_bootstrap=values["MTLS_BOOTSTRAP"],
        ca_file=values["CA_FILE"],
        other_ca_file=values["OTHER_CA_FILE"],
        client_cert=values["CLIENT_CERT"],
        client_key=values["CLIENT_KEY"],
        sasl_mechanism=values["SASL_MECHANISM"],
        sasl_username=values["SASL_USERNAME"],
        sasl_password=Path(values["SASL_PASSWORD_FILE"]).read_text().strip(),
        oauthbearer_bootstrap=values["OAUTHBEARER_BOOTSTRAP"],
    )


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    config = ScenarioConfig(seed=31, answers=200, invalid_lines=INVALID_LINES)
    return write_scenario(build_scenario(config), tmp_path_factory.mktemp("security-scenario"))


def _get(port: int, path: str) -> tuple[int, str]:
    """Status and body of a GET on the exporter's HTTP port (an error status is returned too)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _log_records(log: Path) -> list[tuple[str, str, str]]:
    """(level, logger, message) of every formatted line of an exporter log."""
    records = []
    for line in log.read_text(errors="replace").splitlines():
        match = LOG_LINE.match(line)
        if match:
            records.append((match["level"], match["logger"], match["message"]))
    return records


def _own_errors(log: Path) -> list[str]:
    """Messages the exporter's own loggers (not aiokafka's) wrote at WARNING or above."""
    return [
        message
        for level, logger, message in _log_records(log)
        if logger.split(".")[0] == "exporter" and level in ("WARNING", "ERROR", "CRITICAL")
    ]


# ------------------------------------------------------------------------------- happy paths


@pytest.mark.parametrize("listener", ["sasl_ssl", "mtls", "oauthbearer"])
def test_the_exporter_consumes_and_produces_over_a_secured_listener(
    bootstrap: str,
    security: Security,
    scenario: dict[str, Path],
    tmp_path: Path,
    listener: str,
) -> None:
    # the topics and the input go in over PLAINTEXT; the exporter sees only the secured listener
    topics = create_topics(bootstrap)
    produce(bootstrap, topics.chunks, chunk_messages(scenario["chunks"]))
    answers = produce(bootstrap, topics.answers, answer_messages(scenario["citations"]))
    expected = expected_verdicts(scenario["expected"])
    failing = {e["citation_id"]: e for e in expected if e["status"] != "ok"}
    assert failing, "the scenario must give the exporter verdicts to publish"

    if listener == "sasl_ssl":
        address, settings = security.sasl_ssl_bootstrap, security.sasl_ssl()
    elif listener == "mtls":
        address, settings = security.mtls_bootstrap, security.mtls()
    else:
        token = tmp_path / "token"
        token.write_text(unsecured_jwt("exporter", time.time() + 3600) + "\n")
        address, settings = security.oauthbearer_bootstrap, security.oauthbearer(token)
    log = tmp_path / "exporter.log"
    exporter = ExporterProcess(address, topics, log, **settings)
    try:
        exporter.wait_ready(seconds=45)
        exporter.wait_for("citation_exporter_events_total", answers, 45, topic=topics.answers)
        exporter.wait_for("citation_checks_total", len(expected), 45, mode="inline")
        samples = exporter.scrape()
        _, metrics_text = _get(exporter.port, "/metrics")
        health = _get(exporter.port, "/healthz")
        readiness = _get(exporter.port, "/readyz")
    finally:
        assert exporter.stop() == 0

    assert health == (200, "ok\n")
    assert readiness == (200, "ready\n")
    assert total(samples, "citation_exporter_ready") == 1
    assert total(samples, "citation_checks_total", mode="inline") == len(expected)
    assert (
        total(samples, "citation_exporter_invalid_events_total", topic=topics.answers)
        == INVALID_LINES
    )

    # what it produced over the secured listener, read back over PLAINTEXT
    verdicts = consume_citation_verdicts(bootstrap, topics.verdicts, len(failing), seconds=30)
    assert sorted(r.key.decode() for r in verdicts) == sorted(failing)
    for record in verdicts:
        got, want = orjson.loads(record.value), failing[record.key.decode()]
        assert (got["status"], got["reason"]) == (want["status"], want["reason"])
        assert got["mode"] == "inline" and got["topic"] == topics.answers
    letters = consume(bootstrap, topics.dlq, INVALID_LINES, seconds=30)
    assert len(letters) == INVALID_LINES
    for letter in letters:
        headers = dict(letter.headers)
        assert headers["source_topic"].decode() == topics.answers
        assert headers["reason"] and headers["error"]

    text = log.read_text(errors="replace")
    assert STILL_RETRYING not in text, "a clean run reports no connection problem"
    assert "Traceback" not in text
    assert security.sasl_password not in text
    assert security.sasl_password not in metrics_text


# ---------------------------------------------------------------------------- failure cases

FAILURES = ["wrong-password", "untrusted-ca", "no-client-certificate"]


def _failure(
    case: str, security: Security, wrong_password: str
) -> tuple[str, dict[str, str], list[str]]:
    """Bootstrap address, settings, and the fragments the explanation must contain."""
    if case == "wrong-password":
        return (
            security.sasl_ssl_bootstrap,
            security.sasl_ssl(sasl_password=wrong_password),
            [
                f"Kafka at {security.sasl_ssl_bootstrap} ",
                f"rejected the SASL {security.sasl_mechanism} login of user "
                f"'{security.sasl_username}'",
                "sasl_password",
            ],
        )
    if case == "untrusted-ca":
        return (
            security.sasl_ssl_bootstrap,
            security.sasl_ssl(ssl_cafile=security.other_ca_file),
            [
                f"the TLS certificate of Kafka at {security.sasl_ssl_bootstrap} is not trusted",
                f"ssl_cafile: {security.other_ca_file}",
            ],
        )
    assert case == "no-client-certificate"
    return (
        security.mtls_bootstrap,
        security.mtls(client_certificate=False),
        [
            f"Kafka at {security.mtls_bootstrap} requires a client certificate and none is "
            "configured",
            "ssl_certfile",
        ],
    )


@pytest.mark.parametrize("case", FAILURES)
def test_a_security_misconfiguration_is_named_once_and_never_ends_the_process(
    bootstrap: str, security: Security, tmp_path: Path, case: str
) -> None:
    wrong_password = f"wrong-{uuid.uuid4().hex}"
    secrets = [security.sasl_password, wrong_password]
    address, settings, fragments = _failure(case, security, wrong_password)
    topics = create_topics(bootstrap)
    log = tmp_path / "exporter.log"

    exporter = ExporterProcess(address, topics, log, **settings)
    started = time.monotonic()
    seen: list[tuple[int, str]] = []
    try:
        # the diagnosis arrives within a few seconds; then the exporter is watched as it retries
        while time.monotonic() - started < FAILURE_WATCH_SECONDS:
            assert exporter.process.poll() is None, (
                f"the exporter exited with {exporter.process.returncode}:\n{log.read_text()}"
            )
            with contextlib.suppress(urllib.error.URLError, ConnectionError):  # not up yet
                seen.append(_get(exporter.port, "/readyz"))
            time.sleep(0.5)
        assert exporter.process.poll() is None, "the exporter must keep retrying, not exit"
        ready_status, ready_body = _get(exporter.port, "/readyz")
        health_status, health_body = _get(exporter.port, "/healthz")
        _, metrics_text = _get(exporter.port, "/metrics")
        samples = exporter.scrape()
    finally:
        code = exporter.stop()
    assert code == 0, f"SIGTERM while retrying must exit 0, not {code}"

    # /readyz: 503 all along, and the reason in its body
    assert seen and {status for status, _ in seen} == {503}, seen
    assert ready_status == 503
    assert ready_body.startswith("not ready: ") and ready_body.endswith("\n")
    for fragment in fragments:
        assert fragment in ready_body, (fragment, ready_body)
    # /healthz: alive (a restart fixes none of this), saying why it is not well
    assert health_status == 200
    assert health_body == "ok, but " + ready_body.removeprefix("not ready: ")
    assert total(samples, "citation_exporter_ready") == 0
    assert total(samples, "citation_checks_total") == 0

    # the log: one line of the exporter's own naming the cause, though it retried several times
    errors = _own_errors(log)
    assert len(errors) == 1, errors
    [line] = errors
    assert line == ready_body.removeprefix("not ready: ").rstrip("\n") + STILL_RETRYING
    records = _log_records(log)
    starts = [m for _, logger, m in records if "metrics on http://" in m]
    assert len(starts) == 1, "started once: no restart inside the process"
    lines = Counter((level, logger, message) for level, logger, message in records)
    assert max(lines.values()) == 1, f"a repeated line: {lines.most_common(1)}"
    text = log.read_text(errors="replace")
    assert "Traceback" not in text

    # the password, right or wrong, is nowhere
    for secret in secrets:
        for where, seen_text in (
            ("the log", text),
            ("/metrics", metrics_text),
            ("/readyz", ready_body),
            ("/healthz", health_body),
        ):
            assert secret not in seen_text, f"a password in {where}"


def _rotate(token_file: Path, token: str) -> None:
    """Replace the token as a sidecar does: a new file renamed over the old one."""
    fresh = token_file.with_suffix(".new")
    fresh.write_text(token + "\n")
    os.replace(fresh, token_file)


def test_an_expired_oauthbearer_token_is_named_and_a_rotated_one_is_used_without_a_restart(
    bootstrap: str, security: Security, scenario: dict[str, Path], tmp_path: Path
) -> None:
    topics = create_topics(bootstrap)
    produce(bootstrap, topics.chunks, chunk_messages(scenario["chunks"]))
    produce(bootstrap, topics.answers, answer_messages(scenario["citations"]))
    expected = expected_verdicts(scenario["expected"])
    expired_at = int(time.time()) - 3600
    expired, fresh = (
        unsecured_jwt("exporter", expired_at),
        unsecured_jwt("exporter", time.time() + 3600),
    )
    token_file = tmp_path / "token"
    token_file.write_text(expired + "\n")
    address = security.oauthbearer_bootstrap
    sentence = (
        f"Kafka at {address} rejected the OAUTHBEARER token in sasl_oauth_token_file "
        f"{token_file}: it expired at "
        f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(expired_at))} UTC"
    )
    log = tmp_path / "exporter.log"

    exporter = ExporterProcess(address, topics, log, **security.oauthbearer(token_file))
    try:
        # Kafka's refusal reaches aiokafka as metadata without brokers: the topic lookup waits
        # out its 15 s request timeout before the diagnosis runs
        deadline = time.monotonic() + 60
        readiness = (0, "")
        while time.monotonic() < deadline and sentence not in readiness[1]:
            assert exporter.process.poll() is None, log.read_text()
            with contextlib.suppress(urllib.error.URLError, ConnectionError):
                readiness = _get(exporter.port, "/readyz")
            time.sleep(0.5)
        assert readiness == (503, f"not ready: {sentence}\n")
        assert _own_errors(log) == [sentence + STILL_RETRYING]

        _rotate(token_file, fresh)
        exporter.wait_ready(seconds=60)
        exporter.wait_for("citation_checks_total", len(expected), 45, mode="inline")
    finally:
        assert exporter.stop() == 0

    records = _log_records(log)
    starts = [m for _, logger, m in records if "metrics on http://" in m]
    assert len(starts) == 1, "the same process, not a restart, picked up the new token"
    text = log.read_text(errors="replace")
    assert "Traceback" not in text
    for token in (expired, fresh):
        assert token not in text, "a token in the log"


# ---------------------------------------------------------------------------- no broker needed


def test_a_missing_ca_file_stops_start_up_at_once_naming_the_setting(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "ca.pem"
    password = f"secret-{uuid.uuid4().hex}"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CITATION_EXPORTER_")},
        "CITATION_EXPORTER_BOOTSTRAP_SERVERS": "127.0.0.1:9",
        "CITATION_EXPORTER_METRICS_HOST": "127.0.0.1",
        "CITATION_EXPORTER_METRICS_PORT": str(free_port()),
        "CITATION_EXPORTER_SECURITY_PROTOCOL": "SASL_SSL",
        "CITATION_EXPORTER_SASL_MECHANISM": "SCRAM-SHA-512",
        "CITATION_EXPORTER_SASL_USERNAME": "exporter",
        "CITATION_EXPORTER_SASL_PASSWORD": password,
        "CITATION_EXPORTER_SSL_CAFILE": str(missing),
    }
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "exporter.cli", "run"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert elapsed < 15, f"took {elapsed:.1f} s: it must not try to connect"
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "ssl_cafile" in lines[0] and str(missing) in lines[0], lines[0]
    assert "does not exist" in lines[0]
    assert done.stdout == ""
    assert password not in done.stderr
