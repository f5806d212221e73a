"""The conversions every process makes between the kernel's values and ``fairshare.v1`` messages.

Resources, durations, timestamps, task states, command tasks (``ProcessInfo``) and resource
usage cross the wire here and nowhere else; the
master's ``service.convert``, the agent's ``wire`` and the SDK's ``wire`` build their messages
from these.

Invariants:
- resources cross the wire as exact milli quantities, sorted by name, zeros omitted
  (common.proto); a message with a duplicate, negative or malformed entry raises
  ``ResourceError``;
- durations and timestamps read from the wire are range-checked (``WireRangeError`` names the
  field), so whatever is accepted can be written back out and formatted: a duration lies in
  [0, ``MAX_SECONDS``], a timestamp in [1970-01-01, 9999-12-31];
- task states convert by name (``TASK_STATE_RUNNING`` <-> ``TaskState.RUNNING``), so the kernel
  enum and the wire enum cannot drift silently;
- a ``ProcessInfo`` read from the wire is a valid ``fairshare.command.Command`` or raises
  ``ValueError`` naming the field (the command's shape rules), so every process accepts the same
  commands.
"""

from __future__ import annotations

import math
from typing import Final

from google.protobuf import duration_pb2, timestamp_pb2

from fairshare.command import Command, ResourceUsage
from fairshare.resources import ResourceError, ResourceVector
from fairshare.task_states import TaskReason, TaskState
from fairshare.v1 import common_pb2

__all__ = [
    "MAX_SECONDS",
    "MAX_TIMESTAMP",
    "WireRangeError",
    "command_from_pb",
    "command_to_pb",
    "duration_to_pb",
    "reason_from_pb",
    "reason_to_pb",
    "resources_from_pb",
    "resources_to_pb",
    "seconds_from_duration",
    "seconds_from_timestamp",
    "task_state_from_pb",
    "task_state_to_pb",
    "timestamp_to_pb",
    "usage_from_pb",
    "usage_to_pb",
]

MAX_SECONDS: Final = 315_576_000_000.0
"""The longest duration protobuf's ``Duration`` can hold (10,000 years)."""
MAX_TIMESTAMP: Final = 253_402_300_799.0
"""9999-12-31T23:59:59Z, the latest instant a ``Timestamp`` (and ``datetime``) can hold."""


class WireRangeError(ValueError):
    """A duration or timestamp outside the range the wire and the daemons can represent."""


def resources_to_pb(vector: ResourceVector) -> common_pb2.Resources:
    """The wire form of ``vector``: sorted by name, no zero entries (the wire contract)."""
    return common_pb2.Resources(
        items=[
            common_pb2.Resource(name=name, millis=millis)
            for name, millis in sorted(vector.millis_view().items())
        ]
    )


def resources_from_pb(message: common_pb2.Resources) -> ResourceVector:
    """``message`` as a vector (raises ``ResourceError`` on duplicate, negative or bad entries)."""
    millis: dict[str, int] = {}
    for item in message.items:
        if item.name in millis:
            raise ResourceError(f"resource {item.name!r} is given twice")
        millis[item.name] = item.millis
    return ResourceVector.from_millis(millis)


def duration_to_pb(seconds: float) -> duration_pb2.Duration:
    """A ``Duration`` of ``seconds`` (nanosecond precision)."""
    message = duration_pb2.Duration()
    message.FromNanoseconds(round(seconds * 1e9))
    return message


def seconds_from_duration(message: duration_pb2.Duration, what: str = "duration") -> float:
    """``message`` in seconds; raises ``WireRangeError`` (naming ``what``) unless it is a
    well-formed duration in [0, ``MAX_SECONDS``]."""
    seconds, nanos = message.seconds, message.nanos
    if seconds < 0 or nanos < 0 or nanos >= 1_000_000_000:
        raise WireRangeError(f"{what} must be a non-negative duration")
    value = seconds + nanos / 1e9
    if value > MAX_SECONDS:
        raise WireRangeError(f"{what} is longer than {MAX_SECONDS:.0f} seconds")
    return value


