"""``RebalanceSettings``: the knobs of ``fairshare master --rebalance`` and what they mean to the
core's planner (``master.core.rebalance.RebalanceConfig``, which counts in checks, not seconds).

Invariants: a settings object is valid once built (``ValueError`` otherwise); ``planner()`` turns
the hysteresis into at least one check and leaves at least one check of cooldown after a round,
long enough for the grace period and ``SETTLE`` seconds of allocation and launch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Final

from fairshare.settings import Setting, boolean, duration, positive_duration, positive_int, share

from master.core.rebalance import RebalanceConfig

__all__ = ["REBALANCE_SETTINGS", "SETTLE", "RebalanceSettings"]

SETTLE = 2.0  # seconds a round needs beyond the grace period: allocation, launch, RUNNING


@dataclass(frozen=True, slots=True)
class RebalanceSettings:
    """The knobs of ``--rebalance`` (``fairshare master --help`` explains each)."""

    interval: float = 5.0  # seconds between checks
    threshold: float = 0.1  # act on a gap above this share of a framework's target
    hysteresis: float = 15.0  # ... once it lasted this long (seconds)
    max_kills: int = 4  # tasks killed per check at most
    grace: float = 3.0  # kill grace period of a preempted task (seconds)

    def __post_init__(self) -> None:
        if not self.interval > 0 or not 0 <= self.threshold < 1:
            raise ValueError("rebalance: need interval > 0 and 0 <= threshold < 1")
        if self.hysteresis < 0 or self.grace < 0 or self.max_kills < 1:
            raise ValueError("rebalance: need hysteresis >= 0, grace >= 0, max_kills >= 1")

    def planner(self) -> RebalanceConfig:
        """The core planner's configuration: durations as numbers of checks."""
        threshold = Fraction(self.threshold).limit_denominator(1000)
        return RebalanceConfig(
            threshold=threshold,
            release=threshold / 2,
            patience=max(1, math.ceil(self.hysteresis / self.interval - 1e-9)),
            max_kills=self.max_kills,
            cooldown=max(1, math.ceil((self.grace + SETTLE) / self.interval - 1e-9)),
        )


REBALANCE_SETTINGS: Final = (
    Setting(
        "rebalance",
        boolean,
        False,
        "kill preemptible tasks (TaskInfo.preemptible; fairshare run's placeholder tasks) when the"
        " live allocation stays far from DRFH's allocation for the declared demand, so long-running"
        " tasks move toward it (off by default)",
        switch=True,
    ),
    Setting(
        "rebalance_interval",
        positive_duration,
        "5s",
        "--rebalance: time between two comparisons of the live allocation with DRFH's",
        metavar="DURATION",
    ),
    Setting(
        "rebalance_threshold",
        share,
        0.1,
        "--rebalance: act when some framework misses more than this share of its DRFH tasks"
        " (beyond one task)",
        metavar="SHARE",
    ),
    Setting(
        "rebalance_hysteresis",
        duration,
        "15s",
        "--rebalance: how long that gap must persist before tasks are killed (hysteresis); once"
        " acting, it goes on until the gap is down to half the threshold",
        metavar="DURATION",
    ),
    Setting(
        "rebalance_max_kills",
        positive_int,
        4,
        "--rebalance: tasks killed per interval at most; a round is followed by intervals"
        " without kills for the grace period and the allocation",
        metavar="N",
    ),
    Setting(
        "rebalance_grace",
        duration,
        "3s",
        "--rebalance: kill grace period of a preempted task (SIGTERM to SIGKILL of a command"
        " task; it is reported KILLED with reason PREEMPTED)",
        metavar="DURATION",
    ),
)
"""The settings of ``--rebalance`` (part of ``fairshare master``'s table, ``master.config``)."""
