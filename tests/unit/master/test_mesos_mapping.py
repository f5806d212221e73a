"""The Mesos v1 scheduler API's JSON mapping (``master.web.mesos_calls``, ``mesos_tasks``,
``mesos_events``): every supported call read as fairshare's values; a bad call refused naming the
field; tasks mapped to command tasks or refused with the field; events in Mesos's shapes."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from fairshare.command import Command
from fairshare.resources import ResourceVector
from fairshare.task_states import TaskReason, TaskState
from fairshare.v1 import common_pb2

from master.core import TaskLaunch
from master.core.records import Offer
from master.model import (
    ErrorEvent,
    FailureEvent,
    HeartbeatEvent,
    OffersEvent,
    RescindEvent,
    StatusUpdate,
    StreamEnd,
    UpdateEvent,
)
from master.web import mesos_calls as calls
from master.web.mesos_events import REASONS, event_json, offer_json, record, status_json
from master.web.mesos_json import BadCall, loads
from master.web.mesos_tasks import PREEMPTIBLE_LABEL, TaskProblem, parse_task, task_launch

FID = {"value": "fw-1"}


def cpus_mem(cpus: float, mem: float) -> list[dict[str, Any]]:
    return [
        {"name": "cpus", "type": "SCALAR", "scalar": {"value": cpus}},
        {"name": "mem", "type": "SCALAR", "scalar": {"value": mem}},
    ]


def task(**extra: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "name": "t1",
        "task_id": {"value": "t1"},
        "agent_id": {"value": "ag-1"},
        "resources": cpus_mem(0.5, 64),
        "command": {"value": "echo hi"},
    }
    document.update(extra)
    return {k: v for k, v in document.items() if v is not None}


def accept(*tasks: dict[str, Any], filters: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "offer_ids": [{"value": "o-1"}],
        "operations": [{"type": "LAUNCH", "launch": {"task_infos": list(tasks)}}],
    }
    if filters is not None:
        body["filters"] = filters
    return {"type": "ACCEPT", "framework_id": FID, "accept": body}


def launched(document: dict[str, Any], role: str = "*") -> TaskLaunch | TaskProblem:
    return task_launch(parse_task(document, "task"), role)


# -- calls ----------------------------------------------------------------------------------------


def test_a_pymesos_subscribe_is_a_framework_spec() -> None:
    call = calls.parse_call(
        {
            "type": "SUBSCRIBE",
            "subscribe": {
                "framework_info": {
                    "user": "alice",
                    "name": "batch",
                    "failover_timeout": 100,
                    "role": "eng/dev",
                    "capabilities": [{"type": "GPU_RESOURCES"}, {"type": "REVOCABLE_RESOURCES"}],
                    "labels": {"labels": [{"key": "team", "value": "x"}]},
                    "checkpoint": True,
                }
            },
        }
    )
    body = call.body
    assert isinstance(body, calls.Subscribe) and call.framework_id == ""
    spec = body.spec
    assert (spec.name, spec.role, spec.user, spec.failover_timeout) == (
        "batch",
        "eng/dev",
        "alice",
        100,
    )
    assert spec.weight is None and spec.capabilities == {"GPU_RESOURCES"}
    assert body.capabilities == {"GPU_RESOURCES", "REVOCABLE_RESOURCES"} and not body.suppressed


def test_resubscribe_multi_role_and_suppressed() -> None:
    call = calls.parse_call(
        {
            "type": "SUBSCRIBE",
            "framework_id": FID,
            "subscribe": {
                "framework_info": {
                    "name": "b",
                    "id": FID,
                    "roles": ["eng"],
                    "capabilities": [{"type": "MULTI_ROLE"}],
                },
                "suppressed_roles": ["eng"],
            },
        }
    )
    assert isinstance(call.body, calls.Subscribe)
    assert (call.body.spec.framework_id, call.body.spec.role, call.body.suppressed) == (
        "fw-1",
        "eng",
        True,
    )


def test_every_other_call_kind() -> None:
    got = calls.parse_call(accept(task(), filters={"refuse_seconds": 0.5}))
    assert isinstance(got.body, calls.Accept)
    assert (got.body.offer_ids, got.body.refuse_seconds, len(got.body.tasks)) == (("o-1",), 0.5, 1)
    decline = calls.parse_call(
        {"type": "DECLINE", "framework_id": FID, "decline": {"offer_ids": [{"value": "o-2"}]}}
    )
    assert decline.body == calls.Decline(("o-2",), calls.DEFAULT_REFUSE_SECONDS)  # Mesos's 5 s
    assert calls.parse_call({"type": "REVIVE", "framework_id": FID}).body == calls.Revive(())
    suppress = {"type": "SUPPRESS", "framework_id": FID, "suppress": {"roles": ["*"]}}
    assert calls.parse_call(suppress).body == calls.Suppress(("*",))
    kill = {"type": "KILL", "framework_id": FID, "kill": {"task_id": {"value": "t"}}}
    assert calls.parse_call(kill).body == calls.Kill("t", "")
    uuid = bytes(range(16))
    ack = {
        "type": "ACKNOWLEDGE",
        "framework_id": FID,
        "acknowledge": {
            "agent_id": {"value": "a"},
            "task_id": {"value": "t"},
            "uuid": base64.b64encode(uuid).decode(),
        },
    }
    assert calls.parse_call(ack).body == calls.Acknowledge("a", "t", uuid)
    reconcile = {
        "type": "RECONCILE",
        "framework_id": FID,
        "reconcile": {"tasks": [{"task_id": {"value": "t"}}]},
    }
    assert calls.parse_call(reconcile).body == calls.Reconcile((("t", ""),))
    assert calls.parse_call({"type": "TEARDOWN", "framework_id": FID}).body == calls.Teardown()
    huge = calls.parse_call(accept(task(), filters={"refuse_seconds": 1e12}))
    assert isinstance(huge.body, calls.Accept) and huge.body.refuse_seconds == 31_536_000


BAD_CALLS: list[tuple[Any, str]] = [
    ([], "expected Call"),
    ({"type": "ACCEPT"}, "framework_id: is required"),
    ({"type": "NOPE", "framework_id": FID}, "type: 'NOPE' is not one of"),
    ({"type": 3, "framework_id": FID}, "type: expected an enum name"),
    ({"type": "MESSAGE", "framework_id": FID}, "type: MESSAGE: framework messages"),
    ({"type": "SHUTDOWN", "framework_id": FID}, "type: SHUTDOWN"),
    ({"type": "REQUEST", "framework_id": FID}, "type: REQUEST"),
    ({"type": "UPDATE_FRAMEWORK", "framework_id": FID}, "type: UPDATE_FRAMEWORK"),
    ({"type": "TEARDOWN", "framework_id": FID, "colour": 1}, "colour: is not a field of Call"),
    ({"type": "TEARDOWN", "framework_id": FID, "kill": {}}, "kill: is set but the call's type"),
    ({"type": "TEARDOWN", "framework_id": {"value": ""}}, "framework_id.value: is empty"),
    ({"type": "TEARDOWN", "framework_id": {"value": "x" * 300}}, "framework_id.value: has 300"),
    ({"type": "SUBSCRIBE"}, "subscribe: is required"),
    ({"type": "SUBSCRIBE", "subscribe": {}}, "subscribe.framework_info: is required"),
    (
        {"type": "SUBSCRIBE", "subscribe": {"framework_info": {"name": ""}}},
        "subscribe.framework_info.name: is empty",
    ),
    (
        {"type": "SUBSCRIBE", "subscribe": {"framework_info": {"name": "a", "role": "a//b"}}},
        "subscribe.framework_info.role:",
    ),
    (
        {"type": "SUBSCRIBE", "subscribe": {"framework_info": {"name": "a", "roles": ["x"]}}},
        "subscribe.framework_info.roles: requires the MULTI_ROLE",
    ),
    (
        {
            "type": "SUBSCRIBE",
            "subscribe": {
                "framework_info": {
                    "name": "a",
                    "roles": ["x", "y"],
                    "capabilities": [{"type": "MULTI_ROLE"}],
                }
            },
        },
        "subscribe.framework_info.roles: has 2 roles",
    ),
    (
        {"type": "SUBSCRIBE", "subscribe": {"framework_info": {"name": "a", "capabilities": [{}]}}},
        "subscribe.framework_info.capabilities[0].type: is required",
    ),
    (
        {
            "type": "SUBSCRIBE",
            "subscribe": {"framework_info": {"name": "a", "failover_timeout": -1}},
        },
        "subscribe.framework_info.failover_timeout: must be in",
    ),
    (
        {
            "type": "SUBSCRIBE",
            "subscribe": {"framework_info": {"name": "a", "offer_filters": {"*": {}}}},
        },
        "subscribe.framework_info.offer_filters",
    ),
    (
        {
            "type": "SUBSCRIBE",
            "subscribe": {"framework_info": {"name": "a"}, "suppressed_roles": ["b"]},
        },
        "subscribe.suppressed_roles[0]: 'b' is not the framework's role",
    ),
    (
        {"type": "SUBSCRIBE", "framework_id": FID, "subscribe": {"framework_info": {"name": "a"}}},
        "framework_id: differs from subscribe.framework_info.id",
    ),
    ({"type": "ACCEPT", "framework_id": FID, "accept": {}}, "accept.offer_ids: is empty"),
    (
        {"type": "ACCEPT", "framework_id": FID, "accept": {"offer_ids": [{"value": "o"}] * 2}},
        "accept.offer_ids: names the same offer twice",
    ),
    (
        {
            "type": "ACCEPT",
            "framework_id": FID,
            "accept": {"offer_ids": [{"value": "o"}], "operations": [{"type": "RESERVE"}]},
        },
        "accept.operations[0].type: RESERVE: only LAUNCH",
    ),
    (
        {
            "type": "ACCEPT",
            "framework_id": FID,
            "accept": {"offer_ids": [{"value": "o"}], "operations": [{"type": "LAUNCH"}]},
        },
        "accept.operations[0].launch: is required",
    ),
    (accept(task(task_id=None)), "accept.operations[0].launch.task_infos[0].task_id: is required"),
    (accept(task(agent_id={"value": 7})), "task_infos[0].agent_id.value: expected a string"),
    (accept(task(resources=[{"name": "cpus"}])), "task_infos[0].resources[0].type: is required"),
    (
        accept(task(resources=[{"name": "cpus", "type": "SCALAR", "scalar": {"value": "1"}}])),
        "task_infos[0].resources[0].scalar.value: expected a number",
    ),
    (accept(task(command={"value": "x", "shell": "yes"})), "task_infos[0].command.shell"),
    (accept(task(command={"value": "x", "arguments": [1]})), "command.arguments[0]"),
    (accept(task(colour="red")), "task_infos[0].colour: is not a field of TaskInfo"),
    (accept(task(kill_policy={"grace_period": {"nanoseconds": "x"}})), "grace_period.nanoseconds"),
    (
        accept(task(), filters={"refuse_seconds": -1}),
        "accept.filters.refuse_seconds: -1.0 is negative",
    ),
    (
        {
            "type": "KILL",
            "framework_id": FID,
            "kill": {"task_id": {"value": "t"}, "kill_policy": {}},
        },
        "kill.kill_policy: is not supported",
    ),
    ({"type": "KILL", "framework_id": FID, "kill": {}}, "kill.task_id: is required"),
    (
        {
            "type": "ACKNOWLEDGE",
            "framework_id": FID,
            "acknowledge": {"agent_id": {"value": "a"}, "task_id": {"value": "t"}, "uuid": "!!"},
        },
        "acknowledge.uuid: is not base64",
    ),
    (
        {
            "type": "ACKNOWLEDGE",
            "framework_id": FID,
            "acknowledge": {"agent_id": {"value": "a"}, "task_id": {"value": "t"}, "uuid": "AAAA"},
        },
        "acknowledge.uuid: is 3 bytes",
    ),
    (
        {"type": "RECONCILE", "framework_id": FID, "reconcile": {"tasks": [{}]}},
        "reconcile.tasks[0].task_id",
    ),
    (
        {"type": "REVIVE", "framework_id": FID, "revive": {"roles": "x"}},
        "revive.roles: expected an array",
    ),
]


@pytest.mark.parametrize(("document", "expected"), BAD_CALLS)
def test_a_bad_call_is_refused_naming_the_field(document: Any, expected: str) -> None:
    with pytest.raises(BadCall) as refused:
        calls.parse_call(document)
    assert expected in str(refused.value)


def test_bodies_that_are_not_json() -> None:
    for body, expected in ((b"{", "not JSON"), (b"\xff", "not UTF-8"), (b"[NaN]", "NaN")):
        with pytest.raises(BadCall, match=expected):
            loads(body)
    assert loads(b'{"a": 1}') == {"a": 1}


# -- tasks ----------------------------------------------------------------------------------------


def test_a_shell_command_task() -> None:
    env = {"variables": [{"name": "A", "value": "1"}, {"name": "B", "type": "VALUE", "value": "2"}]}
    got = launched(
        task(
            command={"value": "echo $A", "environment": env, "user": "nobody", "arguments": ["x"]},
            kill_policy={"grace_period": {"nanoseconds": 2_500_000_000}},
            labels={"labels": [{"key": "k", "value": "v"}]},
        )
    )
    assert isinstance(got, TaskLaunch)
    assert (got.task_id, got.name, got.agent_id, got.preemptible) == ("t1", "t1", "ag-1", False)
    assert got.resources == ResourceVector.parse("cpus:0.5;mem:64")
    command = got.details.command  # type: ignore[attr-defined]
    assert command == Command(
        shell="echo $A", env={"A": "1", "B": "2"}, user="nobody", kill_grace_period=2.5
    )
    assert got.details.labels == (("k", "v"),)  # type: ignore[attr-defined]


def test_an_argv_command_task_and_float_noise() -> None:
    resources = [
        {"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1 + 0.2}},
        {"name": "mem", "type": "SCALAR", "scalar": {"value": 32}},
        {"name": "mem", "type": "SCALAR", "scalar": {"value": 32}, "role": "*"},
        {"name": "gpus", "type": "SCALAR", "scalar": {"value": 1.0}},
    ]
    got = launched(
        task(
            resources=resources,
            command={"shell": False, "value": "/bin/echo", "arguments": ["echo", "a", "b"]},
            labels={"labels": [{"key": PREEMPTIBLE_LABEL, "value": "true"}]},
        )
    )
    assert isinstance(got, TaskLaunch) and got.preemptible
    assert got.resources == ResourceVector.parse("cpus:0.3;mem:64;gpus:1")
    assert got.details.command == Command(argv=["/bin/echo", "a", "b"])  # type: ignore[attr-defined]


PROBLEMS: list[tuple[dict[str, Any], str]] = [
    (task(executor={"executor_id": {"value": "e"}}), "task.executor: custom executors"),
    (task(container={"type": "DOCKER"}), "task.container: containers are not supported"),
    (task(data="aGk="), "task.data:"),
    (task(health_check={}), "task.health_check"),
    (task(command=None), "task.command: is required"),
    (task(command={"value": "x", "uris": [{"value": "http://x"}]}), "task.command.uris"),
    (
        task(
            command={"value": "x", "environment": {"variables": [{"name": "S", "type": "SECRET"}]}}
        ),
        "task.command.environment.variables[0]: only variables of type VALUE",
    ),
    (task(command={"value": "  "}), "task.command.value: is empty"),
    (task(command={"value": "x", "user": "bad user"}), "task.command: user 'bad user'"),
    (task(resources=[]), "task.resources: the task asks for no resources"),
    (
        task(resources=[{"name": "ports", "type": "RANGES", "ranges": {"range": []}}]),
        "task.resources[0].type: RANGES resources are not supported",
    ),
    (
        task(resources=[{"name": "cpus", "type": "SCALAR", "scalar": {"value": 1}, "role": "eng"}]),
        "task.resources[0].role: 'eng': reserved",
    ),
    (
        task(
            resources=[
                {"name": "cpus", "type": "SCALAR", "scalar": {"value": 1}, "reservations": [{}]}
            ]
        ),
        "task.resources[0].reservations: reserved resources",
    ),
    (
        task(
            resources=[{"name": "cpus", "type": "SCALAR", "scalar": {"value": 1}, "revocable": {}}]
        ),
        "task.resources[0].revocable",
    ),
    (
        task(resources=[{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.0015}}]),
        "task.resources[0].scalar.value: 0.0015 is finer than fairshare's fixed point of 0.001",
    ),
    (
        task(resources=[{"name": "gpus", "type": "SCALAR", "scalar": {"value": 0.5}}]),
        "task.resources[0].scalar.value: gpus are counted whole",
    ),
    (
        task(resources=[{"name": "cpus", "type": "SCALAR", "scalar": {"value": -1}}]),
        "task.resources[0].scalar.value: -1.0 is negative",
    ),
    (
        task(resources=[{"name": "CPU", "type": "SCALAR", "scalar": {"value": 1}}]),
        "task.resources[0].name: 'CPU' is not a fairshare resource name",
    ),
    (
        task(resources=[{"name": "cpus", "type": "SCALAR"}]),
        "task.resources[0].scalar: is required for a SCALAR resource",
    ),
    (
        task(
            resources=[
                {
                    "name": "cpus",
                    "type": "SCALAR",
                    "scalar": {"value": 1},
                    "allocation_info": {"role": "b"},
                }
            ]
        ),
        "task.resources[0].allocation_info.role: 'b' is not the framework's role",
    ),
    (task(labels={"labels": [{"key": "a"}, {"key": "a"}]}), "task.labels: a key is given twice"),
    (
        task(labels={"labels": [{"key": f"k{i}", "value": "v"} for i in range(129)]}),
        "task.labels: more than 128 labels",
    ),
    (task(kill_policy={"grace_period": {"nanoseconds": -1}}), "kill_grace_period"),
]


@pytest.mark.parametrize(("document", "expected"), PROBLEMS)
def test_a_task_fairshare_cannot_run_is_a_problem_naming_the_field(
    document: dict[str, Any], expected: str
) -> None:
    got = launched(document)
    assert isinstance(got, TaskProblem) and (got.task_id, got.agent_id) == ("t1", "ag-1")
    assert expected in got.message


# -- events ---------------------------------------------------------------------------------------


def test_offers_in_mesos_shape() -> None:
    offer = Offer(
        "o-1", "fw-1", "ag-1", "host-1", ResourceVector.parse("cpus:2.5;mem:1024;gpus:1"), 0,
        (("rack", "r1"), ("size", "3")), 0.0,
    )  # fmt: skip
    document = offer_json(offer, "eng", multi_role=False)
    assert document == {
        "id": {"value": "o-1"},
        "framework_id": {"value": "fw-1"},
        "agent_id": {"value": "ag-1"},
        "hostname": "host-1",
        "resources": [
            {"name": "cpus", "type": "SCALAR", "scalar": {"value": 2.5}, "role": "*"},
            {"name": "mem", "type": "SCALAR", "scalar": {"value": 1024}, "role": "*"},
            {"name": "gpus", "type": "SCALAR", "scalar": {"value": 1}, "role": "*"},
        ],
        "attributes": [
            {"name": "rack", "type": "TEXT", "text": {"value": "r1"}},
            {"name": "size", "type": "SCALAR", "scalar": {"value": 3.0}},
        ],
    }
    multi = offer_json(offer, "eng", multi_role=True)
    assert multi["allocation_info"] == {"role": "eng"}
    assert all(r["allocation_info"] == {"role": "eng"} for r in multi["resources"])
    assert event_json(OffersEvent((offer,)), "eng", False) == {
        "type": "OFFERS",
        "offers": {"offers": [document]},
    }


def test_updates_and_the_other_events() -> None:
    uuid = bytes(range(16))
    update = StatusUpdate(
        "t", "ag", TaskState.FINISHED, TaskReason.UNSPECIFIED, "exited 0", 12.5, uuid, "AGENT"
    )
    assert status_json(update) == {
        "task_id": {"value": "t"},
        "state": "TASK_FINISHED",
        "source": "SOURCE_EXECUTOR",
        "timestamp": 12.5,
        "agent_id": {"value": "ag"},
        "message": "exited 0",
        "uuid": base64.b64encode(uuid).decode(),
    }
    lost = StatusUpdate("t", "", TaskState.UNKNOWN, TaskReason.RECONCILIATION, "", 1.0)
    assert status_json(lost) == {
        "task_id": {"value": "t"},
        "state": "TASK_UNKNOWN",
        "source": "SOURCE_MASTER",
        "timestamp": 1.0,
        "reason": "REASON_RECONCILIATION",
    }
    memory = StatusUpdate(
        "t", "ag", TaskState.FAILED, TaskReason.MEMORY_LIMIT, "", 1.0, uuid, "AGENT"
    )
    assert status_json(memory)["source"] == "SOURCE_AGENT"
    assert event_json(UpdateEvent(lost), "*", False) == {
        "type": "UPDATE",
        "update": {"status": status_json(lost)},
    }
    assert event_json(RescindEvent("o", "expired"), "*", False) == {
        "type": "RESCIND",
        "rescind": {"offer_id": {"value": "o"}},
    }
    assert event_json(HeartbeatEvent(1.0), "*", False) == {"type": "HEARTBEAT"}
    assert event_json(FailureEvent("ag", "lost"), "*", False) == {
        "type": "FAILURE",
        "failure": {"agent_id": {"value": "ag"}},
    }
    assert event_json(ErrorEvent("gone", "CANCELLED"), "*", False) == {
        "type": "ERROR",
        "error": {"message": "gone"},
    }
    assert event_json(StreamEnd(), "*", False) is None


def test_every_fairshare_reason_and_state_has_a_mesos_name() -> None:
    reasons = {
        name.removeprefix("REASON_")
        for name in common_pb2.TaskStatus.Reason.keys()  # noqa: SIM118
        if name != "REASON_UNSPECIFIED"
    }
    assert reasons == {reason.value for reason in REASONS}
    mesos_states = {
        "TASK_STAGING", "TASK_STARTING", "TASK_RUNNING", "TASK_KILLING", "TASK_FINISHED",
        "TASK_FAILED", "TASK_KILLED", "TASK_ERROR", "TASK_LOST", "TASK_DROPPED",
        "TASK_UNREACHABLE", "TASK_GONE", "TASK_GONE_BY_OPERATOR", "TASK_UNKNOWN",
    }  # fmt: skip
    assert {f"TASK_{state.value}" for state in TaskState} <= mesos_states


def test_recordio_framing() -> None:
    framed = record({"type": "HEARTBEAT", "x": "é"})
    length, _, body = framed.partition(b"\n")
    assert int(length) == len(body) and json.loads(body) == {"type": "HEARTBEAT", "x": "é"}
