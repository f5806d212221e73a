"""``state_to_pb``: GetState carries what ``fairshare status --json`` prints."""

from __future__ import annotations

import asyncio

import pytest
from fairshare.resources import ResourceVector
from fairshare.task_states import TaskState
from fairshare.v1 import common_pb2, operator_pb2

from master.core import CoreConfig, TaskLaunch
from master.model import AgentSpec, Demand, FrameworkInfo, StatusUpdate
from master.runtime import MasterRuntime, RuntimeConfig
from master.service.convert import resources
from master.service.state import state_to_pb

R = ResourceVector.parse
Agent = operator_pb2.GetStateResponse.Agent
Framework = operator_pb2.GetStateResponse.Framework


def build_state() -> operator_pb2.GetStateResponse:
    async def main() -> operator_pb2.GetStateResponse:
        runtime = MasterRuntime(
            RuntimeConfig(
                core=CoreConfig(validate=True, offer_timeout=30),
                allocation_interval=60,
                allocation_batch=0,
            )
        )
        await runtime.start()
        session = runtime.agents.register(
            AgentSpec("h1", 7000, R("cpus:4;mem:4096"), (("rack", "r1"),))
        )
        agent_id = session.agent_id
        shape = Demand(task_resources=R("cpus:1;mem:1024"), max_tasks=3)
        web = runtime.frameworks.subscribe(
            FrameworkInfo(name="web", weight=2.0, failover_timeout=60),
            shape,
            False,
        )
        await asyncio.sleep(0)
        [offers] = web.channel.drain()
        offer = offers.offers[0]  # type: ignore[union-attr]
        runtime.frameworks.accept(
            web.framework_id, [offer.offer_id], [TaskLaunch("t1", "t1", R("cpus:1;mem:1024"))], 0
        )
        runtime.agents.update_statuses(
            agent_id,
            session.channel,
            [
                (
                    web.framework_id,
                    StatusUpdate("t1", agent_id, TaskState.RUNNING, uuid=b"u" * 16, source="AGENT"),
                    TaskState.RUNNING,
                )
            ],
        )
        runtime.frameworks.unsubscribe(
            web.framework_id, web.channel
        )  # disconnected, within failover
        batch = runtime.frameworks.subscribe(
            FrameworkInfo(name="batch", role="analytics"), None, True
        )
        await asyncio.sleep(0)
        runtime.state.counters.tasks_preempted[web.framework_id] = 2  # as the rebalancer counts
        state = state_to_pb(runtime.operator.snapshot())
        del batch
        await runtime.stop()
        return state

    return asyncio.run(main())


def test_state_has_everything_status_prints() -> None:
    state = build_state()
    assert state.policy == "drf" and state.version and state.started_at.seconds > 0
    [agent] = state.agents
    assert agent.state == Agent.STATE_ACTIVE and agent.reachable
    assert agent.agent_info.hostname == "h1" and agent.agent_info.attributes[0].name == "rack"
    assert resources(agent.used, "used") == R("cpus:1;mem:1024")
    assert resources(agent.free, "free") == R("cpus:3;mem:3072")  # the rest is free again
    assert agent.last_heartbeat_at.seconds > 0

    by_name = {f.framework_info.name: f for f in state.frameworks}
    web, batch = by_name["web"], by_name["batch"]
    assert web.state == Framework.STATE_DISCONNECTED and web.HasField("failover_deadline")
    assert web.weight == 2.0 and web.dominant_share == pytest.approx(0.25)
    assert web.dominant_resource in ("cpus", "mem")
    assert resources(web.allocated, "a") == R("cpus:1;mem:1024") and not web.offered.items
    assert [(c.state, c.count) for c in web.task_counts] == [(common_pb2.TASK_STATE_RUNNING, 1)]
    assert web.demand.max_tasks == 3
    assert (web.preempted, batch.preempted) == (2, 0)  # status --json's, as the HTTP API's
    assert batch.state == Framework.STATE_SUPPRESSED and batch.framework_info.role == "analytics"
    assert not batch.HasField("demand") and not batch.HasField("failover_deadline")
    assert batch.dominant_share == 0 and batch.dominant_resource == ""

    [task] = state.tasks
    assert task.info.task_id == "t1" and task.status.state == common_pb2.TASK_STATE_RUNNING
    assert task.info.name == "t1"
    assert not state.offers
    assert resources(state.total, "t") == R("cpus:4;mem:4096")
    assert resources(state.used, "u") + resources(state.free, "f") == R("cpus:4;mem:4096")
