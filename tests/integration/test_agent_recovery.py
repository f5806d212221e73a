"""Agent restart (issue 5, item 2) with real processes: a master, an agent and an SDK framework
in the test process; the agent is killed with SIGKILL while its tasks run and restarted on the
same work dir before the master's agent timeout.

What is shown: the agent reregisters with the same agent id; its RUNNING tasks are RUNNING again
(same ids, none launched twice) and finish at their original deadline; a task whose deadline
passed while the agent was down is reported FINISHED at once, stamped with its deadline; the
framework receives exactly one FINISHED per task and no state twice; ``GetState`` shows the
tasks' resources used meanwhile; updates that were unacknowledged at the kill are re-sent after
the restart with the uuids the checkpoint holds.

Every wait polls a condition with a deadline; the agents retry unacknowledged updates only every
10 s, so within a test every copy of an update the framework sees comes from a reconnection,
not from a retry race.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import grpc
import pytest
from daemons import DEFAULT_MASTER_FLAGS, Daemon, restart_agent
from fairshare.v1 import operator_pb2, operator_pb2_grpc

from framework_sdk import (
    Framework,
    FrameworkInfo,
    OffersReceived,
    ResourceVector,
    StatusUpdate,
    TaskSpec,
    TaskState,
)

SETTLE = 30.0
MASTER_FLAGS = (*DEFAULT_MASTER_FLAGS, "--agent-timeout", "60s")
AGENT_RESOURCES = "cpus:4;mem:4096"
AGENT_FLAGS = ("--status-update-retry", "10s")
TASK = ResourceVector.parse("cpus:0.5;mem:256")


class Recorder:
    """Runs a framework's event loop in the background: records updates, queues offers."""

    def __init__(self, framework: Framework, *, acknowledge: bool = True) -> None:
        self.framework = framework
        self.acknowledge = acknowledge  # explicit acknowledgements only (implicit: the SDK)
        self.updates: list[tuple[float, StatusUpdate]] = []  # (arrival, update)
        self.offers: asyncio.Queue[OffersReceived] = asyncio.Queue()
        self.changed = asyncio.Event()
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        async for event in self.framework.events():
            if isinstance(event, OffersReceived):
                self.offers.put_nowait(event)
            elif isinstance(event, StatusUpdate):
                self.updates.append((time.time(), event))
                self.changed.set()

    async def wait(self, condition: Callable[[], object], what: str) -> None:
        async def loop() -> None:
            while not condition():
                self.changed.clear()
                await self.changed.wait()

        try:
            await asyncio.wait_for(loop(), SETTLE)
        except TimeoutError:
            seen = [(u.task_id, u.state.value) for _, u in self.updates]
            pytest.fail(f"timed out waiting for {what}; updates seen: {seen}")

    def of(self, task_id: str, state: TaskState | None = None) -> list[StatusUpdate]:
        return [u for _, u in self.updates if u.task_id == task_id and state in (None, u.state)]

    def seen(self, task_id: str, state: TaskState) -> bool:
        return bool(self.of(task_id, state))

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


@contextlib.asynccontextmanager
async def framework(master: Daemon, name: str, *, implicit: bool = True) -> AsyncIterator[Recorder]:
    info = FrameworkInfo(name=name, failover_timeout=120.0)
    async with Framework.connect(
        master.address, info, implicit_acknowledgements=implicit
    ) as connected:
        recorder = Recorder(connected)
        try:
            yield recorder
        finally:
            await recorder.close()


async def launch(recorder: Recorder, tasks: list[TaskSpec]) -> str:
    """Launch ``tasks`` on the first offer, then suppress further offers; returns the agent id."""
    event = await asyncio.wait_for(recorder.offers.get(), SETTLE)
    offer = event.offers[0]
    await recorder.framework.launch(offer, tasks)
    await recorder.framework.suppress()
    return offer.agent_id


async def get_state(master: Daemon) -> operator_pb2.GetStateResponse:
    async with grpc.aio.insecure_channel(master.address) as channel:
        stub = operator_pb2_grpc.OperatorServiceStub(channel)
        return await stub.GetState(operator_pb2.GetStateRequest(), timeout=10)


def millis(resources: object) -> dict[str, int]:
    return {item.name: item.millis for item in resources.items}  # type: ignore[attr-defined]


def metric(daemon: Daemon, sample: str) -> float:
    """The value of ``sample`` (name and labels, e.g. ``x_total{event="retried"}``) on /metrics."""
    with urllib.request.urlopen(f"http://{daemon.metrics_address}/metrics", timeout=5) as page:
        for line in page.read().decode().splitlines():
            if line.startswith(sample + " "):
                return float(line.split()[-1])
    raise AssertionError(f"no sample {sample} on the {daemon.kind}'s /metrics")


