"""Agent liveness: the pure ``Liveness`` deadlines, and the runtime's batched expiry, interval
growth and O(1) recovery accounting (``AgentLoss``, ``AgentCalls``, ``Recovery``)."""

from __future__ import annotations

import asyncio

from test_runtime_cycle import R, agent, drain, scenario

from master.model import AgentSettings, AgentSpec, FailureEvent, FrameworkInfo, StreamEnd
from master.runtime import MasterRuntime
from master.runtime.agent_loss import LIVENESS_BATCH
from master.runtime.liveness import (
    HEARTBEAT_BUDGET,
    MISSED_HEARTBEATS,
    Liveness,
    base_interval,
    reconnect_jitter,
)


def test_the_interval_scales_with_the_cluster_and_never_shrinks() -> None:
    liveness = Liveness(agent_timeout=15.0)
    assert liveness.interval == base_interval(15.0) == 5.0
    assert liveness.timeout == 15.0
    assert not liveness.resize(2_500)  # 5 s is what 2,500 agents need
    assert liveness.resize(10_000)
    assert liveness.interval == 10_000 / HEARTBEAT_BUDGET == 20.0
    assert liveness.timeout == MISSED_HEARTBEATS * 20.0 == 60.0
    assert not liveness.resize(11_000)  # less than a quarter more: not worth telling
    assert not liveness.resize(100) and liveness.interval == 20.0  # never shrinks
    assert base_interval(3.0) == 1.0
    assert reconnect_jitter(10_000) == 2.0


def test_a_grown_interval_extends_the_deadline_of_every_agent_at_once() -> None:
    liveness = Liveness(agent_timeout=15.0)
    liveness.heard("early", 0.0)  # told 5 s, due at 15 s
    assert liveness.late(15.5) == ["early"]
    liveness.resize(10_000)  # told 20 s now: it may stay silent 60 s since it was last heard
    assert liveness.late(15.5) == [] and liveness.late(60.5) == ["early"]
    assert liveness.next_deadline() == 60.0


def test_late_agents_come_off_the_front_in_deadline_order() -> None:
    liveness = Liveness(agent_timeout=3.0)
    for index, agent_id in enumerate(["a", "b", "c", "d"]):
        liveness.heard(agent_id, float(index))  # deadlines 3, 4, 5, 6
    liveness.heard("a", 4.0)  # heard again: now due at 7, at the back
    assert liveness.late(5.5) == ["b", "c"]
    assert liveness.late(5.5, limit=1) == ["b"]
    assert liveness.late(100.0) == ["b", "c", "d", "a"]
    liveness.forget("b")
    assert liveness.late(100.0) == ["c", "d", "a"] and "b" not in liveness
    assert liveness.next_deadline() == 5.0


def test_a_closed_stream_is_due_after_agent_timeout_and_expire_is_due_now() -> None:
    liveness = Liveness(agent_timeout=15.0)
    liveness.resize(10_000)  # open streams may stay silent 60 s
    liveness.heard("open", 0.0)
    liveness.heard("gone", 0.0)
    liveness.stream_closed("gone", 1.0)  # due at 16, not 60
    assert liveness.late(20.0) == ["gone"]
    liveness.heard("gone", 20.0)  # reconnected: the open-stream deadline again
    assert liveness.late(30.0) == []
    liveness.expire("missing")  # a recovering agent the recovery gave up on
    assert liveness.late(0.0) == ["missing"]
    liveness.heard("missing", 0.0)  # ... unless it came back in time
    assert liveness.late(0.0) == []


def test_many_late_agents_are_expired_in_batches_spread_over_loop_steps() -> None:
    async def test(runtime: MasterRuntime) -> None:
        subscribed = runtime.frameworks.subscribe(FrameworkInfo(name="fw"), None, True)
        agents = [agent(runtime, "cpus:1;mem:64") for _ in range(LIVENESS_BATCH * 2 + 10)]
        channels = [channel for _, channel in agents]
        drain(subscribed.channel)
        long_ago = runtime.state.now() - 1000.0
        for agent_id, _ in agents:  # every agent was last heard long ago: all late at once
            runtime.state.liveness.heard(agent_id, long_ago)
        runtime.loss.check_liveness()  # what the periodic check (every second) does
        lost = [e for e in drain(subscribed.channel) if isinstance(e, FailureEvent)]
        assert len(lost) == LIVENESS_BATCH  # one batch now ...
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        lost += [e for e in drain(subscribed.channel) if isinstance(e, FailureEvent)]
        assert LIVENESS_BATCH < len(lost) <= 2 * LIVENESS_BATCH + 10  # ... the next right after
        for _ in range(5):
            await asyncio.sleep(0)
        lost += [e for e in drain(subscribed.channel) if isinstance(e, FailureEvent)]
        assert len(lost) == len(channels) and not runtime.state.agents
        ended = [c.get_nowait() for c in channels]
        assert all(e == StreamEnd("NOT_FOUND", e.message) for e in ended if e is not None)
        registry = runtime.state.registry.agents.values()
        assert {entry.state for entry in registry} == {"UNREACHABLE"}

    scenario(test, agent_timeout=60.0)


def test_connected_agents_are_told_when_the_interval_grows() -> None:
    async def test(runtime: MasterRuntime) -> None:
        _, first = agent(runtime, "cpus:1;mem:64")
        assert drain(first) == []
        for _ in range(3):
            agent(runtime, "cpus:1;mem:64")
        told = [e for e in drain(first) if isinstance(e, AgentSettings)]
        assert told and told[-1].heartbeat_interval == runtime.state.liveness.interval
        assert runtime.state.liveness.interval == 4 / HEARTBEAT_BUDGET

    scenario(test, agent_heartbeat_interval=0.001)


def test_recovery_waits_on_a_set_of_agents() -> None:
    async def test(runtime: MasterRuntime) -> None:
        session = runtime.agents.register(AgentSpec("h", 0, R("cpus:1;mem:64")))
        runtime.state.recovering = True
        runtime.state.awaited = {session.agent_id, "ag-other"}
        runtime.recovery.agent_back(session.agent_id)
        assert runtime.state.recovering and runtime.state.awaited == {"ag-other"}
        runtime.recovery.agent_back("ag-other")
        assert not runtime.state.recovering

    scenario(test)
