"""``X-Hub-Signature-256`` verification (HMAC-SHA256 of the raw body).

Several secrets may be valid at once so that a secret can be rotated without
dropping deliveries: GitHub signs with the new one while the old is still
accepted. Comparison is constant-time; no secret ever appears in an error.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable

PREFIX = "sha256="


def sign(secret: str, body: bytes) -> str:
    """The header value GitHub would send for this body."""
    return PREFIX + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(secrets: Iterable[str], body: bytes, header: str | None) -> bool:
    """Whether ``header`` is a valid signature of ``body`` under any of ``secrets``."""
    if not header or not header.startswith(PREFIX):
        return False
    matched = False
    for secret in secrets:
        if secret:
            # Check every secret, so timing does not tell which one matched.
            matched |= hmac.compare_digest(sign(secret, body), header)
    return matched
