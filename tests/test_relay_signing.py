"""cronbox.signing: what a worker uses to check that a request came from the relay."""

from __future__ import annotations

import pytest

from cronbox.signing import SignatureError, is_valid, parse, sign, verify

SECRET = "whsec_test"
BODY = b'{"run_id": 1, "idempotency_key": "1:1"}'
T = 1_700_000_000


def test_a_signed_body_verifies_and_returns_its_timestamp():
    header = sign(SECRET, BODY, timestamp=T)
    assert header.startswith(f"t={T},v1=")
    assert verify(SECRET, BODY, header, now=T + 10) == T


def test_a_tampered_body_is_rejected():
    header = sign(SECRET, BODY, timestamp=T)
    tampered = BODY.replace(b'"run_id": 1', b'"run_id": 2')
    with pytest.raises(SignatureError, match="no signature matches"):
        verify(SECRET, tampered, header, now=T)
    assert not is_valid(SECRET, BODY + b" ", header, now=T)


def test_a_tampered_timestamp_is_rejected():
    header = sign(SECRET, BODY, timestamp=T).replace(f"t={T}", f"t={T + 1}")
    assert not is_valid(SECRET, BODY, header, now=T)


def test_a_stale_or_future_timestamp_is_rejected_even_with_a_valid_signature():
    header = sign(SECRET, BODY, timestamp=T)
    with pytest.raises(SignatureError, match="outside the tolerance"):
        verify(SECRET, BODY, header, now=T + 301)
    assert not is_valid(SECRET, BODY, header, now=T - 301)
    assert is_valid(SECRET, BODY, header, now=T + 3600, tolerance=3601)


def test_the_wrong_secret_is_rejected_and_rotation_accepts_either():
    header = sign("old-secret", BODY, timestamp=T)
    assert not is_valid(SECRET, BODY, header, now=T)
    assert is_valid([SECRET, "old-secret"], BODY, header, now=T)
    # a header carrying two signatures (relay signing with both while rotating)
    both = f"t={T},v1={parse(sign('x', BODY, T))[1][0]},v1={parse(header)[1][0]}"
    assert is_valid("old-secret", BODY, both, now=T)


@pytest.mark.parametrize("header", [None, "", "v1=abc", f"t={T}", "t=soon,v1=abc", "garbage"])
def test_missing_or_malformed_headers_are_rejected(header):
    with pytest.raises(SignatureError):
        verify(SECRET, BODY, header, now=T)


def test_the_signature_is_hmac_sha256_over_timestamp_dot_body():
    import hashlib
    import hmac

    expected = hmac.new(SECRET.encode(), f"{T}.".encode() + BODY, hashlib.sha256).hexdigest()
    assert sign(SECRET, BODY, timestamp=T) == f"t={T},v1={expected}"
