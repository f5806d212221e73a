"""Conversions between ``fairshare.v1`` messages and the runtime's values (``master.model``).

With ``master.service.wire_scalars`` (names, resources, durations, timestamps, enums, refuse
filters, roles) and ``master.service.task_convert`` (tasks and statuses, re-exported here), the
only master modules besides the servicers that touch ``*_pb2``; this module holds the agents',
frameworks' and demands' conversions. The wire's shape is validated in these three, before the
runtime sees it: anything malformed raises ``InvalidArgument`` naming the field (duplicate or
negative resources, bad names, unknown enum numbers, durations and timestamps out of range,
refuse filters out of range), so adapters map it to INVALID_ARGUMENT and nothing changes. What
values mean (a weight's range, a task's fit) the core checks.

A ``TaskInfo`` becomes the core's ``TaskLaunch`` in ``task_convert``, once (``task_launch``);
the messages the master streams out (framework events, agent commands) are built in
``master.service.streams``.

Invariants: ``*_from_pb`` functions never return a value the wire contract forbids; ``*_to_pb``
functions emit resources sorted by name without zero entries (common.proto) and leave optional
fields unset for ``None``.
"""

from __future__ import annotations

from collections.abc import Iterable

from fairshare.resources import ResourceVector
from fairshare.v1 import common_pb2
from fairshare.wire import resources_to_pb

from master.core.checks import check_weight
from master.core.errors import InvalidArgument
from master.core.input_bounds import (
    check_agent_resources,
    check_attributes,
    check_reservations,
)
from master.core.reservations import checked_reservation_role
from master.model import AgentSpec, Demand, FrameworkInfo
from master.service.task_convert import (
    agent_updates,
    latest_state,
    reported_tasks,
    status_from_pb,
    status_to_pb,
    task_info,
    task_launch,
    task_state,
)
from master.service.wire_scalars import (
    NAME_RE,
    check_role,
    duration,
    duration_seconds,
    refuse_seconds,
    resources,
    text,
    timestamp,
)

__all__ = [
    "agent_info",
    "agent_spec",
    "agent_updates",
    "attributes_to_pb",
    "check_role",
    "demand_spec",
    "demand_to_pb",
    "duration",
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


def framework_spec(info: common_pb2.FrameworkInfo) -> FrameworkInfo:
    """The wire's ``FrameworkInfo`` as the kernel's; name non-empty, weight and timeout in range."""
    if not info.name.strip():
        raise InvalidArgument("framework_info.name is empty")
    for field in ("framework_id", "name", "principal", "user", "hostname"):
        text(getattr(info, field), f"framework_info.{field}")
    weight = None
    if info.HasField("weight"):  # the core's rule (the ACL's cap is checked at admission)
        weight = check_weight(info.weight, "framework_info")
    failover = duration_seconds(info.failover_timeout, "framework_info.failover_timeout")
    capabilities = set()
    for value in info.capabilities:
        name = common_pb2.FrameworkInfo.Capability.Name(value) if value in _CAPABILITIES else ""
        if name:  # unknown numbers come from newer SDKs: ignore them
            capabilities.add(name.removeprefix("CAPABILITY_"))
    return FrameworkInfo(
        framework_id=info.framework_id,
        name=info.name,
        role=check_role(info.role, "framework_info.role"),
        weight=weight,
        failover_timeout=failover,
        principal=info.principal,
        user=info.user,
        hostname=info.hostname,
        capabilities=frozenset(capabilities),
    )


_CAPABILITIES = frozenset(common_pb2.FrameworkInfo.Capability.values()) - {0}


def framework_info(spec: FrameworkInfo) -> common_pb2.FrameworkInfo:
    """The kernel's ``FrameworkInfo`` as the wire's."""
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


def demand_spec(demand: common_pb2.Demand, present: bool) -> Demand | None:
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
    return Demand(task_resources=shape, max_tasks=max_tasks)


def demand_to_pb(demand: Demand) -> common_pb2.Demand:
    """The kernel's ``Demand`` as the wire's."""
    message = common_pb2.Demand(task_resources=resources_to_pb(demand.task_resources))
    if demand.max_tasks is not None:
        message.max_tasks = demand.max_tasks
    return message
