"""The web configuration file: TLS and basic auth for the HTTP endpoint, read once at start-up.

The format is a subset of the Prometheus exporter-toolkit's ``--web.config.file``, so one file
can serve this exporter and a node_exporter alike::

    tls_server_config:
      cert_file: server.crt          # relative paths are relative to this file
      key_file: server.key
      client_ca_file: clients-ca.crt
      client_auth_type: RequireAndVerifyClientCert
      min_version: TLS12
    basic_auth_users:
      prometheus: $2b$10$...         # bcrypt

A key outside that subset is an error rather than ignored: a ``client_allowed_sans`` that is
silently dropped would let in clients its author meant to keep out. Every problem raises
SettingsError, one line naming the file and the key.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exporter.config.tls import MAX_TLS_FILE_BYTES, EncryptedKey, refuse_passphrase
from exporter.errors import SettingsError
from exporter.small_files import (
    UnusableFile,
    described,
    load_yaml,
    read_small_file,
    shown,
    small_file_problem,
)

__all__ = [
    "CLIENT_AUTH_TYPES",
    "MAX_BCRYPT_COST",
    "MAX_WEB_CONFIG_BYTES",
    "Exposure",
    "TlsServerConfig",
    "WebConfig",
    "load_web_config",
    "server_context",
]

# A web configuration file is a few hundred bytes; this is room for hundreds of users.
MAX_WEB_CONFIG_BYTES = 64 * 1024
# bcrypt doubles its work with each step of cost: 14 takes about a second a check, 31 a month
# (and start-up computes one hash at the highest cost in the file).
MAX_BCRYPT_COST = 14

# exporter-toolkit's names (Go's tls.ClientAuthType) and what Python's ssl makes of them.
# RequestClientCert and RequireAnyClientCert accept unverified certificates: ssl cannot, and
# exporter-toolkit itself calls them insecure.
CLIENT_AUTH_TYPES = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_TLS_VERSIONS = {"TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
_TOP_KEYS = ("tls_server_config", "basic_auth_users")
_TLS_KEYS = (
    "cert_file",
    "key_file",
    "client_ca_file",
    "client_auth_type",
    "min_version",
    "max_version",
)
# $2a$/$2b$/$2y$, a two-digit cost, 22 characters of salt and 31 of hash (htpasswd -B, bcrypt);
# the salt's last character carries 2 of its 6 bits, so only four characters can end it (bcrypt
# refuses any other as an invalid salt, and no password could ever match)
_BCRYPT_HASH = re.compile(r"\$2[aby]\$(?P<cost>[0-9]{2})\$[./A-Za-z0-9]{21}[.Oeu][./A-Za-z0-9]{31}")


@dataclass(frozen=True)
class TlsServerConfig:
    """HTTPS for the endpoint, optionally with client certificates."""

    cert_file: Path
    key_file: Path
    client_ca_file: Path | None = None
    client_auth_type: str = "NoClientCert"
    min_version: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2
    max_version: ssl.TLSVersion = ssl.TLSVersion.TLSv1_3

    @property
    def verify_mode(self) -> ssl.VerifyMode:
        return CLIENT_AUTH_TYPES[self.client_auth_type]


@dataclass(frozen=True)
class WebConfig:
    """A loaded and checked web configuration file."""

    path: Path
    tls: TlsServerConfig | None = None
    # user name -> bcrypt hash; empty: no basic auth
    basic_auth_users: Mapping[str, str] = field(default_factory=dict)


def load_web_config(path: Path) -> WebConfig:
    """Read and check ``path``; its files must be usable now, not at the first scrape."""
    where = f"web config file {shown(path)}"
    try:
        document = load_yaml(read_small_file(path, MAX_WEB_CONFIG_BYTES))
    except UnusableFile as exc:
        raise SettingsError(f"{where} {exc}") from None
    try:
        config = _parse(path, _mapping(document or {}, None, _TOP_KEYS))
        if config.tls is not None:
            server_context(config.tls)  # a key that does not match its certificate, say
    except ValueError as exc:
        raise SettingsError(f"{where}: {exc}") from None
    return config


def _parse(path: Path, document: Mapping[str, Any]) -> WebConfig:
    tls = document.get("tls_server_config")
    if tls is not None:
        tls = _tls(path.parent, _mapping(tls, "tls_server_config", _TLS_KEYS))
    users = _mapping(document.get("basic_auth_users") or {}, "basic_auth_users", None)
    return WebConfig(path=path, tls=tls, basic_auth_users=_users(users))


def _mapping(value: object, where: str | None, keys: tuple[str, ...] | None) -> Mapping[str, Any]:
    """``value`` (the section ``where``; None: the whole file) as a mapping; only ``keys``."""
    if not isinstance(value, dict):
        raise ValueError(f"{where or 'the file'} must be a mapping of names to values")
    prefix = f"{where}." if where else ""
    for key in value:
        if not isinstance(key, str):
            raise ValueError(
                f"{where or 'the file'}: the key {described(key)} is not a string (quote it)"
            )
        if keys is not None and key not in keys:
            raise ValueError(
                f"unknown or unsupported key '{prefix}{shown(key)}' (supported: {', '.join(keys)})"
            )
    return value


def _tls(directory: Path, section: Mapping[str, Any]) -> TlsServerConfig:
    auth = section.get("client_auth_type") or "NoClientCert"
    if not isinstance(auth, str) or auth not in CLIENT_AUTH_TYPES:
        raise ValueError(
            f"tls_server_config.client_auth_type {described(auth)} is not one of "
            f"{', '.join(CLIENT_AUTH_TYPES)}"
        )
    client_ca = _file(directory, section, "client_ca_file")
    if client_ca is not None and auth == "NoClientCert":
        raise ValueError("tls_server_config.client_ca_file is set but client_auth_type is not")
    if client_ca is None and auth != "NoClientCert":
        raise ValueError(f"tls_server_config.client_auth_type {auth} needs client_ca_file")
    config = TlsServerConfig(
        cert_file=_required_file(directory, section, "cert_file"),
        key_file=_required_file(directory, section, "key_file"),
        client_ca_file=client_ca,
        client_auth_type=auth,
        min_version=_version(section, "min_version", "TLS12"),
        max_version=_version(section, "max_version", "TLS13"),
    )
    if config.min_version > config.max_version:
        raise ValueError("tls_server_config.min_version is above max_version")
    return config


def _required_file(directory: Path, section: Mapping[str, Any], key: str) -> Path:
    path = _file(directory, section, key)
    if path is None:
        raise ValueError(f"tls_server_config.{key} is missing")
    return path


def _file(directory: Path, section: Mapping[str, Any], key: str) -> Path | None:
    """The file named by ``key``, which must be readable; relative to the config file."""
    value = section.get(key)
    if not value:
        return None
    if not isinstance(value, str):
        raise ValueError(f"tls_server_config.{key} must be a file name, not {described(value)}")
    path = directory / value
    problem = small_file_problem(path, MAX_TLS_FILE_BYTES)
    if problem is not None:
        raise ValueError(f"tls_server_config.{key} {shown(path)} {problem}")
    return path


def _version(section: Mapping[str, Any], key: str, default: str) -> ssl.TLSVersion:
    name = section.get(key) or default
    if not isinstance(name, str) or name not in _TLS_VERSIONS:
        raise ValueError(
            f"tls_server_config.{key} {described(name)} is not one of {', '.join(_TLS_VERSIONS)} "
            "(older versions are insecure)"
        )
    return _TLS_VERSIONS[name]


def _users(users: Mapping[str, Any]) -> dict[str, str]:
    for name, hashed in users.items():
        if ":" in name or not name:
            raise ValueError(f"basic_auth_users: '{shown(name)}' is not a usable user name")
        match = _BCRYPT_HASH.fullmatch(hashed) if isinstance(hashed, str) else None
        if match is None:
            # the hash is a secret of sorts: never quote it
            raise ValueError(
                f"basic_auth_users.{shown(name)} is not a bcrypt hash ($2b$10$... from "
                "htpasswd -nBC 12 or bcrypt.hashpw)"
            )
        cost = int(match["cost"])
        if not 4 <= cost <= MAX_BCRYPT_COST:
            raise ValueError(
                f"basic_auth_users.{shown(name)} has bcrypt cost {cost}: use 4 to "
                f"{MAX_BCRYPT_COST} (each check at cost {MAX_BCRYPT_COST} takes about a second)"
            )
    return dict(users)


def server_context(tls: TlsServerConfig) -> ssl.SSLContext:
    """A context for ``tls``, as prometheus_client's ``_get_ssl_ctx`` makes one; an unusable file
    raises ValueError naming it."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = tls.min_version
    context.maximum_version = tls.max_version
    try:
        context.load_cert_chain(
            certfile=tls.cert_file, keyfile=tls.key_file, password=refuse_passphrase
        )
    except EncryptedKey:
        raise ValueError(
            f"tls_server_config.key_file {shown(tls.key_file)} is encrypted: the exporter "
            "needs a key without a passphrase"
        ) from None
    except (ssl.SSLError, OSError) as exc:
        raise ValueError(
            f"tls_server_config.cert_file {shown(tls.cert_file)} and key_file "
            f"{shown(tls.key_file)} are not a usable certificate and key: {shown(exc, 200)}"
        ) from None
    if tls.client_ca_file is not None:
        try:
            context.load_verify_locations(cafile=tls.client_ca_file)
        except (ssl.SSLError, OSError) as exc:
            raise ValueError(
                f"tls_server_config.client_ca_file {shown(tls.client_ca_file)} holds no usable "
                f"CA certificate: {shown(exc, 200)}"
            ) from None
    context.verify_mode = tls.verify_mode
    return context


@dataclass(frozen=True, slots=True)
class Exposure:
    """What the metrics endpoint needs: where it listens, its web configuration file (TLS,
    basic auth), and which sources and topics get a label value of their own (the rest are
    counted as "other"). Built by the settings; the HTTP adapter takes this, never them."""

    host: str
    port: int
    web_config_file: Path | None = None
    sources: frozenset[str] = frozenset()
    max_sources: int = 20
    topics: frozenset[str] = frozenset()
    max_topics: int = 20