def pending_updates(agent: Daemon) -> float:
    """The agent's unacknowledged status updates."""
    return metric(agent, "fairshare_agent_status_updates_pending")


RETRIED = 'fairshare_status_updates_total{event="retried"}'  # the master got a uuid again


async def poll(condition: Callable[[], object], what: str, timeout: float = SETTLE) -> None:
    """Poll a blocking ``condition`` in a thread until it is truthy (bounded)."""
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(condition):
        assert time.monotonic() < deadline, f"timed out after {timeout:g}s waiting for {what}"
        await asyncio.sleep(0.05)


@pytest.fixture
def restarted() -> Iterator[list[Daemon]]:
    """Agents started by ``restart_agent`` in a test; killed in teardown."""
    started: list[Daemon] = []
    yield started
    for agent in started:
        agent.kill()


def checkpointed_updates(work_dir: Path) -> dict[str, list[tuple[int, bytes]]]:
    """Unacknowledged updates in the (dead) agent's checkpoint: task -> [(state, uuid)]."""
    with sqlite3.connect(work_dir / "agent.sqlite") as reader:
        rows = reader.execute(
            "SELECT task_id, state, uuid FROM updates ORDER BY framework_id, task_id, position"
        ).fetchall()
    out: dict[str, list[tuple[int, bytes]]] = {}
    for task_id, state, uuid in rows:
        out.setdefault(task_id, []).append((state, uuid))
    return out


def test_kill9_agent_recovers_its_running_tasks_and_they_finish_once_at_their_deadline(
    master_factory: Callable[..., Daemon],
    agent_factory: Callable[..., list[Daemon]],
    restarted: list[Daemon],
) -> None:
    master = master_factory(*MASTER_FLAGS)
    (agent,) = agent_factory(master, 1, AGENT_RESOURCES, *AGENT_FLAGS)
    short, long_ = 1.0, 7.0

    async def scenario() -> None:
        async with framework(master, "recovery") as fw:
            agent_id = await launch(
                fw,
                [
                    TaskSpec("short", TASK, duration=short),
                    TaskSpec("long-1", TASK, duration=long_),
                    TaskSpec("long-2", TASK, duration=long_),
                    TaskSpec("service", TASK),  # no duration: held until killed
                ],
            )
            ids = ("short", "long-1", "long-2", "service")
            await fw.wait(
                lambda: all(fw.seen(t, TaskState.RUNNING) for t in ids), "4 tasks RUNNING"
            )
            await poll(lambda: pending_updates(agent) == 0, "every update acknowledged")
            running_at = {t: fw.of(t, TaskState.RUNNING)[0].timestamp for t in ids}
            assert all(stamp is not None for stamp in running_at.values())
            short_deadline = running_at["short"].timestamp() + short  # type: ignore[union-attr]

            agent.kill()  # SIGKILL while the tasks run
            await poll(lambda: time.time() > short_deadline + 0.05, "short's deadline to pass")
            new = await asyncio.to_thread(
                restart_agent, agent, master.address, *AGENT_FLAGS, resources=AGENT_RESOURCES
            )
            restarted.append(new)

            # The short task ended while the agent was down: FINISHED at once, at its deadline.
            await fw.wait(lambda: fw.seen("short", TaskState.FINISHED), "short FINISHED")
            (finished,) = fw.of("short", TaskState.FINISHED)
            assert finished.timestamp is not None
            assert finished.timestamp.timestamp() == pytest.approx(short_deadline, abs=1e-3)
            assert "deadline passed while the agent was down" in finished.message
            assert finished.agent_id == agent_id

            # Meanwhile the master has the same agent, reachable, with the three others' resources.
            async def the_three_hold_resources() -> bool:
                state = await get_state(master)
                agents = [(a.agent_id, a.reachable, millis(a.used)) for a in state.agents]
                held = (TASK * 3).to_millis()
                return agents == [(agent_id, True, held)]

            deadline = time.monotonic() + SETTLE
            while not await the_three_hold_resources():
                assert time.monotonic() < deadline, (await get_state(master)).agents
                await asyncio.sleep(0.05)
            state = await get_state(master)
            tasks = {t.info.task_id: t.status.state for t in state.tasks}
            assert {t: tasks[t] for t in ("long-1", "long-2", "service")} == {
                t: 3
                for t in ("long-1", "long-2", "service")  # TASK_STATE_RUNNING
            }
            assert not any(fw.seen(t, TaskState.FINISHED) for t in ("long-1", "long-2"))

            # The long tasks were resumed, not restarted: they finish at their first deadline.
            await fw.wait(
                lambda: all(fw.seen(t, TaskState.FINISHED) for t in ("long-1", "long-2")),
                "both long tasks FINISHED",
            )
            for task_id in ("long-1", "long-2"):
                (done,) = fw.of(task_id, TaskState.FINISHED)
                assert done.timestamp is not None
                ran = done.timestamp - running_at[task_id]  # type: ignore[operator]
                assert long_ - 0.01 <= ran.total_seconds() <= long_ + 1.0, ran

            await fw.framework.kill("service")
            await fw.wait(lambda: fw.seen("service", TaskState.KILLED), "service KILLED")
            await poll(lambda: pending_updates(new) == 0, "the restarted agent's updates acked")

            for task_id in ids:  # at least once, but never applied twice: one update per state
                states = [u.state for u in fw.of(task_id)]
                assert len(states) == len(set(states)), (task_id, states)
                assert len({u.uuid for u in fw.of(task_id)}) == len(states)
            assert [len(fw.of(t, TaskState.FINISHED)) for t in ids[:3]] == [1, 1, 1]
            final = await get_state(master)
            assert [(a.agent_id, millis(a.used)) for a in final.agents] == [(agent_id, {})]

    asyncio.run(scenario())
    log = restarted[0].log()
    assert f"agent.reregistered agent_id={agent_id_of(log)}" in log
    assert "task.launched" not in log  # nothing was launched twice
    assert log.count("task.recovered") == 4
    assert "Traceback" not in log


