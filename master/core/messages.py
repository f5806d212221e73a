"""Messages the allocation core returns from ``handle_*`` calls; the runtime performs the I/O.

Invariant: messages are immutable values that describe a change the core has already made (an
offer exists once ``SendOffers`` names it; a task is STAGING once ``LaunchTasks`` names it). They
carry no wire types, so the core stays free of ``fairshare.v1``; the runtime delivers
``LaunchTasks`` and ``KillTask`` to agents as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from fairshare.resources import ResourceVector
from fairshare.task_states import TaskReason, TaskState

from master.core.records import Offer

__all__ = [
    "KillTask",
    "LaunchTasks",
    "Message",
    "RescindOffer",
    "RunningTask",
    "SendOffers",
    "TaskLaunch",
    "TaskStatusChange",
]


@dataclass(frozen=True, slots=True)
class SendOffers:
    """New offers for one framework, batched per allocation run."""

    framework_id: str
    offers: tuple[Offer, ...]


@dataclass(frozen=True, slots=True)
class RescindOffer:
    """An outstanding offer was withdrawn (agent gone, timeout, framework inactive)."""

    framework_id: str
    offer_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class TaskLaunch:
    """One task to start on an agent.

    The core accounts for ``resources`` and checks ``task_id`` and ``agent_id``; ``details``
    (what the agent runs: the runtime's ``TaskDetails``) it never reads, only carries into the
    ``LaunchTasks`` it returns, so a task is described once from the framework to the agent.
    """

    task_id: str
    name: str
    resources: ResourceVector
    agent_id: str | None = None  # as the framework named it; must match the offers' agent
    details: object = None
    preemptible: bool = False  # the rebalancer may kill it (``master.core.rebalance``)


@dataclass(frozen=True, slots=True)
class RunningTask:
    """A task an agent already runs when it (re)joins the pool: after being unreachable, or
    after a master restart, its tasks are adopted instead of launched (Mesos's reregistration)."""

    framework_id: str
    task_id: str
    name: str
    resources: ResourceVector
    state: TaskState  # non-terminal: STAGING, STARTING, RUNNING or KILLING
    preemptible: bool = False


@dataclass(frozen=True, slots=True)
class LaunchTasks:
    """Tasks accepted from offers, to be started by one agent."""

    agent_id: str
    framework_id: str
    tasks: tuple[TaskLaunch, ...]


@dataclass(frozen=True, slots=True)
class KillTask:
    """Ask an agent to kill one task; ``reason`` (UNSPECIFIED: none) is what its KILLED update
    says, ``grace_period`` replaces the task's own (None: keep it)."""

    agent_id: str
    framework_id: str
    task_id: str
    reason: TaskReason = TaskReason.UNSPECIFIED
    grace_period: float | None = None


@dataclass(frozen=True, slots=True)
class TaskStatusChange:
    """A task state the master decided itself (e.g. LOST when its agent was removed)."""

    framework_id: str
    task_id: str
    agent_id: str
    state: TaskState
    reason: str
    message: str


Message = SendOffers | RescindOffer | LaunchTasks | KillTask | TaskStatusChange
