"""Refused tokens per peer address are bounded (fairshare.auth_throttle, issue 23 item 6: a
flood of wrong tokens cost 150% CPU)."""

from __future__ import annotations

import asyncio

import pytest
from fairshare.auth_throttle import FailureThrottle, peer_host
from fairshare.credentials import Credentials, hash_secret
from fairshare.rpc_guard import Authenticator, AuthError, AuthThrottled


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("peer", "host"),
    [
        ("ipv4:127.0.0.1:5000", "127.0.0.1"),
        ("ipv6:[::1]:5000", "::1"),
        ("127.0.0.2", "127.0.0.2"),
        ("::1", "::1"),
        (None, "-"),
    ],
)
def test_the_peer_host_drops_the_port(peer: str | None, host: str) -> None:
    assert peer_host(peer) == host


def test_a_peer_is_slowed_after_its_burst_and_others_are_not() -> None:
    clock = Clock()
    throttle = FailureThrottle(burst=3, rate=1.0, clock=clock)
    for _ in range(3):
        assert throttle.take("ipv4:10.0.0.1:1") == 0
    assert throttle.take("ipv4:10.0.0.1:2") == pytest.approx(1.0)  # same host, another port
    assert throttle.take("ipv4:10.0.0.2:1") == 0
    throttle.give_back("ipv4:10.0.0.1:1")  # a token that verified: its check comes back
    assert throttle.take("ipv4:10.0.0.1:1") == 0
    assert throttle.take("ipv4:10.0.0.1:1") > 0
    clock.now += 1.0
    assert throttle.take("ipv4:10.0.0.1:1") == 0
    assert throttle.throttled == 2


def test_a_flood_of_new_wrong_tokens_costs_a_bounded_number_of_hashes() -> None:
    credentials = Credentials({"owner": hash_secret("good")})
    clock = Clock()
    authenticator = Authenticator(credentials, throttle=FailureThrottle(3, 1.0, clock=clock))
    attacker, owner = "ipv4:10.0.0.9:4000", "ipv4:10.0.0.9:4001"

    async def run() -> list[str]:
        assert await authenticator.principal("owner:good", None, owner) == "owner"
        outcomes = []
        for number in range(50):
            try:
                await authenticator.principal(f"owner:wrong-{number}", None, attacker)
            except AuthThrottled:
                outcomes.append("throttled")
            except AuthError:
                outcomes.append("refused")
        # the owner's token checked before: still served from the same address
        assert await authenticator.principal("owner:good", None, owner) == "owner"
        return outcomes

    outcomes = asyncio.run(run())
    assert outcomes.count("refused") == 3 and outcomes.count("throttled") == 47
    assert credentials.kdf_runs == 1 + 3