def timestamp_to_pb(seconds: float) -> timestamp_pb2.Timestamp:
    """A ``Timestamp`` of wall-clock ``seconds`` since the epoch (clamped to the wire's range)."""
    message = timestamp_pb2.Timestamp()
    clamped = min(max(seconds, 0.0), MAX_TIMESTAMP) if math.isfinite(seconds) else 0.0
    message.FromNanoseconds(round(clamped * 1e9))
    return message


def seconds_from_timestamp(message: timestamp_pb2.Timestamp, what: str = "timestamp") -> float:
    """``message`` in seconds since the epoch; raises ``WireRangeError`` (naming ``what``) unless
    it lies in [1970-01-01, 9999-12-31T23:59:59Z] with valid nanoseconds."""
    seconds, nanos = message.seconds, message.nanos
    if not 0 <= nanos < 1_000_000_000:
        raise WireRangeError(f"{what} has invalid nanoseconds {nanos}")
    if not 0 <= seconds <= MAX_TIMESTAMP:
        raise WireRangeError(f"{what} must lie between 1970-01-01 and 9999-12-31")
    return seconds + nanos / 1e9


def task_state_to_pb(state: TaskState) -> common_pb2.TaskState.ValueType:
    """The wire value of ``state``."""
    return common_pb2.TaskState.Value(f"TASK_STATE_{state.value}")


def reason_to_pb(reason: TaskReason) -> common_pb2.TaskStatus.Reason.ValueType:
    """The wire value of ``reason``."""
    return common_pb2.TaskStatus.Reason.Value(f"REASON_{reason.value}")


def reason_from_pb(value: int, strict: bool = False) -> TaskReason:
    """The reason of a wire value: ``UNSPECIFIED`` for a number a newer peer added, or
    ``ValueError`` when ``strict`` (a stored value this code never wrote)."""
    described = common_pb2.TaskStatus.Reason.DESCRIPTOR.values_by_number.get(value)
    if described is None:
        if strict:
            raise ValueError(f"unknown task status reason {value}")
        return TaskReason.UNSPECIFIED
    return TaskReason[described.name.removeprefix("REASON_")]


def task_state_from_pb(value: int) -> TaskState:
    """The state of a wire value: ``UNKNOWN`` also for unspecified and for numbers a newer peer
    added (receivers that must refuse those check the number first)."""
    described = common_pb2.TaskState.DESCRIPTOR.values_by_number.get(value)
    if described is None:
        return TaskState.UNKNOWN
    name = described.name.removeprefix("TASK_STATE_")
    return TaskState.UNKNOWN if name == "UNSPECIFIED" else TaskState[name]


def command_to_pb(command: Command) -> common_pb2.ProcessInfo:
    """The wire form of a command task's ``command``."""
    message = common_pb2.ProcessInfo(
        argv=list(command.argv),
        shell=command.shell,
        env=dict(command.env),
        working_dir=command.working_dir,
        user=command.user,
    )
    if command.kill_grace_period is not None:
        message.kill_grace_period.CopyFrom(duration_to_pb(command.kill_grace_period))
    return message


def command_from_pb(message: common_pb2.ProcessInfo) -> Command:
    """The command of a ``ProcessInfo``; ``ValueError`` (naming the field) if its shape is bad."""
    grace = None
    if message.HasField("kill_grace_period"):
        grace = seconds_from_duration(message.kill_grace_period, "kill_grace_period")
    return Command(
        argv=message.argv,
        shell=message.shell,
        env=message.env,
        working_dir=message.working_dir,
        user=message.user,
        kill_grace_period=grace,
    )


def usage_to_pb(usage: ResourceUsage) -> common_pb2.ResourceUsage:
    """The wire form of a task's resource usage."""
    return common_pb2.ResourceUsage(
        cpu_time=duration_to_pb(usage.cpu_seconds), memory_peak_bytes=usage.memory_peak_bytes
    )


def usage_from_pb(message: common_pb2.ResourceUsage) -> ResourceUsage:
    """The usage of a ``ResourceUsage``; ``ValueError`` for negative or out-of-range values."""
    cpu = seconds_from_duration(message.cpu_time, "usage.cpu_time")
    return ResourceUsage(cpu_seconds=cpu, memory_peak_bytes=message.memory_peak_bytes)
