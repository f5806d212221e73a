"""``MasterRuntime`` without gRPC: the offer cycle, acknowledgements, failover, draining.

Each test runs one asyncio scenario against a runtime built with ``validate=True`` (the core
checks its invariants after every change) and long timers, so only the calls under test change
anything. Channels are read directly: what a stream handler would write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from fairshare.resources import ResourceVector
from fairshare.task_states import TaskReason, TaskState
from pool_summary_check import assert_summary_matches

from master.core import CoreConfig, KillTask, LaunchTasks, TaskLaunch
from master.core.errors import FailedPrecondition, InvalidArgument, NotFound
from master.model import (
    AckCommand,
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
from master.runtime import MasterRuntime, RuntimeConfig, Unavailable
from master.runtime.sessions import Channel

R = ResourceVector.parse
UUID = b"u" * 16


def scenario(test: Callable[[MasterRuntime], Awaitable[None]], **config: Any) -> None:
    settings: dict[str, Any] = {
        "allocation_interval": 60.0,
        "heartbeat_interval": 60.0,
        "allocation_batch": 0.0,
    }
    core = CoreConfig(validate=True, offer_timeout=config.pop("offer_timeout", None))
    settings.update(config)

    async def main() -> None:
        runtime = MasterRuntime(RuntimeConfig(core=core, **settings))
        await runtime.start()
        try:
            await test(runtime)
        finally:
            await runtime.stop()

    asyncio.run(main())


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


def drain(channel: Channel[Any]) -> list[Any]:
    return channel.drain()


def last(channel: Channel[Any]) -> Any:
    """The last queued item (a closed channel's StreamEnd)."""
    item = None
    while (next_item := channel.get_nowait()) is not None:
        item = next_item
    return item


def agent(runtime: MasterRuntime, resources: str = "cpus:4;mem:8192") -> tuple[str, Channel[Any]]:
    session = runtime.agents.register(AgentSpec("h", 0, R(resources)))
    return session.agent_id, session.channel


def report(
    runtime: MasterRuntime, agent_id: str, fw: str, status: StatusUpdate, latest: TaskState
) -> None:
    """One status update on the agent's open stream."""
    channel = runtime.state.agents[agent_id].channel
    assert channel is not None
    runtime.agents.update_statuses(agent_id, channel, [(fw, status, latest)])


def framework(runtime: MasterRuntime, name: str = "fw", **kw: Any) -> tuple[str, Channel[Any]]:
    demand = kw.pop("demand", None)
    result = runtime.frameworks.subscribe(FrameworkInfo(name=name, **kw), demand, False)
    return result.framework_id, result.channel


def offers_of(channel: Channel[Any]) -> list[Any]:
    return [o for e in drain(channel) if isinstance(e, OffersEvent) for o in e.offers]


def spec(task_id: str, resources: str) -> TaskLaunch:
    return TaskLaunch(task_id, task_id, R(resources), details=TaskDetails(duration=1.0))


def running(
    task_id: str, agent_id: str, uuid: bytes = UUID, state: str = TaskState.RUNNING
) -> StatusUpdate:
    return StatusUpdate(task_id, agent_id, state, uuid=uuid, source="AGENT")


def test_allocation_triggers_are_merged_into_one_run() -> None:
    async def test(runtime: MasterRuntime) -> None:
        await settle()
        before = runtime.state.counters.allocation_runs
        for _ in range(10):
            runtime.dispatcher.request_allocation()
        await settle()
        assert runtime.state.counters.allocation_runs == before + 1

    scenario(test)


def test_a_batch_window_merges_triggers_spread_over_time() -> None:
    async def test(runtime: MasterRuntime) -> None:
        await asyncio.sleep(0.05)
        before = runtime.state.counters.allocation_runs
        for _ in range(5):
            runtime.dispatcher.request_allocation()
            await asyncio.sleep(0.002)
        await asyncio.sleep(0.05)
        assert runtime.state.counters.allocation_runs == before + 1

    scenario(test, allocation_batch=0.02)


def test_drf_offers_accept_launch_update_and_ack() -> None:
    async def test(runtime: MasterRuntime) -> None:
        a, a_events = framework(
            runtime, "A", demand=Demand(task_resources=R("cpus:1;mem:4096"), max_tasks=20)
        )
        _, b_events = framework(
            runtime, "B", demand=Demand(task_resources=R("cpus:3;mem:1024"), max_tasks=20)
        )
        agent_id, commands = agent(runtime, "cpus:9;mem:18432")
        await settle()
        [offer_a] = offers_of(a_events)
        [offer_b] = offers_of(b_events)
        assert (offer_a.fair_tasks, offer_a.resources) == (3, R("cpus:3;mem:12288"))
        assert (offer_b.fair_tasks, offer_b.resources) == (2, R("cpus:6;mem:2048"))

        runtime.frameworks.accept(
            a, [offer_a.offer_id], [spec(f"a{i}", "cpus:1;mem:4096") for i in range(3)], None
        )
        [launch] = drain(commands)
        assert isinstance(launch, LaunchTasks) and launch.framework_id == a
        assert launch.agent_id == agent_id  # the core's own message, sent as it is
        assert [t.name for t in launch.tasks] == ["a0", "a1", "a2"]
        assert all(t.details == TaskDetails(duration=1.0) for t in launch.tasks)

        report(runtime, agent_id, a, running("a0", agent_id), TaskState.RUNNING)
        [update] = drain(a_events)
        assert isinstance(update, UpdateEvent) and update.status.uuid == UUID
        runtime.frameworks.acknowledge(a, agent_id, "a0", UUID)
        assert drain(commands) == [AckCommand(a, "a0", UUID)]
        runtime.frameworks.acknowledge(a, agent_id, "a0", UUID)  # duplicate: fine, nothing sent
        assert drain(commands) == []
        with pytest.raises(NotFound):
            runtime.frameworks.acknowledge(a, agent_id, "a0", b"v" * 16)

        snapshot = runtime.operator.snapshot()
        views = {f.spec.name: f for f in snapshot.frameworks}
        assert views["A"].dominant_share == pytest.approx(2 / 3)
        assert views["A"].task_counts == ((TaskState.RUNNING, 1), (TaskState.STAGING, 2))
        assert views["B"].offered == R("cpus:6;mem:2048") and views["B"].dominant_resource == "cpus"
        [view] = snapshot.agents
        assert view.free + view.offered + view.used == R("cpus:9;mem:18432")
        assert snapshot.free + snapshot.offered + snapshot.used == snapshot.total
        # the metrics and the dashboard's history: the same figures, counted without views
        assert_summary_matches(runtime)
        assert runtime.operator.pool_summary().used == R("cpus:3;mem:12288")

    scenario(test)


def test_killing_is_acknowledged_by_the_master_without_the_capability() -> None:
    async def test(runtime: MasterRuntime) -> None:
        fw, events = framework(runtime)
        agent_id, commands = agent(runtime, "cpus:1;mem:128")
        await settle()
        [offer] = offers_of(events)
        runtime.frameworks.accept(fw, [offer.offer_id], [spec("t", "cpus:1;mem:128")], None)
        drain(commands)
        runtime.frameworks.kill(fw, "t")
        assert drain(commands) == [KillTask(agent_id, fw, "t")]
        report(
            runtime,
            agent_id,
            fw,
            running("t", agent_id, state=TaskState.KILLING),
            TaskState.KILLING,
        )
        assert drain(commands) == [AckCommand(fw, "t", UUID)]  # acked for the framework
        assert drain(events) == []  # not forwarded
        assert runtime.operator.snapshot().tasks[0].status.state == TaskState.KILLING
        report(
            runtime,
            agent_id,
            fw,
            running("t", agent_id, b"k" * 16, TaskState.KILLED),
            TaskState.KILLED,
        )
        [killed] = drain(events)
        assert killed.status.state == TaskState.KILLED
        await settle()
        [again] = offers_of(events)  # resources came back
        assert again.resources == R("cpus:1;mem:128")

    scenario(test)


def test_updates_of_removed_frameworks_are_acknowledged_by_the_master() -> None:
    async def test(runtime: MasterRuntime) -> None:
        fw, events = framework(runtime)
        agent_id, commands = agent(runtime, "cpus:1;mem:128")
        await settle()
        [offer] = offers_of(events)
        runtime.frameworks.accept(fw, [offer.offer_id], [spec("t", "cpus:1;mem:128")], None)
        drain(commands)
        runtime.frameworks.teardown(fw)
        assert drain(commands) == [KillTask(agent_id, fw, "t")]
        assert isinstance(drain(events)[-1], ErrorEvent)
        report(
            runtime, agent_id, fw, running("t", agent_id, state=TaskState.KILLED), TaskState.KILLED
        )
        assert drain(commands) == [AckCommand(fw, "t", UUID)]
        with pytest.raises(NotFound, match="removed"):
            runtime.frameworks.revive(fw)

    scenario(test)


def test_failover_keeps_the_framework_until_its_timeout() -> None:
    async def test(runtime: MasterRuntime) -> None:
        fw, events = framework(runtime, failover_timeout=0.05)
        agent_id, _ = agent(runtime)
        await settle()
        [offer] = offers_of(events)
        runtime.frameworks.unsubscribe(fw, events)
        with pytest.raises(FailedPrecondition):
            runtime.frameworks.revive(fw)
        assert runtime.operator.snapshot().frameworks[0].state == "DISCONNECTED"
        assert not runtime.state.core.offers  # its offer was rescinded
        back = runtime.frameworks.subscribe(
            FrameworkInfo(framework_id=fw, name="fw", failover_timeout=0.05), None, False
        )
        assert back.resubscribed
        runtime.frameworks.unsubscribe(fw, back.channel)
        await asyncio.sleep(0.1)
        assert fw not in runtime.state.frameworks and fw in runtime.state.removed_frameworks
        del offer, agent_id

    scenario(test)


def test_resubscribe_checks_before_changing_anything() -> None:
    async def test(runtime: MasterRuntime) -> None:
        fw, events = framework(runtime, "web")
        with pytest.raises(InvalidArgument, match="cannot change"):
            runtime.frameworks.subscribe(FrameworkInfo(framework_id=fw, name="other"), None, False)
        assert not events.closed  # the open stream was not replaced
        with pytest.raises(NotFound):
            runtime.frameworks.subscribe(
                FrameworkInfo(framework_id="fw-unknown", name="web"), None, False
            )
        newer = runtime.frameworks.subscribe(FrameworkInfo(framework_id=fw, name="web"), None, True)
        assert events.closed and isinstance(drain(events)[-1], ErrorEvent)
        assert runtime.operator.snapshot().frameworks[0].state == "SUPPRESSED"
        del newer

    scenario(test)


def test_heartbeats_reach_every_connected_framework() -> None:
    async def test(runtime: MasterRuntime) -> None:
        _, events = framework(runtime)
        await asyncio.sleep(0.08)
        assert any(isinstance(e, HeartbeatEvent) for e in drain(events))

    scenario(test, heartbeat_interval=0.02)


def test_unheard_agent_becomes_unreachable() -> None:
    async def test(runtime: MasterRuntime) -> None:
        fw, events = framework(runtime)
        agent_id, commands = agent(runtime, "cpus:1;mem:128")
        await settle()
        [offer] = offers_of(events)
        runtime.frameworks.accept(fw, [offer.offer_id], [spec("t", "cpus:1;mem:128")], None)
        await asyncio.sleep(0.4)
        got = drain(events)
        lost = [e for e in got if isinstance(e, UpdateEvent)]
        assert [(e.status.state, e.status.reason) for e in lost] == [
            (TaskState.LOST, TaskReason.AGENT_UNREACHABLE)
        ]
        assert any(isinstance(e, FailureEvent) and e.agent_id == agent_id for e in got)
        assert commands.get_nowait() == StreamEnd("NOT_FOUND", commands_end_message())
        view = runtime.operator.snapshot()
        assert [a.state for a in view.agents] == ["UNREACHABLE"] and not view.total
        assert [t.status.state for t in view.tasks] == [TaskState.UNREACHABLE]
        assert_summary_matches(runtime)
        assert runtime.state.registry.agents[agent_id].state == "UNREACHABLE"
        with pytest.raises(NotFound):
            runtime.agents.heard(agent_id, commands)

    scenario(test, agent_timeout=0.2)


def test_unreachable_agent_that_comes_back_rejoins_with_its_tasks() -> None:
    async def test(runtime: MasterRuntime) -> None:
        fw, events = framework(runtime, capabilities=frozenset({"PARTITION_AWARE"}))
        agent_id, _ = agent(runtime, "cpus:2;mem:256")
        await settle()
        [offer] = offers_of(events)
        tasks = [spec("kept", "cpus:1;mem:128"), spec("lost", "cpus:1;mem:128")]
        runtime.frameworks.accept(fw, [offer.offer_id], tasks, None)
        report(runtime, agent_id, fw, running("kept", agent_id), TaskState.RUNNING)
        await asyncio.sleep(0.4)
        assert [e.status.state for e in drain(events) if isinstance(e, UpdateEvent)][-2:] == [
            TaskState.UNREACHABLE,
            TaskState.UNREACHABLE,
        ]
        # The agent comes back running "kept" only: it rejoins, "kept" runs again, "lost" is LOST.
        reported = [(fw, tasks[0], running("kept", agent_id))]
        back = runtime.agents.reregister(agent_id, AgentSpec("h", 0, R("cpus:2;mem:256")), reported)
        updates = [e.status for e in drain(events) if isinstance(e, UpdateEvent)]
        assert [(u.task_id, u.state, u.reason) for u in updates] == [
            ("kept", TaskState.RUNNING, TaskReason.RECONCILIATION),
            ("lost", TaskState.LOST, TaskReason.AGENT_RESTARTED),
        ]
        view = runtime.operator.snapshot()
        assert [a.state for a in view.agents] == ["ACTIVE"]
        assert [(t.launch.task_id, t.status.state) for t in view.tasks] == [
            ("kept", TaskState.RUNNING)
        ]
        assert runtime.state.core.agents[agent_id].free == R("cpus:1;mem:128")
        assert_summary_matches(runtime)
        assert runtime.state.registry.agents[agent_id].state == "ADMITTED"
        assert back.master_id == runtime.state.master_id
        runtime.agents.heard(agent_id, back.channel)  # a live registration again

    scenario(test, agent_timeout=0.2)


def test_agent_the_registry_does_not_know_must_register_afresh() -> None:
    async def test(runtime: MasterRuntime) -> None:
        with pytest.raises(NotFound):  # agent.proto: NOT_FOUND sends the agent to reregister
            runtime.agents.heard("ag-unknown", Channel())
        with pytest.raises(FailedPrecondition):
            runtime.agents.reregister("ag-unknown", AgentSpec("h", 0, R("cpus:1")), [])

    scenario(test)


def commands_end_message() -> str:
    return "the agent was marked unreachable: reregister"


def test_reregister_reconciles_tasks() -> None:
    async def test(runtime: MasterRuntime) -> None:
        fw, events = framework(runtime, capabilities=frozenset({"PARTITION_AWARE"}))
        agent_id, commands = agent(runtime, "cpus:2;mem:256")
        await settle()
        [offer] = offers_of(events)
        tasks = [spec("staged", "cpus:1;mem:128"), spec("ran", "cpus:1;mem:128")]
        runtime.frameworks.accept(fw, [offer.offer_id], tasks, None)
        report(runtime, agent_id, fw, running("ran", agent_id), TaskState.RUNNING)
        drain(events)
        runtime.agents.disconnect(agent_id, commands)  # the launch was taken: outbox is empty
        reported = [
            (fw, spec("ran", "cpus:1;mem:128"), running("ran", agent_id)),
            ("fw-gone", spec("orphan", "cpus:1"), running("orphan", agent_id)),
        ]
        reopened = runtime.agents.reregister(
            agent_id, AgentSpec("h", 0, R("cpus:2;mem:256")), reported
        ).channel
        [dropped] = [e.status for e in drain(events) if isinstance(e, UpdateEvent)]
        assert (dropped.task_id, dropped.state, dropped.reason) == (
            "staged",
            TaskState.DROPPED,
            TaskReason.AGENT_DISCONNECTED,
        )
        assert drain(reopened) == [KillTask(agent_id, "fw-gone", "orphan")]

    scenario(test)


def test_calls_need_an_open_stream_and_a_known_id() -> None:
    async def test(runtime: MasterRuntime) -> None:
        with pytest.raises(InvalidArgument):
            runtime.frameworks.revive("")
        with pytest.raises(NotFound):
            runtime.frameworks.suppress("fw-nope")
        with pytest.raises(NotFound):
            runtime.agents.heard("ag-nope", Channel())
        with pytest.raises(InvalidArgument):
            runtime.agents.register(AgentSpec("h", 0, ResourceVector()))

    scenario(test)


def test_drain_ends_streams_with_unavailable_and_removes_nothing() -> None:
    async def test(runtime: MasterRuntime) -> None:
        fw, events = framework(runtime)
        agent_id, commands = agent(runtime)
        await settle()
        runtime.drain()
        assert events.closed and commands.closed
        assert last(events) == StreamEnd("UNAVAILABLE", "the master is shutting down")
        assert last(commands) == StreamEnd("UNAVAILABLE", "the master is shutting down")
        runtime.frameworks.unsubscribe(fw, events)
        runtime.agents.disconnect(agent_id, commands)
        assert fw in runtime.state.frameworks and agent_id in runtime.state.agents
        with pytest.raises(Unavailable):
            framework(runtime, "late")
        before = runtime.state.counters.allocation_runs
        runtime.dispatcher.request_allocation()
        await settle()
        assert runtime.state.counters.allocation_runs == before  # no offers once draining

    scenario(test)


def test_offer_timeout_rescinds_and_reoffers() -> None:
    async def test(runtime: MasterRuntime) -> None:
        fw, events = framework(runtime)
        agent(runtime, "cpus:1;mem:128")
        await settle()
        [first] = [e for e in drain(events) if isinstance(e, OffersEvent)]
        assert first.expires_at is not None
        await asyncio.sleep(0.15)
        got = drain(events)
        assert RescindEvent(first.offers[0].offer_id, "offer timed out") in got
        assert any(isinstance(e, OffersEvent) for e in got)
        del fw

    scenario(test, offer_timeout=0.05)
