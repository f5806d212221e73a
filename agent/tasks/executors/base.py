"""The interface between the agent's runtime and its executors.

An executor starts the tasks of one kind, stops them on request and reports what happens to
them as ``TaskEvent`` values through the ``report`` callback it was built with.

Contract every executor keeps:
- ``launch`` and ``kill`` never report from inside the call: reports come later, on the event
  loop, so the caller is never re-entered;
- every launched run reports exactly one terminal state, unless it was killed ``silent``;
- a run leaves ``running()`` before it reports its terminal state;
- ``aclose`` leaves no asyncio task or watcher behind (what happens to the run itself is the
  executor's: a placeholder ends with it, a command task's process outlives the agent).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from fairshare.command import ResourceUsage
from fairshare.task_states import TaskState

from agent.core.records import CommandTask, CommandUsage, TaskKey, TaskReason

__all__ = ["CommandRunner", "Executor", "Report", "TaskEvent"]


@dataclass(frozen=True, slots=True)
class TaskEvent:
    """A task changed state.

    ``timestamp``: wall-clock seconds when it happened, if not now (a command task that ended
    while the agent was down); ``usage``: what a command task used, on its terminal event.
    """

    key: TaskKey
    state: TaskState
    reason: TaskReason = TaskReason.UNSPECIFIED
    message: str = ""
    exit_code: int | None = None
    timestamp: float | None = None
    usage: ResourceUsage | None = None


Report = Callable[[TaskEvent], None]
"""The callback an executor reports through (the runtime's ``_on_task_event``)."""


class Executor(Protocol):
    """What the runtime needs of an executor (``TaskExecutors`` and each kind's executor)."""

    def kill(
        self,
        key: TaskKey,
        reason: TaskReason = TaskReason.UNSPECIFIED,
        *,
        silent: bool = False,
        grace: float | None = None,
    ) -> bool:
        """Stop the task's run; it reports KILLED unless ``silent``. False if not running.
        ``grace`` replaces the task's kill grace period (command tasks; None: the task's own)."""
        ...

    def kill_all(self, reason: TaskReason = TaskReason.UNSPECIFIED, *, silent: bool = False) -> int:
        """Kill every run; returns how many were running."""
        ...

    def running(self) -> list[TaskKey]:
        """Keys of the runs not ended yet."""
        ...

    async def wait_idle(self, timeout: float) -> bool:
        """Wait until every run has ended and reported (killed ones too); False on timeout."""
        ...

    async def aclose(self) -> None:
        """Stop watching the runs (see the executor's docstring for what happens to them)."""
        ...


class CommandRunner(Executor, Protocol):
    """The executor of command tasks (``agent.tasks.executors.command.CommandExecutor``)."""

    def launch(self, key: TaskKey, task: CommandTask) -> None:
        """Start the command task (STARTING, then RUNNING once its process runs)."""
        ...

    def reattach(self, key: TaskKey, task: CommandTask, state: TaskState) -> None:
        """Take over the task's run after an agent restart; ``state`` is its checkpointed one."""
        ...

    def usage(self) -> CommandUsage:
        """What the command tasks use now and used in all (for the agent's metrics)."""
        ...
