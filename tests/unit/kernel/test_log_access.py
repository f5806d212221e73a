"""Task log credentials (``fairshare.log_access``): a grant verifies only under the key of the
agent it was signed for, unchanged and unexpired."""

from __future__ import annotations

import pytest
from fairshare.log_access import (
    ANY,
    CLOCK_SKEW,
    MAX_GRANT_BYTES,
    CredentialError,
    Grant,
    agent_key,
    new_secret,
    sign,
    verify,
)

NOW = 1_700_000_000.0


def test_a_grant_verifies_under_its_agents_key_only() -> None:
    secret = new_secret()
    key = agent_key(secret, "ag-1")
    assert key != agent_key(secret, "ag-2") and key != agent_key(new_secret(), "ag-1")
    text = Grant("alice", "t-1", ("fw-1", "fw-2"), NOW + 60).encode()
    grant = verify(key, text, sign(key, text), NOW)
    assert grant == Grant("alice", "t-1", ("fw-1", "fw-2"), NOW + 60)
    assert grant.covers("fw-2") and not grant.covers("fw-3") and not grant.any_framework
    assert Grant("", "t", ANY, NOW).covers("anything")
    for other in (agent_key(secret, "ag-2"), agent_key(new_secret(), "ag-1")):
        with pytest.raises(CredentialError, match="not signed for it"):
            verify(other, text, sign(key, text), NOW)


def test_nothing_in_a_grant_can_be_changed_and_it_expires() -> None:
    key = agent_key(new_secret(), "ag-1")
    text = Grant("alice", "t-1", ("fw-1",), NOW + 60).encode()
    signature = sign(key, text)
    widened = Grant("alice", "t-1", ANY, NOW + 60).encode()
    for bad_text, bad_signature in (
        (widened, signature),
        (text, signature[:-2] + "AA"),
        (text, ""),
        ("", signature),
        (text, "é" * 10),
    ):
        with pytest.raises(CredentialError):
            verify(key, bad_text, bad_signature, NOW)
    assert verify(key, text, signature, NOW + 60 + CLOCK_SKEW).task_id == "t-1"  # clock skew
    with pytest.raises(CredentialError, match="expired"):
        verify(key, text, signature, NOW + 61 + CLOCK_SKEW)


@pytest.mark.parametrize(
    "text",
    ["not base64!", "eyJ2IjoyfQ", "W10", "e30", "x" * (MAX_GRANT_BYTES + 1)],
)
def test_malformed_grants_are_refused_even_when_signed(text: str) -> None:
    key = agent_key(new_secret(), "ag-1")
    with pytest.raises(CredentialError):
        verify(key, text, sign(key, text), NOW)


def test_a_grant_is_no_bearer_token() -> None:
    text = Grant("ops", "t", ANY, NOW).encode()
    assert ":" not in text  # no PRINCIPAL:SECRET shape: the master takes it for no token
