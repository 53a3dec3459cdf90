"""The server-side TLS context of the HTTP endpoint, as prometheus_client's ``_get_ssl_ctx``."""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING

from exporter.small_files import shown

if TYPE_CHECKING:
    from exporter.web.config import TlsServerConfig

__all__ = ["MAX_TLS_FILE_BYTES", "EncryptedKey", "refuse_passphrase", "server_context"]

# A certificate chain, a key or a CA bundle (Mozilla's whole bundle is about 200 KiB).
MAX_TLS_FILE_BYTES = 1024 * 1024


class EncryptedKey(Exception):  # noqa: N818 - the condition, raised through OpenSSL
    """A key that needs a passphrase."""


def refuse_passphrase() -> bytes:
    """The passphrase callback of ``load_cert_chain``: without one, OpenSSL asks for the
    passphrase of an encrypted key on the terminal, or reads it from standard input, and
    start-up waits for it forever."""
    raise EncryptedKey


def server_context(tls: TlsServerConfig) -> ssl.SSLContext:
    """A context for ``tls``; an unusable file raises ValueError naming it."""
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
