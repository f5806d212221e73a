"""A command task's run as ``CommandExecutor`` tracks it, and what its end means.

``CommandConfig`` says where command tasks live, who they run as and how they are confined;
``CommandRun`` is the executor's record of one run (its supervisor's pid, pidfd and output pipe);
``end_of_run`` reads a supervisor's exit record into the task's terminal event.

Invariants:
- ``stop_watching`` leaves no reader registered on the loop and no descriptor of the run open;
  calling it again does nothing.
- ``end_of_run`` answers None only for a run that was asked to stop before it started (the
  executor reports it KILLED); otherwise the terminal event: FINISHED/FAILED/KILLED from the
  exit record, LAUNCH_FAILED for a program that could not start, EXECUTOR_TERMINATED when the
  supervisor ended before starting the task or without recording how it ended; in those two
  last cases it first kills what the task left (``kill_leftovers``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fairshare.task_states import TaskState

from agent.core.records import CommandTask, TaskKey, TaskReason
from agent.tasks.executors.base import TaskEvent
from agent.tasks.executors.command_launch import kill_leftovers, supervisor_log_tail
from agent.tasks.executors.outcome import exit_event
from agent.tasks.isolation.modes import Isolation, TaskLimits
from agent.tasks.users import DEFAULT_TASK_USER

__all__ = ["CommandConfig", "CommandRun", "end_of_run"]


@dataclass(frozen=True, slots=True)
class CommandConfig:
    """Where command tasks live, who they run as, how they are confined and stopped."""

    work_dir: Path
    isolation: Isolation = field(default_factory=lambda: Isolation("none"))
    kill_grace_period: float = 3.0  # when the task sets none
    close_timeout: float = 3.0  # aclose: wait this long for runs asked to stop
    python: str = sys.executable
    task_user: str = DEFAULT_TASK_USER  # a task naming no user runs as this one (agent as root)
    allow_root_tasks: bool = False  # a task may run as a user of uid 0


@dataclass(slots=True)
class CommandRun:
    """One command task's run: its supervisor, its pipes, what it has reported so far."""

    key: TaskKey
    task: CommandTask
    sandbox: Path
    run_dir: Path
    start: asyncio.Handle | None = None  # a launch not started yet (a kill cancels it)
    pid: int | None = None  # the supervisor's
    pidfd: int | None = None
    child: subprocess.Popen[bytes] | None = None  # when the supervisor is our child
    output: int | None = None  # the supervisor's stdout
    buffer: bytes = b""
    running: bool = False
    task_pid: int | None = None  # the task's main process, once it runs
    limits: TaskLimits = field(default_factory=TaskLimits)
    kill_requested: bool = False
    kill_reason: TaskReason = TaskReason.UNSPECIFIED
    silent: bool = False

    def stop_watching(self, loop: asyncio.AbstractEventLoop) -> None:
        """Stop reading the supervisor's output and exit; close its pipes and pidfd."""
        if self.output is not None:
            loop.remove_reader(self.output)
            self.output = None
        if self.child is not None and self.child.stdout is not None:
            self.child.stdout.close()
        if self.child is not None and self.child.stdin is not None:
            with contextlib.suppress(OSError):
                self.child.stdin.close()
        if self.pidfd is not None:
            loop.remove_reader(self.pidfd)
            os.close(self.pidfd)
            self.pidfd = None


def end_of_run(
    run: CommandRun, record: dict[str, Any] | None, isolation: Isolation
) -> TaskEvent | None:
    """The terminal event of ``run`` from its supervisor's exit ``record`` (None: it was
    killed before it started)."""
    key = run.key
    outcome = record.get("outcome") if record else None
    stamp = record.get("ended_at") if record else None
    when = float(stamp) if isinstance(stamp, int | float) else None
    if outcome == "not_started" or (outcome is None and not run.running):
        if outcome is None:
            kill_leftovers(run.run_dir, isolation)
        if run.kill_requested:
            return None
        message = "the task's supervisor ended before starting it" + supervisor_log_tail(
            run.run_dir
        )
        return TaskEvent(key, TaskState.FAILED, TaskReason.EXECUTOR_TERMINATED, message)
    if outcome is None or record is None:
        kill_leftovers(run.run_dir, isolation)
        message = "the task's supervisor ended without recording how the task ended"
        return TaskEvent(key, TaskState.FAILED, TaskReason.EXECUTOR_TERMINATED, message)
    if outcome == "launch_failed":
        message = str(record.get("error", "the task could not be started"))
        return TaskEvent(key, TaskState.FAILED, TaskReason.LAUNCH_FAILED, message, timestamp=when)
    kill_reason = run.kill_reason if run.kill_requested else None
    return exit_event(key, run.task, run.sandbox, record, kill_reason)
