"""The whole-task allocation the core makes from a clean start: ``fairshare allocate``'s tasks mode.

``tasks_target`` builds a ``MasterState`` with the agents, registers the frameworks with their
declared task shapes, wanted counts and weights, and runs one allocation: progressive filling
with the configured policy and placement (Best-Fit DRFH and the fit-aware choice by default).
The result is what a live master offers when every agent and framework is there at the first
allocation run; the calculator prints it, and the rebalancer (``master.core.rebalance``) moves
the live cluster toward it.

Frameworks carry their role and the roles their operator weights, so the target is the role
tree's allocation under the configured hierarchy (H-DRF by default).

``pinned`` tasks are adopted on their agents before the run (as an agent rejoining with running
tasks): they hold their resources and count in their frameworks' shares, so the target is
reachable by moving only the other tasks.

Invariants: pure and deterministic (agents are added in the order given, frameworks in the
order given, so ties between equal shares go to the earlier one); the result maps every
framework to the agents where it got at least one task, counting pinned tasks; the core's
``validate`` runs at the end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fairshare.resources import ResourceVector
from fairshare.task_states import TaskState

from master.core.config import CoreConfig
from master.core.messages import RunningTask, SendOffers
from master.core.quota import Quota
from master.core.state import MasterState

__all__ = ["PinnedTask", "TargetFramework", "tasks_target"]


@dataclass(frozen=True, slots=True)
class TargetFramework:
    """A framework as the target sees it: its declared task shape, tasks wanted, weight."""

    id: str
    shape: ResourceVector
    wanted: int
    weight: float = 1.0
    name: str = ""
    role: str = "*"


@dataclass(frozen=True, slots=True)
class PinnedTask:
    """A task that stays where it runs (not preemptible): ``resources`` on ``agent_id``."""

    framework_id: str
    agent_id: str
    resources: ResourceVector


def tasks_target(
    agents: Sequence[tuple[str, ResourceVector]],
    frameworks: Sequence[TargetFramework],
    config: CoreConfig,
    pinned: Sequence[PinnedTask] = (),
    role_weights: Mapping[str, float] | None = None,
    quotas: Mapping[str, Quota] | None = None,
) -> dict[str, dict[str, int]]:
    """Framework id -> agent id -> tasks, after one allocation run from a clean start (with
    the roles' operator weights ``role_weights`` and ``quotas``, so the run walks the same
    role tree and serves guarantees first within the same limits)."""
    state = MasterState(config)
    for role, role_weight in sorted((role_weights or {}).items()):
        state.handle_set_weight(role, role_weight, 0.0)
    for role, quota in sorted((quotas or {}).items(), key=lambda item: len(item[0])):
        state.quotas[role] = quota  # checked where it was set; the target only reads it
    for fw in frameworks:
        state.handle_add_framework(
            fw.id, 0.0, name=fw.name or fw.id, role=fw.role, weight=fw.weight
        )
    counts: dict[str, dict[str, int]] = {fw.id: {} for fw in frameworks}
    for agent_id, resources in agents:
        running = [
            RunningTask(
                task.framework_id, f"pinned-{n}", "pinned", task.resources, TaskState.RUNNING
            )
            for n, task in enumerate(pinned)
            if task.agent_id == agent_id
        ]
        state.handle_add_agent(agent_id, resources, 0.0, running=running)
        for task in running:
            per_agent = counts[task.framework_id]
            per_agent[agent_id] = per_agent.get(agent_id, 0) + 1
    for fw in frameworks:
        state.handle_update_demand(fw.id, fw.shape, fw.wanted, 0.0)
    for message in state.handle_allocate(0.0):
        if isinstance(message, SendOffers):
            per_agent = counts[message.framework_id]
            for offer in message.offers:
                per_agent[offer.agent_id] = per_agent.get(offer.agent_id, 0) + offer.fair_tasks
    state.validate()
    return counts
