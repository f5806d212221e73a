"""Recovery of the checkpointed tasks after an agent restart (docs/architecture.md §4).

``plan_recovery`` (pure: the wall-clock time is passed in) decides per task; ``apply_recovery``
feeds the decisions to the state and the executor. Case by case:

- STAGING or STARTING: **restarted** from the beginning (startup delay included). The executor
  reports STARTING again, which the state ignores for a STARTING task (states only move
  forward), then RUNNING.
- RUNNING with a duration: its deadline is ``running_since + duration`` (wall clock, so it
  survives the restart). Time left: **resumed** for that long, without reporting STARTING or
  RUNNING again; deadline passed while the agent was down: **reported** at once, FINISHED
  (exit code 0) or FAILED (REASON_COMMAND_FAILED with its exit code), as it would have ended,
  the update stamped with the deadline.
- RUNNING without a duration: **resumed**, holding its resources until killed.
- KILLING: the kill was under way and the process is gone: **reported** KILLED with
  REASON_AGENT_RESTARTED.
- terminal (its last updates unacknowledged): nothing; its pending updates are re-sent.
- a task that cannot be resumed (RUNNING without ``running_since``, a description whose
  ``launch`` is a ``TaskProblem``, e.g. a command that no longer parses): **reported** LOST
  with REASON_AGENT_RESTARTED (common.proto: "the agent restarted and could not recover the
  task").
- a live command task (STAGING, STARTING, RUNNING or KILLING): **reattached**. Its process does
  not die with the agent; the command executor finds it again (by pid and start time) or finds
  how it ended while the agent was down, and reports from there
  (``agent.tasks.executors.command``).

Invariants: every live task gets exactly one action; the remaining time is clamped to
``[0, duration]`` so a wall clock set back while the agent was down never extends a task beyond
its duration (a clock set forward ends it early: the deadline is wall-clock time by design);
``apply_recovery`` mints updates only through ``AgentState.handle_task_status``, so nothing is
reported twice, and launches resumed runs only after every report has been applied.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fairshare.logs import log_event
from fairshare.task_states import TERMINAL, TaskState

from agent.core.records import (
    CommandTask,
    PlaceholderSpec,
    TaskKey,
    TaskProblem,
    TaskReason,
    TaskView,
)
from agent.core.state import AgentState
from agent.tasks.executors.router import TaskExecutors

__all__ = [
    "Reattach",
    "Report",
    "Restart",
    "Resume",
    "apply_recovery",
    "plan_recovery",
    "recover",
    "remaining_time",
]

_LOG = logging.getLogger("fairshare.agent")


@dataclass(frozen=True, slots=True)
class Resume:
    """Run the task on for ``spec.duration`` (None: until killed) without re-reporting it."""

    key: TaskKey
    spec: PlaceholderSpec


@dataclass(frozen=True, slots=True)
class Restart:
    """Run the task from the beginning (it was not RUNNING yet)."""

    key: TaskKey
    spec: PlaceholderSpec


@dataclass(frozen=True, slots=True)
class Report:
    """Move the task to a terminal ``state`` now; ``wall`` stamps the update."""

    key: TaskKey
    state: TaskState
    reason: TaskReason
    message: str
    wall: float
    exit_code: int | None = None


@dataclass(frozen=True, slots=True)
class Reattach:
    """Hand a live command task to the command executor, which finds its process again."""

    key: TaskKey
    task: CommandTask
    state: TaskState


RecoveryAction = Resume | Restart | Report | Reattach


def remaining_time(running_since: float, duration: float, wall: float) -> float:
    """Seconds left until ``running_since + duration`` at ``wall``, within ``[0, duration]``."""
    return min(duration, max(0.0, running_since + duration - wall))


def plan_recovery(tasks: Iterable[TaskView], wall: float) -> list[RecoveryAction]:
    """One action per non-terminal task (terminal tasks need none), in the given order."""
    actions: list[RecoveryAction] = []
    for task in tasks:
        if task.state not in TERMINAL:
            actions.append(_plan_one(task, wall))
    return actions


def _lost(key: TaskKey, wall: float, why: str) -> Report:
    message = f"the agent restarted and could not recover the task: {why}"
    return Report(key, TaskState.LOST, TaskReason.AGENT_RESTARTED, message, wall)


def _plan_one(task: TaskView, wall: float) -> RecoveryAction:
    key = task.key
    spec = task.info.launch
    if isinstance(spec, TaskProblem):
        return _lost(key, wall, spec.message)
    if isinstance(spec, CommandTask):
        return Reattach(key, spec, task.state)
    if task.state in (TaskState.STAGING, TaskState.STARTING):
        return Restart(key, spec)
    if task.state == TaskState.KILLING:
        message = "killed: the agent restarted while killing it"
        return Report(key, TaskState.KILLED, TaskReason.AGENT_RESTARTED, message, wall)
    if task.state != TaskState.RUNNING:
        return _lost(key, wall, f"unexpected state {task.state.value}")
    resumed = dataclasses.replace(spec, startup_delay=0.0, fail_on_start=False)
    if spec.duration is None:
        return Resume(key, resumed)
    if task.running_since is None:
        return _lost(key, wall, "no RUNNING time was checkpointed")
    left = remaining_time(task.running_since, spec.duration, wall)
    if left > 0:
        return Resume(key, dataclasses.replace(resumed, duration=left))
    deadline = min(wall, task.running_since + spec.duration)
    down = "its deadline passed while the agent was down"
    if spec.exit_code == 0:
        finished = TaskState.FINISHED
        return Report(key, finished, TaskReason.UNSPECIFIED, f"exited 0 ({down})", deadline, 0)
    code = spec.exit_code
    failed, reason = TaskState.FAILED, TaskReason.COMMAND_FAILED
    return Report(key, failed, reason, f"exited {code} ({down})", deadline, code)


def apply_recovery(
    state: AgentState,
    executor: TaskExecutors,
    actions: Sequence[RecoveryAction],
    now: float,
) -> dict[str, int]:
    """Apply the reports to ``state``, then start the resumed and restarted runs.

    Returns how many tasks each kind of action got (``resumed``, ``restarted``, ``reported``,
    ``reattached``).
    The caller checkpoints the state before anything is sent.
    """
    tally = {"resumed": 0, "restarted": 0, "reported": 0, "reattached": 0}
    for action in actions:
        if isinstance(action, Report):
            state.handle_task_status(
                action.key,
                action.state,
                now,
                action.wall,
                reason=action.reason,
                message=action.message,
                exit_code=action.exit_code,
            )
            tally["reported"] += 1
            _log(action.key, "reported", state=action.state.value)
    for action in actions:
        if isinstance(action, Resume):
            executor.launch(action.key, action.spec, resume=True)
            tally["resumed"] += 1
            _log(action.key, "resumed", remaining=action.spec.duration)
        elif isinstance(action, Restart):
            executor.launch(action.key, action.spec)
            tally["restarted"] += 1
            _log(action.key, "restarted")
        elif isinstance(action, Reattach):
            executor.reattach(action.key, action.task, action.state)
            tally["reattached"] += 1
            _log(action.key, "reattached", state=action.state.value)
    return tally


def recover(state: AgentState, executor: TaskExecutors, wall: float, now: float) -> dict[str, int]:
    """Plan and apply the recovery of every task of a restored ``state``; logs a summary."""
    tally = apply_recovery(state, executor, plan_recovery(state.tasks(), wall), now)
    log_event(
        _LOG,
        "agent.recovered",
        agent_id=state.agent_id,
        tasks=len(state.tasks()),
        pending_updates=state.pending_updates(),
        **dict[str, Any](tally),
    )
    return tally


def _log(key: TaskKey, action: str, **fields: Any) -> None:
    log_event(_LOG, "task.recovered", framework_id=key[0], task_id=key[1], action=action, **fields)
