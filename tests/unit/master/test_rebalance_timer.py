"""``RebalanceTimer``: the live master's rebalancer decisions, without sockets.

A runtime holds DRFH Fig. 1 stuck away from DRFH's 10 and 10 (u1 5 tasks on s1, u2 one on s1 and
10 on s2; placed by the real allocator: both frameworks, then s1, then s2, every offer accepted
whole, tasks that never end). The timer's checks run on the loop (``offload=False``) and are
driven by hand.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from fairshare.resources import ResourceVector
from fairshare.settings import SettingsError, add_setting_flags
from fairshare.task_states import TaskReason, TaskState

from master.config import MASTER_SETTINGS, load_config
from master.core import CoreConfig, KillTask, TaskLaunch
from master.core.rebalance import RebalanceDecision
from master.daemon.runtime_config import rebalance_settings
from master.model import AgentSpec, Demand, FrameworkInfo, OffersEvent, StatusUpdate
from master.runtime import MasterRuntime, RuntimeConfig
from master.runtime.rebalance_settings import RebalanceSettings
from master.runtime.rebalancing import RebalanceTimer
from master.runtime.sessions import Channel

R = ResourceVector.parse
SHAPES = {"u1": R("cpus:0.2;mem:1024"), "u2": R("cpus:1;mem:204.8")}
AGENTS = {"s1": "cpus:2;mem:12288", "s2": "cpus:12;mem:2048"}


class Cluster:
    """A runtime with u1, u2 and the agents that joined; tasks accepted and reported RUNNING."""

    def __init__(self, runtime: MasterRuntime, preemptible: bool = True) -> None:
        self.runtime = runtime
        self.preemptible = preemptible
        self.fw: dict[str, tuple[str, Channel[Any]]] = {}
        self.agents: dict[str, tuple[str, Channel[Any]]] = {}
        self.hosts: dict[str, str] = {}  # agent id -> s1/s2
        self.launched = 0

    def subscribe(self, name: str) -> None:
        demand = Demand(task_resources=SHAPES[name], max_tasks=30)
        result = self.runtime.frameworks.subscribe(FrameworkInfo(name=name), demand, False)
        self.fw[name] = (result.framework_id, result.channel)

    def join(self, host: str) -> None:
        session = self.runtime.agents.register(AgentSpec(host, 0, R(AGENTS[host])))
        self.agents[host] = (session.agent_id, session.channel)
        self.hosts[session.agent_id] = host

    async def settle(self) -> None:
        """Accept every offer whole, until none come; launched tasks report RUNNING."""
        for _ in range(20):
            for _ in range(3):
                await asyncio.sleep(0)
            accepted = False
            for name, (fid, channel) in self.fw.items():
                for event in channel.drain():
                    if not isinstance(event, OffersEvent):
                        continue
                    for offer in event.offers:
                        launches = [
                            TaskLaunch(
                                f"{name}-{self.launched + n}",
                                "",
                                SHAPES[name],
                                preemptible=self.preemptible,
                            )
                            for n in range(offer.fair_tasks)
                        ]
                        self.launched += len(launches)
                        self.runtime.frameworks.accept(fid, [offer.offer_id], launches, 0.0)
                        for launch in launches:
                            self.report(fid, offer.agent_id, launch.task_id, TaskState.RUNNING)
                        accepted = accepted or bool(launches)
            for _, channel in self.agents.values():
                channel.drain()
            if not accepted:
                self.runtime.dispatcher.request_allocation()
                for _ in range(3):
                    await asyncio.sleep(0)
                if not any(
                    isinstance(e, OffersEvent) and any(o.fair_tasks for o in e.offers)
                    for _, channel in self.fw.values()
                    for e in channel.drain()
                ):
                    return

    def report(self, fid: str, agent_id: str, task_id: str, state: TaskState) -> None:
        channel = self.runtime.state.agents[agent_id].channel
        assert channel is not None
        status = StatusUpdate(
            task_id,
            agent_id,
            state,
            uuid=f"{task_id}-{state.value}".encode()[:16].ljust(16, b"."),
            source="AGENT",
        )
        self.runtime.agents.update_statuses(agent_id, channel, [(fid, status, state)])

    def layout(self) -> dict[str, dict[str, int]]:
        names = {fid: name for name, (fid, _) in self.fw.items()}
        out: dict[str, dict[str, int]] = {name: {} for name in self.fw}
        for task in self.runtime.state.core.tasks.values():
            per = out[names[task.framework_id]]
            host = self.hosts[task.agent_id]
            per[host] = per.get(host, 0) + 1
        return out


def scenario(test: Callable[[Cluster], Awaitable[None]], preemptible: bool = True) -> None:
    async def main() -> None:
        config = RuntimeConfig(
            core=CoreConfig(validate=True),
            allocation_interval=60.0,
            heartbeat_interval=60.0,
            allocation_batch=0.0,
        )
        runtime = MasterRuntime(config)
        await runtime.start()
        try:
            cluster = Cluster(runtime, preemptible)
            cluster.subscribe("u1")
            cluster.subscribe("u2")
            cluster.join("s1")
            await cluster.settle()
            cluster.join("s2")
            await cluster.settle()
            # u2 took s2 whole and one CPU of s1: u1 is stuck at 5 tasks, DRFH gives it 10
            assert cluster.layout() == {"u1": {"s1": 5}, "u2": {"s1": 1, "s2": 10}}
            await test(cluster)
        finally:
            await runtime.stop()

    asyncio.run(main())


def timer(cluster: Cluster, **knobs: Any) -> RebalanceTimer:
    settings = RebalanceSettings(**{"interval": 1.0, "hysteresis": 3.0, "grace": 2.0, **knobs})
    runtime = cluster.runtime
    return RebalanceTimer(runtime.state, runtime.dispatcher, settings, offload=False)


def kills_sent(cluster: Cluster) -> list[KillTask]:
    return [
        command
        for _, channel in cluster.agents.values()
        for command in channel.drain()
        if isinstance(command, KillTask)
    ]


def test_kills_only_after_the_gap_persisted_then_cools_down() -> None:
    async def test(cluster: Cluster) -> None:
        rebalancer = timer(cluster, max_kills=2)
        assert await rebalancer.tick() == []  # streak 1 of 3
        assert rebalancer.phase == "waiting"
        assert await rebalancer.tick() == []  # streak 2
        killed = await rebalancer.tick()  # streak 3: acting
        assert rebalancer.phase == "acting"
        assert 1 <= len(killed) <= 2
        sent = kills_sent(cluster)
        assert [(k.framework_id, k.task_id) for k in sent] == [
            (t.framework_id, t.task_id) for t in killed
        ]
        assert all(k.reason == TaskReason.PREEMPTED and k.grace_period == 2.0 for k in sent)
        state = cluster.runtime.state
        for task in killed:
            assert state.tasks.get(task.framework_id, task.task_id).state is TaskState.KILLING
        assert sum(state.counters.tasks_preempted.values()) == len(killed)
        # cooldown: ceil((grace 2 + settle 2) / interval 1) = 4 checks without kills
        for _ in range(4):
            assert await rebalancer.tick() == []
            assert rebalancer.phase == "cooling"
        assert kills_sent(cluster) == []

    scenario(test)


def test_the_kills_move_the_cluster_to_drfh_and_then_stop() -> None:
    async def test(cluster: Cluster) -> None:
        rebalancer = timer(cluster, hysteresis=0.0)
        total = 0
        for _ in range(40):
            killed = await rebalancer.tick()
            total += len(killed)
            for task in killed:  # the agent ends the task; the frameworks keep 30 wanted
                cluster.report(task.framework_id, task.agent_id, task.task_id, TaskState.KILLED)
            cluster.runtime.dispatcher.request_allocation()
            await cluster.settle()
        assert cluster.layout() == {"u1": {"s1": 10}, "u2": {"s2": 10}}
        assert rebalancer.phase == "idle"
        assert total == sum(cluster.runtime.state.counters.tasks_preempted.values())
        assert total == 1  # u2's task on s1 makes room for 5 of u1

    scenario(test)


def test_tasks_not_declared_preemptible_are_never_killed() -> None:
    async def test(cluster: Cluster) -> None:
        rebalancer = timer(cluster, hysteresis=0.0)
        for _ in range(6):
            assert await rebalancer.tick() == []
        # the target pins the tasks that may not move: from there the layout is DRFH's already
        assert rebalancer.phase == "idle" and rebalancer.last is not None
        assert rebalancer.last.gap == 0
        assert kills_sent(cluster) == []

    scenario(test, preemptible=False)


def test_a_victim_that_changed_since_the_check_is_left_alone() -> None:
    async def test(cluster: Cluster) -> None:
        rebalancer = timer(cluster, hysteresis=0.0)
        view = rebalancer.view().ordered()
        victim = next(t for t in view.tasks if t.agent_id == cluster.agents["s1"][0])
        fid = victim.framework_id
        cluster.runtime.frameworks.kill(fid, victim.task_id)  # its framework kills it first
        kills_sent(cluster)
        decision = RebalanceDecision((victim,), rebalancer.rebalancer.check(view).gap, "acting", 1)
        assert rebalancer.apply(decision) == []
        assert kills_sent(cluster) == []
        assert cluster.runtime.state.counters.tasks_preempted == {}

    scenario(test)


def test_no_check_while_draining() -> None:
    async def test(cluster: Cluster) -> None:
        rebalancer = timer(cluster, hysteresis=0.0)
        cluster.runtime.drain()
        assert await rebalancer.tick() == []
        assert rebalancer.last is None

    scenario(test)


def test_durations_become_numbers_of_checks() -> None:
    planner = RebalanceSettings(interval=5.0, hysteresis=15.0, grace=3.0, threshold=0.1).planner()
    assert (planner.patience, planner.cooldown, planner.max_kills) == (3, 1, 4)
    assert (
        float(planner.threshold) == pytest.approx(0.1) and planner.release == planner.threshold / 2
    )
    assert RebalanceSettings(interval=2.0, hysteresis=0.0, grace=10.0).planner().patience == 1
    assert RebalanceSettings(interval=2.0, hysteresis=0.0, grace=10.0).planner().cooldown == 6
    with pytest.raises(ValueError):
        RebalanceSettings(max_kills=0)


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_setting_flags(parser, MASTER_SETTINGS)
    return parser.parse_args(list(argv))


def test_master_settings_of_the_rebalancer() -> None:
    assert rebalance_settings(load_config(_args(), {})) is None  # off by default
    config = load_config(
        _args("--rebalance", "--rebalance-interval", "2s", "--rebalance-max-kills", "3"),
        {
            "FAIRSHARE_MASTER_REBALANCE_GRACE": "500ms",
            "FAIRSHARE_MASTER_REBALANCE_THRESHOLD": "0.2",
        },
    )
    assert rebalance_settings(config) == RebalanceSettings(
        interval=2.0, threshold=0.2, hysteresis=15.0, max_kills=3, grace=0.5
    )
    assert load_config(_args(), {"FAIRSHARE_MASTER_REBALANCE": "yes"}).rebalance
    with pytest.raises(SettingsError, match=r"--rebalance: .*--policy drf"):
        load_config(_args("--rebalance", "--policy", "pf"), {})
    with pytest.raises(SettingsError, match="rebalance"):
        load_config(_args("--rebalance-threshold", "1.5"), {})
