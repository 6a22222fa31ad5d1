from __future__ import annotations

import json
from pathlib import Path

from app.webhooks.signature import sign, verify

PAYLOAD = (
    Path(__file__).resolve().parents[2] / "shared/github/webhooks/examples/api.github.com/ping/payload.json"
)


def test_accepts_current_and_rotating_secret_rejects_others() -> None:
    body = PAYLOAD.read_bytes() if PAYLOAD.exists() else json.dumps({"zen": "ok"}).encode()
    header = sign("old-secret", body)
    assert verify(["new-secret", "old-secret"], body, header)
    assert not verify(["new-secret"], body, header)
    assert not verify(["old-secret"], body + b" ", header)
    assert not verify(["old-secret"], body, None)
    assert not verify(["old-secret"], body, header.replace("sha256=", "sha1="))
    assert not verify([""], body, sign("", body))  # an unset secret never validates
