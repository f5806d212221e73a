"""Conversions between the agent's plain values and ``fairshare.v1`` messages.

Invariants: pure functions, no I/O. Resources cross the wire as exact integer millis (never
floats); a ``Resources`` message with a duplicate name, a negative quantity or a bad name raises
``ResourceError`` (the wire contract says receivers treat them as invalid). Durations are read
as exact seconds; a negative duration raises ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Iterable

from fairshare.resources import ResourceVector
from fairshare.task_states import TaskState
from fairshare.v1 import agent_pb2, common_pb2
from fairshare.wire import command_from_pb, resources_to_pb, task_state_to_pb, usage_to_pb
from google.protobuf import duration_pb2, timestamp_pb2

from agent.records import (
    AgentSpec,
    CommandTask,
    LaunchSpec,
    PlaceholderSpec,
    StatusUpdate,
    TaskView,
)

__all__ = [
    "agent_info",
    "command_spec",
    "duration_seconds",
    "heartbeat_message",
    "launch_spec",
    "register_message",
    "reregister_message",
    "task_proto",
    "task_status",
    "updates_message",
]


def duration_seconds(message: duration_pb2.Duration) -> float:
    """Seconds of a ``Duration``; raises ``ValueError`` if it is negative."""
    if message.seconds < 0 or message.nanos < 0:
        raise ValueError(f"duration {message.seconds}s{message.nanos}ns is negative")
    return message.seconds + message.nanos / 1e9


def launch_spec(info: common_pb2.TaskInfo, resources: ResourceVector) -> LaunchSpec:
    """What the task runs: a command task (``info.process``) or a placeholder; ``ValueError``
    (naming the field) for a command of a bad shape or a negative duration."""
    if info.WhichOneof("kind") == "process":
        return CommandTask(command_from_pb(info.process), resources)
    return command_spec(info.command)


def command_spec(command: common_pb2.CommandInfo) -> PlaceholderSpec:
    """What the placeholder task must do; raises ``ValueError`` for negative durations."""
    duration = duration_seconds(command.duration) if command.HasField("duration") else None
    startup = duration_seconds(command.startup_delay) if command.HasField("startup_delay") else 0.0
    return PlaceholderSpec(
        duration=duration,
        exit_code=command.exit_code,
        startup_delay=startup,
        fail_on_start=command.fail_on_start,
    )


def agent_info(spec: AgentSpec) -> common_pb2.AgentInfo:
    """``AgentInfo`` for register and reregister messages."""
    return common_pb2.AgentInfo(
        hostname=spec.hostname,
        port=spec.port,
        resources=resources_to_pb(spec.resources),
        attributes=[common_pb2.Attribute(name=n, value=v) for n, v in spec.attributes],
        version=spec.version,
    )


def _timestamp(wall: float) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromNanoseconds(int(wall * 1e9))
    return stamp


def task_status(update: StatusUpdate, agent_id: str) -> common_pb2.TaskStatus:
    """The wire form of an agent-generated update (source AGENT, uuid set)."""
    status = common_pb2.TaskStatus(
        task_id=update.task_id,
        agent_id=agent_id,
        state=task_state_to_pb(update.state),
        reason=update.reason,
        message=update.message,
        timestamp=_timestamp(update.timestamp),
        uuid=update.uuid,
        source=common_pb2.TaskStatus.SOURCE_AGENT,
    )
    if update.exit_code is not None:
        status.exit_code = update.exit_code
    if update.usage is not None:
        status.usage.CopyFrom(usage_to_pb(update.usage))
    return status


def updates_message(
    agent_id: str, updates: Iterable[tuple[StatusUpdate, TaskState]]
) -> agent_pb2.ConnectRequest:
    """An ``updates`` message: each update with its task's newest state."""
    return agent_pb2.ConnectRequest(
        updates=agent_pb2.StatusUpdates(
            updates=[
                agent_pb2.StatusUpdate(
                    framework_id=update.framework_id,
                    status=task_status(update, agent_id),
                    latest_state=task_state_to_pb(latest_state),
                )
                for update, latest_state in updates
            ]
        )
    )


def heartbeat_message(used: ResourceVector) -> agent_pb2.ConnectRequest:
    """A ``heartbeat`` message reporting the resources in use."""
    return agent_pb2.ConnectRequest(heartbeat=agent_pb2.AgentHeartbeat(used=resources_to_pb(used)))


def register_message(spec: AgentSpec) -> agent_pb2.ConnectRequest:
    """The first message of a new agent."""
    return agent_pb2.ConnectRequest(register=agent_pb2.RegisterAgent(agent_info=agent_info(spec)))


def task_proto(view: TaskView, agent_id: str) -> common_pb2.Task:
    """A tracked task with its latest status, for a reregister message."""
    info = common_pb2.TaskInfo()
    info.CopyFrom(view.info)
    info.agent_id = agent_id
    if view.latest is not None:
        status = task_status(view.latest, agent_id)
    else:
        status = common_pb2.TaskStatus(
            task_id=view.info.task_id,
            agent_id=agent_id,
            state=task_state_to_pb(view.state),
            source=common_pb2.TaskStatus.SOURCE_AGENT,
        )
    return common_pb2.Task(framework_id=view.framework_id, info=info, status=status)


def reregister_message(
    agent_id: str, spec: AgentSpec, tasks: Iterable[TaskView], framework_ids: Iterable[str]
) -> agent_pb2.ConnectRequest:
    """The first message of a known agent, with every tracked task and framework."""
    return agent_pb2.ConnectRequest(
        reregister=agent_pb2.ReregisterAgent(
            agent_id=agent_id,
            agent_info=agent_info(spec),
            tasks=[task_proto(view, agent_id) for view in tasks],
            framework_ids=sorted(framework_ids),
        )
    )
