"""``OperatorCalls.deactivate_agents`` / ``reactivate_agents`` without gRPC (operator maintenance).

Runtimes are built with ``validate=True`` and long timers (``scenario`` of the cycle tests), so
only the calls under test change anything.
"""

from __future__ import annotations

import pytest
from test_runtime_cycle import R, agent, framework, offers_of, scenario, settle, spec

from master.core import LaunchTasks
from master.core.errors import CoreError, InvalidArgument, NotFound
from master.model import AgentSpec, RescindEvent
from master.runtime import MasterRuntime
from master.service.state import state_to_pb


def _agent_states(runtime: MasterRuntime) -> dict[str, str]:
    return {view.agent_id: view.state for view in runtime.operator.snapshot().agents}


def test_deactivate_rescinds_offers_keeps_the_pool_and_offers_nothing() -> None:
    async def test(runtime: MasterRuntime) -> None:
        agent_id, _ = agent(runtime, "cpus:4;mem:8192")
        _, events = framework(runtime)
        await settle()
        (offer,) = offers_of(events)
        runtime.operator.deactivate_agents([agent_id])
        await settle()
        rescinds = [e for e in events.drain() if isinstance(e, RescindEvent)]
        assert [r.offer_id for r in rescinds] == [offer.offer_id]
        snapshot = runtime.operator.snapshot()
        assert _agent_states(runtime) == {agent_id: "DEACTIVATED"}
        assert snapshot.total == R("cpus:4;mem:8192")
        assert snapshot.free == R("cpus:4;mem:8192") and not snapshot.offers
        wire = state_to_pb(snapshot)
        assert wire.agents[0].reachable
        assert wire.agents[0].state == wire.agents[0].STATE_DEACTIVATED
        runtime.dispatcher.request_allocation()
        await settle()
        assert offers_of(events) == []

    scenario(test)


def test_tasks_on_a_deactivated_agent_keep_running() -> None:
    async def test(runtime: MasterRuntime) -> None:
        agent_id, commands = agent(runtime, "cpus:4;mem:8192")
        fw, events = framework(runtime)
        await settle()
        (offer,) = offers_of(events)
        runtime.frameworks.accept(fw, [offer.offer_id], [spec("t1", "cpus:1;mem:128")], 0.0)
        assert any(isinstance(c, LaunchTasks) for c in commands.drain())
        await settle()
        offers_of(events)  # the rest of the agent, offered again
        runtime.operator.deactivate_agents([agent_id])
        await settle()
        (view,) = runtime.operator.snapshot().agents
        assert view.used == R("cpus:1;mem:128") and view.offered == R("")
        assert [t.launch.task_id for t in runtime.operator.snapshot().tasks] == ["t1"]

    scenario(test)


def test_reactivating_several_agents_costs_one_allocation_run_that_sees_them_all() -> None:
    async def test(runtime: MasterRuntime) -> None:
        first, _ = agent(runtime, "cpus:4;mem:8192")
        second, _ = agent(runtime, "cpus:2;mem:4096")
        runtime.operator.deactivate_agents([first, second])
        _, events = framework(runtime)
        await settle()
        assert offers_of(events) == []
        before = runtime.state.counters.allocation_runs
        runtime.operator.reactivate_agents([first, second, first])
        await settle()
        assert runtime.state.counters.allocation_runs == before + 1
        assert sorted(o.agent_id for o in offers_of(events)) == sorted([first, second])
        assert set(_agent_states(runtime).values()) == {"ACTIVE"}

    scenario(test)


@pytest.mark.parametrize("method", ["deactivate_agents", "reactivate_agents"])
@pytest.mark.parametrize(
    ("ids", "error"),
    [([], InvalidArgument), (["KNOWN", ""], InvalidArgument), (["KNOWN", "ag-nope"], NotFound)],
    ids=["empty-list", "empty-id", "unknown-id"],
)
def test_bad_ids_are_refused_and_change_no_agent(
    method: str, ids: list[str], error: type[CoreError]
) -> None:
    async def test(runtime: MasterRuntime) -> None:
        known, _ = agent(runtime)
        other, _ = agent(runtime)
        runtime.operator.deactivate_agents([other])
        before = _agent_states(runtime)
        with pytest.raises(error):
            getattr(runtime.operator, method)([known if i == "KNOWN" else i for i in ids])
        assert _agent_states(runtime) == before

    scenario(test)


def test_an_agent_out_of_the_pool_is_not_found() -> None:
    async def test(runtime: MasterRuntime) -> None:
        agent_id = runtime.agents.register(AgentSpec("h", 0, R("cpus:1;mem:1"))).agent_id
        runtime.loss.unreachable([runtime.state.agents[agent_id]])  # left the pool
        with pytest.raises(NotFound, match="not connected"):
            runtime.operator.deactivate_agents([agent_id])

    scenario(test)


def test_calls_are_idempotent() -> None:
    async def test(runtime: MasterRuntime) -> None:
        agent_id, _ = agent(runtime)
        runtime.operator.reactivate_agents([agent_id])
        runtime.operator.deactivate_agents([agent_id])
        runtime.operator.deactivate_agents([agent_id])
        assert _agent_states(runtime) == {agent_id: "DEACTIVATED"}
        runtime.operator.reactivate_agents([agent_id])
        assert _agent_states(runtime) == {agent_id: "ACTIVE"}

    scenario(test)
