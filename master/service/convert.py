"""Conversions between ``fairshare.v1`` messages and the runtime's values (``master.model``).

The only master module besides the servicers that touches ``*_pb2``. Wire input is validated
here, before the runtime sees it: anything malformed raises ``InvalidArgument`` naming the field
(duplicate or negative resources, bad names, unknown enum numbers, negative durations, refuse
filters out of range), so adapters map it to INVALID_ARGUMENT and nothing changes.

Invariants: ``*_from_pb`` functions never return a value the wire contract forbids; ``*_to_pb``
functions emit resources sorted by name without zero entries (common.proto) and leave optional
fields unset for ``None``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

import grpc
from fairshare.resources import ResourceError, ResourceVector
from fairshare.v1 import agent_pb2, common_pb2, scheduler_pb2
from fairshare.wire import resources_from_pb, resources_to_pb
from google.protobuf.descriptor import EnumDescriptor
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from master.core.errors import InvalidArgument
from master.core.records import Offer
from master.model import (
    AckCommand,
    AgentCommand,
    AgentSpec,
    DemandSpec,
    ErrorEvent,
    FailureEvent,
    FrameworkEvent,
    FrameworkSpec,
    HeartbeatEvent,
    KillCommand,
    LaunchCommand,
    OffersEvent,
    RescindEvent,
    StatusUpdate,
    StreamEnd,
    TaskSpec,
    UpdateEvent,
)

__all__ = [
    "AGENT_STATES",
    "agent_spec",
    "attributes_to_pb",
    "command_to_pb",
    "demand_spec",
    "demand_to_pb",
    "duration_seconds",
    "event_to_pb",
    "framework_info",
    "framework_spec",
    "latest_state",
    "offer_to_pb",
    "refuse_seconds",
    "resources",
    "resources_to_pb",
    "status_from_pb",
    "status_to_pb",
    "task_info",
    "task_spec",
    "task_state",
    "timestamp",
]

NAME_RE = re.compile(r"^[a-z][a-z0-9_.\-]*$")
ROLE_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")
MAX_REFUSE_SECONDS = 31_536_000.0
MAX_WEIGHT = 1e6
UUID_BYTES = 16
AGENT_STATES = frozenset(
    {"STARTING", "RUNNING", "KILLING", "FINISHED", "FAILED", "KILLED", "ERROR", "LOST", "DROPPED"}
)
"""States an agent may report (the others are the master's to decide)."""


# -- scalars --------------------------------------------------------------------------------------


def resources(message: common_pb2.Resources, what: str) -> ResourceVector:
    """A ``Resources`` message as a vector; bad names, negatives and duplicates are refused.

    The master accepts a narrower set of names than ``ResourceVector`` (lower case, starting with
    a letter); everything else is ``framework_sdk.wire.resources_from_pb``'s checks.
    """
    for item in message.items:
        if not NAME_RE.match(item.name):
            raise InvalidArgument(
                f"{what}: resource name {item.name!r} is malformed (lower case [a-z0-9_.-],"
                " starting with a letter)"
            )
    try:
        return resources_from_pb(message)
    except ResourceError as error:
        raise InvalidArgument(f"{what}: {error}") from None


def duration_seconds(message: Duration, what: str) -> float:
    """A non-negative Duration in seconds."""
    if message.seconds < 0 or message.nanos < 0 or message.nanos >= 1_000_000_000:
        raise InvalidArgument(f"{what} must be a non-negative duration")
    return message.seconds + message.nanos / 1e9


def duration(seconds: float) -> Duration:
    """Seconds as a Duration."""
    message = Duration()
    message.FromNanoseconds(round(seconds * 1e9))
    return message


def timestamp(seconds: float) -> Timestamp:
    """Wall-clock seconds as a Timestamp."""
    message = Timestamp()
    message.FromNanoseconds(round(seconds * 1e9))
    return message


def _enum_name(enum: EnumDescriptor, value: int, what: str) -> str:
    described = enum.values_by_number.get(value)
    if described is None:
        raise InvalidArgument(f"{what}: unknown enum number {value}")
    return described.name


def refuse_seconds(filters: common_pb2.Filters, present: bool) -> float | None:
    """``Filters.refuse_seconds`` (``None``: the master default); finite, in [0, 1 year]."""
    if not present or not filters.HasField("refuse_seconds"):
        return None
    value = filters.refuse_seconds
    if not math.isfinite(value) or not 0 <= value <= MAX_REFUSE_SECONDS:
        raise InvalidArgument(f"filters.refuse_seconds must be in [0, {MAX_REFUSE_SECONDS:.0f}]")
    return value


def check_weight(weight: float, what: str) -> float:
    """A weight: finite, in (0, 1e6]."""
    if not math.isfinite(weight) or not 0 < weight <= MAX_WEIGHT:
        raise InvalidArgument(f"{what} must be finite and in (0, 1e6], got {weight!r}")
    return weight


def check_role(role: str, what: str = "role") -> str:
    """A role name, ``"*"`` for empty."""
    if role in ("", "*"):
        return "*"
    if not ROLE_RE.match(role):
        raise InvalidArgument(f"{what} {role!r} is malformed (letters, digits, '_', '.', '-')")
    return role


def _attributes(items: Iterable[common_pb2.Attribute]) -> tuple[tuple[str, str], ...]:
    seen: dict[str, str] = {}
    for item in items:
        if not NAME_RE.match(item.name):
            raise InvalidArgument(f"attribute name {item.name!r} is malformed")
        if ";" in item.value or ":" in item.value:
            raise InvalidArgument(f"attribute {item.name!r}: value must not contain ';' or ':'")
        if item.name in seen:
            raise InvalidArgument(f"attribute {item.name!r} is given twice")
        seen[item.name] = item.value
    return tuple(sorted(seen.items()))


def attributes_to_pb(attributes: Iterable[tuple[str, str]]) -> list[common_pb2.Attribute]:
    """Attribute pairs as messages."""
    return [common_pb2.Attribute(name=n, value=v) for n, v in attributes]


# -- agents and frameworks ------------------------------------------------------------------------


def agent_spec(info: common_pb2.AgentInfo) -> AgentSpec:
    """``AgentInfo`` as an ``AgentSpec``; resources must be non-empty."""
    total = resources(info.resources, "agent_info.resources")
    if not total:
        raise InvalidArgument("agent_info.resources is empty")
    if not 0 <= info.port <= 65535:
        raise InvalidArgument(f"agent_info.port {info.port} is not a port number")
    return AgentSpec(info.hostname, info.port, total, _attributes(info.attributes), info.version)


def agent_info(spec: AgentSpec) -> common_pb2.AgentInfo:
    """An ``AgentSpec`` as ``AgentInfo``."""
    return common_pb2.AgentInfo(
        hostname=spec.hostname,
        port=spec.port,
        resources=resources_to_pb(spec.resources),
        attributes=attributes_to_pb(spec.attributes),
        version=spec.version,
    )


def framework_spec(info: common_pb2.FrameworkInfo) -> FrameworkSpec:
    """``FrameworkInfo`` as a ``FrameworkSpec``; name non-empty, weight and timeout in range."""
    if not info.name.strip():
        raise InvalidArgument("framework_info.name is empty")
    weight = None
    if info.HasField("weight"):
        weight = check_weight(info.weight, "framework_info.weight")
    failover = duration_seconds(info.failover_timeout, "framework_info.failover_timeout")
    capabilities = set()
    for value in info.capabilities:
        name = common_pb2.FrameworkInfo.Capability.Name(value) if value in _CAPABILITIES else ""
        if name:  # unknown numbers come from newer SDKs: ignore them
            capabilities.add(name.removeprefix("CAPABILITY_"))
    return FrameworkSpec(
        info.framework_id,
        info.name,
        check_role(info.role, "framework_info.role"),
        weight,
        failover,
        info.principal,
        info.user,
        info.hostname,
        frozenset(capabilities),
    )


_CAPABILITIES = frozenset(common_pb2.FrameworkInfo.Capability.values()) - {0}


def framework_info(spec: FrameworkSpec) -> common_pb2.FrameworkInfo:
    """A ``FrameworkSpec`` as ``FrameworkInfo``."""
    info = common_pb2.FrameworkInfo(
        framework_id=spec.framework_id,
        name=spec.name,
        role=spec.role,
        failover_timeout=duration(spec.failover_timeout),
        principal=spec.principal,
        user=spec.user,
        hostname=spec.hostname,
        capabilities=[
            common_pb2.FrameworkInfo.Capability.Value(f"CAPABILITY_{c}")
            for c in sorted(spec.capabilities)
        ],
    )
    if spec.weight is not None:
        info.weight = spec.weight
    return info


def demand_spec(demand: common_pb2.Demand, present: bool) -> DemandSpec | None:
    """A ``Demand`` (``None`` when absent); its shape must be non-empty, max_tasks >= 0."""
    if not present:
        return None
    shape = resources(demand.task_resources, "demand.task_resources")
    if not shape:
        raise InvalidArgument("demand.task_resources is empty (leave demand unset to clear it)")
    max_tasks = None
    if demand.HasField("max_tasks"):
        if demand.max_tasks < 0:
            raise InvalidArgument(f"demand.max_tasks must be >= 0, got {demand.max_tasks}")
        max_tasks = demand.max_tasks
    return DemandSpec(shape, max_tasks)


def demand_to_pb(demand: DemandSpec) -> common_pb2.Demand:
    """A ``DemandSpec`` as ``Demand``."""
    message = common_pb2.Demand(task_resources=resources_to_pb(demand.task_resources))
    if demand.max_tasks is not None:
        message.max_tasks = demand.max_tasks
    return message


# -- tasks ----------------------------------------------------------------------------------------


def task_spec(info: common_pb2.TaskInfo) -> TaskSpec:
    """``TaskInfo`` as a ``TaskSpec`` (the core checks ids, emptiness and fit)."""
    what = f"task {info.task_id!r}"
    command = info.command
    duration_ = None
    if command.HasField("duration"):
        duration_ = duration_seconds(command.duration, f"{what}: command.duration")
    delay = None
    if command.HasField("startup_delay"):
        delay = duration_seconds(command.startup_delay, f"{what}: command.startup_delay")
    return TaskSpec(
        info.task_id,
        info.name,
        info.agent_id,
        resources(info.resources, f"{what}: resources"),
        duration_,
        command.exit_code,
        delay,
        command.fail_on_start,
        tuple(sorted(info.labels.items())),
    )


def task_info(spec: TaskSpec) -> common_pb2.TaskInfo:
    """A ``TaskSpec`` as ``TaskInfo``."""
    command = common_pb2.CommandInfo(exit_code=spec.exit_code, fail_on_start=spec.fail_on_start)
    if spec.duration is not None:
        command.duration.CopyFrom(duration(spec.duration))
    if spec.startup_delay is not None:
        command.startup_delay.CopyFrom(duration(spec.startup_delay))
    return common_pb2.TaskInfo(
        task_id=spec.task_id,
        name=spec.name,
        agent_id=spec.agent_id,
        resources=resources_to_pb(spec.resources),
        command=command,
        labels=dict(spec.labels),
    )


def task_state(value: int, what: str) -> str:
    """A ``TaskState`` number as its name without prefix; UNSPECIFIED is refused."""
    name = _enum_name(common_pb2.TaskState.DESCRIPTOR, value, what).removeprefix("TASK_STATE_")
    if name == "UNSPECIFIED":
        raise InvalidArgument(f"{what} is unspecified")
    return name


def latest_state(value: int) -> str:
    """``UpdateStatusRequest.latest_state``: ``""`` when unspecified, else an agent state."""
    if value == 0:
        return ""
    state = task_state(value, "latest_state")
    if state not in AGENT_STATES:
        raise InvalidArgument(f"latest_state {state} is not a state an agent reports")
    return state


def status_from_pb(status: common_pb2.TaskStatus, agent_update: bool) -> StatusUpdate:
    """A ``TaskStatus``; an agent update needs a task id, an agent state and a 16-byte uuid."""
    if not status.task_id:
        raise InvalidArgument("status.task_id is empty")
    state = task_state(status.state, "status.state")
    if agent_update:
        if state not in AGENT_STATES:
            raise InvalidArgument(f"status.state {state} is not a state an agent reports")
        if len(status.uuid) != UUID_BYTES:
            raise InvalidArgument(f"status.uuid must be {UUID_BYTES} bytes, got {len(status.uuid)}")
    reason_enum = common_pb2.TaskStatus.Reason.DESCRIPTOR
    reason = _enum_name(reason_enum, status.reason, "status.reason").removeprefix("REASON_")
    return StatusUpdate(
        status.task_id,
        status.agent_id,
        state,
        "" if reason == "UNSPECIFIED" else reason,
        status.message,
        status.timestamp.ToNanoseconds() / 1e9,
        status.uuid,
        "AGENT" if agent_update else "MASTER",
        status.healthy if status.HasField("healthy") else None,
        status.exit_code if status.HasField("exit_code") else None,
    )


def status_to_pb(status: StatusUpdate) -> common_pb2.TaskStatus:
    """A ``StatusUpdate`` as ``TaskStatus``."""
    message = common_pb2.TaskStatus(
        task_id=status.task_id,
        agent_id=status.agent_id,
        state=common_pb2.TaskState.Value(f"TASK_STATE_{status.state}"),
        reason=common_pb2.TaskStatus.Reason.Value(f"REASON_{status.reason or 'UNSPECIFIED'}"),
        message=status.message,
        timestamp=timestamp(status.timestamp),
        uuid=status.uuid,
        source=common_pb2.TaskStatus.Source.Value(f"SOURCE_{status.source}"),
    )
    if status.healthy is not None:
        message.healthy = status.healthy
    if status.exit_code is not None:
        message.exit_code = status.exit_code
    return message


# -- outgoing streams -----------------------------------------------------------------------------


def offer_to_pb(offer: Offer, expires_at: float | None) -> common_pb2.Offer:
    """A core offer as ``Offer``."""
    message = common_pb2.Offer(
        offer_id=offer.offer_id,
        framework_id=offer.framework_id,
        agent_id=offer.agent_id,
        hostname=offer.hostname,
        resources=resources_to_pb(offer.resources),
        attributes=attributes_to_pb(offer.attributes),
        fair_tasks=offer.fair_tasks,
    )
    if expires_at is not None:
        message.expires_at.CopyFrom(timestamp(expires_at))
    return message


def event_to_pb(event: FrameworkEvent) -> scheduler_pb2.SubscribeResponse:
    """A framework event as one stream message (``StreamEnd`` is not sent)."""
    pb = scheduler_pb2
    if isinstance(event, OffersEvent):
        offers = [offer_to_pb(offer, event.expires_at) for offer in event.offers]
        return pb.SubscribeResponse(offers=pb.OffersEvent(offers=offers))
    if isinstance(event, UpdateEvent):
        return pb.SubscribeResponse(update=pb.UpdateEvent(status=status_to_pb(event.status)))
    if isinstance(event, RescindEvent):
        rescind = pb.RescindEvent(offer_id=event.offer_id, reason=event.reason)
        return pb.SubscribeResponse(rescind=rescind)
    if isinstance(event, HeartbeatEvent):
        return pb.SubscribeResponse(heartbeat=pb.HeartbeatEvent(time=timestamp(event.time)))
    if isinstance(event, FailureEvent):
        failure = pb.FailureEvent(agent_id=event.agent_id, message=event.message)
        return pb.SubscribeResponse(failure=failure)
    if isinstance(event, ErrorEvent):
        code = _grpc_code_number(event.code)
        return pb.SubscribeResponse(error=pb.ErrorEvent(message=event.message, code=code))
    raise TypeError(f"not a stream message: {event!r}")


def _grpc_code_number(name: str) -> int:
    code: tuple[int, str] = getattr(grpc.StatusCode, name, grpc.StatusCode.UNKNOWN).value
    return code[0]


def command_to_pb(command: AgentCommand) -> agent_pb2.CommandsResponse:
    """An agent command as one stream message (``StreamEnd`` is not sent)."""
    pb = agent_pb2
    if isinstance(command, LaunchCommand):
        tasks = [task_info(spec) for spec in command.tasks]
        launch = pb.LaunchTasksCommand(framework_id=command.framework_id, tasks=tasks)
        return pb.CommandsResponse(launch_tasks=launch)
    if isinstance(command, KillCommand):
        kill = pb.KillTaskCommand(framework_id=command.framework_id, task_id=command.task_id)
        return pb.CommandsResponse(kill_task=kill)
    if isinstance(command, AckCommand):
        ack = pb.AcknowledgeStatusCommand(
            framework_id=command.framework_id, task_id=command.task_id, uuid=command.uuid
        )
        return pb.CommandsResponse(acknowledge_status=ack)
    if isinstance(command, StreamEnd):
        raise TypeError("StreamEnd is not a stream message")
    raise TypeError(f"not a command: {command!r}")