def agent_id_of(log: str) -> str:
    for line in log.splitlines():
        if "agent.recovered agent_id=" in line:
            return line.split("agent.recovered agent_id=")[1].split()[0]
    raise AssertionError(f"no recovery line in the agent log:\n{log}")


def test_updates_unacknowledged_at_a_kill9_are_resent_after_restart_with_the_same_uuids(
    master_factory: Callable[..., Daemon],
    agent_factory: Callable[..., list[Daemon]],
    restarted: list[Daemon],
) -> None:
    master = master_factory(*MASTER_FLAGS)
    (agent,) = agent_factory(master, 1, AGENT_RESOURCES, *AGENT_FLAGS)

    async def scenario() -> None:
        async with framework(master, "no-acks", implicit=False) as fw:
            await launch(fw, [TaskSpec("t", TASK, duration=0.2)])
            await fw.wait(lambda: fw.seen("t", TaskState.STARTING), "STARTING")
            # Not acknowledged: RUNNING and FINISHED queue behind it on the agent.
            await poll(lambda: pending_updates(agent) == 3, "3 updates pending on the agent")
            agent.kill()
            before = checkpointed_updates(agent.work_dir)["t"]
            assert [state for state, _ in before] == [2, 3, 5]  # STARTING, RUNNING, FINISHED
            (first,) = fw.of("t")
            assert first.uuid == before[0][1]
            retried = metric(master, RETRIED)

            new = await asyncio.to_thread(
                restart_agent, agent, master.address, *AGENT_FLAGS, resources=AGENT_RESOURCES
            )
            restarted.append(new)
            # The restarted agent sends the checkpointed head again: the master recognises its
            # uuid as one it forwarded and not yet acknowledged, and forwards it again.
            await poll(lambda: metric(master, RETRIED) > retried, "STARTING re-sent (same uuid)")
            await fw.framework.acknowledge(first)
            for state, uuid in before[1:]:  # the queued ones follow, one per acknowledgement

                def arrived(expected: bytes = uuid) -> bool:
                    return any(x.uuid == expected for x in fw.of("t"))

                await fw.wait(arrived, "the next update")
                update = next(x for x in fw.of("t") if x.uuid == uuid)
                assert update.state is (TaskState.RUNNING if state == 3 else TaskState.FINISHED)
                await fw.framework.acknowledge(update)
            await poll(lambda: pending_updates(new) == 0, "every update acknowledged")
            uuids = {u.uuid for u in fw.of("t")}
            assert uuids == {uuid for _, uuid in before}  # nothing new was minted
            assert len(fw.of("t", TaskState.FINISHED)) == 1
            assert [u.state for u in fw.of("t") if u.state is not TaskState.STARTING] == [
                TaskState.RUNNING, TaskState.FINISHED,
            ]  # fmt: skip

    asyncio.run(scenario())
