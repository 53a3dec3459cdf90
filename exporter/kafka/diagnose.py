"""Why Kafka cannot be reached, in one sentence an operator can act on.

When a client cannot start, aiokafka raises "Unable to bootstrap from [...]" whatever the cause,
and logs the cause on a separate line, if at all. A wrong password, an untrusted CA, a missing
client certificate and a TLS client talking to a plaintext port then all look alike, and all look
like an outage that a retry will fix. So on a failure we connect to each bootstrap server once
more, as the clients do (TLS, then SASL), with aiokafka's own connection, and turn the first
error into a sentence that names the setting to look at. Secrets never appear in it.

A rejected OAUTHBEARER token needs a closer look: Kafka answers it with an error challenge that
aiokafka takes for success, and then refuses the next request with an empty metadata response
(no broker lists no broker, itself included) before hanging up.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import ssl
import time
from pathlib import Path
from typing import Any

import orjson
from aiokafka.conn import create_conn
from aiokafka.errors import (
    KafkaConnectionError,
    SaslAuthenticationFailed,
    UnsupportedSaslMechanismError,
)
from aiokafka.protocol.metadata import MetadataRequest

from exporter.config.kafka import KafkaConnection
from exporter.kafka.clients import client_id, connection_options
from exporter.records.limits import preview

__all__ = ["bootstrap_hosts", "diagnose", "explain"]


def bootstrap_hosts(servers: str) -> list[tuple[str, int]]:
    """``host:port,host:port`` as pairs (the port defaults to 9092, as in Kafka)."""
    hosts = []
    for listed in servers.split(","):
        server = listed.strip()
        if not server:
            continue
        host, _, port = server.rpartition(":") if ":" in server else (server, "", "9092")
        hosts.append((host.strip("[]") or "localhost", int(port) if port.isdigit() else 9092))
    return hosts


class TokenRejectedError(Exception):
    """The broker refused the OAUTHBEARER token (seen as an empty metadata response)."""


def token_expiry(path: Path | None) -> float | None:
    """The ``exp`` claim of the JWT in ``path`` (None for an opaque token or an unreadable
    file): enough to tell an expired token from one the broker does not accept."""
    try:
        payload = (path.read_text(encoding="utf-8") if path else "").strip().split(".")[1]
        claims = orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (OSError, IndexError, ValueError):  # not base64, not JSON, not UTF-8
        return None
    expiry = claims.get("exp") if isinstance(claims, dict) else None
    return float(expiry) if isinstance(expiry, int | float) else None


def _rejected_token(where: str, connection: KafkaConnection) -> str:
    path = connection.sasl_oauth_token_file
    said = f"{where} rejected the OAUTHBEARER token in sasl_oauth_token_file {path}"
    expiry = token_expiry(path)
    if expiry is not None and expiry <= time.time():
        return (
            f"{said}: it expired at {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(expiry))} UTC"
        )
    return f"{said} (invalid, expired, or issued for another broker)"


def _tls_alert(exc: BaseException) -> ssl.SSLError | None:
    """The TLS error behind ``exc``, which aiokafka wraps in a connection error."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def explain(exc: BaseException, host: str, port: int, connection: KafkaConnection) -> str:
    """One sentence on why connecting to ``host:port`` failed, naming the setting to check."""
    where = f"Kafka at {host}:{port}"
    protocol = connection.security_protocol
    mechanism = connection.sasl_mechanism or "PLAIN"
    if isinstance(exc, TokenRejectedError) or (
        isinstance(exc, SaslAuthenticationFailed) and mechanism == "OAUTHBEARER"
    ):
        return _rejected_token(where, connection)
    if isinstance(exc, SaslAuthenticationFailed) and mechanism == "GSSAPI":
        return (
            f"{where} rejected the SASL GSSAPI login: check the Kerberos ticket or keytab and "
            f"the service principal {connection.sasl_kerberos_service_name}@"
            f"{connection.sasl_kerberos_domain_name or host} (sasl_kerberos_service_name, "
            "sasl_kerberos_domain_name)"
        )
    if isinstance(exc, SaslAuthenticationFailed):
        return (
            f"{where} rejected the SASL {connection.sasl_mechanism or 'PLAIN'} login of user "
            f"{connection.sasl_username!r}: wrong username or password (sasl_username, "
            "sasl_password)"
        )
    if isinstance(exc, UnsupportedSaslMechanismError):
        # aiokafka's own message is the repr of its connection object; say it plainly
        return f"{where} does not offer SASL {connection.sasl_mechanism} (sasl_mechanism)"
    if isinstance(exc, ssl.SSLCertVerificationError):
        trusted = connection.ssl_cafile or "not set, so the system CAs"
        return (
            f"the TLS certificate of {where} is not trusted: {exc.verify_message} "
            f"(ssl_cafile: {trusted})"
        )
    alert = _tls_alert(exc)
    if alert is not None:
        reason = alert.reason or str(alert)
        if "CERTIFICATE" in reason.upper() and not connection.ssl_certfile:
            return (
                f"{where} requires a client certificate and none is configured "
                f"(ssl_certfile, ssl_keyfile; TLS alert {reason})"
            )
        if "CERTIFICATE" in reason.upper():
            return (
                f"{where} refused the client certificate ssl_certfile={connection.ssl_certfile} "
                f"(TLS alert {reason}): is it signed by a CA the broker trusts?"
            )
        return f"the TLS handshake with {where} failed: {reason}"
    if isinstance(exc, ConnectionRefusedError):
        return f"nothing accepts connections at {host}:{port} (bootstrap_servers)"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve {host!r}: {exc} (bootstrap_servers)"
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return f"no answer from {where} in time (bootstrap_servers, network)"
    if isinstance(exc, ConnectionResetError | KafkaConnectionError) and protocol != "PLAINTEXT":
        return (
            f"{where} closed the connection during the {protocol} handshake: is this a "
            f"{protocol} listener? (security_protocol, bootstrap_servers)"
        )
    if isinstance(exc, ConnectionResetError | KafkaConnectionError):
        return (
            f"{where} closed the connection: does this listener expect TLS or SASL? "
            "(security_protocol)"
        )
    return f"cannot connect to {where}: {type(exc).__name__}: {preview(str(exc))}"


