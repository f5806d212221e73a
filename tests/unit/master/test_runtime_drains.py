"""``OperatorCalls.drain_agent`` without gRPC (issue 24, item 11): refusals change nothing, a
drain rescinds the agent's offers, kills its tasks at the deadline (grace 0: at once) and marks
it DRAINED once they ended; re-draining sets a new deadline; reactivating ends a drain.

Runtimes as in the cycle tests (long timers); the drain's own timer is stepped by hand
(``drains.check``)."""

from __future__ import annotations

import asyncio

import pytest
from pool_summary_check import assert_summary_matches
from test_runtime_cycle import (
    agent,
    drain,
    framework,
    offers_of,
    report,
    running,
    scenario,
    settle,
    spec,
)

from master.acl import parse
from master.core import KillTask, TaskState
from master.core.errors import InvalidArgument, NotFound, PermissionDenied
from master.model import RescindEvent
from master.runtime import MasterRuntime
from master.runtime.authority import Authority
from master.service.state import state_to_pb


def _states(runtime: MasterRuntime) -> dict[str, str]:
    return {view.agent_id: view.state for view in runtime.operator.snapshot().agents}


def test_bad_drains_are_refused_and_change_nothing() -> None:
    async def test(runtime: MasterRuntime) -> None:
        agent_id, _ = agent(runtime)
        writes = runtime.state.registry.writes
        with pytest.raises(InvalidArgument, match="agent_id"):
            runtime.operator.drain_agent("", None)
        with pytest.raises(InvalidArgument, match="deadline"):
            runtime.operator.drain_agent(agent_id, -1.0)
        with pytest.raises(InvalidArgument, match="deadline"):
            runtime.operator.drain_agent(agent_id, 1e12)
        with pytest.raises(NotFound, match="not connected"):
            runtime.operator.drain_agent("nosuch", 10.0)
        assert runtime.state.registry.writes == writes
        assert _states(runtime) == {agent_id: "ACTIVE"}

    scenario(test)


def test_an_unreachable_or_removed_agent_cannot_be_drained() -> None:
    async def test(runtime: MasterRuntime) -> None:
        agent_id, _ = agent(runtime, "cpus:1;mem:128")
        await asyncio.sleep(0.4)  # unheard: unreachable
        assert _states(runtime) == {agent_id: "UNREACHABLE"}
        with pytest.raises(NotFound, match="not connected"):
            runtime.operator.drain_agent(agent_id, None)
        runtime.operator.remove_agent(agent_id)
        with pytest.raises(NotFound, match="removed"):
            runtime.operator.drain_agent(agent_id, None)
        assert runtime.state.registry.agents[agent_id].drain is None

    scenario(test, agent_timeout=0.2)


def test_a_drain_rescinds_kills_at_the_deadline_then_drained() -> None:
    async def test(runtime: MasterRuntime) -> None:
        fw, events = framework(runtime)
        agent_id, commands = agent(runtime, "cpus:2;mem:256")
        await settle()
        [offer] = offers_of(events)
        runtime.frameworks.accept(fw, [offer.offer_id], [spec("t", "cpus:1;mem:128")], None)
        drain(commands)
        report(runtime, agent_id, fw, running("t", agent_id), TaskState.RUNNING)
        runtime.frameworks.revive(fw)
        runtime.dispatcher.request_allocation()
        await settle()
        [rest] = offers_of(events)  # the rest of the agent, offered again
        recorded = runtime.operator.drain_agent(agent_id, 3600.0)
        assert recorded.state == "DRAINING" and recorded.deadline is not None
        await settle()
        rescinded = [e.offer_id for e in drain(events) if isinstance(e, RescindEvent)]
        assert rescinded == [rest.offer_id]
        runtime.operator.drains.check()  # before the deadline: nothing killed
        assert drain(commands) == []
        wire = state_to_pb(runtime.operator.snapshot())
        assert wire.agents[0].state == wire.agents[0].STATE_DRAINING
        assert wire.agents[0].HasField("drain_deadline") and wire.agents[0].reachable
        again = runtime.operator.drain_agent(agent_id, 0.0)  # a new deadline: now
        assert again.started_at == recorded.started_at and again.deadline is not None
        assert drain(commands) == [KillTask(agent_id, fw, "t")]
        runtime.operator.drains.check()
        assert drain(commands) == []  # KILLING: not killed twice
        assert _states(runtime) == {agent_id: "DRAINING"}
        assert_summary_matches(runtime)
        killed = running("t", agent_id, b"k" * 16, TaskState.KILLED)
        report(runtime, agent_id, fw, killed, TaskState.KILLED)
        runtime.operator.drains.check()
        assert _states(runtime) == {agent_id: "DRAINED"}
        recorded_drain = runtime.state.registry.agents[agent_id].drain
        assert recorded_drain is not None and recorded_drain.state == "DRAINED"
        await settle()
        runtime.dispatcher.request_allocation()
        await settle()
        assert offers_of(events) == []  # drained: offered to nobody
        assert runtime.operator.drain_agent(agent_id, 5.0).state == "DRAINED"  # unchanged
        runtime.operator.reactivate_agents([agent_id])
        await settle()
        assert _states(runtime) == {agent_id: "ACTIVE"}
        assert runtime.state.registry.agents[agent_id].drain is None
        assert offers_of(events)

    scenario(test)


def test_an_idle_agent_is_drained_at_once() -> None:
    async def test(runtime: MasterRuntime) -> None:
        agent_id, _ = agent(runtime)
        assert runtime.operator.drain_agent(agent_id, None).state == "DRAINED"
        assert _states(runtime) == {agent_id: "DRAINED"}

    scenario(test)


def test_draining_needs_the_acls_maintain_agents() -> None:
    async def test(runtime: MasterRuntime) -> None:
        agent_id, _ = agent(runtime)
        acl = parse({"maintain_agents": [{"principals": ["ops"]}]}, "acls.toml")
        runtime.state.authority = Authority(acl, authenticated=True)
        refusal = r"no rule of acls\.toml lets bob maintain_agents"
        with pytest.raises(PermissionDenied, match=refusal):
            runtime.operator.drain_agent(agent_id, 60.0, "bob")
        assert _states(runtime) == {agent_id: "ACTIVE"}
        assert runtime.operator.drain_agent(agent_id, 60.0, "ops").state == "DRAINED"

    scenario(test)
