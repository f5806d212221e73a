"""Jittered exponential backoff, shared by status-update retries and reconnects.

Invariants: ``delay(attempt)`` for attempt ``n >= 1`` lies in ``[base / 2, base]`` with
``base = min(maximum, initial * 2 ** (n - 1))`` ("equal jitter"), so delays grow geometrically,
never exceed ``maximum`` and two agents that failed together do not retry in lock-step. The
randomness comes from an injected source, so the class is deterministic under a seeded one.
"""

from __future__ import annotations

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

    initial: float
    maximum: float
    rng: RandomSource

    def __post_init__(self) -> None:
        if not 0 < self.initial <= self.maximum:
            raise ValueError(
                f"backoff needs 0 < initial <= maximum, got {self.initial}, {self.maximum}"
            )

    def base(self, attempt: int) -> float:
        """The un-jittered delay before retry number ``attempt`` (1 for the first retry)."""
        exponent = min(max(attempt, 1) - 1, 60)  # 2**60 * initial is past any maximum
        return min(self.maximum, self.initial * 2.0**exponent)

    def delay(self, attempt: int) -> float:
        """The jittered delay before retry number ``attempt``: in ``[base / 2, base]``."""
        base = self.base(attempt)
        return base * (0.5 + 0.5 * self.rng.random())
