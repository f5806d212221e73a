"""Framework failover and exactly-once status updates, end to end: a real master and agent
processes, frameworks driven in this process with the SDK's ``SchedulerClient``.

- a framework that disconnects briefly and resubscribes with its id within its failover timeout
  keeps its tasks (implicit reconciliation reports the same ids RUNNING; none launched twice);
- one that stays away past its failover timeout loses them: the agent kills them, ``GetState``
  forgets them, their resources go to another framework, and resubscribing is NOT_FOUND;
- ``Teardown`` does the same at once;
- with acknowledgements delayed past the agent's retry interval the master forwards copies, and
  the application still sees each (task, state) once, in order per task.

Every wait polls a condition with a deadline (``SETTLE``); failover timeouts are 1-2 s.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import grpc
import pytest
from daemons import DEFAULT_MASTER_FLAGS, Daemon
from fairshare.v1 import operator_pb2
from wire_fakes import get_state, task_counts, vec

from framework_sdk import (
    Backoff,
    ClientOptions,
    FrameworkInfo,
    NotFoundError,
    Offer,
    ResourceVector,
    SchedulerClient,
    StatusUpdate,
    Subscribed,
    TaskReason,
    TaskSpec,
    TaskState,
)
from framework_sdk.events import OffersReceived

T = TypeVar("T")
SETTLE = 15.0  # bound on every wait for the cluster to reach a state
TEST_TIMEOUT = 40.0
R = ResourceVector.parse
AGENT = "cpus:2;mem:1024"
SHAPE = "cpus:1;mem:128"
OPTIONS = ClientOptions(
    backoff=Backoff(initial=0.05, maximum=0.2), call_timeout=5.0, subscribe_timeout=5.0, seed=3
)
FState = operator_pb2.GetStateResponse.Framework


def run(scenario: Coroutine[Any, Any, T]) -> T:
    """Run ``scenario`` on a fresh loop, failing it after ``TEST_TIMEOUT`` seconds."""
    return asyncio.run(asyncio.wait_for(scenario, TEST_TIMEOUT))


async def until(condition: Callable[[], Any], what: str, timeout: float = SETTLE) -> Any:
    """Poll ``condition`` (run off the loop: it may call the master) until it is truthy."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        result = await asyncio.to_thread(condition)
        if result:
            return result
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(0.02)


def state(master: Daemon) -> operator_pb2.GetStateResponse:
    with grpc.insecure_channel(master.address) as channel:
        return get_state(channel)


def framework_view(master: Daemon, framework_id: str) -> Any:
    """The framework in GetState, or None once the master forgot it."""
    for view in state(master).frameworks:
        if view.framework_info.framework_id == framework_id:
            return view
    return None


def launches(agent: Daemon) -> list[str]:
    """Task ids in the order the agent launched them (from its log)."""
    return re.findall(r"task\.launched .*task_id=(\S+)", agent.log())


def agent_states(agent: Daemon, task_id: str) -> list[str]:
    return re.findall(
        rf"task\.state\.changed .*task_id={re.escape(task_id)} state=(\S+)", agent.log()
    )


