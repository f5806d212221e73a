"""What ``AgentState`` answers its shell: the first message of a session, the fate of each task
of a launch, what a kill must do, and the status updates due for sending.

Invariants: plain immutable values (no wire types); the shell performs what they say and never
changes the state through them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from fairshare.task_states import TaskState

from agent.core.records import AgentSpec, LaunchSpec, StatusUpdate, TaskKey, TaskView

__all__ = ["KillDecision", "LaunchResult", "Outgoing", "RegisterCall", "ReregisterCall"]


@dataclass(frozen=True, slots=True)
class RegisterCall:
    """The agent has no id yet: send register with this spec."""

    spec: AgentSpec


@dataclass(frozen=True, slots=True)
class ReregisterCall:
    """The agent has an id: send reregister with its tasks and frameworks."""

    agent_id: str
    spec: AgentSpec
    tasks: tuple[TaskView, ...]
    framework_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LaunchResult:
    """What ``handle_launch`` decided, task by task."""

    accepted: tuple[tuple[TaskKey, LaunchSpec], ...] = ()  # the executors must start these
    rejected: tuple[tuple[TaskKey, str], ...] = ()  # answered with TASK_STATE_ERROR
    ignored: tuple[str, ...] = ()  # duplicates or tasks that cannot even be addressed


class KillDecision(Enum):
    """What the runtime must do after ``handle_kill``."""

    KILL = "kill"  # the task is live: stop it in the executor (KILLING queued)
    UNKNOWN = "unknown"  # the agent never had the task: DROPPED queued
    ALREADY_TERMINAL = "already_terminal"  # nothing to do


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One update to send now (in an ``updates`` message)."""

    update: StatusUpdate
    latest_state: TaskState
    attempt: int  # 1 for the first send
