"""``RebalanceSettings``: the knobs of ``fairshare master --rebalance`` and what they mean to the
core's planner (``master.core.rebalance.RebalanceConfig``, which counts in checks, not seconds).

Invariants: a settings object is valid once built (``ValueError`` otherwise); ``planner()`` turns
the hysteresis into at least one check and leaves at least one check of cooldown after a round,
long enough for the grace period and ``SETTLE`` seconds of allocation and launch. The defaults and
the settings table are ``master.settings.rebalance``'s (``REBALANCE_SETTINGS`` is re-exported).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from master.core.rebalance import RebalanceConfig
from master.settings.rebalance import REBALANCE_DEFAULTS, REBALANCE_SETTINGS

__all__ = ["REBALANCE_SETTINGS", "SETTLE", "RebalanceSettings"]

SETTLE = 2.0  # seconds a round needs beyond the grace period: allocation, launch, RUNNING


@dataclass(frozen=True, slots=True)
class RebalanceSettings:
    """The knobs of ``--rebalance`` (``fairshare master --help`` explains each)."""

    interval: float = REBALANCE_DEFAULTS["rebalance_interval"]  # seconds between checks
    threshold: float = REBALANCE_DEFAULTS["rebalance_threshold"]  # act on a gap above this share
    hysteresis: float = REBALANCE_DEFAULTS["rebalance_hysteresis"]  # ... lasting this long (s)
    max_kills: int = REBALANCE_DEFAULTS["rebalance_max_kills"]  # tasks killed per check at most
    grace: float = REBALANCE_DEFAULTS["rebalance_grace"]  # a preempted task's kill grace (s)

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
