"""``CommandExecutor``: runs command tasks as real processes, each under its own supervisor
(``agent.tasks.executors.supervisor``), and finds them again after an agent restart. The
launch itself (the user, the launch record, starting and finding a supervisor, what is left of
a supervisor gone without a record) is ``agent.tasks.executors.command_launch``; the record of a
run, its configuration and the reading of its end are ``agent.tasks.executors.command_run``.

A run, from ``launch``:
- on the next loop step the agent resolves the user (``agent.tasks.users``: the task's own, else
  ``CommandConfig.task_user``; uid 0 only with ``allow_root_tasks``) and prepares the sandbox:
  an unknown user, a user the agent cannot or may not switch to, a user who cannot reach the
  sandboxes, or a working directory that leaves the sandbox through a symbolic link is ERROR,
  REASON_COMMAND_INVALID, and nothing starts. It creates the task's
  limits (its cgroup), writes the launch record, reports STARTING, starts the supervisor,
  records it (pid and start time) and only then lets it start the task;
- the supervisor says ``running PID`` once the task's program runs: RUNNING. A program that
  cannot start (not found, permission denied, ...) is FAILED, REASON_LAUNCH_FAILED, with why;
- the end (the supervisor exits; seen through a pidfd, no thread per task) is read from its exit
  record: exit 0 is FINISHED; a non-zero exit FAILED, REASON_COMMAND_FAILED, with the exit code
  and the last lines of stderr; death by a signal FAILED, REASON_EXECUTOR_TERMINATED; the OOM
  killer in its cgroup FAILED, REASON_MEMORY_LIMIT; a run that was asked to stop KILLED (with
  the kill's reason). The terminal update carries the run's CPU time and peak memory;
- ``kill`` sends SIGTERM to the supervisor (``pidfd_send_signal``: never to another process),
  which sends SIGTERM to the task's process group and SIGKILL to the group and its cgroup after
  the kill grace period, on its own even if the agent dies meanwhile.

After an agent restart (``reattach``, with the task's checkpointed state):
- supervisor still running (same pid, start time and boot): watched again; a task that was
  STARTING and whose process runs is reported RUNNING, a KILLING one is killed again; its end is
  reported as above, so the real exit code is known;
- supervisor gone, its exit record there: the task ended while the agent was down and is
  reported from the record, with the real exit code, stamped with the time it ended;
- supervisor gone having started nothing (``not_started``, or no supervisor record at all: the
  agent died before letting it start): STAGING and STARTING tasks start now, a KILLING one is
  KILLED;
- supervisor gone without an exit record (it was killed itself): the task's leftovers are
  killed and it is FAILED, REASON_EXECUTOR_TERMINATED (its exit status cannot be known).

Invariants: the contract of ``agent.tasks.executors.base``; nothing blocks the event loop for long
(one fork and exec per launch, small file reads); a run's key stays in ``running()`` until its
supervisor has exited (a kill does not free it at once, unlike a placeholder's); ``aclose``
kills nothing, it waits (at most ``close_timeout``) for runs already asked to stop and stops
watching the rest: command tasks outlive the agent by design, and the runtime kills them first
when it shuts down cleanly.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import Any

from fairshare.task_states import TaskState

from agent.core.records import CommandTask, CommandUsage, TaskKey, TaskReason
from agent.tasks.executors import supervisor as records
from agent.tasks.executors.base import Report, TaskEvent
from agent.tasks.executors.command_launch import (
    LaunchRefused,
    launch_spec,
    launch_user,
    open_pidfd,
    start_supervisor,
)
from agent.tasks.executors.command_run import CommandConfig, CommandRun, end_of_run
from agent.tasks.executors.outcome import UsageTally, live_usage
from agent.tasks.isolation import cgroups
from agent.tasks.isolation.modes import TaskLimits
from agent.tasks.sandbox import SandboxError, Sandboxes

__all__ = ["CommandConfig", "CommandExecutor"]


class CommandExecutor:
    """Starts, watches, kills and reattaches command tasks; reports through ``report``."""

    def __init__(self, report: Report, config: CommandConfig) -> None:
        self._report = report
        self.config = config
        self.sandboxes = Sandboxes(config.work_dir)
        self._runs: dict[TaskKey, CommandRun] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self.tally = UsageTally()  # what ended runs used (metrics)

    # -- the executor interface ------------------------------------------------------------------

    def launch(self, key: TaskKey, task: CommandTask) -> None:
        """Start the task on the next loop step. A key whose earlier run is still ending (killed
        silently, e.g. when the master removed the agent) is FAILED at once instead."""
        loop = asyncio.get_running_loop()
        if key in self._runs:
            message = "an earlier run of this task id is still ending on this agent"
            event = TaskEvent(key, TaskState.FAILED, TaskReason.LAUNCH_FAILED, message)
            loop.call_soon(self._report, event)
            return
        run = self._new_run(key, task)
        run.start = loop.call_soon(self._start, run)

    def reattach(self, key: TaskKey, task: CommandTask, state: TaskState) -> None:
        """Take over the run of a recovered task (see the module docstring)."""
        run = self._new_run(key, task)  # a kill before _reattach runs is applied by it
        asyncio.get_running_loop().call_soon(self._reattach, run, state)

    def kill(
        self,
        key: TaskKey,
        reason: TaskReason = TaskReason.UNSPECIFIED,
        *,
        silent: bool = False,
        grace: float | None = None,
    ) -> bool:
        """Ask the run to stop (SIGTERM, SIGKILL after the grace period: ``grace`` when set,
        written to the run's ``kill.json`` first, else the task's own); it reports KILLED
        unless ``silent``. False if the key has no run."""
        run = self._runs.get(key)
        if run is None:
            return False
        run.silent = run.silent or silent
        if run.kill_requested:
            return True
        run.kill_requested = True
        run.kill_reason = reason
        if grace is not None:
            with contextlib.suppress(OSError):  # unwritable: the task's own grace applies
                records.write_json(run.run_dir / records.KILL_FILE, {"grace": grace})
        if run.start is not None:  # nothing started yet: nothing to stop
            run.start.cancel()
            run.start = None
            asyncio.get_running_loop().call_soon(self._killed_before_start, run)
            return True
        self._signal(run)  # (a reattach not done yet signals when it has found the supervisor)
        return True

    def kill_all(self, reason: TaskReason = TaskReason.UNSPECIFIED, *, silent: bool = False) -> int:
        """Kill every run; returns how many there were."""
        keys = list(self._runs)
        for key in keys:
            self.kill(key, reason, silent=silent)
        return len(keys)

    def running(self) -> list[TaskKey]:
        """Keys of the runs whose supervisor has not exited yet."""
        return list(self._runs)

    def usage(self) -> CommandUsage:
        """What the live runs use now (cgroup or /proc) and what all runs used in all."""
        live = [live_usage(run.limits, run.task_pid) for run in self._runs.values() if run.running]
        tally = self.tally
        return CommandUsage(
            isolation=self.config.isolation.mode,
            live_tasks=len(self._runs),
            live_memory_bytes=sum(memory for _, memory in live),
            cpu_seconds_total=tally.cpu_seconds + sum(cpu for cpu, _ in live),
            memory_peaks=tuple(tally.peaks),
            memory_peak_sum=tally.peak_sum,
        )

    async def wait_idle(self, timeout: float) -> bool:
        """Wait until every run has ended and reported; False on timeout."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._idle.wait()
        return self._idle.is_set()

    async def aclose(self) -> None:
        """Wait (bounded) for the runs asked to stop, then stop watching every run."""
        if any(run.kill_requested for run in self._runs.values()):
            await self.wait_idle(self.config.close_timeout)
        for run in list(self._runs.values()):
            if run.start is not None:
                run.start.cancel()
            run.stop_watching(asyncio.get_running_loop())
        self._runs.clear()
        self._idle.set()
        self.config.isolation.close()

    # -- starting --------------------------------------------------------------------------------

    def _new_run(self, key: TaskKey, task: CommandTask) -> CommandRun:
        if key in self._runs:
            raise ValueError(f"task {key[1]} of framework {key[0]} is already running")
        run = CommandRun(key, task, self.sandboxes.sandbox(key), self.sandboxes.run_dir(key))
        self._runs[key] = run
        self._idle.clear()
        return run

    def _start(self, run: CommandRun) -> None:
        run.start = None
        try:
            spec = self._prepare(run)
        except LaunchRefused as error:
            self._end(
                run, TaskEvent(run.key, TaskState.ERROR, TaskReason.COMMAND_INVALID, str(error))
            )
            return
        except OSError as error:
            self.config.isolation.release(run.limits)
            message = f"cannot prepare the task: {error}"
            self._end(run, TaskEvent(run.key, TaskState.FAILED, TaskReason.LAUNCH_FAILED, message))
            return
        self._report(TaskEvent(run.key, TaskState.STARTING))
        try:
            self._spawn(run, spec)
        except OSError as error:
            self.config.isolation.release(run.limits)
            run.stop_watching(asyncio.get_running_loop())
            message = f"cannot start the task's supervisor: {error}"
            self._end(run, TaskEvent(run.key, TaskState.FAILED, TaskReason.LAUNCH_FAILED, message))

    def _prepare(self, run: CommandRun) -> dict[str, Any]:
        """Check the user and the sandbox, create the limits; the launch record."""
        command, config = run.task.command, self.config
        user = launch_user(command.user, config.task_user, config.allow_root_tasks, self.sandboxes)
        owner = None if user is None else (user.uid, user.gid)
        try:
            prepared = self.sandboxes.prepare(run.key, command.working_dir, owner)
        except SandboxError as error:
            raise LaunchRefused(str(error)) from None
        run.limits = config.isolation.prepare(run.key, run.task.resources)
        spec = launch_spec(
            run.key, run.task, run.sandbox, prepared, user, run.limits, config.kill_grace_period
        )
        records.write_json(run.run_dir / records.LAUNCH_FILE, spec)
        return spec

    def _spawn(self, run: CommandRun, spec: dict[str, Any]) -> None:
        """Start the supervisor, record it, then let it start the task."""
        del spec  # the supervisor reads it from the launch record
        run.child, run.pidfd, run.output = start_supervisor(self.config.python, run.run_dir)
        run.pid = run.child.pid
        self._watch(run)
        if run.kill_requested:
            self._signal(run)

    # -- watching --------------------------------------------------------------------------------

    def _watch(self, run: CommandRun) -> None:
        loop = asyncio.get_running_loop()
        if run.pidfd is not None:
            loop.add_reader(run.pidfd, self._on_exit, run)
        if run.output is not None:
            loop.add_reader(run.output, self._on_output, run)

    def _on_output(self, run: CommandRun) -> bool:
        """The supervisor's stdout: ``running PID`` means the task's program runs. False once
        nothing more can be read now (end of file, or no data yet)."""
        if run.output is None:
            return False
        try:
            data = os.read(run.output, 4096)
        except BlockingIOError:
            return False
        except OSError:
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(run.output)
            run.output = None
            return False
        run.buffer += data
        while b"\n" in run.buffer:
            line, run.buffer = run.buffer.split(b"\n", 1)
            if line.startswith(b"running ") and not run.running:
                with contextlib.suppress(ValueError):
                    run.task_pid = int(line.split()[1])
                self._now_running(run)
        return True

    def _now_running(self, run: CommandRun) -> None:
        run.running = True
        if not run.silent:
            self._report(TaskEvent(run.key, TaskState.RUNNING))

    def _on_exit(self, run: CommandRun) -> None:
        """The supervisor exited: read the rest of its output, then its exit record."""
        while self._on_output(run):  # a "running" line still in the pipe comes first
            pass
        if run.child is not None:
            run.child.wait()
        elif run.pid is not None:  # reattached: reap it if it happens to be our child
            with contextlib.suppress(ChildProcessError):
                os.waitpid(run.pid, os.WNOHANG)
        run.stop_watching(asyncio.get_running_loop())
        self._ended(run, records.read_json(run.run_dir / records.EXIT_FILE))

    def _signal(self, run: CommandRun) -> None:
        if run.pidfd is None:
            return
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(run.pidfd, signal.SIGTERM)

    # -- the end ---------------------------------------------------------------------------------

    def _ended(self, run: CommandRun, record: dict[str, Any] | None) -> None:
        """Report how the run ended, from the supervisor's exit record."""
        event = end_of_run(run, record, self.config.isolation)
        if event is None:
            self._killed_before_start(run)
            return
        self.tally.add(event.usage)
        self._end(run, event)

    def _killed_before_start(self, run: CommandRun) -> None:
        reason = run.kill_reason
        if reason == TaskReason.UNSPECIFIED:
            reason = TaskReason.TASK_KILLED_DURING_LAUNCH
        self._end(run, TaskEvent(run.key, TaskState.KILLED, reason, "killed before it started"))

    def _end(self, run: CommandRun, event: TaskEvent) -> None:
        """Free the run's key, then report its terminal state (unless it was killed silently)."""
        if self._runs.get(run.key) is run:
            del self._runs[run.key]
        if not self._runs:
            self._idle.set()
        if not run.silent:
            self._report(event)

    # -- after an agent restart ------------------------------------------------------------------

    def _reattach(self, run: CommandRun, state: TaskState) -> None:
        if self._runs.get(run.key) is not run:
            return  # closed meanwhile
        supervisor = records.read_json(run.run_dir / records.SUPERVISOR_FILE)
        if supervisor is None:  # the agent died before it let a supervisor start the task
            if state in (TaskState.STAGING, TaskState.STARTING) and not run.kill_requested:
                self._start(run)
            else:
                run.kill_requested = True
                self._killed_before_start(run)
            return
        run.running = state in (TaskState.RUNNING, TaskState.KILLING)
        if state == TaskState.KILLING:
            run.kill_requested = True
        pidfd = open_pidfd(supervisor)
        if pidfd is None:  # it ended while the agent was down
            if isinstance(supervisor.get("pid"), int):  # reap it if it is our child
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(supervisor["pid"], os.WNOHANG)
            record = records.read_json(run.run_dir / records.EXIT_FILE)
            never_started = record is not None and record.get("outcome") == "not_started"
            if never_started and not run.kill_requested:
                self._start(run)
                return
            if record is not None and record.get("outcome") == "exited" and not run.running:
                self._now_running(run)  # it did run: say so before how it ended
            self._ended(run, record)
            return
        run.pid, run.pidfd = supervisor["pid"], pidfd
        self._watch(run)
        launch = records.read_json(run.run_dir / records.LAUNCH_FILE) or {}
        if launch.get("cgroup"):
            run.limits = TaskLimits(cgroup=cgroups.TaskCgroup.from_json(launch["cgroup"]))
        task = records.read_json(run.run_dir / records.TASK_FILE)
        if task is not None and isinstance(task.get("pid"), int):
            run.task_pid = task["pid"]
            if not run.running:
                self._now_running(run)
        if run.kill_requested:
            self._signal(run)
