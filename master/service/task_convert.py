"""Tasks and their statuses between ``fairshare.v1`` and the master's values: a ``TaskInfo``
becomes the core's ``TaskLaunch`` here, once (``task_launch``); agents' status updates and the
tasks of a reregistration are checked here (re-exported by ``master.service.convert``).

Invariants: a ``TaskLaunch`` returned has every free-form part within
``master.core.input_bounds`` and a command task's shape checked (``fairshare.command``); an
agent's update has a task id, a state an agent reports and a ``UUID_BYTES``-byte uuid; a batch
of updates is refused whole if one is malformed; status messages are cut to ``MAX_MESSAGE``
characters, never refused for their prose; ``*_to_pb`` leave optional fields unset for ``None``.
"""

from __future__ import annotations

from collections.abc import Iterable

from fairshare.command import Command, ResourceUsage
from fairshare.task_states import AGENT_REPORTED, TaskState
from fairshare.v1 import agent_pb2, common_pb2
from fairshare.wire import (
    command_from_pb,
    command_to_pb,
    reason_from_pb,
    reason_to_pb,
    resources_to_pb,
    task_state_from_pb,
    task_state_to_pb,
    usage_from_pb,
    usage_to_pb,
)

from master.core import TaskLaunch
from master.core.errors import InvalidArgument
from master.core.input_bounds import check_labels
from master.model import StatusUpdate, TaskDetails
from master.service.wire_scalars import (
    duration,
    duration_seconds,
    enum_name,
    resources,
    text,
    timestamp,
    timestamp_seconds,
)

__all__ = [
    "MAX_MESSAGE",
    "UUID_BYTES",
    "agent_updates",
    "latest_state",
    "reported_tasks",
    "status_from_pb",
    "status_to_pb",
    "task_info",
    "task_launch",
    "task_state",
]

UUID_BYTES = 16
MAX_MESSAGE = 4096
"""Characters of a status message kept (longer ones are cut: an agent's update is not refused
for its prose)."""


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
    enum_name(common_pb2.TaskState.DESCRIPTOR, value, what)
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
    enum_name(reason_enum, status.reason, "status.reason")  # INVALID_ARGUMENT for an unknown one
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
