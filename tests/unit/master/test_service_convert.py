"""``master.service.convert``: wire messages to runtime values and back, with validation.

Every malformed input raises ``InvalidArgument`` naming the field (the servicers map it to
INVALID_ARGUMENT); every value survives a round trip; outgoing resources are sorted by name.
"""

from __future__ import annotations

import math

import pytest
from fairshare.command import Command, ResourceUsage
from fairshare.resources import ResourceVector
from fairshare.task_states import TaskReason, TaskState
from fairshare.v1 import agent_pb2, common_pb2, scheduler_pb2
from google.protobuf.duration_pb2 import Duration

from master.core import KillTask, LaunchTasks, TaskLaunch
from master.core.errors import InvalidArgument
from master.core.records import Offer
from master.model import (
    AckCommand,
    AgentSettings,
    AgentSpec,
    Demand,
    ErrorEvent,
    FailureEvent,
    FrameworkInfo,
    HeartbeatEvent,
    OffersEvent,
    RescindEvent,
    StatusUpdate,
    StreamEnd,
    TaskDetails,
    UpdateEvent,
)
from master.service import convert, streams

C = common_pb2
R = ResourceVector.parse


def wire(*items: tuple[str, int]) -> common_pb2.Resources:
    return C.Resources(items=[C.Resource(name=n, millis=m) for n, m in items])


# -- resources ------------------------------------------------------------------------------------


def test_resources_parse_exact_millis() -> None:
    vector = convert.resources(wire(("mem", 4_096_000), ("cpus", 1500)), "r")
    assert vector == R("cpus:1.5;mem:4096")
    assert convert.resources(wire(), "r") == ResourceVector()
    assert convert.resources(wire(("gpus", 0)), "r") == ResourceVector()


