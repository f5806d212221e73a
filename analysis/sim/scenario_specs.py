"""The checked scenario of ``fairshare simulate``: immutable specs (``parse_scenario`` makes them).

Invariant: every value here was checked by the parser (``analysis.sim.scenario``); nothing
downstream re-validates.
"""

from __future__ import annotations

from dataclasses import dataclass

from fairshare.resources import ResourceVector

from master.core.quota import Quota
from master.core.rebalance import RebalanceConfig

__all__ = [
    "Duration",
    "JobSpec",
    "RebalanceSpec",
    "RoleQuota",
    "Scenario",
    "SimulatedAgent",
    "UserSpec",
]


@dataclass(frozen=True, slots=True)
class Duration:
    """Task duration distribution: deterministic, exponential or Erlang-k with ``mean``."""

    dist: str
    mean: float
    k: int = 1


@dataclass(frozen=True, slots=True)
class SimulatedAgent:
    """One simulated agent, joining the pool at ``join`` seconds."""

    id: str
    resources: ResourceVector
    join: float = 0.0


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One job: ``tasks`` tasks of its user's shape, submitted at ``submit`` seconds."""

    submit: float
    tasks: int
    duration: Duration


@dataclass(frozen=True, slots=True)
class UserSpec:
    """One simulated user (framework) with task shape ``task`` and its jobs.

    ``tasks`` is the total over ``jobs`` (sorted by submission time); ``duration`` is the law of
    the job submitted at join (the first job) for users written with ``tasks``/``duration``.
    """

    id: str
    name: str
    task: ResourceVector
    tasks: int
    duration: Duration
    join: float
    leave: float | None
    weight: float
    jobs: tuple[JobSpec, ...] = ()
    preemptible: bool = False
    role: str = "*"  # a role path (``fairshare.roles``)


@dataclass(frozen=True, slots=True)
class RebalanceSpec:
    """The core's rebalancer on a timer: a check every ``every`` s, kills end ``grace`` s later."""

    every: float
    grace: float
    config: RebalanceConfig


@dataclass(frozen=True, slots=True)
class RoleQuota:
    """A role's quota (``master.core.quota``), set by the operator at ``at`` seconds."""

    role: str
    quota: Quota
    at: float = 0.0


@dataclass(frozen=True, slots=True)
class Scenario:
    """A checked scenario; servers from a mix are drawn later, with ``seed``."""

    seed: int
    policy: str
    placement: str
    slots_per_agent: int
    agents: tuple[SimulatedAgent, ...]
    mix: str | None
    mix_count: int
    mix_scale: float
    users: tuple[UserSpec, ...]
    until: float | None
    sample_every: float
    allocation_interval: float = 0.0
    variants: tuple[tuple[str, Scenario], ...] = ()
    sample_size: int = 8
    mix_join_start: float = 0.0
    mix_join_every: float = 0.0
    fit_window: int = 8
    measure_from: float = 0.0
    rebalance: RebalanceSpec | None = None
    # The role tree (``master.core.hierarchy``): the hierarchy named ("" is the core's default),
    # the roles' operator weights, and whether the scenario names roles at all (then the
    # results have a per-role section)
    hierarchy: str = ""
    role_weights: tuple[tuple[str, float], ...] = ()
    has_roles: bool = False
    # the roles' quotas (``roles.<path>.guarantee``/``limit``), by path
    role_quotas: tuple[RoleQuota, ...] = ()
