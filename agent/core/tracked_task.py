"""A task the agent tracks, and the check that admits a launched task.

Pure like the rest of ``agent.core`` (plain values in, plain values out).

Invariants:
- ``TrackedTask.view()`` is a snapshot: later changes to the record do not show in it;
  ``TrackedTask.from_view`` rebuilds an equal record from one.
- ``check_launch`` fills in the agent's id (when the agent has one) and answers a
  ``TaskProblem`` for a task of another agent, a task whose description has a problem, or one
  that does not fit the free resources; otherwise the task's ``LaunchSpec``. It changes nothing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from fairshare.resources import ResourceVector
from fairshare.task_states import TaskState

from agent.core.records import LaunchSpec, StatusUpdate, TaskProblem, TaskSpec, TaskView

__all__ = ["TrackedTask", "check_launch"]


@dataclass(slots=True)
class TrackedTask:
    """The agent's record of one task: its spec, resources, state and latest update."""

    framework_id: str
    info: TaskSpec
    resources: ResourceVector
    state: TaskState
    latest: StatusUpdate | None = None
    running_since: float | None = None

    def view(self) -> TaskView:
        """The record as a plain value."""
        return TaskView(
            self.framework_id,
            self.info,
            self.resources,
            self.state,
            self.latest,
            self.running_since,
        )

    @classmethod
    def from_view(cls, view: TaskView) -> TrackedTask:
        """The record ``view`` was taken of (``view()``'s inverse: a restored task)."""
        return cls(
            view.framework_id,
            view.info,
            view.resources,
            view.state,
            view.latest,
            view.running_since,
        )


def check_launch(
    given: TaskSpec, agent_id: str | None, free: ResourceVector
) -> tuple[TaskSpec, LaunchSpec | TaskProblem]:
    """The task as the agent keeps it (its agent id filled in), and what to run or why it
    cannot run: another agent's task, a problem of its description, or no room for it."""
    if given.agent_id and agent_id is not None and given.agent_id != agent_id:
        problem = f"task is for agent {given.agent_id}, this is {agent_id}"
        return given, TaskProblem(problem)
    task = given
    if agent_id is not None:
        task = dataclasses.replace(given, agent_id=agent_id)
    if isinstance(task.launch, TaskProblem):
        return task, task.launch
    if not task.resources.fits_in(free):
        problem = f"resources {task.resources} do not fit the agent's free {free}"
        return task, TaskProblem(problem)
    return task, task.launch
