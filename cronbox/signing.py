"""HMAC-SHA256 request signatures: the relay signs, a worker verifies.

Header (Stripe/Svix style): ``Cronbox-Signature: t=<unix seconds>,v1=<hex>`` where
``hex = HMAC-SHA256(secret, f"{t}." + body)`` over the exact request body bytes (a single
message or a batched JSON array). The timestamp is the relay's clock when it signed the
request (it is not stored anywhere); verifiers reject signatures older than a tolerance
(default 5 minutes) so a captured request cannot be replayed later. Several ``v1=`` entries
may appear (secret rotation); one matching is enough.

A worker verifies with nothing but this module (standard library only)::

    from cronbox.signing import verify, SignatureError
    try:
        verify(secret, raw_body, request.headers["Cronbox-Signature"])
    except SignatureError as exc:
        return 400, str(exc)
"""

from __future__ import annotations

import hashlib
import hmac
import time

HEADER = "Cronbox-Signature"
DEFAULT_TOLERANCE = 300.0


class SignatureError(ValueError):
    """The signature header is missing, malformed, stale, or does not match the body."""


def _key(secret: str | bytes) -> bytes:
    return secret.encode() if isinstance(secret, str) else secret


def compute(secret: str | bytes, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of ``f"{timestamp}." + body``."""
    return hmac.new(_key(secret), str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()


def sign(secret: str | bytes, body: bytes, timestamp: int | None = None) -> str:
    """The header value for body: ``t=<unix>,v1=<hex>`` (timestamp defaults to now)."""
    t = int(time.time()) if timestamp is None else int(timestamp)
    return f"t={t},v1={compute(secret, t, body)}"


def parse(header: str) -> tuple[int, list[str]]:
    """(timestamp, [v1 signatures]) from a header value, or SignatureError."""
    timestamp: int | None = None
    signatures: list[str] = []
    for part in (header or "").split(","):
        key, sep, value = part.strip().partition("=")
        if not sep:
            continue
        if key == "t":
            try:
                timestamp = int(value)
            except ValueError:
                raise SignatureError(f"{HEADER}: timestamp is not an integer: {value!r}") from None
        elif key == "v1":
            signatures.append(value.strip().lower())
    if timestamp is None:
        raise SignatureError(f"{HEADER}: no t=<timestamp>")
    if not signatures:
        raise SignatureError(f"{HEADER}: no v1=<signature>")
    return timestamp, signatures


def fresh(header: str | None, *, tolerance: float = DEFAULT_TOLERANCE,
          now: float | None = None) -> tuple[int, list[str]]:
    """(timestamp, [v1 signatures]) of a header that is present, well formed and within the
    tolerance, or SignatureError: what can be checked before the body is read."""
    if not header:
        raise SignatureError(f"{HEADER}: header missing")
    timestamp, signatures = parse(header)
    now = time.time() if now is None else now
    if abs(now - timestamp) > tolerance:
        raise SignatureError(f"{HEADER}: timestamp {timestamp} is outside the tolerance of {tolerance:g}s")
    return timestamp, signatures


def verify(
    secret: str | bytes | list[str | bytes],
    body: bytes,
    header: str | None,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> int:
    """Check a request; returns its timestamp or raises SignatureError.

    secret may be a list (accept any of them while rotating). The body must be the raw
    bytes received, before any JSON parsing.
    """
    timestamp, signatures = fresh(header, tolerance=tolerance, now=now)
    secrets = secret if isinstance(secret, list) else [secret]
    for s in secrets:
        expected = compute(s, timestamp, body)
        if any(hmac.compare_digest(expected, sig) for sig in signatures):
            return timestamp
    raise SignatureError(f"{HEADER}: no signature matches the body")


def is_valid(secret: str | bytes | list[str | bytes], body: bytes, header: str | None, **kwargs: float) -> bool:
    """verify() as a boolean."""
    try:
        verify(secret, body, header, **kwargs)  # type: ignore[arg-type]
    except SignatureError:
        return False
    return True
