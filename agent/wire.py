"""Conversions between the agent's plain values (``agent.core``) and ``fairshare.v1`` messages.

The agent's one boundary with the wire: the core never sees a protobuf message. A ``TaskInfo``
becomes a ``TaskSpec`` when it arrives (``task_spec``: a launch, a checkpoint row) and a
``TaskInfo`` again when it leaves (``task_info``: a reregister, a checkpoint write); status
updates, heartbeats and the first message of a session are built here.

Invariants: pure functions, no I/O. ``task_info(task_spec(info))`` is ``info`` (its agent id
replaced by the one given), field for field and byte for byte: the spec keeps the description
as it was given, so labels, unknown fields and invalid values travel unchanged. Resources cross
the wire as exact integer millis (never floats); a ``Resources`` message with a duplicate name,
a negative quantity or a bad name is invalid (``ResourceError``: a task that asks for one is a
``TaskProblem``). Durations are read as exact seconds; a negative duration raises
``ValueError``. Reasons are the kernel's ``TaskReason`` (``fairshare.wire`` converts them by
name); a number the agent does not know is read as ``TaskReason.UNSPECIFIED`` where the master
sends it.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import MappingProxyType

from fairshare.resources import ResourceError, ResourceVector
from fairshare.task_states import TaskState
from fairshare.v1 import agent_pb2, common_pb2
from fairshare.wire import (
    command_from_pb,
    reason_to_pb,
    resources_from_pb,
    resources_to_pb,
    seconds_from_duration,
    task_state_to_pb,
    usage_to_pb,
)
from google.protobuf import duration_pb2, timestamp_pb2

from agent.core.records import (
    AgentSpec,
    CommandTask,
    LaunchSpec,
    PlaceholderSpec,
    StatusUpdate,
    TaskProblem,
    TaskReason,
    TaskSpec,
    TaskView,
)

__all__ = [
    "agent_info",
    "command_spec",
    "duration_seconds",
    "heartbeat_message",
    "launch_spec",
    "reason_name",
    "register_message",
    "reregister_message",
    "task_info",
    "task_proto",
    "task_spec",
    "task_status",
    "updates_message",
]

_TS = common_pb2.TaskStatus


def duration_seconds(message: duration_pb2.Duration) -> float:
    """Seconds of a ``Duration``; raises ``ValueError`` (the kernel's ``WireRangeError``) unless
    it is a well-formed duration in [0, ``fairshare.wire.MAX_SECONDS``]."""
    return seconds_from_duration(message, "duration")


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


def task_spec(info: common_pb2.TaskInfo) -> TaskSpec:
    """The core's reading of a task's description: what it runs, or why it cannot run (invalid
    or empty resources, a command of a bad shape: checked in that order)."""
    described = common_pb2.TaskInfo()
    described.CopyFrom(info)
    described.ClearField("agent_id")
    encoded = described.SerializeToString(deterministic=True)
    resources = ResourceVector()
    launch: LaunchSpec | TaskProblem
    try:
        resources = resources_from_pb(info.resources)
    except ResourceError as error:
        launch = TaskProblem(f"invalid resources: {error}")
    else:
        launch = _launch(info, resources)
    return TaskSpec(
        task_id=info.task_id,
        agent_id=info.agent_id,
        resources=resources,
        launch=launch,
        name=info.name,
        labels=MappingProxyType(dict(info.labels)),
        preemptible=info.preemptible,
        encoded=encoded,
    )


def _launch(info: common_pb2.TaskInfo, resources: ResourceVector) -> LaunchSpec | TaskProblem:
    if not resources:
        return TaskProblem("task has no resources")
    try:
        return launch_spec(info, resources)
    except ValueError as error:
        process = info.WhichOneof("kind") == "process"
        reason = TaskReason.COMMAND_INVALID if process else TaskReason.TASK_INVALID
        return TaskProblem(f"invalid command: {error}", reason)


def task_info(spec: TaskSpec, agent_id: str | None = None) -> common_pb2.TaskInfo:
    """The ``TaskInfo`` a spec was read from, with ``agent_id`` (default: the spec's)."""
    info = common_pb2.TaskInfo.FromString(spec.encoded)
    info.agent_id = spec.agent_id if agent_id is None else agent_id
    return info


def reason_name(reason: TaskReason) -> str:
    """The wire's name of a reason (``REASON_AGENT_SHUTDOWN``), for the log."""
    return f"REASON_{reason.value}"


def agent_info(spec: AgentSpec) -> common_pb2.AgentInfo:
    """``AgentInfo`` for register and reregister messages."""
    return common_pb2.AgentInfo(
        hostname=spec.hostname,
        port=spec.port,
        resources=resources_to_pb(spec.resources),
        attributes=[common_pb2.Attribute(name=n, value=v) for n, v in spec.attributes],
        version=spec.version,
        reservations=[
            common_pb2.Reservation(role=role, resources=resources_to_pb(r))
            for role, r in spec.reservations
        ],
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
        reason=reason_to_pb(update.reason),
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
    if view.latest is not None:
        status = task_status(view.latest, agent_id)
    else:
        status = common_pb2.TaskStatus(
            task_id=view.info.task_id,
            agent_id=agent_id,
            state=task_state_to_pb(view.state),
            source=common_pb2.TaskStatus.SOURCE_AGENT,
        )
    info = task_info(view.info, agent_id)
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
