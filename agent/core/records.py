"""Plain value types the agent's state, executors and runtime exchange.

Invariants: every type here is immutable and wire-free (no protobuf: ``agent.wire`` converts at
the boundary, and an import-linter contract keeps ``agent.core`` pure). Task states are the
kernel's ``TaskState`` (``fairshare.task_states``: one vocabulary and one forward rule for every
process), and so are reasons (``TaskReason``, named like the wire's ``TaskStatus.Reason``,
converted by name). A task is
addressed by ``TaskKey = (framework_id, task_id)``; the master's description of a task is a
``TaskSpec``, decoded once when it arrives (or is read back from the checkpoint).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, TypeAlias

from fairshare.agent_spec import AgentSpec
from fairshare.command import Command, ResourceUsage
from fairshare.resources import ResourceVector
from fairshare.task_states import TaskReason, TaskState

__all__ = [
    "MEMORY_PEAK_BUCKETS",
    "AgentMetrics",
    "AgentSpec",
    "CommandTask",
    "CommandUsage",
    "LaunchSpec",
    "PlaceholderSpec",
    "StatusUpdate",
    "TaskKey",
    "TaskProblem",
    "TaskReason",
    "TaskSpec",
    "TaskView",
]

TaskKey: TypeAlias = tuple[str, str]
"""``(framework_id, task_id)``: task ids are unique only within their framework."""


@dataclass(frozen=True, slots=True)
class PlaceholderSpec:
    """What a placeholder task does (``CommandInfo`` in seconds)."""

    duration: float | None = None  # None: until killed
    exit_code: int = 0
    startup_delay: float = 0.0
    fail_on_start: bool = False

    def log_fields(self) -> dict[str, Any]:
        """What a log line about launching it says."""
        return {"kind": "placeholder", "duration": self.duration}


@dataclass(frozen=True, slots=True)
class CommandTask:
    """What a command task runs (``ProcessInfo``), with the resources its limits come from."""

    command: Command
    resources: ResourceVector

    def log_fields(self) -> dict[str, Any]:
        """What a log line about launching it says (the command line cut short; no env)."""
        return {"kind": "command", "command": self.command.describe(), "user": self.command.user}


LaunchSpec: TypeAlias = PlaceholderSpec | CommandTask
"""What the executors start for a task: its kind decides which executor runs it."""


@dataclass(frozen=True, slots=True)
class TaskProblem:
    """Why a task cannot run as described: it is answered with TASK_STATE_ERROR and ``reason``."""

    message: str
    reason: TaskReason = TaskReason.TASK_INVALID


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """A task as the master described it (the wire's ``TaskInfo``), read by ``agent.wire``.

    ``launch`` is what to run, or the problem that keeps it from running (resources that are
    invalid or empty, a command of a bad shape). ``encoded`` is the description exactly as it
    was given, minus its ``agent_id``: opaque to the core, which never reads it; the boundary
    rebuilds the wire form from it (with ``agent_id``) for a reregister and the checkpoint, so
    labels, unknown fields and invalid values travel unchanged. The other fields are read from
    the same description and never change, except ``agent_id``, which the state fills in.
    """

    task_id: str
    agent_id: str = ""  # empty: not given
    resources: ResourceVector = field(default_factory=ResourceVector)
    launch: LaunchSpec | TaskProblem = field(default_factory=PlaceholderSpec)
    name: str = ""
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    preemptible: bool = False
    encoded: bytes = b""


@dataclass(frozen=True, slots=True)
class StatusUpdate:
    """One agent-generated status update; ``uuid`` identifies it for acknowledgement."""

    framework_id: str
    task_id: str
    state: TaskState
    uuid: bytes
    timestamp: float  # wall-clock seconds since the epoch, by the agent's clock
    reason: TaskReason = TaskReason.UNSPECIFIED
    message: str = ""
    exit_code: int | None = None
    usage: ResourceUsage | None = None  # a command task's, on its terminal update

    @property
    def key(self) -> TaskKey:
        """The task the update is about."""
        return (self.framework_id, self.task_id)


@dataclass(frozen=True, slots=True)
class TaskView:
    """A task as the agent tracks it: its description, current state and newest update."""

    framework_id: str
    info: TaskSpec
    resources: ResourceVector
    state: TaskState
    latest: StatusUpdate | None  # None while STAGING (no update minted yet)
    running_since: float | None = None  # wall-clock epoch seconds it became RUNNING

    @property
    def key(self) -> TaskKey:
        """``(framework_id, task_id)``."""
        return (self.framework_id, self.info.task_id)


MEMORY_PEAK_BUCKETS: Final = tuple(16 << 20 << (2 * i) for i in range(6))
"""Upper bounds (bytes) of the peak-memory histogram of ended command tasks: 16 MiB .. 16 GiB."""


@dataclass(frozen=True, slots=True)
class CommandUsage:
    """What the agent's command tasks use: now (live tasks) and in all (since the agent started).

    ``memory_peaks`` counts ended tasks per ``MEMORY_PEAK_BUCKETS`` bound (not cumulative; the
    last entry counts those above every bound).
    """

    isolation: str
    live_tasks: int
    live_memory_bytes: int
    cpu_seconds_total: float
    memory_peaks: tuple[int, ...]
    memory_peak_sum: int


@dataclass(frozen=True, slots=True)
class AgentMetrics:
    """A snapshot of the agent's counters and gauges (the agent's /metrics exports them)."""

    connected: bool
    agent_id: str | None
    tasks_by_state: dict[str, int]
    tasks_terminal_total: dict[str, int]
    pending_updates: int
    updates_sent_total: int
    update_retries_total: int
    acks_total: int
    acks_ignored_total: int
    reconnects_total: int
    registrations_total: int
    reregistrations_total: int
    heartbeats_total: int
    heartbeat_failures_total: int
    resources_total_millis: dict[str, int]
    resources_used_millis: dict[str, int]
    command: CommandUsage | None = None  # None: the agent runs no command tasks
