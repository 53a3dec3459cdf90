"""The server-side TLS context of the HTTP endpoint, as prometheus_client's ``_get_ssl_ctx``."""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from exporter.web.config import TlsServerConfig

__all__ = ["server_context"]


def server_context(tls: TlsServerConfig) -> ssl.SSLContext:
    """A context for ``tls``; an unusable file raises ValueError naming it."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = tls.min_version
    context.maximum_version = tls.max_version
    try:
        context.load_cert_chain(certfile=tls.cert_file, keyfile=tls.key_file)
    except (ssl.SSLError, OSError) as exc:
        raise ValueError(
            f"tls_server_config.cert_file {tls.cert_file} and key_file {tls.key_file} are not "
            f"a usable certificate and key: {exc}"
        ) from None
    if tls.client_ca_file is not None:
        try:
            context.load_verify_locations(cafile=tls.client_ca_file)
        except (ssl.SSLError, OSError) as exc:
            raise ValueError(
                f"tls_server_config.client_ca_file {tls.client_ca_file} holds no usable CA "
                f"certificate: {exc}"
            ) from None
    context.verify_mode = tls.verify_mode
    return context
