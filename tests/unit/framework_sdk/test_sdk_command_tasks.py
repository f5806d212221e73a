"""Command tasks in the SDK: ``TaskSpec(command=Command(...))`` on the wire and back.

A command task becomes ``TaskInfo.process`` (a placeholder stays ``TaskInfo.command``); its
terminal update's resource usage reaches the application as ``StatusUpdate.usage``; the new
reasons have their SDK members.
"""

from __future__ import annotations

import pytest
from fairshare.v1 import common_pb2
from google.protobuf.duration_pb2 import Duration

from framework_sdk import Command, ResourceUsage, ResourceVector, TaskReason, TaskSpec, TaskState
from framework_sdk.wire import status_from_pb, task_info_to_pb

SHAPE = ResourceVector.parse("cpus:0.5;mem:64")


def test_a_command_task_is_sent_as_process() -> None:
    command = Command(shell="echo hi >&2", env={"X": "1"}, working_dir="w", kill_grace_period=2)
    info = task_info_to_pb(TaskSpec("c1", SHAPE, command=command), agent_id="ag-1")
    assert info.WhichOneof("kind") == "process"
    assert info.process.shell == "echo hi >&2" and dict(info.process.env) == {"X": "1"}
    assert info.process.working_dir == "w" and info.process.kill_grace_period.seconds == 2
    assert info.agent_id == "ag-1"
    placeholder = task_info_to_pb(TaskSpec("p1", SHAPE, duration=1.0))
    assert placeholder.WhichOneof("kind") == "command"


def test_a_command_task_takes_no_placeholder_fields() -> None:
    with pytest.raises(ValueError, match="placeholder"):
        TaskSpec("c", SHAPE, duration=1.0, command=Command(argv=["true"]))
    with pytest.raises(ValueError, match="exactly one of argv and shell"):
        TaskSpec("c", SHAPE, command=Command())


def test_usage_and_new_reasons_reach_the_application() -> None:
    status = common_pb2.TaskStatus(
        task_id="c1",
        state=common_pb2.TASK_STATE_FAILED,
        reason=common_pb2.TaskStatus.REASON_MEMORY_LIMIT,
        usage=common_pb2.ResourceUsage(
            cpu_time=Duration(nanos=500_000_000), memory_peak_bytes=1 << 26
        ),
    )
    update = status_from_pb(status)
    assert update.state is TaskState.FAILED and update.reason is TaskReason.MEMORY_LIMIT
    assert update.usage == ResourceUsage(cpu_seconds=0.5, memory_peak_bytes=1 << 26)
    assert status_from_pb(common_pb2.TaskStatus(task_id="p")).usage is None
    for name in ("LAUNCH_FAILED", "COMMAND_INVALID"):
        value = common_pb2.TaskStatus.Reason.Value(f"REASON_{name}")
        assert status_from_pb(common_pb2.TaskStatus(task_id="x", reason=value)).reason.value == name
