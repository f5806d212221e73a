"""What the fake master's simulated agents do with a launched task (``framework_sdk._fake_cluster``
with ``simulate_tasks``): STARTING and RUNNING at once, then after the command's ``duration``
(scaled by ``time_scale``) FINISHED, or FAILED with its ``exit_code``; ``fail_on_start`` fails it
at once; a kill answers KILLING (to frameworks with TASK_KILLING_STATE, as the real master) and
KILLED. Command tasks are not executed.

Invariants: every update goes through the cluster's ``update`` in agent order (``fifo``); a task
that is no longer live when its duration ends (killed or replaced) is left alone; time only
through ``schedule``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from fairshare.v1 import common_pb2
from fairshare.wire import seconds_from_duration

from framework_sdk._fake_rules import FrameworkRecord, TaskRecord

__all__ = ["Schedule", "TaskSimulation"]

_TS = common_pb2.TaskState
_KILLING_STATE = common_pb2.FrameworkInfo.Capability.CAPABILITY_TASK_KILLING_STATE

Schedule = Callable[[float, Callable[[], None]], None]


class UpdateTask(Protocol):
    """The cluster's ``FakeClusterState.update``."""

    def __call__(
        self,
        framework_id: str,
        task_id: str,
        state: common_pb2.TaskState.ValueType,
        *,
        reason: int = ...,
        message: str = ...,
        exit_code: int | None = ...,
        fifo: bool = ...,
    ) -> object: ...


class TaskSimulation:
    """The simulated lifecycle of launched tasks (module docstring)."""

    def __init__(
        self,
        update: UpdateTask,
        schedule: Schedule,
        is_live: Callable[[TaskRecord], bool],
        time_scale: float = 1.0,
    ) -> None:
        self._update = update
        self._schedule = schedule
        self._is_live = is_live
        self.time_scale = time_scale

    def start(self, task: TaskRecord) -> None:
        """Run ``task`` as soon as the loop turns (the Accept is answered first)."""
        self._schedule(0.0, lambda: self._run(task))

    def kill(self, framework: FrameworkRecord, task: TaskRecord) -> None:
        """KILLING only to a framework that asked for it (as the master), then KILLED."""
        fid, task_id = framework.framework_id, task.info.task_id
        if _KILLING_STATE in framework.info.capabilities:
            self._update(fid, task_id, _TS.TASK_STATE_KILLING, message="kill requested", fifo=True)
        self._update(fid, task_id, _TS.TASK_STATE_KILLED, message="killed", fifo=True)

    def _run(self, task: TaskRecord) -> None:
        command = task.info.command
        if command.fail_on_start:
            reason = common_pb2.TaskStatus.REASON_EXECUTOR_TERMINATED
            failed = _TS.TASK_STATE_FAILED
            self._update(task.framework_id, task.info.task_id, failed, reason=reason, fifo=True)
            return
        for state in (_TS.TASK_STATE_STARTING, _TS.TASK_STATE_RUNNING):
            self._update(task.framework_id, task.info.task_id, state, fifo=True)
        if command.HasField("duration"):
            delay = seconds_from_duration(command.duration) * self.time_scale
            self._schedule(delay, lambda: self._finish(task))

    def _finish(self, task: TaskRecord) -> None:
        if not self._is_live(task):
            return  # killed or replaced meanwhile
        code = task.info.command.exit_code
        state = _TS.TASK_STATE_FINISHED if code == 0 else _TS.TASK_STATE_FAILED
        reason = 0 if code == 0 else common_pb2.TaskStatus.REASON_COMMAND_FAILED
        self._update(
            task.framework_id, task.info.task_id, state, reason=reason, exit_code=code, fifo=True
        )
