"""``Reconnection``: the delay before an agent's next session (agent.proto's error contract,
docs/architecture.md §5), with a seeded random source."""

from __future__ import annotations

import random

from agent.runtime.reconnect import (
    AFTER_STALE_HINT,
    MAX_REDIRECTS,
    RECONNECT_CAP_ONCE_CONNECTED,
    Reconnection,
)
from agent.runtime.stream import Outcome


def make() -> Reconnection:
    return Reconnection(0.5, 30.0, random.Random(3))


def test_not_found_is_retried_at_once_and_unavailable_backs_off() -> None:
    reconnection = make()
    assert reconnection.delay(Outcome.REREGISTER, established=True) == 0.0
    delays = [reconnection.delay(Outcome.RECONNECT, established=False) for _ in range(4)]
    assert all(d > 0 for d in delays) and delays[-1] > delays[0]


def test_once_connected_attempts_are_at_most_the_cap_apart() -> None:
    reconnection = make()
    reconnection.delay(Outcome.RECONNECT, established=True)
    for _ in range(10):
        assert reconnection.delay(Outcome.RECONNECT, established=False) <= (
            RECONNECT_CAP_ONCE_CONNECTED
        )


def test_redirects_are_followed_at_once_a_bounded_number_of_times() -> None:
    reconnection = make()
    delays = [
        reconnection.delay(Outcome.REDIRECTED, established=False) for _ in range(MAX_REDIRECTS + 1)
    ]
    assert delays[:MAX_REDIRECTS] == [0.0] * MAX_REDIRECTS and delays[-1] > 0


def test_a_named_leader_that_does_not_answer_sends_the_agent_back_soon() -> None:
    reconnection = make()
    reconnection.delay(Outcome.RECONNECT, established=True)  # the leader died
    for _ in range(MAX_REDIRECTS):  # a follower names the dead leader, which refuses
        assert reconnection.delay(Outcome.REDIRECTED, established=False) == 0.0
        stale = reconnection.delay(Outcome.RECONNECT, established=False)
        assert AFTER_STALE_HINT / 2 <= stale <= AFTER_STALE_HINT
    reconnection.delay(Outcome.REDIRECTED, established=False)
    assert reconnection.delay(Outcome.RECONNECT, established=False) > AFTER_STALE_HINT  # backoff
    reconnection.jitter = 4.0  # a big cluster: spread over a quarter of its jitter
    reconnection.delay(Outcome.RECONNECT, established=True)  # the next outage
    reconnection.delay(Outcome.REDIRECTED, established=False)
    assert 0.5 <= reconnection.delay(Outcome.RECONNECT, established=False) <= 1.0
