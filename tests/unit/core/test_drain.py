"""``master.core.drain``: what a drain kills when, and when an agent is drained (issue 24,
item 11)."""

from __future__ import annotations

import pytest

from master.core import InvalidArgument, TaskState
from master.core.drain import MAX_GRACE, DrainStep, check_grace, deadline_at, drain_step

R, K, F = TaskState.RUNNING, TaskState.KILLING, TaskState.FINISHED


def test_no_live_task_is_drained_at_once_whatever_the_deadline() -> None:
    assert drain_step(None, [], 0.0) == DrainStep(drained=True)
    assert drain_step(100.0, [(("f", "done"), F)], 0.0) == DrainStep(drained=True)


def test_without_a_deadline_tasks_run_to_their_end() -> None:
    assert drain_step(None, [(("f", "t"), R)], 1e9) == DrainStep()


def test_before_the_deadline_nothing_is_killed_and_it_wakes_at_the_deadline() -> None:
    assert drain_step(100.0, [(("f", "t"), R)], 99.9) == DrainStep(wake_at=100.0)


def test_at_the_deadline_every_live_task_is_killed_once() -> None:
    tasks = [(("g", "b"), R), (("f", "a"), R), (("f", "k"), K), (("f", "x"), F)]
    assert drain_step(100.0, tasks, 100.0) == DrainStep(kill=(("f", "a"), ("g", "b")))
    killing = [(("f", "a"), K), (("g", "b"), K)]
    assert drain_step(100.0, killing, 150.0) == DrainStep()  # not again; drained when they end


def test_the_grace_is_checked_and_made_absolute() -> None:
    assert check_grace(None) is None and check_grace(0.0) == 0.0
    assert deadline_at(1000.0, 30.0) == 1030.0 and deadline_at(1000.0, None) is None
    for bad in (-1.0, float("nan"), float("inf"), MAX_GRACE + 1):
        with pytest.raises(InvalidArgument, match="deadline"):
            check_grace(bad)
