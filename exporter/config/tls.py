"""TLS files, as the HTTP endpoint and the Kafka clients load them: bounded, never prompting."""

from __future__ import annotations

__all__ = ["MAX_TLS_FILE_BYTES", "EncryptedKey", "refuse_passphrase"]

# A certificate chain, a key or a CA bundle (Mozilla's whole bundle is about 200 KiB).
MAX_TLS_FILE_BYTES = 1024 * 1024


class EncryptedKey(Exception):  # noqa: N818 - the condition, raised through OpenSSL
    """A key that needs a passphrase."""


def refuse_passphrase() -> bytes:
    """The passphrase callback of ``load_cert_chain``: without one, OpenSSL asks for the
    passphrase of an encrypted key on the terminal, or reads it from standard input, and
    start-up waits for it forever."""
    raise EncryptedKey
