"""Throwaway certificates for the TLS tests, made with the openssl command line."""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["openssl_certificate"]

_CONFIG = "[req]\ndistinguished_name = dn\n[dn]\n"


def openssl_certificate(
    directory: Path, name: str, *extra: str, subject: str | None = None, passphrase: str = ""
) -> None:
    """Write ``name.crt`` and ``name.key`` (a P-256 key, one day) into ``directory``.

    Self-signed unless ``extra`` names a CA (``-CA``, ``-CAkey``); the key is encrypted with
    ``passphrase`` when one is given. ``subject`` is the CN (default: ``name``).
    """
    config = directory / "openssl.cnf"
    if not config.exists():
        config.write_text(_CONFIG)
    encryption = ["-passout", f"pass:{passphrase}"] if passphrase else ["-nodes"]
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt"),
            *("ec_paramgen_curve:prime256v1", *encryption, "-days", "1"),
            *("-config", "openssl.cnf", "-subj", f"/CN={subject or name}"),
            *("-keyout", f"{name}.key", "-out", f"{name}.crt", *extra),
        ],
        cwd=directory,
        check=True,
        capture_output=True,
        timeout=30,
    )