class Fw:
    """A framework in this process: it launches up to ``wanted`` tasks of ``SHAPE`` on its
    offers (declining the rest briefly) and records every event; acknowledgements are implicit,
    or explicit after ``ack_delay`` seconds."""

    def __init__(
        self,
        master: Daemon,
        name: str,
        *,
        wanted: int = 0,
        failover_timeout: float = 60.0,
        framework_id: str = "",
        ack_delay: float | None = None,
        duration: float | None = None,
        prefix: str = "",
    ) -> None:
        info = FrameworkInfo(name, failover_timeout=failover_timeout, framework_id=framework_id)
        options = OPTIONS
        if ack_delay is not None:
            options = ClientOptions(
                implicit_acknowledgements=False,
                backoff=OPTIONS.backoff,
                call_timeout=OPTIONS.call_timeout,
                subscribe_timeout=OPTIONS.subscribe_timeout,
            )
        self.client = SchedulerClient(master.address, info, options=options)
        self.tearing_down = False  # set by teardown(): a call racing it may find no framework
        self.wanted = wanted
        self.ack_delay = ack_delay
        self.duration = duration
        self.prefix = prefix or name
        self.launched: list[str] = []
        self.offers: list[Offer] = []
        self.updates: list[StatusUpdate] = []
        self.subscribed: list[Subscribed] = []
        self._pump: asyncio.Task[None] | None = None
        self._acks: set[asyncio.Task[None]] = set()

    async def start(self) -> Fw:
        await self.client.start()
        await self.client.wait_subscribed(SETTLE)
        self._pump = asyncio.get_running_loop().create_task(self._run())
        return self

    @property
    def framework_id(self) -> str:
        return self.client.framework_id

    def states(self, task_id: str, *, with_uuid: bool = True) -> list[TaskState]:
        """States of ``task_id`` the application saw (agent updates only by default)."""
        return [u.state for u in self.updates if u.task_id == task_id and bool(u.uuid) == with_uuid]

    def latest(self) -> dict[str, TaskState]:
        return {u.task_id: u.state for u in self.updates}

    async def _run(self) -> None:
        while (event := await self.client.next_event()) is not None:
            if isinstance(event, Subscribed):
                self.subscribed.append(event)
            elif isinstance(event, OffersReceived):
                for offer in event.offers:
                    self.offers.append(offer)
                    try:
                        await self._use(offer)
                    except NotFoundError:
                        if not self.tearing_down:
                            raise  # only our own teardown may remove the framework
            elif isinstance(event, StatusUpdate):
                self.updates.append(event)
                if self.ack_delay is not None and event.uuid:
                    ack = asyncio.get_running_loop().create_task(self._ack_later(event))
                    self._acks.add(ack)
                    ack.add_done_callback(self._acks.discard)
            self.client.complete(event)

    async def _use(self, offer: Offer) -> None:
        fit = 0
        room = offer.resources
        while len(self.launched) + fit < self.wanted and R(SHAPE) <= room:
            room = room - R(SHAPE)
            fit += 1
        if not fit:
            await self.client.decline(offer, refuse_seconds=0.1)
            return
        ids = [f"{self.prefix}-{len(self.launched) + i}" for i in range(fit)]
        tasks = [TaskSpec(i, R(SHAPE), duration=self.duration) for i in ids]
        self.launched.extend(ids)
        await self.client.launch(offer, tasks, refuse_seconds=0.1)

    async def _ack_later(self, update: StatusUpdate) -> None:
        assert self.ack_delay is not None
        await asyncio.sleep(self.ack_delay)  # hold it past the agent's retries on purpose
        await self.client.acknowledge(update)

    async def close(self) -> None:
        """Close without teardown (the process "dies"): the master keeps it for failover."""
        await self.client.close()
        if self._pump is not None:
            await self._pump

    async def teardown(self) -> None:
        self.tearing_down = True
        await self.client.teardown()
        if self._pump is not None:
            await self._pump


async def running(fw: Fw, count: int) -> list[str]:
    """Wait until ``count`` launched tasks of ``fw`` are RUNNING; their ids."""

    def ready() -> list[str] | None:
        ids = [t for t, s in fw.latest().items() if s is TaskState.RUNNING]
        return sorted(ids) if len(ids) == count else None

    result: list[str] = await until(ready, f"{count} tasks of {fw.prefix} RUNNING")
    return result


@pytest.fixture
def cluster(
    master_factory: Callable[..., Daemon], agent_factory: Callable[..., list[Daemon]]
) -> tuple[Daemon, Daemon]:
    """A master and one agent with room for two tasks of ``SHAPE``; acks retried after 100 ms."""
    master = master_factory(*DEFAULT_MASTER_FLAGS, "--heartbeat-interval", "1s")
    [agent] = agent_factory(master, 1, AGENT, "--status-update-retry", "100ms")
    return master, agent


def test_a_framework_back_within_its_failover_timeout_keeps_its_tasks(
    cluster: tuple[Daemon, Daemon],
) -> None:
    master, agent = cluster

    async def scenario() -> None:
        first = await Fw(master, "keeper", wanted=2, failover_timeout=2.0).start()
        ids = await running(first, 2)
        framework_id = first.framework_id
        await first.close()
        view = await until(
            lambda: (
                (v := framework_view(master, framework_id))
                and v.state == v.STATE_DISCONNECTED
                and v
            ),
            "the framework disconnected",
        )
        assert task_counts(view) == {"RUNNING": 2} and view.HasField("failover_deadline")

        # A new process (a new client) takes over with the saved framework id.
        second = Fw(master, "keeper", failover_timeout=2.0, framework_id=framework_id)
        await second.start()
        await until(lambda: second.subscribed, "the SUBSCRIBED event")
        assert second.subscribed[0].resubscribed and second.framework_id == framework_id
        await until(lambda: sorted(second.latest()) == ids, "reconciliation of both tasks")
        for task_id in ids:
            [answer] = [u for u in second.updates if u.task_id == task_id]
            assert (answer.state, answer.reason) == (TaskState.RUNNING, TaskReason.RECONCILIATION)
        # Past the first connection's failover deadline nothing happens to the tasks.
        await until(
            lambda: framework_view(master, framework_id).state == FState.STATE_ACTIVE, "active"
        )
        deadline = asyncio.get_running_loop().time() + 2.5
        while asyncio.get_running_loop().time() < deadline:  # outlive the old timer
            view = await asyncio.to_thread(framework_view, master, framework_id)
            assert view is not None and task_counts(view) == {"RUNNING": 2}
            await asyncio.sleep(0.1)
        assert not view.HasField("failover_deadline")
        assert launches(agent) == ids  # each launched once
        assert all(agent_states(agent, t)[-1:] == ["RUNNING"] for t in ids)  # never killed
        await second.teardown()

    run(scenario())


