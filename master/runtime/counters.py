"""The runtime's counters: ``RuntimeCounters`` and the ``DurationHistogram`` they hold.

The runtime observes durations (an allocation run, a registry write) with one bisect and two
additions and counts offers and status updates; the metrics collector (``master.metrics``) turns
a ``copy()`` into Prometheus metrics at scrape time. No locks: only the runtime's loop changes
them; readers get a copy taken on that loop.

Invariants: ``counts[i]`` is the number of observations ``v`` with ``BUCKETS[i-1] < v <=
BUCKETS[i]`` (the last slot counts those above every bound, the +Inf bucket); ``count`` is
``sum(counts)``; ``total`` is the sum of the observed values (seconds); every counter of
``RuntimeCounters`` only grows.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_left
from dataclasses import dataclass, field

__all__ = ["BUCKETS", "DurationHistogram", "RuntimeCounters"]

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
"""Upper bounds (seconds): sub-millisecond to seconds (the metrics contract,
docs/architecture.md §8)."""


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


@dataclass(slots=True)
class RuntimeCounters:
    """Monotonic counters for logs and metrics, incremented on the runtime's loop.

    ``status_updates`` counts every agent update received; ``status_forwarded`` the updates
    forwarded to their framework the first time, ``status_retried`` those forwarded again (the
    agent retried a uuid still pending); ``acknowledgements`` the framework acknowledgements
    passed back to agents; ``tasks_preempted`` the tasks the rebalancer killed, per framework
    id (``master.runtime.rebalancing``).
    """

    allocation_runs: int = 0
    allocation_seconds: float = 0.0
    allocation_durations: DurationHistogram = field(default_factory=DurationHistogram)
    registry_write_durations: DurationHistogram = field(default_factory=DurationHistogram)
    offers_sent: int = 0
    offers_accepted: int = 0
    offers_declined: int = 0
    offers_rescinded: int = 0
    status_updates: int = 0
    status_forwarded: int = 0
    status_retried: int = 0
    acknowledgements: int = 0
    tasks_preempted: dict[str, int] = field(default_factory=dict)

    def copy(self) -> RuntimeCounters:
        """An independent copy (take it on the runtime's loop)."""
        return dataclasses.replace(
            self,
            allocation_durations=self.allocation_durations.copy(),
            registry_write_durations=self.registry_write_durations.copy(),
            tasks_preempted=dict(self.tasks_preempted),
        )
