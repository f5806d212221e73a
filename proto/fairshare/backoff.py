"""Jittered exponential backoff: one policy for every retry in the cluster (the agent's status
updates and reconnects, the SDK's reconnects).

Invariants: ``delay(attempt, rng)`` for retry number ``attempt >= 1`` lies in
``[base / 2, base]`` with ``base = min(maximum, initial * multiplier ** (attempt - 1))``
("equal jitter"), so delays grow geometrically, never exceed ``maximum``, and two processes that
failed together do not retry in lock-step. The randomness comes from the caller (``rng``), so a
seeded source makes the delays deterministic; pure: no clock, no global randomness.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Backoff", "RandomSource"]


class RandomSource(Protocol):
    """Anything with ``random() -> float`` in ``[0, 1)``, e.g. ``random.Random(seed)``."""

    def random(self) -> float:
        """A float in ``[0, 1)``."""
        ...


@dataclass(frozen=True, slots=True)
class Backoff:
    """Delays of a jittered exponential backoff, in seconds."""

    initial: float = 0.5
    maximum: float = 15.0
    multiplier: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.initial <= self.maximum:
            raise ValueError(
                f"backoff needs 0 < initial <= maximum, got {self.initial}, {self.maximum}"
            )
        if self.multiplier < 1:
            raise ValueError(f"backoff needs a multiplier >= 1, got {self.multiplier}")

    def base(self, attempt: int) -> float:
        """The un-jittered delay before retry number ``attempt`` (1 for the first retry)."""
        exponent = min(max(attempt, 1) - 1, 64)  # 2**64 * initial is past any maximum
        return min(self.maximum, self.initial * self.multiplier**exponent)

    def delay(self, attempt: int, rng: RandomSource) -> float:
        """The jittered delay before retry number ``attempt``: in ``[base / 2, base]``."""
        return self.base(attempt) * (0.5 + 0.5 * rng.random())

    def jittered(self, rng: RandomSource) -> Callable[[int], float]:
        """``delay`` with ``rng`` bound: retry number -> seconds (what a pure state machine that
        owns no randomness is given)."""
        return lambda attempt: self.delay(attempt, rng)
