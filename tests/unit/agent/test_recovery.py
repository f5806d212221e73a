"""Recovery after an agent restart: the plan case by case with injected wall-clock times
(deadline arithmetic), its application to a restored state and a real executor (no duplicate
STARTING/RUNNING updates), and the runtime's wiring: each change is in the checkpoint file before
it can be sent, and a new runtime on the same file restores it.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
from datetime import timedelta
from itertools import count
from pathlib import Path

import pytest
from fairshare.backoff import Backoff
from fairshare.resources import ResourceVector
from fairshare.task_states import TaskReason, TaskState
from fairshare.v1 import agent_pb2, common_pb2
from fairshare.wire import resources_to_pb, task_state_to_pb

from agent.core import AgentSnapshot, AgentState
from agent.core.records import AgentSpec, PlaceholderSpec, TaskView
from agent.durability.checkpoint import CHECKPOINT_FILE, CheckpointStore
from agent.durability.recovery import (
    Report,
    Restart,
    Resume,
    apply_recovery,
    plan_recovery,
    remaining_time,
)
from agent.runtime import AgentFatalError, AgentRuntime, RuntimeConfig
from agent.tasks.executors.base import TaskEvent
from agent.tasks.executors.placeholder import PlaceholderExecutor
from agent.tasks.executors.router import TaskExecutors
from agent.wire import task_spec

R = ResourceVector.parse
TS = common_pb2.TaskStatus
STAGING, STARTING, RUNNING = (
    TaskState.STAGING,
    TaskState.STARTING,
    TaskState.RUNNING,
)
KILLING, FINISHED, FAILED = (
    TaskState.KILLING,
    TaskState.FINISHED,
    TaskState.FAILED,
)
KILLED, LOST = TaskState.KILLED, TaskState.LOST
FW = "fw-1"
T0 = 1_700_000_000.0  # wall clock when the tasks became RUNNING
SPEC = AgentSpec("host-a", 7000, R("cpus:4;mem:1024"))
DEADLINE = 5.0


def info(task_id: str, **command: float) -> common_pb2.TaskInfo:
    message = common_pb2.TaskInfo(task_id=task_id, resources=resources_to_pb(R("cpus:1")))
    for name in ("duration", "startup_delay"):
        if name in command:
            getattr(message.command, name).FromTimedelta(timedelta(seconds=command[name]))
    if "exit_code" in command:
        message.command.exit_code = int(command["exit_code"])
    return message


def view(task_id: str, state: int, running_since: float | None = T0, **command: float) -> TaskView:
    spec = task_spec(info(task_id, **command))
    return TaskView(FW, spec, R("cpus:1"), state, None, running_since)  # type: ignore[arg-type]


# -- the plan (pure) --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wall", "left"),
    [(T0, 10.0), (T0 + 4.25, 5.75), (T0 + 10.0, 0.0), (T0 + 60.0, 0.0), (T0 - 30.0, 10.0)],
    ids=["at-start", "midway", "at-deadline", "long-past", "clock-set-back"],
)
def test_remaining_time_is_the_deadline_minus_now_within_the_duration(
    wall: float, left: float
) -> None:
    assert remaining_time(T0, 10.0, wall) == left


def test_plan_case_by_case() -> None:
    wall = T0 + 4.0
    tasks = [
        view("staging", STAGING, None, duration=10, startup_delay=1),
        view("starting", STARTING, None, duration=10, startup_delay=1),
        view("midway", RUNNING, duration=10, startup_delay=1),
        view("forever", RUNNING),
        view("over", RUNNING, duration=3),
        view("over-bad", RUNNING, duration=2.5, exit_code=7),
        view("killing", KILLING, duration=10),
        view("finished", FINISHED, duration=1),
        view("no-time", RUNNING, None, duration=10),
    ]
    actions = {action.key[1]: action for action in plan_recovery(tasks, wall)}
    full = PlaceholderSpec(duration=10.0, startup_delay=1.0)
    assert actions["staging"] == Restart((FW, "staging"), full)
    assert actions["starting"] == Restart((FW, "starting"), full)
    assert actions["midway"] == Resume((FW, "midway"), PlaceholderSpec(duration=6.0))
    assert actions["forever"] == Resume((FW, "forever"), PlaceholderSpec(duration=None))
    assert actions["over"] == Report(
        (FW, "over"), FINISHED, TaskReason.UNSPECIFIED,
        "exited 0 (its deadline passed while the agent was down)", T0 + 3.0, 0,
    )  # fmt: skip
    assert actions["over-bad"] == Report(
        (FW, "over-bad"), FAILED, TaskReason.COMMAND_FAILED,
        "exited 7 (its deadline passed while the agent was down)", T0 + 2.5, 7,
    )  # fmt: skip
    killed = actions["killing"]
    assert isinstance(killed, Report) and killed.wall == wall
    assert (killed.state, killed.reason) == (KILLED, TaskReason.AGENT_RESTARTED)
    assert "finished" not in actions  # terminal: only its pending updates are re-sent
    lost = actions["no-time"]
    assert isinstance(lost, Report) and (lost.state, lost.reason) == (
        LOST, TaskReason.AGENT_RESTARTED,
    )  # fmt: skip
    assert "could not recover" in lost.message


# -- applied to a restored state and a real executor -------------------------------------------


def restored(snapshot: AgentSnapshot) -> AgentState:
    counter = count(100)
    return AgentState.restore(
        SPEC,
        snapshot,
        retry=Backoff(1.0, 8.0).jittered(random.Random(3)),
        new_uuid=lambda: next(counter).to_bytes(16, "big"),
    )


def before_the_crash() -> AgentSnapshot:
    """A state with a RUNNING task whose RUNNING update is unacked, a STARTING one, a KILLING
    one and one past its deadline, as the checkpoint would hold it."""
    counter = count(1)
    state = AgentState(
        SPEC,
        retry=Backoff(1.0, 8.0).jittered(random.Random(3)),
        new_uuid=lambda: next(counter).to_bytes(16, "big"),
    )
    state.on_registered("ag-1", "m-1")
    tasks = [
        info("run", duration=0.15), info("start", duration=0.05),
        info("kill"), info("over", duration=0.01),
    ]  # fmt: skip
    state.handle_launch(FW, [task_spec(task) for task in tasks], 0.0, T0)
    for task_id in ("run", "start", "kill", "over"):
        state.handle_task_status((FW, task_id), STARTING, 0.0, T0)
    for task_id in ("run", "kill", "over"):
        state.handle_task_status((FW, task_id), RUNNING, 0.0, T0)
    state.handle_kill(FW, "kill", 0.0, T0)
    return state.snapshot()


def test_applied_recovery_reports_each_state_once_and_keeps_the_uuids() -> None:
    async def main() -> None:
        snapshot = before_the_crash()
        state = restored(snapshot)

        def report(event: TaskEvent) -> None:
            state.handle_task_status(
                event.key, event.state, 0.0, T0 + 1, reason=event.reason, exit_code=event.exit_code
            )

        executor = TaskExecutors(report)
        actions = plan_recovery(state.tasks(), T0 + 0.05)  # "run" has 0.1 s left
        tally = apply_recovery(state, executor, actions, 0.0)
        assert tally == {"resumed": 1, "restarted": 1, "reported": 2, "reattached": 0}
        assert state.task((FW, "kill")).state == KILLED  # type: ignore[union-attr]
        assert state.task((FW, "over")).state == FINISHED  # type: ignore[union-attr]
        assert sorted(executor.running()) == [(FW, "run"), (FW, "start")]
        await asyncio.wait_for(executor.wait_idle(DEADLINE), DEADLINE)
        old = {u.uuid: u for u in snapshot.updates}
        for task_id, states, new in (
            ("run", [STARTING, RUNNING, FINISHED], 1),
            ("start", [STARTING, RUNNING, FINISHED], 2),  # restarted: STARTING not repeated
            ("kill", [STARTING, RUNNING, KILLING, KILLED], 1),
            ("over", [STARTING, RUNNING, FINISHED], 1),
        ):
            pending = state.pending((FW, task_id))
            assert [u.state for u in pending] == states, task_id  # no duplicates
            kept = [u for u in pending if u.uuid in old]
            assert kept == [old[u.uuid] for u in kept]  # the checkpointed ones, unchanged
            assert len(pending) - len(kept) == new, task_id
        assert not state.used  # every task is terminal now

    asyncio.run(main())


# -- the runtime: checkpoint before externalizing, restore on start ------------------------------


def launch_command(*tasks: common_pb2.TaskInfo) -> agent_pb2.ConnectResponse:
    launch = agent_pb2.LaunchTasksCommand(framework_id=FW, tasks=tasks)
    commands = [agent_pb2.AgentCommand(launch_tasks=launch)]
    return agent_pb2.ConnectResponse(commands=agent_pb2.AgentCommands(commands=commands))


def rows(path: Path, query: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as reader:  # a second connection: only committed data
        return list(reader.execute(query))


def test_runtime_checkpoints_each_change_before_it_can_be_sent(tmp_path: Path) -> None:
    path = tmp_path / CHECKPOINT_FILE

    async def main() -> None:
        store = CheckpointStore.open(path, SPEC)
        runtime = AgentRuntime(RuntimeConfig(master="127.0.0.1:9"), SPEC, checkpoint=store)
        runtime.state.on_registered("ag-1", "m-1")
        runtime._persist()
        runtime._dispatch(launch_command(info("t", duration=30)))
        assert rows(path, "SELECT task_id, state FROM tasks") == [("t", task_state_to_pb(STAGING))]
        assert runtime.executor.running() == [(FW, "t")]
        for _ in range(100):  # STARTING and RUNNING arrive on the loop, each written at once
            if runtime.state.task((FW, "t")).state == RUNNING:  # type: ignore[union-attr]
                break
            await asyncio.sleep(0.01)
        assert rows(path, "SELECT state FROM updates ORDER BY position") == [
            (task_state_to_pb(STARTING),), (task_state_to_pb(RUNNING),),
        ]  # fmt: skip
        (since,) = rows(path, "SELECT running_since FROM tasks")[0]
        assert isinstance(since, float) and since > T0
        runtime.executor.kill_all(silent=True)
        await runtime.executor.aclose()
        store.close()

        reopened = CheckpointStore.open(path, SPEC)
        again = AgentRuntime(RuntimeConfig(master="127.0.0.1:9"), SPEC, checkpoint=reopened)
        assert again.state.agent_id == "ag-1"
        assert [u.state for u in again.state.pending((FW, "t"))] == [STARTING, RUNNING]
        assert again.state.used == R("cpus:1")
        reopened.close()

    asyncio.run(main())


def test_a_failed_checkpoint_write_stops_the_agent_with_a_fatal_error(tmp_path: Path) -> None:
    path = tmp_path / CHECKPOINT_FILE
    store = CheckpointStore.open(path, SPEC)
    state = AgentState(
        SPEC, retry=Backoff(1.0, 2.0).jittered(random.Random(1)), new_uuid=lambda: b"u" * 16
    )
    state.on_registered("ag-1", "m-1")
    state.handle_launch(FW, [task_spec(info("t", duration=1))], 0.0, T0)
    state.handle_task_status((FW, "t"), STARTING, 0.0, T0)
    state.handle_task_status((FW, "t"), RUNNING, 0.0, T0)  # long past its deadline now
    store.write(state.take_changes())

    async def main() -> None:
        config = RuntimeConfig(master="127.0.0.1:9", reconnect_initial=0.01)
        runtime = AgentRuntime(config, SPEC, checkpoint=store)
        store._db.close()  # every later write fails
        with pytest.raises(AgentFatalError, match="cannot write the checkpoint"):
            await asyncio.wait_for(runtime.run(), DEADLINE)

    asyncio.run(main())
    store.close()


def test_a_resumed_run_reports_only_how_it_ends() -> None:
    async def main() -> None:
        events: list[TaskEvent] = []
        executor = PlaceholderExecutor(events.append)
        executor.launch((FW, "ends"), PlaceholderSpec(duration=0.01, exit_code=4), resume=True)
        executor.launch((FW, "held"), PlaceholderSpec(duration=None), resume=True)
        await asyncio.sleep(0)
        executor.kill((FW, "held"), TaskReason.FRAMEWORK_REMOVED)
        assert await executor.wait_idle(DEADLINE)
        assert [(e.key[1], e.state, e.reason, e.exit_code) for e in events] == [
            ("held", KILLED, TaskReason.FRAMEWORK_REMOVED, None),  # RUNNING: not "during launch"
            ("ends", FAILED, TaskReason.COMMAND_FAILED, 4),
        ]

    asyncio.run(main())
