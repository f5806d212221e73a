"""Records, validation rules and offer sizing of the fake master of ``framework_sdk.testing``.

The fake's calls (``framework_sdk._fake_cluster``) check their input here first.

Invariants: every check raises ``Refusal`` with the gRPC code and a message, as the real master
refuses the same input, and none changes anything; ``sized_offer`` never offers more than it is
given free, nor more tasks than a Demand's ``max_tasks`` still wants; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

import grpc
from fairshare.resources import ResourceError, ResourceVector
from fairshare.roles import RoleError, check_role
from fairshare.v1 import common_pb2, scheduler_pb2
from fairshare.wire import resources_from_pb, resources_to_pb
from google.protobuf import timestamp_pb2

__all__ = [
    "MAX_REFUSE_SECONDS",
    "FakeAgent",
    "FrameworkRecord",
    "OfferRecord",
    "Refusal",
    "TaskRecord",
    "accepted_offers",
    "check_acknowledgements",
    "check_filters",
    "check_framework_info",
    "check_role_of",
    "check_tasks",
    "checked_demand",
    "in_use",
    "now_stamp",
    "sized_offer",
    "update_event",
]

MAX_REFUSE_SECONDS: Final = 31536000.0


class Refusal(Exception):
    """A refused call: the gRPC code and message the fake master answers with."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class FakeAgent:
    """A simulated agent whose resources the fake master offers."""

    agent_id: str
    resources: ResourceVector
    hostname: str = "localhost"
    attributes: Mapping[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class FrameworkRecord:
    """A framework the fake master knows."""

    framework_id: str
    info: common_pb2.FrameworkInfo
    demand: common_pb2.Demand | None = None
    suppressed: bool = False
    connected: bool = False
    removed: bool = False
    unacked: dict[bytes, common_pb2.TaskStatus] = field(default_factory=dict)
    held: dict[str, list[common_pb2.TaskStatus]] = field(default_factory=dict)  # task_id -> FIFO
    acked: set[bytes] = field(default_factory=set)
    filters: dict[str, float] = field(default_factory=dict)  # agent_id -> expiry (clock)


@dataclass(slots=True)
class TaskRecord:
    """A live task."""

    framework_id: str
    info: common_pb2.TaskInfo
    resources: ResourceVector
    status: common_pb2.TaskStatus


@dataclass(slots=True)
class OfferRecord:
    """An outstanding offer."""

    offer: common_pb2.Offer
    resources: ResourceVector

    @classmethod
    def of(
        cls,
        offer_id: str,
        framework_id: str,
        agent_id: str,
        resources: ResourceVector,
        hostname: str = "localhost",
        attributes: Mapping[str, str] | None = None,
    ) -> OfferRecord:
        """A new offer of ``resources`` on an agent to a framework."""
        offer = common_pb2.Offer(
            offer_id=offer_id,
            framework_id=framework_id,
            agent_id=agent_id,
            hostname=hostname,
            resources=resources_to_pb(resources),
            attributes=[
                common_pb2.Attribute(name=k, value=v) for k, v in (attributes or {}).items()
            ],
        )
        return cls(offer=offer, resources=resources)


def check_framework_info(info: common_pb2.FrameworkInfo) -> None:
    """A FrameworkInfo the real master would accept: a name, a weight > 0, a valid role."""
    if not info.name:
        raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "framework_info.name is empty")
    if info.HasField("weight") and not info.weight > 0:
        raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "framework_info.weight must be > 0")
    try:
        check_role(info.role, "framework_info.role")  # the master's rule
    except RoleError as error:
        raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, str(error)) from None


def accepted_offers(
    request: scheduler_pb2.AcceptRequest, offers: Mapping[str, OfferRecord]
) -> list[OfferRecord]:
    """The outstanding offers an Accept names, all of the caller and on one agent."""
    if not request.offer_ids:
        raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "offer_ids is empty")
    if len(set(request.offer_ids)) != len(request.offer_ids):
        raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "offer_ids has duplicates")
    records = []
    for offer_id in request.offer_ids:
        record = offers.get(offer_id)
        if record is None or record.offer.framework_id != request.framework_id:
            raise Refusal(grpc.StatusCode.NOT_FOUND, f"offer {offer_id} is not outstanding")
        records.append(record)
    if len({r.offer.agent_id for r in records}) > 1:
        raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "offers are on different agents")
    return records


