"""What the status table tells a newcomer (issue 16 items 2 and 9): weighted shares, dominant
resource, running vs wanted, agent attributes, and the GPU rule when agents have GPUs."""

from __future__ import annotations

from fairshare.v1 import common_pb2
from test_cli_status import State, drf_table1_state, res

from client_commands.status_document import render_table, state_to_dict


def test_the_table_shows_weighted_share_dominant_resource_wanted_and_attributes() -> None:
    state = drf_table1_state()
    state.frameworks[1].weight = 2.0
    state.frameworks[1].weighted_share = state.frameworks[1].dominant_share / 2.0  # the master's
    lines = render_table(state_to_dict(state)).splitlines()
    header = next(line for line in lines if line.startswith("FRAMEWORK"))
    assert header.split()[4:9] == ["WEIGHT", "SHARE", "WEIGHTED", "DOMINANT", "RUNNING/WANTED"]
    b_line = next(line for line in lines if line.startswith("fw-b"))
    assert b_line.split()[4:9] == ["2", "0.667", "0.333", "cpus", "2/20"]
    agent_header = next(line for line in lines if line.startswith("AGENT"))
    assert agent_header.split()[:4] == ["AGENT", "HOSTNAME", "STATE", "ATTRIBUTES"]
    assert "rack:r1" in next(line for line in lines if line.startswith("ag-1"))
    assert not any("gpus" in line for line in lines)  # no GPU agent: no GPU note


def test_gpu_agents_come_with_the_rule() -> None:
    state = drf_table1_state()
    gpu = State.Agent(
        agent_id="ag-gpu",
        agent_info=common_pb2.AgentInfo(hostname="g1", resources=res("cpus:16;mem:8192;gpus:2")),
        state=State.Agent.STATE_ACTIVE,
        reachable=True,
        free=res("cpus:16;mem:8192;gpus:2"),
    )
    state.agents.append(gpu)
    table = render_table(state_to_dict(state))
    assert "1 agent(s) have gpus; they are offered only to frameworks with the GPU_RESOURCES" in (
        table
    )
    assert "none of the frameworks above" in table
    state.frameworks[0].framework_info.capabilities.append(
        common_pb2.FrameworkInfo.CAPABILITY_GPU_RESOURCES
    )
    document = state_to_dict(state)
    assert document["frameworks"][0]["capabilities"] == ["GPU_RESOURCES"]
    assert "(A)" in render_table(document)


def test_the_json_document_has_running_and_wanted_as_the_http_api() -> None:
    """Issue 24, item 12: ``status --json`` says what the HTTP API's frameworks say."""
    state = drf_table1_state()
    state.frameworks[1].preempted = 3
    document = state_to_dict(state)
    framework = next(f for f in document["frameworks"] if f["id"] == "fw-b")
    assert (framework["running"], framework["wanted"], framework["preempted"]) == (2, 20, 3)
    assert framework["running"] == framework["tasks"].get("RUNNING", 0)
