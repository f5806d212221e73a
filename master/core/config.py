"""``CoreConfig``: the settings of the allocation core, the one source of them for the master.

The daemon resolves flags, environment and TOML into one ``CoreConfig`` that the runtime holds
as is (``RuntimeConfig.core``); the calculator and the simulators build their own. Policies are
named here and looked up in their strategy tables (``FAIRNESS_POLICIES``, ``PLACEMENT_POLICIES``).

Invariants: immutable; every field is checked when the config is built (``ValueError`` naming
the field), so a ``MasterState`` is never built from settings it cannot honour.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fairshare.resources import ResourceVector

from master.core.checks import hierarchy_in_force, hierarchy_refusal
from master.core.fairness import FAIRNESS_POLICIES
from master.core.placement import DEFAULT_SAMPLE_SIZE, PLACEMENT_POLICIES

__all__ = ["CoreConfig"]


@dataclass(frozen=True, slots=True)
class CoreConfig:
    """Settings of the allocation core.

    ``offer_timeout`` and ``default_refuse_seconds`` are seconds of the clock the core is given;
    ``seed`` feeds the random placement policy; ``validate`` checks every invariant after every
    change (tests, debugging); ``offer_id_prefix`` keeps offer ids unique across restarts.
    """

    policy: str = "drf"
    placement: str = "best-fit"
    sample_size: int = DEFAULT_SAMPLE_SIZE
    seed: int = 0
    default_refuse_seconds: float = 5.0
    offer_timeout: float | None = None
    slots_per_agent: int = 14
    offer_id_prefix: str = "o"
    validate: bool = False
    # The fit-aware choice (master.core.fit): how many frameworks within one task of the most
    # deprived may claim its chosen agent; 0 is plain progressive filling.
    fit_window: int = 8
    # The role tree (master.core.hierarchy): "hdrf", "naive" or "flat"; "" is the default for
    # the policy: hdrf under drf, flat under the others (H-DRF and Mesos's hierarchical sorter
    # compare dominant shares; asset, pf and slots have no tree here, so asking for one with
    # them is refused).
    hierarchy: str = ""
    # Resources that count in no share (Mesos's --fair_sharing_excluded_resource_names): a
    # framework holding the only GPUs does not look like a dominant-share hog. drf only.
    fair_sharing_excluded_resources: frozenset[str] = frozenset()
    # Mesos's --min_allocatable_resources: a coarse (whole-agent) offer is made only of free
    # resources holding at least one of these quantities whole (Mesos's default, which the
    # master sets, is cpus:0.01 or mem:32); empty: any non-empty free resources.
    min_allocatable: tuple[ResourceVector, ...] = ()

    def allocatable(self, resources: ResourceVector) -> bool:
        """May ``resources`` be offered whole (Mesos's ``isAllocatable``)?"""
        if not self.min_allocatable:
            return bool(resources)
        return any(minimum.fits_in(resources) for minimum in self.min_allocatable)

    @property
    def effective_hierarchy(self) -> str:
        """The hierarchy in force: the one named, else hdrf under drf and flat otherwise."""
        return hierarchy_in_force(self.hierarchy, self.policy)

    def __post_init__(self) -> None:
        if self.policy not in FAIRNESS_POLICIES:
            known = ", ".join(sorted(FAIRNESS_POLICIES))
            raise ValueError(f"unknown fairness policy {self.policy!r}; choose one of {known}")
        if self.placement not in PLACEMENT_POLICIES:
            known = ", ".join(sorted(PLACEMENT_POLICIES))
            raise ValueError(f"unknown placement policy {self.placement!r}; choose one of {known}")
        if self.sample_size < 1:
            raise ValueError(f"sample_size must be at least 1, got {self.sample_size}")
        if self.slots_per_agent < 1:
            raise ValueError(f"slots_per_agent must be at least 1, got {self.slots_per_agent}")
        if not (math.isfinite(self.default_refuse_seconds) and self.default_refuse_seconds >= 0):
            raise ValueError(
                f"default_refuse_seconds must be >= 0, got {self.default_refuse_seconds}"
            )
        if self.fit_window < 0:
            raise ValueError(f"fit_window must be >= 0, got {self.fit_window}")
        refusal = hierarchy_refusal(self.hierarchy, self.policy)
        if refusal is not None:
            raise ValueError(f"hierarchy {refusal}")
        if self.fair_sharing_excluded_resources and self.policy != "drf":
            raise ValueError(
                "fair_sharing_excluded_resources leaves resources out of dominant shares and"
                f" needs policy 'drf', not {self.policy!r}"
            )
        timeout = self.offer_timeout
        if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
            raise ValueError(f"offer_timeout must be > 0 or None, got {timeout}")
