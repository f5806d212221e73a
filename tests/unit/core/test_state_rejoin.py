"""An agent that rejoins with the tasks it runs (after being unreachable, or after a master
restart): ``handle_add_agent(..., running=...)`` adopts them as accepted tasks."""

from __future__ import annotations

import pytest
from fairshare.resources import ResourceVector

from master.core import (
    AlreadyExists,
    CoreConfig,
    InvalidArgument,
    MasterState,
    NotFound,
    RunningTask,
    TaskState,
)

R = ResourceVector.parse


def state_with_framework() -> MasterState:
    state = MasterState(CoreConfig(validate=True))
    state.handle_add_framework("fw", 0.0, "fw")
    return state


def running(task_id: str, resources: str = "cpus:1;mem:128", fw: str = "fw") -> RunningTask:
    return RunningTask(fw, task_id, task_id, R(resources), TaskState.RUNNING)


def test_adopted_tasks_hold_their_resources_and_count_for_their_framework() -> None:
    state = state_with_framework()
    tasks = [running("a"), running("b", "cpus:2;mem:256")]
    assert state.handle_add_agent("ag", R("cpus:4;mem:1024"), 1.0, running=tasks) == []
    agent = state.agents["ag"]
    assert agent.free == R("cpus:1;mem:640")
    assert agent.task_keys == {("fw", "a"), ("fw", "b")}
    assert state.frameworks["fw"].allocated == R("cpus:3;mem:384")
    assert state.tasks[("fw", "b")].state is TaskState.RUNNING
    assert state.dominant_share("fw") == pytest.approx(3 / 4)
    # A task ending frees its resources as for any launched task.
    state.handle_task_status("ag", "fw", "a", TaskState.FINISHED, 2.0)
    assert state.agents["ag"].free == R("cpus:2;mem:768")


@pytest.mark.parametrize(
    ("tasks", "error"),
    [
        ([running("a", fw="nobody")], NotFound),
        ([running("a"), running("a")], AlreadyExists),
        ([running("a", "cpus:5")], InvalidArgument),
        ([RunningTask("fw", "a", "a", R("cpus:1"), TaskState.FINISHED)], InvalidArgument),
        ([RunningTask("fw", "", "", R("cpus:1"), TaskState.RUNNING)], InvalidArgument),
    ],
    ids=["unknown-framework", "twice", "too-big", "terminal", "empty-id"],
)
def test_bad_running_tasks_are_refused_and_change_nothing(
    tasks: list[RunningTask], error: type[Exception]
) -> None:
    state = state_with_framework()
    with pytest.raises(error):
        state.handle_add_agent("ag", R("cpus:4;mem:1024"), 1.0, running=tasks)
    assert not state.agents and not state.tasks and not state.total


def test_a_task_live_elsewhere_is_not_adopted_twice() -> None:
    state = state_with_framework()
    state.handle_add_agent("one", R("cpus:4;mem:1024"), 0.0, running=[running("a")])
    with pytest.raises(AlreadyExists):
        state.handle_add_agent("two", R("cpus:4;mem:1024"), 1.0, running=[running("a")])
    assert list(state.agents) == ["one"]
