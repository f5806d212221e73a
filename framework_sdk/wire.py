"""Conversion between the SDK's value types and the ``fairshare.v1`` wire messages.

Invariants:
- This is the only SDK module (with ``client`` and ``testing``) that touches ``*_pb2``; every
  function is a pure conversion without I/O.
- Resources, durations, timestamps and task states convert through the kernel's
  ``fairshare.wire`` (the one conversion every process uses).
- Other enums convert by member name, so the SDK enums and the wire enums cannot drift silently
  (an unknown wire value raises ``ValueError``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

import grpc
from fairshare.v1 import common_pb2, scheduler_pb2
from fairshare.wire import (
    command_to_pb,
    duration_to_pb,
    reason_from_pb,
    resources_from_pb,
    resources_to_pb,
    seconds_from_duration,
    seconds_from_timestamp,
    task_state_from_pb,
    usage_from_pb,
)
from google.protobuf import timestamp_pb2

from framework_sdk.events import (
    AgentLost,
    ErrorEvent,
    Event,
    Heartbeat,
    OfferRescinded,
    OffersReceived,
    StatusUpdate,
    Subscribed,
)
from framework_sdk.types import (
    Capability,
    Demand,
    FrameworkInfo,
    LaunchOperation,
    Offer,
    TaskSpec,
    UpdateSource,
)

__all__ = [
    "accept_request",
    "capabilities_from_pb",
    "demand_to_pb",
    "event_from_pb",
    "framework_info_to_pb",
    "offer_from_pb",
    "set_refuse_seconds",
    "status_from_pb",
    "task_info_to_pb",
    "task_refs",
]


def _datetime(stamp: timestamp_pb2.Timestamp) -> datetime:
    """A timestamp the master sent, range-checked (``WireRangeError``, a ``ValueError``)."""
    return datetime.fromtimestamp(seconds_from_timestamp(stamp, "timestamp"), tz=UTC)


def framework_info_to_pb(info: FrameworkInfo) -> common_pb2.FrameworkInfo:
    """The wire FrameworkInfo; role ``*`` is sent as is, weight only when requested."""
    message = common_pb2.FrameworkInfo(
        framework_id=info.framework_id,
        name=info.name,
        role=info.role,
        failover_timeout=duration_to_pb(info.failover_timeout),
        principal=info.principal,
        user=info.user,
        hostname=info.hostname,
        capabilities=[
            common_pb2.FrameworkInfo.Capability.Value(f"CAPABILITY_{capability}")
            for capability in sorted(info.capabilities)
        ],
    )
    if info.weight is not None:
        message.weight = info.weight
    return message


def demand_to_pb(demand: Demand) -> common_pb2.Demand:
    """The wire Demand (max_tasks unset when unlimited)."""
    message = common_pb2.Demand(task_resources=resources_to_pb(demand.task_resources))
    if demand.max_tasks is not None:
        message.max_tasks = demand.max_tasks
    return message


def task_info_to_pb(task: TaskSpec, agent_id: str = "") -> common_pb2.TaskInfo:
    """The wire TaskInfo of ``task`` (``process`` for a command task, ``command`` for a
    placeholder); ``agent_id`` is used when the task names none."""
    info = common_pb2.TaskInfo(
        task_id=task.task_id,
        name=task.name,
        agent_id=task.agent_id or agent_id,
        resources=resources_to_pb(task.resources),
        labels=dict(task.labels),
        preemptible=task.preemptible,
    )
    if task.command is not None:
        info.process.CopyFrom(command_to_pb(task.command))
        return info
    command = common_pb2.CommandInfo(exit_code=task.exit_code, fail_on_start=task.fail_on_start)
    if task.duration is not None:
        command.duration.CopyFrom(duration_to_pb(task.duration))
    if task.startup_delay is not None:
        command.startup_delay.CopyFrom(duration_to_pb(task.startup_delay))
    info.command.CopyFrom(command)
    return info


def offer_from_pb(message: common_pb2.Offer) -> Offer:
    """The SDK Offer of a wire offer."""
    return Offer(
        offer_id=message.offer_id,
        agent_id=message.agent_id,
        hostname=message.hostname,
        resources=resources_from_pb(message.resources),
        attributes={attribute.name: attribute.value for attribute in message.attributes},
        fair_tasks=message.fair_tasks,
        framework_id=message.framework_id,
        expires_at=_datetime(message.expires_at) if message.HasField("expires_at") else None,
    )


def status_from_pb(status: common_pb2.TaskStatus) -> StatusUpdate:
    """The SDK StatusUpdate of a wire TaskStatus."""
    source_name = common_pb2.TaskStatus.Source.Name(status.source).removeprefix("SOURCE_")
    return StatusUpdate(
        task_id=status.task_id,
        agent_id=status.agent_id,
        state=task_state_from_pb(status.state),
        reason=reason_from_pb(status.reason),
        message=status.message,
        uuid=status.uuid,
        source=UpdateSource[source_name],
        timestamp=_datetime(status.timestamp) if status.HasField("timestamp") else None,
        healthy=status.healthy if status.HasField("healthy") else None,
        exit_code=status.exit_code if status.HasField("exit_code") else None,
        usage=usage_from_pb(status.usage) if status.HasField("usage") else None,
    )


def _status_code(value: int) -> grpc.StatusCode:
    for code in grpc.StatusCode:
        if code.value[0] == value:
            return code
    return grpc.StatusCode.UNKNOWN


def event_from_pb(message: scheduler_pb2.SubscribeResponse, address: str) -> Event | None:
    """The SDK event of one stream message (None for an empty message from a newer master)."""
    kind = message.WhichOneof("event")
    if kind == "subscribed":
        sub = message.subscribed
        return Subscribed(
            framework_id=sub.framework_id,
            master_id=sub.master_id,
            heartbeat_interval=seconds_from_duration(sub.heartbeat_interval),
            resubscribed=sub.resubscribed,
            weight=sub.weight,
            address=address,
        )
    if kind == "offers":
        return OffersReceived(offers=tuple(offer_from_pb(o) for o in message.offers.offers))
    if kind == "rescind":
        return OfferRescinded(offer_id=message.rescind.offer_id, reason=message.rescind.reason)
    if kind == "update":
        return status_from_pb(message.update.status)
    if kind == "failure":
        return AgentLost(agent_id=message.failure.agent_id, message=message.failure.message)
    if kind == "heartbeat":
        beat = message.heartbeat
        return Heartbeat(time=_datetime(beat.time) if beat.HasField("time") else None)
    if kind == "error":
        return ErrorEvent(message=message.error.message, code=_status_code(message.error.code))
    return None


def set_refuse_seconds(filters: common_pb2.Filters, refuse_seconds: float | None) -> None:
    """Set ``filters.refuse_seconds`` (None: leave the master's default)."""
    if refuse_seconds is not None:
        filters.refuse_seconds = refuse_seconds


def accept_request(
    framework_id: str,
    offer_ids: Sequence[str],
    operations: Sequence[LaunchOperation],
    agent_id: str,
    refuse_seconds: float | None,
) -> scheduler_pb2.AcceptRequest:
    """An ``AcceptRequest`` launching ``operations`` on ``offer_ids`` (all on ``agent_id``)."""
    request = scheduler_pb2.AcceptRequest(
        framework_id=framework_id,
        offer_ids=offer_ids,
        operations=[
            scheduler_pb2.Operation(
                launch=scheduler_pb2.Operation.Launch(
                    task_infos=[task_info_to_pb(t, agent_id) for t in op.tasks]
                )
            )
            for op in operations
        ],
    )
    set_refuse_seconds(request.filters, refuse_seconds)
    return request


def task_refs(pairs: Iterable[tuple[str, str]]) -> list[scheduler_pb2.ReconcileRequest.TaskRef]:
    """Wire TaskRefs of ``(task_id, agent_id)`` pairs."""
    return [
        scheduler_pb2.ReconcileRequest.TaskRef(task_id=task_id, agent_id=agent_id)
        for task_id, agent_id in pairs
    ]


def capabilities_from_pb(values: Iterable[int]) -> frozenset[Capability]:
    """SDK capabilities of wire capability values (unknown values are skipped)."""
    out = set()
    for value in values:
        wire_value = common_pb2.FrameworkInfo.Capability.ValueType(value)
        name = common_pb2.FrameworkInfo.Capability.Name(wire_value).removeprefix("CAPABILITY_")
        if name in Capability.__members__:
            out.add(Capability[name])
    return frozenset(out)
