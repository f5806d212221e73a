"""``PlaceholderExecutor``: placeholder tasks as asyncio timers.

Lifecycle STARTING -> RUNNING -> FINISHED/FAILED (exit code), fail_on_start, startup_delay,
kill before and after RUNNING, silent kills, one terminal report per run. Durations are a few
milliseconds and every wait is bounded (``wait_for`` with a deadline), so nothing here depends
on timing luck.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from fairshare.task_states import TaskReason, TaskState
from fairshare.v1 import common_pb2

from agent.core.records import PlaceholderSpec
from agent.tasks.executors.base import TaskEvent
from agent.tasks.executors.placeholder import PlaceholderExecutor

TS = common_pb2.TaskStatus
STARTING, RUNNING = TaskState.STARTING, TaskState.RUNNING
FINISHED, FAILED, KILLED = (
    TaskState.FINISHED,
    TaskState.FAILED,
    TaskState.KILLED,
)
KEY = ("fw-1", "t-1")
DEADLINE = 5.0


class Recorder:
    def __init__(self) -> None:
        self.events: list[TaskEvent] = []
        self._changed = asyncio.Event()

    def __call__(self, event: TaskEvent) -> None:
        self.events.append(event)
        self._changed.set()

    def states(self, key: tuple[str, str] = KEY) -> list[int]:
        return [e.state for e in self.events if e.key == key]

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        async def loop() -> None:
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(loop(), DEADLINE)


def run(test: Callable[[PlaceholderExecutor, Recorder], Awaitable[None]]) -> None:
    async def main() -> None:
        recorder = Recorder()
        executor = PlaceholderExecutor(recorder)
        try:
            await test(executor, recorder)
        finally:
            await executor.aclose()

    asyncio.run(main())


def test_task_runs_for_its_duration_then_finishes() -> None:
    async def body(executor: PlaceholderExecutor, rec: Recorder) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        executor.launch(KEY, PlaceholderSpec(duration=0.05))
        assert rec.events == []  # reports come from the event loop, never from launch()
        await rec.wait_for(lambda: FINISHED in rec.states())
        assert loop.time() - started >= 0.05
        assert rec.states() == [STARTING, RUNNING, FINISHED]
        assert rec.events[-1].exit_code == 0
        assert executor.running() == []

    run(body)


@pytest.mark.parametrize("code", [1, 137, -3])
def test_nonzero_exit_code_fails_with_command_failed(code: int) -> None:
    async def body(executor: PlaceholderExecutor, rec: Recorder) -> None:
        executor.launch(KEY, PlaceholderSpec(duration=0.0, exit_code=code))
        await rec.wait_for(lambda: FAILED in rec.states())
        assert rec.states() == [STARTING, RUNNING, FAILED]
        last = rec.events[-1]
        assert (last.reason, last.exit_code) == (TaskReason.COMMAND_FAILED, code)

    run(body)


def test_fail_on_start_never_runs() -> None:
    async def body(executor: PlaceholderExecutor, rec: Recorder) -> None:
        executor.launch(KEY, PlaceholderSpec(duration=10.0, fail_on_start=True))
        await rec.wait_for(lambda: FAILED in rec.states())
        assert rec.states() == [STARTING, FAILED]
        assert rec.events[-1].reason == TaskReason.EXECUTOR_TERMINATED
        assert rec.events[-1].exit_code is None

    run(body)


def test_startup_delay_keeps_the_task_starting() -> None:
    async def body(executor: PlaceholderExecutor, rec: Recorder) -> None:
        executor.launch(KEY, PlaceholderSpec(duration=None, startup_delay=60.0))
        await rec.wait_for(lambda: STARTING in rec.states())
        await asyncio.sleep(0.02)
        assert rec.states() == [STARTING]
        assert executor.kill(KEY)
        await rec.wait_for(lambda: KILLED in rec.states())
        assert rec.events[-1].reason == TaskReason.TASK_KILLED_DURING_LAUNCH

    run(body)


def test_task_without_duration_holds_until_killed() -> None:
    async def body(executor: PlaceholderExecutor, rec: Recorder) -> None:
        executor.launch(KEY, PlaceholderSpec(duration=None))
        await rec.wait_for(lambda: RUNNING in rec.states())
        assert executor.running() == [KEY]
        assert executor.kill(KEY, TaskReason.AGENT_SHUTDOWN)
        assert executor.running() == []  # the key is free at once
        await rec.wait_for(lambda: KILLED in rec.states())
        assert rec.states() == [STARTING, RUNNING, KILLED]
        assert rec.events[-1].reason == TaskReason.AGENT_SHUTDOWN
        assert not executor.kill(KEY)  # already gone

    run(body)


def test_kill_before_the_task_started_still_reports_killed() -> None:
    async def body(executor: PlaceholderExecutor, rec: Recorder) -> None:
        executor.launch(KEY, PlaceholderSpec(duration=None))
        assert executor.kill(KEY)  # the coroutine never ran
        assert await executor.wait_idle(DEADLINE)
        assert rec.states() == [KILLED]
        assert rec.events[-1].reason == TaskReason.TASK_KILLED_DURING_LAUNCH

    run(body)


def test_silent_kill_reports_nothing_and_frees_the_key() -> None:
    async def body(executor: PlaceholderExecutor, rec: Recorder) -> None:
        executor.launch(KEY, PlaceholderSpec(duration=None))
        await rec.wait_for(lambda: RUNNING in rec.states())
        assert executor.kill(KEY, silent=True)
        executor.launch(KEY, PlaceholderSpec(duration=0.0))  # same key, new run
        await rec.wait_for(lambda: FINISHED in rec.states())
        assert rec.states() == [STARTING, RUNNING, STARTING, RUNNING, FINISHED]

    run(body)


def test_a_live_key_cannot_be_launched_twice() -> None:
    async def body(executor: PlaceholderExecutor, rec: Recorder) -> None:
        executor.launch(KEY, PlaceholderSpec(duration=None))
        with pytest.raises(ValueError, match="already running"):
            executor.launch(KEY, PlaceholderSpec(duration=None))

    run(body)


def test_kill_all_reports_each_task_once() -> None:
    async def body(executor: PlaceholderExecutor, rec: Recorder) -> None:
        keys = [("fw-1", f"t-{i}") for i in range(5)]
        for key in keys:
            executor.launch(key, PlaceholderSpec(duration=None))
        await rec.wait_for(lambda: all(RUNNING in rec.states(k) for k in keys))
        assert executor.kill_all(TaskReason.AGENT_SHUTDOWN) == 5
        assert await executor.wait_idle(DEADLINE)
        for key in keys:
            assert rec.states(key) == [STARTING, RUNNING, KILLED]
        assert executor.running() == []

    run(body)


def test_many_short_tasks_each_report_exactly_one_terminal_state() -> None:
    async def body(executor: PlaceholderExecutor, rec: Recorder) -> None:
        keys = [("fw-2", f"t-{i}") for i in range(200)]
        for i, key in enumerate(keys):
            executor.launch(key, PlaceholderSpec(duration=0.001 * (i % 7), exit_code=i % 2))
        await rec.wait_for(lambda: len(rec.events) == 3 * len(keys))
        for i, key in enumerate(keys):
            assert rec.states(key) == [STARTING, RUNNING, FAILED if i % 2 else FINISHED]

    run(body)
