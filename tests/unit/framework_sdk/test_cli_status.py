"""``fairshare status`` against a canned OperatorService: the JSON document and the table."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from typing import Any

import grpc
import pytest
from fairshare import cli
from fairshare.v1 import common_pb2, operator_pb2, operator_pb2_grpc
from fairshare.wire import resources_to_pb
from sdk_helpers import run_async

from framework_sdk import ResourceVector

State = operator_pb2.GetStateResponse


def res(text: str) -> common_pb2.Resources:
    return resources_to_pb(ResourceVector.parse(text))


def drf_table1_state() -> operator_pb2.GetStateResponse:
    """DRF paper Table 1 as the master would report it: A 3 tasks, B 2 tasks."""
    agent = State.Agent(
        agent_id="ag-1",
        agent_info=common_pb2.AgentInfo(
            hostname="node1",
            resources=res("cpus:9;mem:18432"),
            attributes=[common_pb2.Attribute(name="rack", value="r1")],
        ),
        state=State.Agent.STATE_ACTIVE,
        reachable=True,
        free=res("cpus:0;mem:4096"),
        used=res("cpus:9;mem:14336"),
    )

    def framework(fid: str, name: str, used: str, running: int) -> State.Framework:
        return State.Framework(
            framework_info=common_pb2.FrameworkInfo(framework_id=fid, name=name, role=""),
            state=State.Framework.STATE_ACTIVE,
            weight=1.0,
            dominant_share=2 / 3,
            weighted_share=2 / 3,
            dominant_resource="mem" if name == "A" else "cpus",
            allocated=res(used),
            used=res(used),
            task_counts=[
                State.TaskCount(state=common_pb2.TASK_STATE_RUNNING, count=running),
                State.TaskCount(state=common_pb2.TASK_STATE_STAGING, count=1),
            ],
            demand=common_pb2.Demand(task_resources=res("cpus:1;mem:4096"), max_tasks=20),
        )

    task = common_pb2.Task(
        framework_id="fw-a",
        info=common_pb2.TaskInfo(task_id="A-1", agent_id="ag-1", resources=res("cpus:1;mem:4096")),
        status=common_pb2.TaskStatus(task_id="A-1", state=common_pb2.TASK_STATE_RUNNING),
    )
    return State(
        master_id="0123456789abcdef0123",
        version="0.1.0",
        policy="drf",
        placement="best-fit",
        agents=[agent],
        frameworks=[
            framework("fw-a", "A", "cpus:3;mem:12288", 3),
            framework("fw-b", "B", "cpus:6;mem:2048", 2),
        ],
        tasks=[task],
        offers=[common_pb2.Offer(offer_id="of-1", framework_id="fw-b", agent_id="ag-1")],
        total=res("cpus:9;mem:18432"),
        used=res("cpus:9;mem:14336"),
        free=res("mem:4096"),
    )


class CannedOperator(operator_pb2_grpc.OperatorServiceServicer):
    async def GetState(
        self, request: operator_pb2.GetStateRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> operator_pb2.GetStateResponse:
        return drf_table1_state()


async def operator_server() -> AsyncGenerator[str, None]:
    server = grpc.aio.server()
    operator_pb2_grpc.add_OperatorServiceServicer_to_server(CannedOperator(), server)  # type: ignore[abstract]
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(None)


def status_output(capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, str, str]:
    async def scenario() -> int:
        servers = operator_server()
        address = await servers.__anext__()
        try:
            return await asyncio.to_thread(cli.main, ["status", "--master", address, *flags])
        finally:
            await servers.aclose()

    code = run_async(scenario())
    out, err = capsys.readouterr()
    return code, out, err


def test_status_json_has_the_documented_fields(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = status_output(capsys, "--json")
    assert (code, err) == (0, "")
    document = json.loads(out)  # exactly one JSON object
    assert {"agents", "frameworks", "offers", "total", "used"} <= set(document)
    (agent,) = document["agents"]
    assert agent["id"] == "ag-1" and agent["reachable"] is True and agent["state"] == "ACTIVE"
    assert agent["resources"]["total"] == {"cpus": 9.0, "mem": 18432.0}
    assert agent["resources"]["free"] == {"mem": 4096.0}
    assert agent["attributes"] == {"rack": "r1"}
    a, b = document["frameworks"]
    assert (a["id"], a["name"], a["role"], a["weight"]) == ("fw-a", "A", "*", 1.0)
    assert a["dominant_share"] == pytest.approx(2 / 3) == b["dominant_share"]
    assert a["allocated"] == {"cpus": 3.0, "mem": 12288.0}
    assert a["tasks"] == {"RUNNING": 3, "STAGING": 1} and b["tasks"]["RUNNING"] == 2
    assert a["demand"] == {"task": {"cpus": 1.0, "mem": 4096.0}, "max_tasks": 20}
    assert document["offers"] == [
        {
            "id": "of-1",
            "framework_id": "fw-b",
            "agent_id": "ag-1",
            "resources": {},
            "expires_at": None,
        }
    ]
    assert document["tasks"][0]["state"] == "RUNNING"
    assert document["total"] == {"cpus": 9.0, "mem": 18432.0}
    assert document["used"] == {"cpus": 9.0, "mem": 14336.0}
    assert document["policy"] == "drf"


def test_status_table_lists_agents_and_frameworks(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = status_output(capsys)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith("master 0123456789ab  policy drf")
    assert any(line.split()[:3] == ["AGENT", "HOSTNAME", "STATE"] for line in lines)
    agent_line = next(line for line in lines if line.startswith("ag-1"))
    assert "node1" in agent_line and "cpus:9;mem:18432" in agent_line
    a_line = next(line for line in lines if line.startswith("fw-a"))
    assert a_line.split()[:6] == ["fw-a", "A", "*", "ACTIVE", "1", "0.667"]
    assert "RUNNING=3" in a_line and "STAGING=1" in a_line


def test_status_of_an_unreachable_master_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    async def free_port() -> str:
        servers = operator_server()
        address = await servers.__anext__()
        await servers.aclose()
        return address

    address = run_async(free_port())
    assert cli.main(["status", "--master", address]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"fairshare status: no master answers at {address}")
    assert "UNAVAILABLE" in err and "Traceback" not in err
