"""``DurationHistogram``: a cheap fixed-bucket histogram of durations, kept on the event loop.

The runtime observes durations (an allocation run, later a registry write) with one bisect and
two additions; the metrics collector turns a ``copy()`` into a Prometheus histogram at scrape
time. No locks: only the owner's loop calls ``observe``; readers get a copy taken on that loop.

Invariants: ``counts[i]`` is the number of observations ``v`` with ``BUCKETS[i-1] < v <=
BUCKETS[i]`` (the last slot counts those above every bound, the +Inf bucket); ``count`` is
``sum(counts)``; ``total`` is the sum of the observed values (seconds).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

__all__ = ["BUCKETS", "DurationHistogram"]

BUCKETS: tuple[float, ...] = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
"""Upper bounds (seconds): sub-millisecond to seconds (the metrics contract of issue 4)."""


@dataclass(slots=True)
class DurationHistogram:
    """Observation counts per bucket of ``BUCKETS`` (plus +Inf), their sum and count."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS) + 1))
    total: float = 0.0
    count: int = 0

    def observe(self, seconds: float) -> None:
        """Record one duration."""
        self.counts[bisect_left(BUCKETS, seconds)] += 1
        self.total += seconds
        self.count += 1

    def copy(self) -> DurationHistogram:
        """An independent copy (take it on the owner's loop)."""
        return DurationHistogram(list(self.counts), self.total, self.count)

    def cumulative(self) -> list[tuple[str, int]]:
        """Prometheus buckets: ``(le, observations <= le)``, ending with ``("+Inf", count)``."""
        out: list[tuple[str, int]] = []
        running = 0
        for bound, n in zip((*map(repr, BUCKETS), "+Inf"), self.counts, strict=True):
            running += n
            out.append((bound, running))
        return out
