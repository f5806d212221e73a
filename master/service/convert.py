"""Conversions between ``fairshare.v1`` messages and the runtime's values (``master.model``).

The only master module besides the servicers that touches ``*_pb2``. The wire's shape is
validated here, before the runtime sees it: anything malformed raises ``InvalidArgument`` naming
the field (duplicate or negative resources, bad names, unknown enum numbers, durations and
timestamps out of range, refuse filters out of range), so adapters map it to INVALID_ARGUMENT and
nothing changes. What values mean (a weight's range, a task's fit) the core checks.

A ``TaskInfo`` becomes the core's ``TaskLaunch`` here, once (``task_launch``); the messages the
master streams out (framework events, agent commands) are built in ``master.service.streams``.

Invariants: ``*_from_pb`` functions never return a value the wire contract forbids; ``*_to_pb``
functions emit resources sorted by name without zero entries (common.proto) and leave optional
fields unset for ``None``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from fairshare.command import Command, ResourceUsage
from fairshare.resources import ResourceError, ResourceVector
from fairshare.roles import RoleError
from fairshare.roles import check_role as check_role_path
from fairshare.task_states import AGENT_REPORTED, TaskState
from fairshare.v1 import agent_pb2, common_pb2
from fairshare.wire import (
    WireRangeError,
    command_from_pb,
    command_to_pb,
    duration_to_pb,
    reason_from_pb,
    reason_to_pb,
    resources_from_pb,
    resources_to_pb,
    seconds_from_duration,
    seconds_from_timestamp,
    task_state_from_pb,
    task_state_to_pb,
    timestamp_to_pb,
    usage_from_pb,
    usage_to_pb,
)
from google.protobuf.descriptor import EnumDescriptor
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from master.core import TaskLaunch
from master.core.errors import InvalidArgument
from master.core.input_bounds import (
    check_agent_resources,
    check_attributes,
    check_labels,
    check_reservations,
)
from master.core.reservations import checked_reservation_role
from master.model import (
    AgentSpec,
    DemandSpec,
    FrameworkSpec,
    StatusUpdate,
    TaskDetails,
)

__all__ = [
    "agent_spec",
    "agent_updates",
    "attributes_to_pb",
    "demand_spec",
    "demand_to_pb",
    "duration_seconds",
    "framework_info",
    "framework_spec",
    "latest_state",
    "refuse_seconds",
    "reported_tasks",
    "resources",
    "resources_to_pb",
    "status_from_pb",
    "status_to_pb",
    "task_info",
    "task_launch",
    "task_state",
    "text",
    "timestamp",
]

NAME_RE = re.compile(r"^[a-z][a-z0-9_.\-]*$")
MAX_REFUSE_SECONDS = 31_536_000.0
UUID_BYTES = 16
MAX_NAME = 256
"""Characters of an id, a name, a role, a principal or a hostname at most (a 100k-character
name is not a name: it is a way to make every GetState large)."""
MAX_MESSAGE = 4096
"""Characters of a status message kept (longer ones are cut: an agent's update is not refused
for its prose)."""


# -- scalars --------------------------------------------------------------------------------------


def text(value: str, what: str, most: int = MAX_NAME) -> str:
    """``value`` if it has at most ``most`` characters (INVALID_ARGUMENT naming it if not)."""
    if len(value) > most:
        raise InvalidArgument(f"{what} has {len(value)} characters; at most {most}")
    return value


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
    """A Duration in seconds, in [0, ``fairshare.wire.MAX_SECONDS``]."""
    try:
        return seconds_from_duration(message, what)
    except WireRangeError as error:
        raise InvalidArgument(str(error)) from None


def timestamp_seconds(message: Timestamp, what: str) -> float:
    """A Timestamp in seconds since the epoch, between 1970 and 9999."""
    try:
        return seconds_from_timestamp(message, what)
    except WireRangeError as error:
        raise InvalidArgument(str(error)) from None


def duration(seconds: float) -> Duration:
    """Seconds as a Duration."""
    return duration_to_pb(seconds)


def timestamp(seconds: float) -> Timestamp:
    """Wall-clock seconds as a Timestamp."""
    return timestamp_to_pb(seconds)


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


def check_role(role: str, what: str = "role") -> str:
    """A role path (``eng``, ``eng/dev``; ``fairshare.roles``'s syntax), ``"*"`` for empty;
    ``InvalidArgument`` naming ``what`` and the rule it breaks."""
    try:
        return check_role_path(role, what)
    except RoleError as error:
        raise InvalidArgument(str(error)) from None


def _attributes(items: Iterable[common_pb2.Attribute]) -> tuple[tuple[str, str], ...]:
    seen: dict[str, str] = {}
    check_attributes(((item.name, item.value) for item in items), "agent_info.attributes")
    for item in items:
        text(item.name, "agent_info.attributes: a name")
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
    """``AgentInfo`` as an ``AgentSpec``; resources must be non-empty (and every free-form
    part within ``master.core.input_bounds``)."""
    check_agent_resources((item.name for item in info.resources.items), "agent_info.resources")
    check_reservations(info.reservations, "agent_info.reservations")
    total = resources(info.resources, "agent_info.resources")
    if not total:
        raise InvalidArgument("agent_info.resources is empty")
    if not 0 <= info.port <= 65535:
        raise InvalidArgument(f"agent_info.port {info.port} is not a port number")
    text(info.hostname, "agent_info.hostname")
    text(info.version, "agent_info.version")
    return AgentSpec(
        info.hostname,
        info.port,
        total,
        _attributes(info.attributes),
        info.version,
        _static_reservations(info.reservations, total),
    )


def _static_reservations(
    items: Iterable[common_pb2.Reservation], total: ResourceVector
) -> tuple[tuple[str, ResourceVector], ...]:
    """An agent's own reservations: one per role path (not ``*``), none dynamic, non-empty,
    together within the agent's resources."""
    seen: dict[str, ResourceVector] = {}
    for index, item in enumerate(items):
        what = f"agent_info.reservations[{index}]"
        if item.dynamic:
            raise InvalidArgument(f"{what}.dynamic: an agent declares static reservations only")
        role = checked_reservation_role(item.role, f"{what}.role")
        if role in seen:
            raise InvalidArgument(f"{what}.role: {role!r} is reserved twice")
        amount = resources(item.resources, f"{what}.resources")
        if not amount:
            raise InvalidArgument(f"{what}.resources is empty")
        seen[role] = amount
    if not sum(seen.values(), ResourceVector()).fits_in(total):
        raise InvalidArgument(
            f"agent_info.reservations: {sum(seen.values(), ResourceVector())} reserved is more"
            f" than agent_info.resources {total}"
        )
    return tuple(sorted(seen.items()))


def reservations_to_pb(
    reservations: Iterable[tuple[str, ResourceVector]], dynamic: bool = False
) -> list[common_pb2.Reservation]:
    """(role, resources) pairs as ``Reservation`` messages."""
    return [
        common_pb2.Reservation(role=role, resources=resources_to_pb(r), dynamic=dynamic)
        for role, r in reservations
    ]


def agent_info(spec: AgentSpec) -> common_pb2.AgentInfo:
    """An ``AgentSpec`` as ``AgentInfo``."""
    return common_pb2.AgentInfo(
        hostname=spec.hostname,
        port=spec.port,
        resources=resources_to_pb(spec.resources),
        attributes=attributes_to_pb(spec.attributes),
        version=spec.version,
        reservations=reservations_to_pb(spec.reservations),
    )


def framework_spec(info: common_pb2.FrameworkInfo) -> FrameworkSpec:
    """``FrameworkInfo`` as a ``FrameworkSpec``; name non-empty, weight and timeout in range."""
    if not info.name.strip():
        raise InvalidArgument("framework_info.name is empty")
    for field in ("framework_id", "name", "principal", "user", "hostname"):
        text(getattr(info, field), f"framework_info.{field}")
    weight = info.weight if info.HasField("weight") else None  # its range: the core's rule
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
    check_agent_resources((i.name for i in demand.task_resources.items), "demand.task_resources")
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


def _process(info: common_pb2.TaskInfo, what: str) -> Command | None:
    """The command of a command task (None for a placeholder); its shape is checked here."""
    if info.WhichOneof("kind") != "process":
        return None
    try:
        return command_from_pb(info.process)
    except ValueError as error:
        raise InvalidArgument(f"{what}: process: {error}") from None


def task_launch(info: common_pb2.TaskInfo) -> TaskLaunch:
    """``TaskInfo`` as the core's ``TaskLaunch``, its command and labels as ``TaskDetails``
    (the core checks ids, emptiness and fit); an empty name is the task id. A command task's
    shape is checked here (``fairshare.command``): a bad one is INVALID_ARGUMENT at Accept."""
    text(info.task_id, "task_info.task_id")
    what = f"task {info.task_id!r}"
    text(info.name, f"{what}: name")
    check_labels(info.labels.items(), f"{what}: labels")
    process = _process(info, what)
    command = info.command
    duration_ = None
    if command.HasField("duration"):
        duration_ = duration_seconds(command.duration, f"{what}: command.duration")
    delay = None
    if command.HasField("startup_delay"):
        delay = duration_seconds(command.startup_delay, f"{what}: command.startup_delay")
    details = TaskDetails(
        duration_,
        command.exit_code,
        delay,
        command.fail_on_start,
        tuple(sorted(info.labels.items())),
        process,
    )
    return TaskLaunch(
        info.task_id,
        info.name or info.task_id,
        resources(info.resources, f"{what}: resources"),
        info.agent_id or None,
        details,
        info.preemptible,
    )


def task_info(launch: TaskLaunch, agent_id: str) -> common_pb2.TaskInfo:
    """A ``TaskLaunch`` placed on ``agent_id`` as ``TaskInfo``."""
    details = launch.details if isinstance(launch.details, TaskDetails) else TaskDetails()
    command = common_pb2.CommandInfo(
        exit_code=details.exit_code, fail_on_start=details.fail_on_start
    )
    if details.duration is not None:
        command.duration.CopyFrom(duration(details.duration))
    if details.startup_delay is not None:
        command.startup_delay.CopyFrom(duration(details.startup_delay))
    info = common_pb2.TaskInfo(
        task_id=launch.task_id,
        name=launch.name,
        agent_id=agent_id,
        resources=resources_to_pb(launch.resources),
        labels=dict(details.labels),
        preemptible=launch.preemptible,
    )
    if details.command is not None:
        info.process.CopyFrom(command_to_pb(details.command))
    else:
        info.command.CopyFrom(command)
    return info


def task_state(value: int, what: str) -> TaskState:
    """A ``TaskState`` number as the kernel's state; UNSPECIFIED and unknown numbers are
    refused."""
    _enum_name(common_pb2.TaskState.DESCRIPTOR, value, what)
    if value == common_pb2.TASK_STATE_UNSPECIFIED:
        raise InvalidArgument(f"{what} is unspecified")
    return task_state_from_pb(value)


def latest_state(value: int) -> TaskState | None:
    """``StatusUpdate.latest_state``: None when unspecified, else an agent state."""
    if value == 0:
        return None
    state = task_state(value, "latest_state")
    if state not in AGENT_REPORTED:
        raise InvalidArgument(f"latest_state {state.value} is not a state an agent reports")
    return state


def status_from_pb(status: common_pb2.TaskStatus, agent_update: bool) -> StatusUpdate:
    """A ``TaskStatus``; an agent update needs a task id, an agent state and a 16-byte uuid."""
    if not status.task_id:
        raise InvalidArgument("status.task_id is empty")
    text(status.task_id, "status.task_id")
    state = task_state(status.state, "status.state")
    if agent_update:
        if state not in AGENT_REPORTED:
            raise InvalidArgument(f"status.state {state.value} is not a state an agent reports")
        if len(status.uuid) != UUID_BYTES:
            raise InvalidArgument(f"status.uuid must be {UUID_BYTES} bytes, got {len(status.uuid)}")
    reason_enum = common_pb2.TaskStatus.Reason.DESCRIPTOR
    _enum_name(reason_enum, status.reason, "status.reason")  # INVALID_ARGUMENT for an unknown one
    return StatusUpdate(
        status.task_id,
        status.agent_id,
        state,
        reason_from_pb(status.reason),
        status.message[:MAX_MESSAGE],
        timestamp_seconds(status.timestamp, "status.timestamp"),
        status.uuid,
        "AGENT" if agent_update else "MASTER",
        status.healthy if status.HasField("healthy") else None,
        status.exit_code if status.HasField("exit_code") else None,
        _usage(status),
    )


def reported_tasks(tasks: Iterable[common_pb2.Task]) -> list[tuple[str, TaskLaunch, StatusUpdate]]:
    """The tasks of ``ReregisterAgent``: (framework id, launch, latest status) each."""
    return [
        (
            task.framework_id,
            task_launch(task.info),
            status_from_pb(task.status, agent_update=False),
        )
        for task in tasks
    ]


def agent_updates(
    updates: Iterable[agent_pb2.StatusUpdate],
) -> list[tuple[str, StatusUpdate, TaskState | None]]:
    """The updates of a ``StatusUpdates`` message: (framework id, update, latest state) each;
    the whole batch is refused if one of them is malformed."""
    return [
        (
            update.framework_id,
            status_from_pb(update.status, agent_update=True),
            latest_state(update.latest_state),
        )
        for update in updates
    ]


def _usage(status: common_pb2.TaskStatus) -> ResourceUsage | None:
    if not status.HasField("usage"):
        return None
    try:
        return usage_from_pb(status.usage)
    except ValueError as error:
        raise InvalidArgument(f"status.usage: {error}") from None


def status_to_pb(status: StatusUpdate) -> common_pb2.TaskStatus:
    """A ``StatusUpdate`` as ``TaskStatus``."""
    message = common_pb2.TaskStatus(
        task_id=status.task_id,
        agent_id=status.agent_id,
        state=task_state_to_pb(status.state),
        reason=reason_to_pb(status.reason),
        message=status.message,
        timestamp=timestamp(status.timestamp),
        uuid=status.uuid,
        source=common_pb2.TaskStatus.Source.Value(f"SOURCE_{status.source}"),
    )
    if status.healthy is not None:
        message.healthy = status.healthy
    if status.exit_code is not None:
        message.exit_code = status.exit_code
    if status.usage is not None:
        message.usage.CopyFrom(usage_to_pb(status.usage))
    return message
