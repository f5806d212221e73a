"""Values the master runtime exchanges with its gRPC adapters and its registry, free of wire types.

``master.service.convert`` turns ``fairshare.v1`` messages into these values (and the core's
``TaskLaunch``, ``LaunchTasks`` and ``KillTask``) and back; the runtime (``master.runtime``), the
registry and the task book work only with them, so nothing outside ``master.service`` touches
``*_pb2`` (docs/architecture.md §1).

A task is described once: the wire's ``TaskInfo`` becomes the core's ``TaskLaunch`` in
``convert`` (its ``details`` a ``TaskDetails``: what the agent runs, which the core never reads),
the core returns it inside its own ``LaunchTasks`` message, and that message is what the runtime
records and sends to the agent.

Invariants:
- every value is immutable (frozen dataclasses, tuples, ``ResourceVector``);
- times are wall-clock seconds since the epoch (the wire's Timestamps); the runtime's own
  monotonic clock never leaves it;
- task states are the kernel's ``TaskState``; reasons are the wire enum names without their
  prefix (``"AGENT_UNREACHABLE"``), ``""`` being the unspecified reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fairshare.agent_spec import AgentSpec
from fairshare.command import Command, ResourceUsage
from fairshare.framework_info import Demand, FrameworkInfo
from fairshare.task_states import TaskReason, TaskState

from master.core.messages import KillTask, LaunchTasks
from master.core.records import Offer

__all__ = [
    "AckCommand",
    "AgentCommand",
    "AgentSettings",
    "AgentSpec",
    "Demand",
    "ErrorEvent",
    "FailureEvent",
    "FrameworkEvent",
    "FrameworkInfo",
    "HeartbeatEvent",
    "LeaderInfo",
    "OffersEvent",
    "RescindEvent",
    "StatusUpdate",
    "StreamEnd",
    "TaskDetails",
    "UpdateEvent",
]


@dataclass(frozen=True, slots=True)
class LeaderInfo:
    """The leadership term a runtime serves: the leader's address (what clients dial), its
    epoch (0 for a master leading alone with its embedded registry) and since when it leads
    (wall clock)."""

    address: str
    epoch: int
    elected_at: float


@dataclass(frozen=True, slots=True)
class TaskDetails:
    """What the agent runs for a task (``TaskInfo.command`` or ``TaskInfo.process``, and labels):
    the ``details`` of the core's ``TaskLaunch``, passed through to the agent unchanged (the core
    never reads them). ``command`` set: a command task (the placeholder fields keep their
    defaults); None: a placeholder task."""

    duration: float | None = None
    exit_code: int = 0
    startup_delay: float | None = None
    fail_on_start: bool = False
    labels: tuple[tuple[str, str], ...] = ()
    command: Command | None = None


@dataclass(frozen=True, slots=True)
class StatusUpdate:
    """A task status (``TaskStatus``); agent updates carry a 16-byte ``uuid``."""

    task_id: str
    agent_id: str
    state: TaskState
    reason: TaskReason = TaskReason.UNSPECIFIED
    message: str = ""
    timestamp: float = 0.0
    uuid: bytes = b""
    source: str = "MASTER"  # or "AGENT"
    healthy: bool | None = None
    exit_code: int | None = None
    usage: ResourceUsage | None = None  # a command task's, on its terminal update


# -- events on a framework's Subscribe stream ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffersEvent:
    """New offers; ``expires_at`` (wall clock) when offers time out."""

    offers: tuple[Offer, ...]
    expires_at: float | None = None


@dataclass(frozen=True, slots=True)
class RescindEvent:
    """An outstanding offer was withdrawn."""

    offer_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class UpdateEvent:
    """A task status change (agent-forwarded or master-generated)."""

    status: StatusUpdate


@dataclass(frozen=True, slots=True)
class FailureEvent:
    """An agent was lost."""

    agent_id: str
    message: str


@dataclass(frozen=True, slots=True)
class HeartbeatEvent:
    """Periodic liveness signal; ``time`` is the master's wall clock."""

    time: float


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    """Fatal error; a ``StreamEnd`` follows. ``code`` is a gRPC status code name."""

    message: str
    code: str


@dataclass(frozen=True, slots=True)
class StreamEnd:
    """End the stream: ``code`` ``"OK"`` ends it normally, any other gRPC code name aborts."""

    code: str = "OK"
    message: str = ""


FrameworkEvent = (
    OffersEvent
    | RescindEvent
    | UpdateEvent
    | FailureEvent
    | HeartbeatEvent
    | ErrorEvent
    | StreamEnd
)


# -- commands on an agent's stream -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AckCommand:
    """The framework acknowledged a status update."""

    framework_id: str
    task_id: str
    uuid: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """New session settings for a connected agent (seconds)."""

    heartbeat_interval: float
    reconnect_jitter: float


AgentCommand = LaunchTasks | KillTask | AckCommand | AgentSettings | StreamEnd
"""Launches and kills are the core's own messages; acknowledgements and settings the
runtime's."""
