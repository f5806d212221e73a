"""Values the master runtime exchanges with its gRPC adapters, free of wire types.

``master.service.convert`` turns ``fairshare.v1`` messages into these values and back; the runtime
(``master.runtime``) and the task book work only with them, so nothing outside ``master.service``
touches ``*_pb2`` (DESIGN.md §1).

Invariants:
- every value is immutable (frozen dataclasses, tuples, ``ResourceVector``);
- times are wall-clock seconds since the epoch (the wire's Timestamps); the runtime's own
  monotonic clock never leaves it;
- task states and reasons are the wire enum names without their prefix (``"RUNNING"``,
  ``"AGENT_UNREACHABLE"``); ``""`` is the unspecified reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fairshare.resources import ResourceVector

from master.core.records import Offer

__all__ = [
    "AckCommand",
    "AgentCommand",
    "AgentSpec",
    "DemandSpec",
    "ErrorEvent",
    "FailureEvent",
    "FrameworkEvent",
    "FrameworkSpec",
    "HeartbeatEvent",
    "KillCommand",
    "LaunchCommand",
    "OffersEvent",
    "RescindEvent",
    "StatusUpdate",
    "StreamEnd",
    "TaskSpec",
    "UpdateEvent",
]


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """What an agent registers with (``AgentInfo``)."""

    hostname: str
    port: int
    resources: ResourceVector
    attributes: tuple[tuple[str, str], ...] = ()
    version: str = ""


@dataclass(frozen=True, slots=True)
class FrameworkSpec:
    """What a framework subscribes with (``FrameworkInfo``); ``framework_id`` empty when new."""

    framework_id: str
    name: str
    role: str = "*"
    weight: float | None = None
    failover_timeout: float = 0.0
    principal: str = ""
    user: str = ""
    hostname: str = ""
    capabilities: frozenset[str] = frozenset()  # "PARTITION_AWARE", "TASK_KILLING_STATE", ...


@dataclass(frozen=True, slots=True)
class DemandSpec:
    """A declared task shape and how many tasks the framework wants (``None``: unlimited)."""

    task_resources: ResourceVector
    max_tasks: int | None = None


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """A task description (``TaskInfo``), passed to the agent unchanged but for ``agent_id``."""

    task_id: str
    name: str
    agent_id: str
    resources: ResourceVector
    duration: float | None = None
    exit_code: int = 0
    startup_delay: float | None = None
    fail_on_start: bool = False
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class StatusUpdate:
    """A task status (``TaskStatus``); agent updates carry a 16-byte ``uuid``."""

    task_id: str
    agent_id: str
    state: str
    reason: str = ""
    message: str = ""
    timestamp: float = 0.0
    uuid: bytes = b""
    source: str = "MASTER"  # or "AGENT"
    healthy: bool | None = None
    exit_code: int | None = None


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


# -- commands on an agent's Commands stream --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LaunchCommand:
    """Launch tasks of one framework."""

    framework_id: str
    tasks: tuple[TaskSpec, ...]


@dataclass(frozen=True, slots=True)
class KillCommand:
    """Kill one task."""

    framework_id: str
    task_id: str


@dataclass(frozen=True, slots=True)
class AckCommand:
    """The framework acknowledged a status update."""

    framework_id: str
    task_id: str
    uuid: bytes = field(repr=False)


AgentCommand = LaunchCommand | KillCommand | AckCommand | StreamEnd
