"""The cluster's snapshot as values: ``ClusterSnapshot`` and the views of its agents, frameworks,
tasks, offers and roles (built by ``master.runtime.views``).

Every class here is a frozen dataclass of immutable values: a snapshot shares nothing mutable
with the runtime and may be handed to any thread. The figures' invariants (an agent's
``free + reserved_free + offered + used == total``; pool sums over the agents in
``POOL_STATES``; the orders of agents, frameworks, tasks, offers and roles; a role's figures the
sums over its subtree) are established by ``build_snapshot`` and stated in
``master.runtime.views``. ``FrameworkView.weighted_share`` is the one definition of the
weighted share every view reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fairshare.resources import ResourceVector
from fairshare.task_states import TaskState

from master.core import TaskLaunch
from master.core.records import Offer
from master.model import AgentSpec, Demand, FrameworkInfo, LeaderInfo, StatusUpdate

__all__ = [
    "EMPTY",
    "POOL_STATES",
    "REDACTED",
    "AgentView",
    "ClusterSnapshot",
    "FrameworkView",
    "OfferView",
    "PoolSummary",
    "RoleView",
    "TaskView",
    "role_order",
]

EMPTY = ResourceVector()
REDACTED = "(redacted)"
POOL_STATES = frozenset({"ACTIVE", "DEACTIVATED", "DRAINING", "DRAINED"})
"""States of the agents whose resources are in the pool (the master hears from them)."""


@dataclass(frozen=True, slots=True)
class AgentView:
    """One agent; ``state`` is ACTIVE, DEACTIVATED (by the operator), DRAINING or DRAINED (the
    operator's drain, ``master.runtime.agent_drains``), RECOVERING (known from the registry after
    a master restart, not reregistered yet), UNREACHABLE or GONE."""

    agent_id: str
    spec: AgentSpec
    state: str
    free: ResourceVector
    offered: ResourceVector
    used: ResourceVector
    registered_at: float
    last_heard: float
    # (role, resources, dynamic) of its reservations, static first; what of them is idle
    reservations: tuple[tuple[str, ResourceVector, bool], ...] = ()
    reserved_free: ResourceVector = EMPTY
    drain_deadline: float | None = None  # DRAINING: when its tasks are killed (wall clock)


@dataclass(frozen=True, slots=True)
class FrameworkView:
    """One framework; ``state`` is ACTIVE, SUPPRESSED or DISCONNECTED."""

    spec: FrameworkInfo
    state: str
    weight: float
    dominant_share: float
    dominant_resource: str
    allocated: ResourceVector
    offered: ResourceVector
    used: ResourceVector
    task_counts: tuple[tuple[TaskState, int], ...]
    demand: Demand | None
    registered_at: float
    failover_deadline: float | None
    preempted: int = 0  # its tasks the rebalancer (--rebalance) killed since the master started

    @property
    def weighted_share(self) -> float:
        """``dominant_share / weight``: what DRF orders frameworks by (0 for a weight of 0);
        the one definition every view (GetState, the HTTP API, metrics) reads."""
        return self.dominant_share / self.weight if self.weight > 0 else 0.0


@dataclass(frozen=True, slots=True)
class TaskView:
    """One tracked task, where it runs and its latest status (``status.state`` is its state)."""

    framework_id: str
    agent_id: str
    launch: TaskLaunch
    status: StatusUpdate


@dataclass(frozen=True, slots=True)
class OfferView:
    """One outstanding offer and when it expires (wall clock), if offers time out."""

    offer: Offer
    expires_at: float | None


@dataclass(frozen=True, slots=True)
class RoleView:
    """One role of the tree: weight, share and dominant resource as the core's hierarchy computes
    them (``RoleShare``), and what its subtree's frameworks hold and run."""

    path: str
    weight: float
    share: float
    weighted_share: float
    dominant_resource: str
    allocated: ResourceVector  # used + offered of the frameworks of the role and below it
    frameworks: int  # whose role is exactly ``path``
    subtree_frameworks: int  # of ``path`` and every role below it
    running_tasks: int  # RUNNING tasks of the subtree's frameworks
    guarantee: ResourceVector = EMPTY  # its quota (master.core.quota); empty: none
    limit: ResourceVector | None = None  # None: no limit
    wanting: bool = False  # a framework of the subtree declared it wants more tasks
    reserved: ResourceVector = EMPTY  # reserved for exactly this role, used or not
    idle_reserved: ResourceVector = EMPTY  # the subtree's reservations neither offered nor used

    @property
    def below_guarantee(self) -> bool:
        """Holds less than its guarantee of some guaranteed resource (a reservation counts
        whole, idle or not)."""
        held = self.allocated + self.idle_reserved
        return any(held.millis(n) < m for n, m in self.guarantee.millis_items())


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """The whole cluster state."""

    master_id: str
    version: str
    started_at: float
    policy: str
    placement: str
    agents: tuple[AgentView, ...]
    frameworks: tuple[FrameworkView, ...]
    tasks: tuple[TaskView, ...]
    offers: tuple[OfferView, ...]
    total: ResourceVector
    used: ResourceVector
    offered: ResourceVector
    free: ResourceVector
    leader: LeaderInfo
    roles: tuple[RoleView, ...] = ()
    hierarchy: str = ""  # "hdrf", "naive" or "flat" (master.core.hierarchy)


@dataclass(frozen=True, slots=True)
class PoolSummary:
    """The figures of a ``ClusterSnapshot`` that the metrics and the dashboard's share history
    report: agents, tasks and offers
    counted (agents by state, GONE ones left out; tasks by state), the frameworks and roles
    whole, and the pool's sums; the same values as the snapshot of that moment, without a view
    of every agent, task and offer (a scrape of 50,000 agents would hold the loop ~1 s)."""

    version: str
    agent_states: Mapping[str, int]
    task_states: Mapping[TaskState, int]
    offers: int
    frameworks: tuple[FrameworkView, ...]
    roles: tuple[RoleView, ...]
    total: ResourceVector
    free: ResourceVector
    offered: ResourceVector
    used: ResourceVector


def role_order(path: str) -> tuple[str, ...]:
    """Sort key of the tree's pre-order: ``eng`` < ``eng/dev`` < ``eng-x`` (by segments)."""
    return tuple(path.split("/"))
