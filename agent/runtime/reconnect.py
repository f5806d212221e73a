"""``Reconnection``: how long an agent waits before its next session, given how the last ended
(agent.proto's error contract, docs/architecture.md §5).

- NOT_FOUND, FAILED_PRECONDITION (``REREGISTER``, ``REMOVED``): at once, the first time;
- a master that does not lead named the leader (``REDIRECTED``): at once, at most
  ``MAX_REDIRECTS`` times in a row (two followers naming each other cannot make it spin);
- the leader named did not answer (right after a redirect: followers name the dead leader until
  its etcd lease ends): ``AFTER_STALE_HINT`` seconds (jittered; or a quarter of the master's
  reconnect jitter, if longer, so a big fleet does not storm the followers), at most
  ``MAX_REDIRECTS`` times after a session, then the backoff: the agent is back at a follower
  when the election ends (a follower holds calls during the election, then names the winner);
- anything else: a jittered exponential backoff (``Backoff``), reset once a session was
  established; once the agent has been connected its attempts are at most
  ``RECONNECT_CAP_ONCE_CONNECTED`` apart (or the master's reconnect jitter, if longer), so a
  restarted or newly elected master has its agents back within seconds; the first attempt
  after losing an established session also waits a random time in [0, reconnect jitter] (the
  master sizes it to the cluster), so a fleet does not come back all at once.

Invariants: the randomness comes from the injected source (deterministic under a seeded one);
``jitter`` is whatever the master last said (``AgentRegistered`` or ``AgentSettings``).
"""

from __future__ import annotations

from typing import Final

from fairshare.backoff import Backoff, RandomSource

from agent.runtime.stream import Outcome

__all__ = ["AFTER_STALE_HINT", "MAX_REDIRECTS", "RECONNECT_CAP_ONCE_CONNECTED", "Reconnection"]

RECONNECT_CAP_ONCE_CONNECTED: Final = 2.0
"""Seconds between reconnection attempts at most, once a session was established (or the
master's reconnect jitter, if longer): a restarted master finds its agents back quickly."""
MAX_REDIRECTS: Final = 3
"""Redirects to a named leader followed at once in a row; then the usual backoff applies."""
AFTER_STALE_HINT: Final = 0.25
"""Seconds before the next attempt when the leader a follower named did not answer."""


class Reconnection:
    """The delay before each next session."""

    def __init__(self, initial: float, maximum: float, rng: RandomSource) -> None:
        self._backoff = Backoff(initial, maximum)
        self._rng = rng
        self.jitter = 0.0  # the master's reconnect jitter, as it last said
        self._attempt = 0
        self._known_master = False  # a session was established once (a master will be back)
        self._redirects = 0  # redirects followed in a row
        self._redirected = False  # the last session ended with a redirect
        self._stale_hints = 0  # named leaders that did not answer since the last session

    def delay(self, outcome: Outcome, established: bool) -> float:
        """Seconds to wait after a session that ended with ``outcome`` (``established``: it
        was registered)."""
        self._attempt = 1 if established else self._attempt + 1
        self._known_master = self._known_master or established
        stale = self._redirected and outcome is Outcome.RECONNECT and not established
        self._stale_hints = 0 if established else self._stale_hints + stale  # since connected
        self._redirected = outcome is Outcome.REDIRECTED
        self._redirects = self._redirects + 1 if outcome is Outcome.REDIRECTED else 0
        if outcome is Outcome.REDIRECTED and self._redirects <= MAX_REDIRECTS:
            return 0.0  # a master named the leader: try it at once
        if stale and self._stale_hints <= MAX_REDIRECTS:  # back to a follower soon
            return max(AFTER_STALE_HINT, self.jitter / 4) * (0.5 + 0.5 * self._rng.random())
        attempt = self._attempt
        if outcome not in (Outcome.RECONNECT, Outcome.REDIRECTED) and attempt == 1:
            return 0.0  # NOT_FOUND, FAILED_PRECONDITION: at once
        delay = self._backoff.delay(attempt, self._rng)
        if self._known_master:  # a restarting master is back in seconds: keep trying often
            cap = max(RECONNECT_CAP_ONCE_CONNECTED, self.jitter)
            delay = min(delay, cap * (0.5 + 0.5 * self._rng.random()))
        if attempt == 1:  # the fleet spreads out (agent.proto)
            delay += self._rng.random() * self.jitter
        return delay
