"""The fake master as a newcomer meets it (issue 16 item 11): ``launched_tasks`` holds typed
values, and a framework that launches one task per offer (declining the rest with the default
filter) is not slowed by the real master's 5 s filter."""

from __future__ import annotations

import time

from sdk_helpers import FAST, run_async

from framework_sdk import (
    Framework,
    FrameworkInfo,
    OffersReceived,
    ResourceVector,
    StatusUpdate,
    TaskSpec,
    TaskState,
)
from framework_sdk.testing import FakeAgent, FakeMaster, LaunchedTask

SHAPE = ResourceVector.parse("cpus:1;mem:1024")


def test_one_task_per_offer_is_quick_and_launches_are_typed() -> None:
    async def scenario() -> float:
        agents = [FakeAgent("ag-1", ResourceVector.parse("cpus:4;mem:8192"))]
        async with FakeMaster(agents=agents) as master:
            started = time.monotonic()
            async with Framework.connect(master.address, FrameworkInfo(name="one"),
                                         options=FAST) as fw:  # fmt: skip
                launched, finished = 0, 0
                async for event in fw.events():
                    if isinstance(event, OffersReceived):
                        for offer in event.offers:
                            if launched < 3:  # one task; the rest declined by default
                                launched += 1
                                task = TaskSpec(f"t{launched}", SHAPE, duration=0.01)
                                await fw.launch(offer, [task])
                            else:
                                await fw.decline(offer)
                    elif isinstance(event, StatusUpdate) and event.state is TaskState.FINISHED:
                        finished += 1
                        if finished == 3:
                            break
                await fw.teardown()
            elapsed = time.monotonic() - started
            tasks = master.launched_tasks
            assert all(isinstance(t, LaunchedTask) for t in tasks)
            assert [(t.task_id, t.agent_id, t.resources, t.duration) for t in tasks] == [
                (f"t{i}", "ag-1", SHAPE, 0.01) for i in (1, 2, 3)
            ]
            assert tasks[0].info.task_id == "t1"  # the wire message, for anything else
            return elapsed

    assert run_async(scenario()) < 3.0  # with a 5 s default filter it took over 10 s
