"""The messages the master streams out: framework events (Subscribe) and agent messages
(Connect), built from the runtime's values and the core's own messages.

Invariants: a ``StreamEnd`` is never a message (the servicer ends the stream with its code);
``LaunchTasks`` and ``KillTask`` are the core's messages, converted as they are, every task of a
launch placed on the message's agent; consecutive commands go out as one ``commands`` message,
in the order they were queued (settings between them split it, and so does the message limit,
``message_fit.BUDGET``: nothing is reordered); an offers event too large for one message goes
out as several (``event_messages``).
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from fairshare.task_states import TaskReason
from fairshare.v1 import agent_pb2, common_pb2, scheduler_pb2
from fairshare.wire import reason_to_pb

from master.core import KillTask, LaunchTasks
from master.core.records import Offer
from master.model import (
    AckCommand,
    AgentCommand,
    AgentSettings,
    ErrorEvent,
    FailureEvent,
    FrameworkEvent,
    HeartbeatEvent,
    OffersEvent,
    RescindEvent,
    UpdateEvent,
)
from master.runtime.agents import AgentSession
from master.service.convert import (
    attributes_to_pb,
    duration,
    reservations_to_pb,
    resources_to_pb,
    status_to_pb,
    task_info,
    timestamp,
)
from master.service.message_fit import BUDGET, FIELD_OVERHEAD, split_by_size

__all__ = [
    "agent_messages",
    "command_to_pb",
    "event_messages",
    "event_to_pb",
    "offer_to_pb",
    "registered_to_pb",
]


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
        reserved=reservations_to_pb(offer.reserved),
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


def event_messages(event: FrameworkEvent) -> list[scheduler_pb2.SubscribeResponse]:
    """A framework event as stream messages: one, or an offers event too large for one message
    as several, each within the message limit (``message_fit.split_by_size``)."""
    if not isinstance(event, OffersEvent):
        return [event_to_pb(event)]
    pb = scheduler_pb2
    offers = [offer_to_pb(offer, event.expires_at) for offer in event.offers]
    return [
        pb.SubscribeResponse(offers=pb.OffersEvent(offers=group)) for group in split_by_size(offers)
    ]


def _grpc_code_number(name: str) -> int:
    code: tuple[int, str] = getattr(grpc.StatusCode, name, grpc.StatusCode.UNKNOWN).value
    return code[0]


def registered_to_pb(session: AgentSession) -> agent_pb2.AgentRegistered:
    """The first message of an agent's stream."""
    return agent_pb2.AgentRegistered(
        agent_id=session.agent_id,
        master_id=session.master_id,
        heartbeat_interval=duration(session.heartbeat_interval),
        reconnect_jitter=duration(session.reconnect_jitter),
        epoch=session.epoch,
        log_key=session.log_key,
    )


def agent_messages(
    items: Sequence[AgentCommand], epoch: int = 0
) -> list[agent_pb2.ConnectResponse]:
    """Queued items of an agent's channel as stream messages: runs of commands batched (each
    ``commands`` message carries the leadership ``epoch``), each ``AgentSettings`` on its own
    (``StreamEnd`` is not sent)."""
    pb = agent_pb2
    messages: list[agent_pb2.ConnectResponse] = []
    run: list[agent_pb2.AgentCommand] = []
    size = 0
    for item in items:
        if isinstance(item, AgentSettings):
            if run:
                messages.append(
                    pb.ConnectResponse(commands=pb.AgentCommands(commands=run, epoch=epoch))
                )
                run, size = [], 0
            settings = pb.AgentSettings(
                heartbeat_interval=duration(item.heartbeat_interval),
                reconnect_jitter=duration(item.reconnect_jitter),
            )
            messages.append(pb.ConnectResponse(settings=settings))
        else:
            command = command_to_pb(item)
            cost = command.ByteSize() + FIELD_OVERHEAD
            if run and size + cost > BUDGET:  # launches of many Accepts: several messages
                messages.append(
                    pb.ConnectResponse(commands=pb.AgentCommands(commands=run, epoch=epoch))
                )
                run, size = [], 0
            run.append(command)
            size += cost
    if run:
        messages.append(pb.ConnectResponse(commands=pb.AgentCommands(commands=run, epoch=epoch)))
    return messages


def command_to_pb(command: AgentCommand) -> agent_pb2.AgentCommand:
    """One agent command (``StreamEnd`` and ``AgentSettings`` are not commands)."""
    pb = agent_pb2
    if isinstance(command, LaunchTasks):
        tasks = [task_info(task, command.agent_id) for task in command.tasks]
        launch = pb.LaunchTasksCommand(framework_id=command.framework_id, tasks=tasks)
        return pb.AgentCommand(launch_tasks=launch)
    if isinstance(command, KillTask):
        kill = pb.KillTaskCommand(framework_id=command.framework_id, task_id=command.task_id)
        if command.reason is not TaskReason.UNSPECIFIED:
            kill.reason = reason_to_pb(command.reason)
        if command.grace_period is not None:
            kill.grace_period.CopyFrom(duration(command.grace_period))
        return pb.AgentCommand(kill_task=kill)
    if isinstance(command, AckCommand):
        ack = pb.AcknowledgeStatusCommand(
            framework_id=command.framework_id, task_id=command.task_id, uuid=command.uuid
        )
        return pb.AgentCommand(acknowledge_status=ack)
    raise TypeError(f"not a command: {command!r}")
