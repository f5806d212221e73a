"""Plain value types the agent's state, executor and runtime exchange.

Invariants: every type here is immutable (the ``TaskInfo`` inside ``TaskView`` is the agent's own
copy and is never mutated after launch); task states are the kernel's ``TaskState``
(``fairshare.task_states``: one vocabulary and one forward rule for every process) and reasons the
wire enum values (``common_pb2.TaskStatus.REASON_*``), so no mapping table can drift from the
API. A task is addressed by ``TaskKey = (framework_id, task_id)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from fairshare.command import Command, ResourceUsage
from fairshare.resources import ResourceVector
from fairshare.task_states import TaskState
from fairshare.v1 import common_pb2

__all__ = [
    "MEMORY_PEAK_BUCKETS",
    "AgentMetrics",
    "AgentSpec",
    "CommandTask",
    "CommandUsage",
    "LaunchSpec",
    "PlaceholderSpec",
    "Reason",
    "StatusUpdate",
    "TaskKey",
    "TaskView",
]

TaskKey: TypeAlias = tuple[str, str]
"""``(framework_id, task_id)``: task ids are unique only within their framework."""

Reason: TypeAlias = common_pb2.TaskStatus.Reason.ValueType


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """Who the agent is and what it offers (becomes ``AgentInfo`` on the wire)."""

    hostname: str
    port: int
    resources: ResourceVector
    attributes: tuple[tuple[str, str], ...] = ()
    version: str = "0.1.0"


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
class StatusUpdate:
    """One agent-generated status update; ``uuid`` identifies it for acknowledgement."""

    framework_id: str
    task_id: str
    state: TaskState
    uuid: bytes
    timestamp: float  # wall-clock seconds since the epoch, by the agent's clock
    reason: Reason = common_pb2.TaskStatus.REASON_UNSPECIFIED
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
    info: common_pb2.TaskInfo
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
    """A snapshot of the agent's counters and gauges (issue 4 exports them to Prometheus)."""

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
