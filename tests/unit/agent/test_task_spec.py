"""The agent's core is wire-free: a ``TaskInfo`` becomes a ``TaskSpec`` at the boundary
(``agent.wire``) and comes back unchanged, reasons keep the wire's numbers, and importing the
core loads no gRPC, protobuf or asyncio."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

from fairshare.command import Command
from fairshare.resources import ResourceVector
from fairshare.v1 import common_pb2
from fairshare.wire import reason_from_pb, reason_to_pb, resources_to_pb

from agent.core import CommandTask, PlaceholderSpec, TaskProblem, TaskReason
from agent.wire import reason_name, task_info, task_spec

R = ResourceVector.parse
TS = common_pb2.TaskStatus


def described() -> common_pb2.TaskInfo:
    info = common_pb2.TaskInfo(
        task_id="t-1", name="web", agent_id="ag-1", resources=resources_to_pb(R("cpus:1;mem:64"))
    )
    info.labels.update({"team": "search", "tier": "1"})
    info.preemptible = True
    info.process.shell = "echo hi"
    return info


def test_reasons_are_the_wire_reasons_by_name_both_ways() -> None:
    wire = {name.removeprefix("REASON_"): number for name, number in TS.Reason.items()}
    assert {reason.name for reason in TaskReason} == set(wire)
    assert {reason.name: reason_to_pb(reason) for reason in TaskReason} == wire
    assert all(reason_from_pb(number) is TaskReason[name] for name, number in wire.items())
    assert reason_name(TaskReason.AGENT_SHUTDOWN) == "REASON_AGENT_SHUTDOWN"
    assert reason_from_pb(TS.REASON_PREEMPTED) is TaskReason.PREEMPTED
    assert reason_from_pb(999) is TaskReason.UNSPECIFIED  # one this agent does not know


def test_a_task_spec_reads_the_description_and_gives_it_back_byte_for_byte() -> None:
    info = described()
    spec = task_spec(info)
    assert (spec.task_id, spec.agent_id, spec.name) == ("t-1", "ag-1", "web")
    assert spec.preemptible
    assert dict(spec.labels) == {"team": "search", "tier": "1"}
    assert spec.resources == R("cpus:1;mem:64")
    assert spec.launch == CommandTask(Command(shell="echo hi"), R("cpus:1;mem:64"))
    assert task_info(spec) == info
    assert task_info(spec).SerializeToString(deterministic=True) == info.SerializeToString(
        deterministic=True
    )
    moved = task_info(spec, "ag-2")
    assert moved.agent_id == "ag-2" and moved.labels["team"] == "search"
    assert task_spec(task_info(spec)) == spec  # read back (a checkpoint row): equal


def test_a_placeholder_spec_and_the_problems_of_a_description() -> None:
    info = common_pb2.TaskInfo(task_id="p", resources=resources_to_pb(R("cpus:1")))
    info.command.duration.FromTimedelta(timedelta(seconds=2.5))
    assert task_spec(info).launch == PlaceholderSpec(duration=2.5)
    empty = common_pb2.TaskInfo(task_id="e")
    assert task_spec(empty).launch == TaskProblem("task has no resources", TaskReason.TASK_INVALID)
    twice = common_pb2.TaskInfo(task_id="d", resources=resources_to_pb(R("cpus:1")))
    twice.resources.items.add(name="cpus", millis=1)
    problem = task_spec(twice).launch
    assert isinstance(problem, TaskProblem) and "twice" in problem.message
    assert task_info(task_spec(twice)) == twice  # kept as given, invalid resources included
    bad = described()
    bad.process.working_dir = "../../etc"
    problem = task_spec(bad).launch
    assert isinstance(problem, TaskProblem) and problem.reason is TaskReason.COMMAND_INVALID
    assert problem.message.startswith("invalid command: ")


def test_the_core_loads_no_wire_api() -> None:
    code = (
        "import sys, agent.core; "
        "loaded = [m for m in sys.modules if m.split('.')[0] in ('grpc', 'google', 'asyncio')"
        " or m.startswith(('fairshare.v1', 'fairshare.wire'))]; "
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
