"""The asyncio style end to end against the fake master's simulated cluster."""

from __future__ import annotations

import pytest
from sdk_helpers import FAST, run_async

from framework_sdk import (
    Demand,
    Framework,
    FrameworkInfo,
    NotConnectedError,
    OffersReceived,
    ResourceVector,
    StatusUpdate,
    Subscribed,
    TaskSpec,
    TaskState,
)
from framework_sdk.testing import FakeAgent, FakeMaster

SHAPE = ResourceVector.parse("cpus:1;mem:1024")
AGENTS = [
    FakeAgent("ag-1", ResourceVector.parse("cpus:2;mem:4096"), hostname="h1"),
    FakeAgent("ag-2", ResourceVector.parse("cpus:2;mem:4096"), hostname="h2"),
]


def test_launch_tasks_until_all_finished() -> None:
    async def scenario() -> None:
        async with FakeMaster(agents=AGENTS) as master:
            info = FrameworkInfo(name="batch")
            async with Framework.connect(master.address, info, options=FAST) as fw:
                pending = [f"t{i}" for i in range(6)]
                finished: set[str] = set()
                placed: dict[str, str] = {}
                async for event in fw.events():
                    if isinstance(event, OffersReceived):
                        for offer in event.offers:
                            fits = SHAPE.times_fits_in(offer.resources)
                            tasks = [TaskSpec(pending.pop(), SHAPE, duration=0.02)
                                     for _ in range(min(fits, len(pending)))]  # fmt: skip
                            if tasks:
                                await fw.launch(offer, tasks, refuse_seconds=0)
                            else:
                                await fw.decline(offer, refuse_seconds=0)
                    elif isinstance(event, StatusUpdate):
                        placed[event.task_id] = event.agent_id
                        if event.state is TaskState.FINISHED:
                            finished.add(event.task_id)
                        if len(finished) == 6:
                            break
                await fw.teardown()
            assert finished == {f"t{i}" for i in range(6)}
            assert set(placed.values()) == {"ag-1", "ag-2"}
            assert len(master.launched_tasks) == 6

    run_async(scenario())


def test_declared_demand_sizes_the_offers_and_kill_reports_killed() -> None:
    async def scenario() -> None:
        async with FakeMaster(agents=AGENTS[:1]) as master:
            info = FrameworkInfo(name="service")
            demand = Demand(task_resources=SHAPE, max_tasks=1)
            async with Framework.connect(master.address, info, demand=demand, options=FAST) as fw:
                assert isinstance(await fw.next_event(), Subscribed)
                event = await fw.next_event()
                assert isinstance(event, OffersReceived)
                (offer,) = event.offers
                assert offer.resources == SHAPE and offer.fair_tasks == 1  # sized, not coarse
                await fw.launch(offer, [TaskSpec("web-1", SHAPE)])
                states: list[TaskState] = []
                while len(states) < 2:
                    update = await fw.next_event()
                    assert isinstance(update, StatusUpdate)
                    states.append(update.state)
                assert states == [TaskState.STARTING, TaskState.RUNNING]
                await fw.kill("web-1", offer.agent_id)
                killed = await fw.next_event()
                while isinstance(killed, OffersReceived):  # web-1's resources may come first:
                    killed = await fw.next_event()  # KILLED waits for RUNNING's acknowledgement
                assert isinstance(killed, StatusUpdate) and killed.state is TaskState.KILLED
                await fw.teardown()

    run_async(scenario())


def test_framework_calls_after_close_raise_not_connected() -> None:
    async def scenario() -> None:
        async with FakeMaster() as master:
            fw = Framework.connect(master.address, FrameworkInfo(name="x"), options=FAST)
            async with fw:
                assert fw.connected
            assert not fw.connected
            with pytest.raises(NotConnectedError, match="closed"):
                await fw.suppress()
            assert await fw.next_event() is None

    run_async(scenario())