def test_a_framework_away_past_its_failover_timeout_loses_its_tasks_to_others(
    cluster: tuple[Daemon, Daemon],
) -> None:
    master, agent = cluster

    async def scenario() -> None:
        leaver = await Fw(master, "leaver", wanted=2, failover_timeout=1.5).start()
        ids = await running(leaver, 2)
        taker = await Fw(master, "taker", wanted=2).start()
        framework_id = leaver.framework_id
        await leaver.close()
        view = await until(
            lambda: (
                (v := framework_view(master, framework_id))
                and v.state == v.STATE_DISCONNECTED
                and v
            ),
            "the leaver disconnected",
        )
        assert task_counts(view) == {"RUNNING": 2}  # kept during the failover timeout
        assert not taker.launched

        await until(lambda: framework_view(master, framework_id) is None, "the leaver removed")
        await until(
            lambda: all(agent_states(agent, t)[-1:] == ["KILLED"] for t in ids),
            "the agent to kill the leaver's tasks",
        )
        taken = await running(taker, 2)  # the freed resources were offered to the taker
        assert taken == ["taker-0", "taker-1"]
        snapshot = await asyncio.to_thread(state, master)
        assert {t.info.task_id for t in snapshot.tasks} == set(taken)
        assert vec(snapshot.agents[0].used) == R(SHAPE) * 2
        assert [f.framework_info.name for f in snapshot.frameworks] == ["taker"]
        assert "its failover timeout expired" in master.log()

        late = SchedulerClient(
            master.address,
            FrameworkInfo("leaver", failover_timeout=1.5, framework_id=framework_id),
            options=OPTIONS,
        )
        await late.start()
        with pytest.raises(NotFoundError, match="removed"):
            await late.wait_subscribed(SETTLE)
        await late.close()
        await taker.teardown()

    run(scenario())


def test_teardown_kills_the_tasks_and_frees_the_resources_at_once(
    cluster: tuple[Daemon, Daemon],
) -> None:
    master, agent = cluster

    async def scenario() -> None:
        doomed = await Fw(master, "doomed", wanted=2, failover_timeout=60.0).start()
        ids = await running(doomed, 2)
        taker = await Fw(master, "taker", wanted=2).start()
        framework_id = doomed.framework_id
        started = asyncio.get_running_loop().time()
        await doomed.teardown()
        assert await doomed.client.next_event() is None  # its events ended
        assert await asyncio.to_thread(framework_view, master, framework_id) is None
        await until(
            lambda: all(agent_states(agent, t)[-1:] == ["KILLED"] for t in ids),
            "the agent to kill the torn down tasks",
        )
        assert await running(taker, 2) == ["taker-0", "taker-1"]
        assert asyncio.get_running_loop().time() - started < 30  # not the 60 s failover
        late = SchedulerClient(
            master.address,
            FrameworkInfo("doomed", failover_timeout=60.0, framework_id=framework_id),
            options=OPTIONS,
        )
        await late.start()
        with pytest.raises(NotFoundError):
            await late.wait_subscribed(SETTLE)
        await late.close()
        await taker.teardown()

    run(scenario())


def test_delayed_acknowledgements_cause_copies_but_each_update_is_seen_once_in_order(
    cluster: tuple[Daemon, Daemon],
) -> None:
    master, agent = cluster
    order = [TaskState.STAGING, TaskState.STARTING, TaskState.RUNNING, TaskState.FINISHED]

    async def scenario() -> None:
        slow = Fw(master, "slow", wanted=2, ack_delay=0.5, duration=0.2)
        await slow.start()
        await until(
            lambda: (
                len(slow.launched) == 2
                and all(slow.states(t)[-1:] == [TaskState.FINISHED] for t in slow.launched)
            ),
            "both tasks FINISHED",
        )
        for task_id in slow.launched:
            seen = slow.states(task_id)
            assert len(seen) == len(set(seen)), f"{task_id} saw a state twice: {seen}"
            assert seen == sorted(seen, key=order.index), f"{task_id} out of order: {seen}"
            assert TaskState.RUNNING in seen
            assert agent_states(agent, task_id)[-1] == "FINISHED"
        assert slow.client.duplicates_dropped > 0  # the master did forward copies
        await until(lambda: not state(master).tasks, "every update acknowledged")
        await slow.teardown()

    run(scenario())