async def _probe(host: str, port: int, options: dict[str, Any], timeout: float) -> None:
    connection = await asyncio.wait_for(
        create_conn(
            host,
            port,
            client_id=options["client_id"],
            request_timeout_ms=int(timeout * 1000),
            ssl_context=options.get("ssl_context"),
            security_protocol=options["security_protocol"],
            sasl_mechanism=options.get("sasl_mechanism"),
            sasl_plain_username=options.get("sasl_plain_username"),
            sasl_plain_password=options.get("sasl_plain_password"),
            sasl_kerberos_service_name=options.get("sasl_kerberos_service_name", "kafka"),
            sasl_kerberos_domain_name=options.get("sasl_kerberos_domain_name"),
            sasl_oauth_token_provider=options.get("sasl_oauth_token_provider"),
        ),
        timeout,
    )
    try:
        # a listener that expects SASL lets the version handshake through, then hangs up
        response = await asyncio.wait_for(connection.send(MetadataRequest([])), timeout)
    finally:
        connection.close()
    if not response.brokers and options.get("sasl_mechanism") == "OAUTHBEARER":
        raise TokenRejectedError  # see the module's docstring


async def diagnose(connection: KafkaConnection, timeout: float = 10.0) -> str | None:
    """Why no bootstrap server can be used, or None when one of them can."""
    options = {**connection_options(connection), "client_id": client_id(connection, "diagnose")}
    problems = []
    for host, port in bootstrap_hosts(connection.bootstrap_servers):
        try:
            await _probe(host, port, options, timeout)
        except Exception as exc:
            problems.append(explain(exc, host, port, connection))
            continue
        return None
    return "; ".join(problems) or "bootstrap_servers names no server"
