"""``FailureThrottle``: how many tokens a peer may have refused before it is slowed down.

Checking a token never seen before costs one scrypt hash (tens of milliseconds of a core); a
flood of distinct wrong tokens would keep the daemon's cores busy with them. Each peer address
(the host, without the port) has a bucket of ``burst`` checks, refilled at ``rate`` a second;
a token not seen before takes one when its check starts (before it waits for a hash: so the
number of hashes an address causes is bounded whatever their speed and however many calls it
has in flight), and a token that verifies gives it back. A peer whose bucket is empty gets its
tokens not seen before refused without a hash (``AuthThrottled``: RESOURCE_EXHAUSTED on gRPC,
429 on HTTP, "retry in" the time until its next check is allowed) until the bucket refills.

Invariants: tokens already verified (cached) are never throttled, so a principal whose token
checked before keeps being served from the same address during a flood; only refused tokens
keep what they took; at most ``max_peers`` buckets are kept (the least recently used first
out: a forgotten peer starts full again); time is ``time.monotonic`` unless a clock is given
(the tests').
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

__all__ = ["DEFAULT_BURST", "DEFAULT_RATE", "FailureThrottle", "peer_host"]

DEFAULT_BURST: Final = 10
"""Refused hashes a peer may cause at once."""
DEFAULT_RATE: Final = 2.0
"""Refused hashes a peer may cause per second after its burst (about a tenth of a core)."""


def peer_host(peer: str | None) -> str:
    """The host of a gRPC peer (``ipv4:127.0.0.1:5000``, ``ipv6:[::1]:5000``) or an HTTP
    remote address, without the port; ``-`` when unknown."""
    if not peer:
        return "-"
    kind, sep, rest = peer.partition(":")
    if sep and kind in ("ipv4", "ipv6", "unix"):
        peer = rest
    if peer.startswith("["):
        return peer[1:].partition("]")[0]
    host, sep, port = peer.rpartition(":")
    if sep and port.isdigit() and host.count(":") == 0:
        return host
    return peer


class FailureThrottle:
    """Token buckets of refused hashes per peer host (module docstring)."""

    def __init__(
        self,
        burst: int = DEFAULT_BURST,
        rate: float = DEFAULT_RATE,
        max_peers: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if burst < 1 or rate <= 0 or max_peers < 1:
            raise ValueError("burst and max_peers must be at least 1 and rate above 0")
        self.burst = burst
        self.rate = rate
        self.max_peers = max_peers
        self.clock = clock
        self.throttled = 0
        """How many checks were refused without a hash."""
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def _level(self, host: str, now: float) -> float:
        level, since = self._buckets.get(host, (float(self.burst), now))
        return min(float(self.burst), level + (now - since) * self.rate)

    def take(self, peer: str | None) -> float:
        """Take one check from ``peer``'s bucket before a token is hashed: 0 when taken (the
        hash may run), else the seconds until one may (nothing taken)."""
        host, now = peer_host(peer), self.clock()
        level = self._level(host, now)
        if level < 1.0:
            self.throttled += 1
            return (1.0 - level) / self.rate
        self._buckets[host] = (level - 1.0, now)
        self._buckets.move_to_end(host)
        while len(self._buckets) > self.max_peers:
            self._buckets.popitem(last=False)
        return 0.0

    def give_back(self, peer: str | None) -> None:
        """Return the check taken for a token that verified (only refusals count)."""
        host = peer_host(peer)
        if host in self._buckets:
            level, since = self._buckets[host]
            self._buckets[host] = (min(float(self.burst), level + 1.0), since)
