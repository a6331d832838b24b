"""Checking that a push came from Baton (docs/push.md)."""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Optional, Sequence, Union


def verify_signature(
    header: Optional[str],
    body: Union[bytes, str],
    secret: Union[str, Sequence[str]],
    tolerance: float = 300,
    now: Optional[float] = None,
) -> bool:
    """Whether a push is genuine: ``header`` is the request's Baton-Signature, ``body`` the raw body
    as received (before any JSON parsing), ``secret`` the queue's signing secret, or several while
    you move from one to the next. True when a v1 signature matches one of them and its time is
    within ``tolerance`` seconds of now (older ones may be replays).

        if not verify_signature(request.headers.get("Baton-Signature"), request.body, SECRET):
            return 401
    """
    if not header:
        return False
    parts = [p.strip().split("=", 1) for p in header.split(",") if "=" in p]
    t = next((v for k, v in parts if k == "t"), "")
    if not t.isdigit():
        return False
    if abs((time.time() if now is None else now) - int(t)) > tolerance:
        return False
    raw = body.encode() if isinstance(body, str) else body
    signed = t.encode() + b"." + raw
    secrets = [secret] if isinstance(secret, str) else list(secret)
    given = [v for k, v in parts if k == "v1"]
    for s in secrets:
        expected = hmac.new(s.encode(), signed, hashlib.sha256).hexdigest()
        if any(hmac.compare_digest(g, expected) for g in given):
            return True
    return False
