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

import os
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from exporter.errors import SettingsError
from exporter.web.tls import server_context

__all__ = ["CLIENT_AUTH_TYPES", "TlsServerConfig", "WebConfig", "load_web_config"]

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
# $2a$/$2b$/$2y$, a two-digit cost, 22 characters of salt and 31 of hash (htpasswd -B, bcrypt)
_BCRYPT_HASH = re.compile(r"\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}")


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
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SettingsError(f"web config file {path} does not exist") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        why = " ".join(str(exc).split())
        raise SettingsError(f"web config file {path} cannot be read: {why}") from None
    try:
        config = _parse(path, _mapping(document or {}, None, _TOP_KEYS))
        if config.tls is not None:
            server_context(config.tls)  # a key that does not match its certificate, say
    except ValueError as exc:
        raise SettingsError(f"web config file {path}: {exc}") from None
    return config


def _parse(path: Path, document: Mapping[str, Any]) -> WebConfig:
    tls = document.get("tls_server_config")
    if tls is not None:
        tls = _tls(path.parent, _mapping(tls, "tls_server_config", _TLS_KEYS))
    users = _mapping(document.get("basic_auth_users") or {}, "basic_auth_users", None)
    return WebConfig(path=path, tls=tls, basic_auth_users=_users(users))


def _mapping(value: object, where: str | None, keys: tuple[str, ...] | None) -> Mapping[str, Any]:
    """``value`` (the section ``where``; None: the whole file) as a mapping; only ``keys``."""
    if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
        raise ValueError(f"{where or 'the file'} must be a mapping of names to values")
    for key in value:
        if keys is not None and key not in keys:
            prefix = f"{where}." if where else ""
            raise ValueError(
                f"unknown or unsupported key '{prefix}{key}' (supported: {', '.join(keys)})"
            )
    return value


def _tls(directory: Path, section: Mapping[str, Any]) -> TlsServerConfig:
    auth = section.get("client_auth_type") or "NoClientCert"
    if not isinstance(auth, str) or auth not in CLIENT_AUTH_TYPES:
        raise ValueError(
            f"tls_server_config.client_auth_type {auth!r} is not one of "
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
        raise ValueError(f"tls_server_config.{key} must be a file name")
    path = directory / value
    if not path.is_file():
        raise ValueError(f"tls_server_config.{key} {path} does not exist")
    if not os.access(path, os.R_OK):
        raise ValueError(f"tls_server_config.{key} {path} is not readable")
    return path


def _version(section: Mapping[str, Any], key: str, default: str) -> ssl.TLSVersion:
    name = section.get(key) or default
    if not isinstance(name, str) or name not in _TLS_VERSIONS:
        raise ValueError(
            f"tls_server_config.{key} {name!r} is not one of {', '.join(_TLS_VERSIONS)} "
            "(older versions are insecure)"
        )
    return _TLS_VERSIONS[name]


def _users(users: Mapping[str, Any]) -> dict[str, str]:
    for name, hashed in users.items():
        if ":" in name or not name:
            raise ValueError(f"basic_auth_users: {name!r} is not a usable user name")
        if not isinstance(hashed, str) or not _BCRYPT_HASH.fullmatch(hashed):
            # the hash is a secret of sorts: never quote it
            raise ValueError(
                f"basic_auth_users.{name} is not a bcrypt hash ($2b$10$... from "
                "htpasswd -nBC 10 or bcrypt.hashpw)"
            )
    return dict(users)