@pytest.mark.parametrize(
    ("items", "fragment"),
    [
        ((("cpus", -1),), "negative"),
        ((("cpus", 1), ("cpus", 2)), "twice"),
        ((("CPUS", 1),), "malformed"),
        ((("1cpu", 1),), "malformed"),
        ((("", 1),), "malformed"),
        ((("c pu", 1),), "malformed"),
        ((("cpus", 2**63 - 1),), "too large"),
    ],
)
def test_bad_resources_are_invalid_argument(
    items: tuple[tuple[str, int], ...], fragment: str
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        convert.resources(wire(*items), "task 't': resources")
    assert fragment in caught.value.message
    assert caught.value.message.startswith("task 't': resources")
    assert caught.value.code == "INVALID_ARGUMENT"


def test_resources_to_pb_sorted_without_zeros() -> None:
    message = convert.resources_to_pb(R("mem:2;cpus:1;disk:0;gpus:2"))
    assert [(i.name, i.millis) for i in message.items] == [
        ("cpus", 1000),
        ("gpus", 2000),
        ("mem", 2000),
    ]
    assert convert.resources(message, "r") == R("cpus:1;mem:2;gpus:2")


# -- filters, durations, weights, roles -----------------------------------------------------------


def test_refuse_seconds() -> None:
    assert convert.refuse_seconds(C.Filters(), present=False) is None
    assert convert.refuse_seconds(C.Filters(), present=True) is None
    assert convert.refuse_seconds(C.Filters(refuse_seconds=0), present=True) == 0.0
    assert convert.refuse_seconds(C.Filters(refuse_seconds=2.5), present=True) == 2.5
    for bad in (-0.1, math.nan, math.inf, 31_536_001.0):
        with pytest.raises(InvalidArgument):
            convert.refuse_seconds(C.Filters(refuse_seconds=bad), present=True)


def test_durations() -> None:
    assert convert.duration_seconds(Duration(seconds=1, nanos=500_000_000), "d") == 1.5
    assert convert.duration(0.25).ToMilliseconds() == 250
    with pytest.raises(InvalidArgument):
        convert.duration_seconds(Duration(seconds=-1), "command.duration")


def test_roles() -> None:
    assert convert.check_role("") == "*"
    assert convert.check_role("*") == "*"
    assert convert.check_role("batch.prod-1") == "batch.prod-1"
    assert convert.check_role("eng/.hidden") == "eng/.hidden"  # Mesos's rule: not '.' or '..'
    for bad in ("a b", "a//b", "x;y", "-dash"):
        with pytest.raises(InvalidArgument):
            convert.check_role(bad)


# -- frameworks and demand ------------------------------------------------------------------------


def test_framework_spec_round_trip() -> None:
    info = C.FrameworkInfo(
        framework_id="fw-1",
        name="web",
        role="",
        weight=2.0,
        failover_timeout=Duration(seconds=30),
        principal="p",
        user="u",
        hostname="h",
        capabilities=[C.FrameworkInfo.CAPABILITY_PARTITION_AWARE, 99],  # 99: from a newer SDK
    )
    spec = convert.framework_spec(info)
    assert spec == FrameworkInfo(
        framework_id="fw-1",
        name="web",
        role="*",
        weight=2.0,
        failover_timeout=30.0,
        principal="p",
        user="u",
        hostname="h",
        capabilities=frozenset({"PARTITION_AWARE"}),
    )
    back = convert.framework_info(spec)
    assert back.weight == 2.0 and back.role == "*"
    assert list(back.capabilities) == [C.FrameworkInfo.CAPABILITY_PARTITION_AWARE]
    assert convert.framework_spec(C.FrameworkInfo(name="x")).weight is None
    assert not convert.framework_info(convert.framework_spec(C.FrameworkInfo(name="x"))).HasField(
        "weight"
    )


@pytest.mark.parametrize(
    "info",
    [
        C.FrameworkInfo(name=""),
        C.FrameworkInfo(name="   "),
        C.FrameworkInfo(name="x", role="bad role"),
        C.FrameworkInfo(name="x", failover_timeout=Duration(seconds=-5)),
    ],
)
def test_bad_framework_info(info: common_pb2.FrameworkInfo) -> None:
    with pytest.raises(InvalidArgument):
        convert.framework_spec(info)


def test_demand() -> None:
    assert convert.demand_spec(C.Demand(), present=False) is None
    shape = convert.resources_to_pb(R("cpus:1;mem:4096"))
    assert convert.demand_spec(C.Demand(task_resources=shape), True) == Demand(
        task_resources=R("cpus:1;mem:4096"), max_tasks=None
    )
    limited = convert.demand_spec(C.Demand(task_resources=shape, max_tasks=0), True)
    assert limited == Demand(task_resources=R("cpus:1;mem:4096"), max_tasks=0)
    assert convert.demand_to_pb(limited).max_tasks == 0
    assert not convert.demand_to_pb(Demand(task_resources=R("cpus:1"))).HasField("max_tasks")
    with pytest.raises(InvalidArgument, match="empty"):
        convert.demand_spec(C.Demand(max_tasks=3), True)
    with pytest.raises(InvalidArgument, match="max_tasks"):
        convert.demand_spec(C.Demand(task_resources=shape, max_tasks=-1), True)


# -- agents ---------------------------------------------------------------------------------------


def test_agent_spec_round_trip() -> None:
    info = C.AgentInfo(
        hostname="h1",
        port=7000,
        resources=convert.resources_to_pb(R("cpus:8;mem:16384")),
        attributes=[C.Attribute(name="zone", value="a"), C.Attribute(name="rack", value="r1")],
        version="0.1.0",
    )
    spec = convert.agent_spec(info)
    assert spec == AgentSpec(
        "h1", 7000, R("cpus:8;mem:16384"), (("rack", "r1"), ("zone", "a")), "0.1.0"
    )
    assert convert.agent_spec(convert.agent_info(spec)) == spec


@pytest.mark.parametrize(
    "info",
    [
        C.AgentInfo(),
        C.AgentInfo(resources=wire(("cpus", -1))),
        C.AgentInfo(resources=wire(("cpus", 1)), port=70000),
        C.AgentInfo(resources=wire(("cpus", 1)), attributes=[C.Attribute(name="Rack", value="x")]),
        C.AgentInfo(resources=wire(("cpus", 1)), attributes=[C.Attribute(name="r", value="a:b")]),
        C.AgentInfo(
            resources=wire(("cpus", 1)),
            attributes=[C.Attribute(name="r", value="a"), C.Attribute(name="r", value="b")],
        ),
    ],
)
def test_bad_agent_info(info: common_pb2.AgentInfo) -> None:
    with pytest.raises(InvalidArgument):
        convert.agent_spec(info)


# -- tasks and statuses ---------------------------------------------------------------------------


def test_task_launch_round_trip() -> None:
    info = C.TaskInfo(
        task_id="t1",
        name="first",
        agent_id="ag-1",
        resources=convert.resources_to_pb(R("cpus:1;mem:128")),
        command=C.CommandInfo(
            duration=Duration(seconds=2),
            exit_code=3,
            startup_delay=Duration(nanos=100_000_000),
            fail_on_start=True,
        ),
        labels={"b": "2", "a": "1"},
    )
    launch = convert.task_launch(info)
    details = TaskDetails(2.0, 3, 0.1, True, (("a", "1"), ("b", "2")))
    assert launch == TaskLaunch("t1", "first", R("cpus:1;mem:128"), "ag-1", details)
    assert convert.task_info(launch, "ag-1") == info
    plain = convert.task_launch(C.TaskInfo(task_id="p", resources=wire(("cpus", 1))))
    assert plain.name == "p"  # an empty name is the task id
    assert plain.agent_id is None  # the framework named no agent
    assert plain.details == TaskDetails()
    assert not convert.task_info(plain, "ag-2").command.HasField("duration")
    assert convert.task_info(plain, "ag-2").agent_id == "ag-2"
    assert not plain.preemptible and not convert.task_info(plain, "ag-2").preemptible


def test_preemptible_flag_round_trips() -> None:
    info = C.TaskInfo(task_id="p", resources=wire(("cpus", 1)), preemptible=True)
    launch = convert.task_launch(info)
    assert launch.preemptible
    assert convert.task_info(launch, "ag-1").preemptible


def test_task_with_negative_duration_is_invalid() -> None:
    info = C.TaskInfo(task_id="t", command=C.CommandInfo(startup_delay=Duration(seconds=-1)))
    with pytest.raises(InvalidArgument, match="startup_delay"):
        convert.task_launch(info)


def test_command_task_round_trip() -> None:
    process = C.ProcessInfo(
        argv=["python3", "-c", "print(1)"],
        env={"B": "2", "A": "1"},
        working_dir="out/./logs/",
        user="nobody",
        kill_grace_period=Duration(seconds=1, nanos=500_000_000),
    )
    info = C.TaskInfo(task_id="c", resources=wire(("cpus", 1)), process=process)
    launch = convert.task_launch(info)
    assert isinstance(launch.details, TaskDetails)
    command = launch.details.command
    assert command == Command(
        argv=("python3", "-c", "print(1)"),
        env={"A": "1", "B": "2"},
        working_dir="out/logs",
        user="nobody",
        kill_grace_period=1.5,
    )
    back = convert.task_info(launch, "ag-1")
    assert back.WhichOneof("kind") == "process"
    assert back.process.working_dir == "out/logs"  # normalized once, at the master
    assert convert.task_launch(back).details == launch.details
    shell = convert.task_launch(C.TaskInfo(task_id="s", process=C.ProcessInfo(shell="echo hi")))
    assert isinstance(shell.details, TaskDetails) and shell.details.command is not None
    assert shell.details.command.program == ("/bin/sh", "-c", "echo hi")


@pytest.mark.parametrize(
    ("process", "fragment"),
    [
        (C.ProcessInfo(), "exactly one of argv and shell"),
        (C.ProcessInfo(argv=["a"], shell="b"), "exactly one of argv and shell"),
        (C.ProcessInfo(shell="   "), "blank"),
        (C.ProcessInfo(argv=["", "x"]), "argv\\[0\\]"),
        (C.ProcessInfo(argv=["true"] * 4097), "more than 4096"),
        (C.ProcessInfo(shell="x" * 140_000), "more than 131072"),
        (C.ProcessInfo(argv=["a\0b"]), "NUL"),
        (C.ProcessInfo(shell="true", env={"A-B": "1"}), "env name"),
        (C.ProcessInfo(shell="true", working_dir="/etc"), "absolute"),
        (C.ProcessInfo(shell="true", working_dir="a/../../b"), "'..'"),
        (C.ProcessInfo(shell="true", working_dir=".."), "'..'"),
        (C.ProcessInfo(shell="true", user="no body"), "user"),
        (C.ProcessInfo(shell="true", kill_grace_period=Duration(seconds=3601)), "grace"),
        (C.ProcessInfo(shell="true", kill_grace_period=Duration(seconds=-1)), "grace"),
    ],
)
def test_bad_command_task_is_invalid(process: common_pb2.ProcessInfo, fragment: str) -> None:
    info = C.TaskInfo(task_id="bad", resources=wire(("cpus", 1)), process=process)
    with pytest.raises(InvalidArgument, match=f"task 'bad': process: .*{fragment}"):
        convert.task_launch(info)


def agent_status(**kw: object) -> common_pb2.TaskStatus:
    fields: dict[str, object] = {
        "task_id": "t",
        "agent_id": "ag",
        "state": C.TASK_STATE_RUNNING,
        "uuid": b"u" * 16,
        "source": C.TaskStatus.SOURCE_AGENT,
    }
    fields.update(kw)
    return C.TaskStatus(**fields)  # type: ignore[arg-type]


def test_status_round_trip() -> None:
    message = agent_status(
        reason=C.TaskStatus.REASON_COMMAND_FAILED, exit_code=2, healthy=False, message="m"
    )
    message.timestamp.FromSeconds(1_700_000_000)
    status = convert.status_from_pb(message, agent_update=True)
    assert status == StatusUpdate(
        "t",
        "ag",
        TaskState.RUNNING,
        TaskReason.COMMAND_FAILED,
        "m",
        1_700_000_000.0,
        b"u" * 16,
        "AGENT",
        False,
        2,
    )
    assert convert.status_to_pb(status) == message
    master = StatusUpdate("t", "ag", TaskState.UNKNOWN, TaskReason.RECONCILIATION)
    back = convert.status_to_pb(master)
    assert back.state == C.TASK_STATE_UNKNOWN and back.source == C.TaskStatus.SOURCE_MASTER
    assert not back.HasField("exit_code") and not back.HasField("healthy")
    assert not back.HasField("usage")


def test_status_usage_round_trip() -> None:
    usage = C.ResourceUsage(
        cpu_time=Duration(seconds=1, nanos=250_000_000), memory_peak_bytes=64 << 20
    )
    message = agent_status(state=C.TASK_STATE_FINISHED, exit_code=0, usage=usage)
    message.timestamp.FromSeconds(1_700_000_000)
    status = convert.status_from_pb(message, agent_update=True)
    assert status.usage == ResourceUsage(cpu_seconds=1.25, memory_peak_bytes=64 << 20)
    assert convert.status_to_pb(status) == message
    bad = agent_status(usage=C.ResourceUsage(memory_peak_bytes=-1))
    with pytest.raises(InvalidArgument, match=r"status\.usage"):
        convert.status_from_pb(bad, agent_update=True)


@pytest.mark.parametrize(
    ("kw", "fragment"),
    [
        ({"task_id": ""}, "task_id"),
        ({"state": C.TASK_STATE_UNSPECIFIED}, "unspecified"),
        ({"state": C.TASK_STATE_UNREACHABLE}, "not a state an agent reports"),
        ({"state": C.TASK_STATE_GONE}, "not a state an agent reports"),
        ({"state": 77}, "unknown enum"),
        ({"uuid": b""}, "16 bytes"),
        ({"uuid": b"x" * 17}, "16 bytes"),
        ({"reason": 999}, "unknown enum"),
    ],
)
def test_bad_agent_status(kw: dict[str, object], fragment: str) -> None:
    with pytest.raises(InvalidArgument, match=fragment):
        convert.status_from_pb(agent_status(**kw), agent_update=True)


def test_latest_state() -> None:
    assert convert.latest_state(0) is None
    assert convert.latest_state(C.TASK_STATE_FINISHED) == TaskState.FINISHED
    with pytest.raises(InvalidArgument):
        convert.latest_state(C.TASK_STATE_UNKNOWN)


# -- outgoing streams -----------------------------------------------------------------------------


OFFER = Offer("o-1", "fw-1", "ag-1", "h1", R("cpus:2;mem:1024"), 2, (("rack", "r1"),), 5.0)


def test_events_to_pb() -> None:
    offers = streams.event_to_pb(OffersEvent((OFFER,), expires_at=1_700_000_000.5))
    [offer] = offers.offers.offers
    assert (offer.offer_id, offer.framework_id, offer.agent_id, offer.hostname) == (
        "o-1",
        "fw-1",
        "ag-1",
        "h1",
    )
    assert offer.fair_tasks == 2 and offer.attributes[0].value == "r1"
    assert offer.expires_at.ToMilliseconds() == 1_700_000_000_500
    assert not streams.event_to_pb(OffersEvent((OFFER,))).offers.offers[0].HasField("expires_at")

    assert streams.event_to_pb(RescindEvent("o-1", "gone")).rescind.reason == "gone"
    update = streams.event_to_pb(
        UpdateEvent(StatusUpdate("t", "ag", TaskState.LOST, TaskReason.AGENT_RESTARTED))
    )
    assert update.update.status.reason == C.TaskStatus.REASON_AGENT_RESTARTED
    assert streams.event_to_pb(FailureEvent("ag", "lost")).failure.agent_id == "ag"
    assert streams.event_to_pb(HeartbeatEvent(10.0)).heartbeat.time.seconds == 10
    error = streams.event_to_pb(ErrorEvent("bye", "CANCELLED")).error
    assert (error.message, error.code) == ("bye", 1)
    with pytest.raises(TypeError):
        streams.event_to_pb(StreamEnd())


def test_commands_to_pb() -> None:
    task = TaskLaunch("t", "t", R("cpus:1"), None, TaskDetails())
    launch = streams.command_to_pb(LaunchTasks("ag", "fw", (task,))).launch_tasks
    assert launch.framework_id == "fw" and launch.tasks[0].agent_id == "ag"
    assert streams.command_to_pb(KillTask("ag", "fw", "t")).kill_task.task_id == "t"
    ack = streams.command_to_pb(AckCommand("fw", "t", b"u" * 16)).acknowledge_status
    assert ack.uuid == b"u" * 16
    assert isinstance(streams.command_to_pb(KillTask("ag", "f", "t")), agent_pb2.AgentCommand)
    with pytest.raises(TypeError):
        streams.command_to_pb(StreamEnd())


def test_agent_messages_batch_commands_in_order_around_settings() -> None:
    kill = KillTask("ag", "fw", "t")
    ack = AckCommand("fw", "t", b"u" * 16)
    settings = AgentSettings(20.0, 2.0)
    messages = streams.agent_messages([kill, ack, settings, kill])
    assert [m.WhichOneof("message") for m in messages] == ["commands", "settings", "commands"]
    first = [c.WhichOneof("command") for c in messages[0].commands.commands]
    assert first == ["kill_task", "acknowledge_status"]
    assert messages[1].settings.heartbeat_interval.seconds == 20
    assert messages[1].settings.reconnect_jitter.seconds == 2
    assert len(messages[2].commands.commands) == 1
    assert streams.agent_messages([]) == []


def test_subscribe_response_types() -> None:
    assert isinstance(streams.event_to_pb(HeartbeatEvent(0.0)), scheduler_pb2.SubscribeResponse)
