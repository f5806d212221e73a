"""The rows of the agent's checkpoint (``agent.durability.checkpoint``, whose docstring gives the
schema): a task as its ``tasks`` row and back, an update as its columns and back.

Invariants: pure (no database access); encoding then decoding gives the value back; a row that
cannot be decoded raises ``ValueError`` (``DecodeError``, ``ResourceError``, ``KeyError`` for
what the protobuf, resource and JSON decoders raise), which the store reports as a corrupt file.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from fairshare.command import ResourceUsage
from fairshare.resources import ResourceVector
from fairshare.task_states import TaskState
from fairshare.v1 import common_pb2
from fairshare.wire import reason_from_pb, reason_to_pb, task_state_from_pb, task_state_to_pb

from agent.core.records import StatusUpdate, TaskView
from agent.wire import task_info, task_spec

__all__ = ["task_from_row", "task_row", "update_columns", "update_from_columns"]


def task_row(key: tuple[str, str], task: TaskView) -> tuple[Any, ...]:
    """The ``tasks`` row of ``task`` (``key``: its framework and task ids)."""
    latest = (None,) * 7 if task.latest is None else update_columns(task.latest)
    return (
        *key,
        task_info(task.info).SerializeToString(deterministic=True),
        str(task.resources),
        task_state_to_pb(task.state),
        task.running_since,
        *latest,
    )


def task_from_row(row: tuple[Any, ...]) -> TaskView:
    """A task from its ``tasks`` row (columns in the table's order)."""
    framework_id, task_id, info_bytes, resources, state = row[:5]
    info = task_spec(common_pb2.TaskInfo.FromString(info_bytes))
    if info.task_id != task_id:
        raise ValueError(f"task row {task_id!r} holds TaskInfo of {info.task_id!r}")
    latest = None if row[6] is None else update_from_columns(framework_id, task_id, row[6:])
    running_since = None if row[5] is None else float(row[5])
    return TaskView(
        framework_id,
        info,
        ResourceVector.parse(resources) if resources else ResourceVector(),
        _state(state),
        latest,
        running_since,
    )


def _state(value: Any) -> TaskState:
    """A stored wire state number; ``ValueError`` for one the API does not define."""
    number = int(value)
    common_pb2.TaskState.Name(number)  # type: ignore[arg-type]
    return task_state_from_pb(number)


def update_columns(update: StatusUpdate) -> tuple[Any, ...]:
    """An update's columns, from ``state`` on (the ``updates`` table, ``tasks``' ``latest_*``)."""
    return (
        task_state_to_pb(update.state),
        update.uuid,
        update.timestamp,
        int(reason_to_pb(update.reason)),
        update.message,
        update.exit_code,
        None if update.usage is None else json.dumps(dataclasses.asdict(update.usage)),
    )


def _usage(text: Any) -> ResourceUsage | None:
    if text is None:
        return None
    data = json.loads(text)
    return ResourceUsage(float(data["cpu_seconds"]), int(data["memory_peak_bytes"]))


def update_from_columns(framework_id: str, task_id: str, columns: tuple[Any, ...]) -> StatusUpdate:
    """An update from its columns (``update_columns``' order)."""
    state, uuid, timestamp, reason, message, exit_code, usage = columns
    if not isinstance(uuid, bytes) or not uuid:
        raise ValueError(f"update of task {task_id!r} without a uuid")
    return StatusUpdate(
        framework_id,
        task_id,
        _state(state),
        uuid,
        float(timestamp),
        reason_from_pb(int(reason), strict=True),  # ValueError for an unknown reason
        str(message),
        None if exit_code is None else int(exit_code),
        _usage(usage),
    )
