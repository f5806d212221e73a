"""``fairshare.task_states``: the one vocabulary of task states and the rule of how they move."""

from __future__ import annotations

import itertools

from fairshare.task_states import AGENT_REPORTED, TERMINAL, TaskState, advance
from fairshare.v1 import common_pb2
from fairshare.wire import task_state_from_pb, task_state_to_pb

LIVE_ORDER = [TaskState.STAGING, TaskState.STARTING, TaskState.RUNNING, TaskState.KILLING]


def test_every_wire_state_has_a_kernel_state_and_back() -> None:
    for name, number in common_pb2.TaskState.items():
        state = task_state_from_pb(number)
        if name == "TASK_STATE_UNSPECIFIED":
            assert state is TaskState.UNKNOWN
        else:
            assert state.value == name.removeprefix("TASK_STATE_")
            assert task_state_to_pb(state) == number
    assert task_state_from_pb(999) is TaskState.UNKNOWN  # a number a newer peer added


def test_terminal_states_are_final() -> None:
    for terminal, new in itertools.product(TERMINAL, TaskState):
        assert advance(terminal, new) is terminal
    assert all(state.is_terminal for state in TERMINAL)
    assert not any(state.is_terminal for state in LIVE_ORDER)


def test_live_states_only_move_forward() -> None:
    for i, current in enumerate(LIVE_ORDER):
        for j, new in enumerate(LIVE_ORDER):
            assert advance(current, new) is (new if j >= i else current)
        for terminal in TERMINAL:
            assert advance(current, terminal) is terminal


def test_killing_is_left_only_for_a_terminal_state() -> None:
    for new in TaskState:
        moved = advance(TaskState.KILLING, new)
        assert moved in (TaskState.KILLING, TaskState.UNREACHABLE) or moved.is_terminal


def test_unreachable_is_entered_from_any_live_state_and_left_for_what_the_agent_reports() -> None:
    for live in LIVE_ORDER:
        assert advance(live, TaskState.UNREACHABLE) is TaskState.UNREACHABLE
    for reported in AGENT_REPORTED:
        assert advance(TaskState.UNREACHABLE, reported) is reported


def test_unknown_never_replaces_a_live_state() -> None:
    for live in LIVE_ORDER:
        assert advance(live, TaskState.UNKNOWN) is live
