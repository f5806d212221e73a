"""An in-process fake master for testing frameworks: real gRPC on 127.0.0.1, scripted events.

Two ways to use it, both on the asyncio loop of the test::

    async with FakeMaster() as master:                     # scripted: you send everything
        ...connect your framework to master.address...
        await master.wait_for(lambda: master.framework_ids)
        offer_id = master.send_offers(OfferSpec("ag-1", "cpus:4;mem:8192"))[0]
        await master.wait_for(lambda: master.launched_tasks)
        master.send_update(task_id="t1", state=TaskState.RUNNING, agent_id="ag-1")

    agents = [FakeAgent("ag-1", ResourceVector.parse("cpus:4;mem:8192"))]
    async with FakeMaster(agents=agents) as master:        # simulated cluster
        ...offers flow by themselves; launched tasks report STARTING, RUNNING and, after their
        duration, FINISHED or FAILED; kills answer KILLED (command tasks are not executed:
        they run like placeholders without a duration, until killed)...

Invariants:
- Implements the Scheduler API of ``fairshare.v1`` (see ``_fake_cluster``): the first stream
  event is SUBSCRIBED, refused calls get the codes the proto documents and change nothing,
  heartbeats every ``heartbeat_interval`` (unless paused), unacknowledged updates are resent
  on resubscription.
- Every request received is recorded in ``calls`` in arrival order (refused ones too).
- Scripting methods (``send_*``, ``rescind``, ``drop_stream``, ...) must be called on the loop
  the fake master runs on; ``wait_for`` polls a condition with a deadline. Synchronous tests
  (e.g. of a callback-style ``Scheduler``) use ``ThreadedFakeMaster``, which runs the fake
  master on its own loop thread and is safe to call from any thread.
- It never imports ``master``: frameworks are tested against the wire contract only. Where it
  differs from the real master on purpose is listed in ``framework_sdk._fake_cluster``; the
  scenario suite ``tests/integration/test_master_scenarios.py`` holds the two to the rest.
"""

from __future__ import annotations

from framework_sdk._fake_cluster import FakeAgent
from framework_sdk._fake_master import DEFAULT_REFUSE_SECONDS as DEFAULT_REFUSE_SECONDS
from framework_sdk._fake_master import FakeMaster
from framework_sdk._fake_threaded import ThreadedFakeMaster
from framework_sdk._fake_types import LaunchedTask, OfferSpec

__all__ = ["FakeAgent", "FakeMaster", "LaunchedTask", "OfferSpec", "ThreadedFakeMaster"]
