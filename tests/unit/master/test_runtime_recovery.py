"""A master restart from the registry, in process (the integration tests kill -9 real ones):
frameworks and agents come back from ``registry.sqlite``, nothing is offered until the known
agents reregistered, and the first run after that offers in DRF order."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from fairshare.task_states import TaskState
from pool_summary_check import assert_summary_matches
from test_runtime_cycle import (
    AgentSpec,
    FrameworkInfo,
    MasterRuntime,
    OffersEvent,
    R,
    RuntimeConfig,
    UpdateEvent,
    drain,
    offers_of,
    running,
    settle,
    spec,
)

from master.core import CoreConfig
from master.core.errors import NotFound
from master.model import Demand
from master.registry import SqliteRegistry
from master.runtime.sessions import Channel

CONFIG = RuntimeConfig(
    core=CoreConfig(validate=True),
    allocation_interval=60.0,
    heartbeat_interval=60.0,
    allocation_batch=0.0,
    reregistration_timeout=5.0,
)
SMALL = R("cpus:1;mem:128")


async def first_life(work_dir: Path) -> dict[str, str]:
    """A master where A runs 2 tasks on agent "busy" and B 1 task; agent "idle" has room."""
    runtime = MasterRuntime(CONFIG, registry=SqliteRegistry.open(work_dir))
    await runtime.start()
    ids: dict[str, str] = {}
    demand = Demand(task_resources=SMALL, max_tasks=2)
    a = runtime.frameworks.subscribe(FrameworkInfo(name="A", failover_timeout=60.0), demand, False)
    b = runtime.frameworks.subscribe(FrameworkInfo(name="B", failover_timeout=60.0), None, True)
    ids["A"], ids["B"] = a.framework_id, b.framework_id
    busy_session = runtime.agents.register(AgentSpec("busy", 1, R("cpus:3;mem:1024")))
    busy = busy_session.agent_id
    await settle()
    [offer] = offers_of(a.channel)
    runtime.frameworks.accept(
        ids["A"],
        [offer.offer_id],
        [spec("a1", "cpus:1;mem:128"), spec("a2", "cpus:1;mem:128")],
        None,
    )
    for task in ("a1", "a2"):
        runtime.agents.update_statuses(
            busy,
            busy_session.channel,
            [(ids["A"], running(task, busy, bytes(16)), TaskState.RUNNING)],
        )
    idle = runtime.agents.register(AgentSpec("idle", 2, R("cpus:4;mem:1024"))).agent_id
    runtime.frameworks.update_demand(ids["A"], None)
    ids["busy"], ids["idle"] = busy, idle
    await runtime.stop()  # as if killed: nothing below reads its memory again
    runtime.state.registry.close()
    return ids


def test_restart_recovers_and_offers_in_drf_order_only_once_agents_are_back(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        ids = await first_life(tmp_path)
        runtime = MasterRuntime(CONFIG, registry=SqliteRegistry.open(tmp_path))
        runtime.recovery.recover()
        await runtime.start()
        try:
            assert runtime.state.recovering
            view = runtime.operator.snapshot()
            assert sorted(a.state for a in view.agents) == ["RECOVERING", "RECOVERING"]
            assert_summary_matches(runtime)
            a = runtime.frameworks.subscribe(
                FrameworkInfo(framework_id=ids["A"], name="A", failover_timeout=60.0),
                Demand(task_resources=SMALL, max_tasks=5),
                False,
            )
            b = runtime.frameworks.subscribe(
                FrameworkInfo(framework_id=ids["B"], name="B", failover_timeout=60.0),
                Demand(task_resources=SMALL, max_tasks=5),
                False,
            )
            assert a.resubscribed and b.resubscribed
            with pytest.raises(NotFound):  # a recovering agent must reregister first
                runtime.agents.heard(ids["idle"], Channel())
            # The idle agent is back first: nothing is offered while A's tasks are unknown
            # (A would look like it held nothing).
            runtime.agents.reregister(ids["idle"], AgentSpec("idle", 3, R("cpus:4;mem:1024")), [])
            await asyncio.sleep(0.05)
            assert not [
                e for e in drain(a.channel) + drain(b.channel) if isinstance(e, OffersEvent)
            ]
            # The busy agent comes back with A's two tasks: adopted, and recovery is over.
            tasks = [
                (ids["A"], spec(t, "cpus:1;mem:128"), running(t, ids["busy"], bytes(16)))
                for t in ("a1", "a2")
            ]
            runtime.agents.reregister(
                ids["busy"], AgentSpec("busy", 4, R("cpus:3;mem:1024")), tasks
            )
            assert not runtime.state.recovering
            adopted = [e.status for e in drain(a.channel) if isinstance(e, UpdateEvent)]
            assert sorted((u.task_id, u.state) for u in adopted) == [
                ("a1", TaskState.RUNNING),
                ("a2", TaskState.RUNNING),
            ]
            await settle()
            # DRF over what every agent reported: A holds 2 of 7 CPUs, B none, 5 are free.
            # B is served until its share reaches A's, then they alternate: B ends with 3
            # tasks' worth and A 2 more (the last CPU goes to one of them, tied at 3/7).
            # Offering while only "idle" was back would have split its 4 CPUs 2 and 2.
            offered_b = sum(o.fair_tasks for o in offers_of(b.channel))
            offered_a = sum(o.fair_tasks for o in offers_of(a.channel))
            assert offered_a + offered_b == 5 and offered_b >= 3 and offered_a >= 1
            assert runtime.state.registry.agents[ids["busy"]].spec.port == 4  # the new port is kept
        finally:
            await runtime.stop()

    asyncio.run(main())


def test_operator_weights_are_durable_and_follow_their_precedence(tmp_path: Path) -> None:
    async def main() -> None:
        runtime = MasterRuntime(CONFIG, registry=SqliteRegistry.open(tmp_path))
        await runtime.start()
        spec_a = FrameworkInfo(
            framework_id="", name="A", role="batch", weight=2.0, failover_timeout=60.0
        )
        a = runtime.frameworks.subscribe(spec_a, None, True).framework_id
        assert runtime.operator.set_weight("batch", None, 3.0, False) == ("role", "batch", 3.0)
        assert runtime.operator.set_weight(None, a, 5.0, False) == ("framework", a, 5.0)
        assert runtime.state.core.frameworks[a].weight == 5.0
        assert (
            runtime.operator.set_weight(None, a, 0.0, True) is None
        )  # cleared: under the role tree (hdrf) its subscribed weight applies, the role's
        # weight weighs the role's node instead
        assert runtime.state.core.frameworks[a].weight == 2.0
        assert runtime.state.core.role_shares()["batch"].weight == 3.0
        runtime.operator.set_weight(None, a, 7.0, False)
        with pytest.raises(NotFound):
            runtime.operator.set_weight(None, "fw-unknown", 2.0, False)
        await runtime.stop()
        runtime.state.registry.close()

        again = MasterRuntime(CONFIG, registry=SqliteRegistry.open(tmp_path))
        again.recovery.recover()
        assert again.operator.weights() == [("role", "batch", 3.0), ("framework", a, 7.0)]
        assert again.state.core.frameworks[a].weight == 7.0
        again.state.registry.close()

    asyncio.run(main())


def test_a_recoverys_reregistrations_log_their_progress_not_a_line_each(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        ids = await first_life(tmp_path)
        runtime = MasterRuntime(CONFIG, registry=SqliteRegistry.open(tmp_path))
        runtime.recovery.recover()
        await runtime.start()
        caplog.set_level(logging.DEBUG, logger="fairshare.master")
        try:
            for name, port in (("idle", 3), ("busy", 4)):
                runtime.agents.reregister(ids[name], AgentSpec(name, port, SMALL), [])
            assert not runtime.state.recovering
            runtime.agents.reregister(ids["idle"], AgentSpec("idle", 5, SMALL), [])  # after
        finally:
            await runtime.stop()

    asyncio.run(main())
    lines = [(r.levelno, r.getMessage()) for r in caplog.records]
    levels = [level for level, message in lines if message == "agent.reregistered"]
    assert levels == [logging.DEBUG, logging.DEBUG, logging.INFO]
    progress = [
        r.fairshare_fields  # type: ignore[attr-defined]
        for r in caplog.records
        if r.getMessage() == "master.recovery.progress"
    ]
    assert progress == [{"back": 1, "awaited": 2}]  # each tenth (of 2: each), but the last