def check_tasks(
    framework_id: str,
    infos: list[common_pb2.TaskInfo],
    agent_id: str,
    live: Mapping[tuple[str, str], TaskRecord],
) -> ResourceVector:
    """The resources the tasks of an Accept need; each checked (ids new, resources valid)."""
    needed = ResourceVector()
    seen: set[str] = set()
    for info in infos:
        key = (framework_id, info.task_id)
        if not info.task_id or info.task_id in seen or key in live:
            raise Refusal(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"task id {info.task_id!r} is empty, duplicate or already live",
            )
        seen.add(info.task_id)
        if info.agent_id and info.agent_id != agent_id:
            raise Refusal(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"task {info.task_id}: agent_id {info.agent_id} is not the offers' agent",
            )
        try:
            resources = resources_from_pb(info.resources)
        except ResourceError as error:
            raise Refusal(
                grpc.StatusCode.INVALID_ARGUMENT, f"task {info.task_id}: {error}"
            ) from None
        if not resources:
            raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, f"task {info.task_id}: no resources")
        needed = needed + resources
    return needed


def checked_demand(demand: common_pb2.Demand) -> common_pb2.Demand:
    """A copy of a valid Demand (a shape of valid, non-empty resources, a count >= 0)."""
    try:
        shape = resources_from_pb(demand.task_resources)
    except ResourceError as error:
        raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, f"demand: {error}") from None
    if not shape:
        raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "demand.task_resources is empty")
    if demand.HasField("max_tasks") and demand.max_tasks < 0:
        raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "demand.max_tasks is negative")
    copied = common_pb2.Demand()
    copied.CopyFrom(demand)
    return copied


def check_acknowledgements(
    framework: FrameworkRecord,
    request: scheduler_pb2.AcknowledgeRequest,
    live: Mapping[tuple[str, str], TaskRecord],
) -> None:
    """Check every acknowledgement of a call before any is applied (as the real master: of a
    live task, a uuid it never had is NOT_FOUND and another agent INVALID_ARGUMENT; of a task
    no longer live, any uuid is fine)."""
    if not request.acknowledgements:
        raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "no acknowledgements")
    for ack in request.acknowledgements:
        if not ack.uuid:
            raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "uuid is empty")
        if not ack.task_id:
            raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "task_id is empty")
        task = live.get((framework.framework_id, ack.task_id))
        if task is None:
            continue  # stale: the task ended or was never launched here
        if ack.agent_id and ack.agent_id != task.status.agent_id:
            raise Refusal(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"task {ack.task_id!r} is on agent {task.status.agent_id!r}",
            )
        if ack.uuid not in framework.unacked and ack.uuid not in framework.acked:
            raise Refusal(
                grpc.StatusCode.NOT_FOUND,
                f"task {ack.task_id!r} has no status update with uuid {ack.uuid.hex()}",
            )


def check_filters(filters: common_pb2.Filters) -> None:
    """A valid refuse_seconds (0 to a year), when set."""
    if filters.HasField("refuse_seconds") and not 0 <= filters.refuse_seconds <= MAX_REFUSE_SECONDS:
        raise Refusal(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"filters.refuse_seconds {filters.refuse_seconds} is not in [0, 31536000]",
        )


def check_role_of(framework: FrameworkRecord, role: str) -> None:
    """A call's role is empty or the framework's."""
    if role and role != framework.info.role:
        raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, f"role {role!r} is not the framework's")


def now_stamp() -> timestamp_pb2.Timestamp:
    """The current time as a protobuf Timestamp."""
    stamp = timestamp_pb2.Timestamp()
    stamp.GetCurrentTime()
    return stamp


def update_event(status: common_pb2.TaskStatus) -> scheduler_pb2.SubscribeResponse:
    """The stream event carrying ``status``."""
    return scheduler_pb2.SubscribeResponse(update=scheduler_pb2.UpdateEvent(status=status))


def in_use(
    agent_id: str,
    tasks: Mapping[tuple[str, str], TaskRecord],
    offers: Mapping[str, OfferRecord],
) -> ResourceVector:
    """What an agent's live tasks use plus what its outstanding offers hold."""
    total = ResourceVector()
    for task in tasks.values():
        if task.status.agent_id == agent_id:
            total = total + task.resources
    for record in offers.values():
        if record.offer.agent_id == agent_id:
            total = total + record.resources
    return total


def sized_offer(
    framework: FrameworkRecord,
    free: ResourceVector,
    tasks: Mapping[tuple[str, str], TaskRecord],
    offers: Mapping[str, OfferRecord],
) -> tuple[ResourceVector, int]:
    """What to offer the framework of ``free`` and its ``fair_tasks``: all of it without a
    Demand, else whole tasks of its shape up to the count it still wants."""
    if framework.demand is None:
        return free, 0
    shape = resources_from_pb(framework.demand.task_resources)
    fits = shape.times_fits_in(free)
    if framework.demand.HasField("max_tasks"):
        fid = framework.framework_id
        live = sum(1 for t in tasks.values() if t.framework_id == fid)
        in_offers = sum(r.offer.fair_tasks for r in offers.values() if r.offer.framework_id == fid)
        fits = min(fits, framework.demand.max_tasks - live - in_offers)
    return (shape * fits, fits) if fits > 0 else (ResourceVector(), 0)
