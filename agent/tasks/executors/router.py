"""``TaskExecutors``: the one executor the runtime holds; each task goes to its kind's executor.

Placeholder tasks (``PlaceholderSpec``) run in the ``PlaceholderExecutor``; command tasks
(``CommandTask``) in the command executor given at construction. An agent built without one
(tests of the runtime alone) answers a command task with ERROR, REASON_COMMAND_INVALID.

Invariants: a task key is live in at most one executor (the runtime launches a key only when
the state admitted it, and the state admits a key only when it is not live); every report goes
through the one ``report`` callback; ``running()`` is the union of the executors' runs; the
contract of ``agent.tasks.executors.base`` holds for the whole.
"""

from __future__ import annotations

import asyncio

from fairshare.task_states import TaskState

from agent.core.records import CommandTask, LaunchSpec, TaskKey, TaskReason
from agent.tasks.executors.base import CommandRunner, Executor, Report, TaskEvent
from agent.tasks.executors.placeholder import PlaceholderExecutor

__all__ = ["TaskExecutors"]


class TaskExecutors:
    """Routes launches by task kind; kills, waits and closes across every executor."""

    def __init__(self, report: Report, command: CommandRunner | None = None) -> None:
        self._report = report
        self.placeholder = PlaceholderExecutor(report)
        self.command = command

    @property
    def _all(self) -> list[Executor]:
        return [self.placeholder] if self.command is None else [self.placeholder, self.command]

    def launch(self, key: TaskKey, spec: LaunchSpec, *, resume: bool = False) -> None:
        """Start the task in its kind's executor (``resume``: a recovered RUNNING placeholder)."""
        if isinstance(spec, CommandTask):
            if self.command is not None:
                self.command.launch(key, spec)
                return
            message = "this agent does not run command tasks"
            event = TaskEvent(key, TaskState.ERROR, TaskReason.COMMAND_INVALID, message)
            asyncio.get_running_loop().call_soon(self._report, event)
            return
        self.placeholder.launch(key, spec, resume=resume)

    def reattach(self, key: TaskKey, task: CommandTask, state: TaskState) -> None:
        """A recovered command task: its executor finds its process again (or its end)."""
        if self.command is None:
            message = "the agent restarted and runs no command tasks any more"
            event = TaskEvent(key, TaskState.LOST, TaskReason.AGENT_RESTARTED, message)
            asyncio.get_running_loop().call_soon(self._report, event)
            return
        self.command.reattach(key, task, state)

    def kill(
        self,
        key: TaskKey,
        reason: TaskReason = TaskReason.UNSPECIFIED,
        *,
        silent: bool = False,
        grace: float | None = None,
    ) -> bool:
        """Kill the task in whichever executor runs it; False if none does."""
        return any(executor.kill(key, reason, silent=silent, grace=grace) for executor in self._all)

    def kill_all(self, reason: TaskReason = TaskReason.UNSPECIFIED, *, silent: bool = False) -> int:
        """Kill every run of every executor; returns how many were running."""
        return sum(executor.kill_all(reason, silent=silent) for executor in self._all)

    def running(self) -> list[TaskKey]:
        """Keys of the runs not ended yet, in every executor."""
        return [key for executor in self._all for key in executor.running()]

    async def wait_idle(self, timeout: float) -> bool:
        """Wait until every executor is idle (within one shared ``timeout``)."""
        waits = [executor.wait_idle(timeout) for executor in self._all]
        return all(await asyncio.gather(*waits))

    async def aclose(self) -> None:
        """Close every executor."""
        for executor in self._all:
            await executor.aclose()
