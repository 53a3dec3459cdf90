"""HTTP basic auth against bcrypt hashes, as the exporter-toolkit checks them.

bcrypt is slow on purpose (about 60 ms at cost 10, four times that at 12): verified once per
user and password, not once per scrape. What is remembered is an HMAC of the password under a
key that lives only in this process, never the password itself. Checks that miss the cache run
one at a time, so a flood of wrong passwords occupies one core rather than all of them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import threading
from collections.abc import Mapping

import bcrypt

__all__ = ["REALM", "BasicAuth"]

REALM = "citation-drift-exporter"


class BasicAuth:
    """Decides whether an ``Authorization`` header names a user and their password."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._hashes = {name: hashed.encode() for name, hashed in users.items()}
        # an unknown user costs as much as a known one: its name cannot be found by timing
        cost = max((int(hashed.split("$")[2]) for hashed in users.values()), default=10)
        self._decoy = bcrypt.hashpw(secrets.token_bytes(16), bcrypt.gensalt(cost))
        self._key = secrets.token_bytes(32)
        self._verified: dict[str, bytes] = {}  # user -> HMAC of the password that verified
        self._lock = threading.Lock()

    def allows(self, authorization: str | None) -> bool:
        credentials = _credentials(authorization)
        if credentials is None:
            return False
        user, password = credentials
        digest = hmac.digest(self._key, password, hashlib.sha256)
        if hmac.compare_digest(self._verified.get(user, b""), digest):
            return True
        hashed = self._hashes.get(user)
        with self._lock:
            matches = _checkpw(password, hashed if hashed is not None else self._decoy)
        if matches and hashed is not None:
            self._verified[user] = digest
            return True
        return False


def _credentials(authorization: str | None) -> tuple[str, bytes] | None:
    """User and password of a ``Basic`` header; None for anything else.

    The header is whatever the client sent (http.server decodes it as Latin-1), so a character
    outside base64, and outside ASCII, is one more wrong header rather than an exception.
    """
    scheme, _, encoded = (authorization or "").strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip().encode("ascii"), validate=True)
        user, colon, password = decoded.partition(b":")
        return (user.decode("utf-8"), password) if colon else None
    except (UnicodeError, binascii.Error):  # UnicodeEncodeError: not ASCII
        return None


def _checkpw(password: bytes, hashed: bytes) -> bool:
    try:
        return bcrypt.checkpw(password, hashed)
    except ValueError:  # longer than bcrypt's 72 bytes: no hash can match it
        return False
