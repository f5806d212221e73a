"""``PlaceholderExecutor``: runs placeholder tasks as asyncio timers that "hold resources".

A placeholder task reports STARTING, waits ``startup_delay``, reports RUNNING, waits
``duration`` (forever when unset) and then reports FINISHED (exit code 0) or FAILED (any other
exit code, REASON_COMMAND_FAILED). With ``fail_on_start`` it reports STARTING then FAILED
(REASON_EXECUTOR_TERMINATED). ``kill`` cancels it and it reports KILLED (reason
REASON_TASK_KILLED_DURING_LAUNCH if it was not RUNNING yet, else the reason given to ``kill``).
A run launched with ``resume=True`` (a RUNNING task recovered after an agent restart) is RUNNING
from the start: it reports neither STARTING nor RUNNING again, only how it ends.

Invariants:
- At most one run per task key; a key is free again as soon as its run ends or is killed: a
  run that ends on its own leaves ``running()`` before it reports its terminal state, so no
  observer of that report ever sees a finished task still counted as running (the done-callback
  runs one loop step later, and Python 3.13 orders it after the observer's wake-up).
- Every run reports exactly one terminal state, unless it was killed with ``silent=True``.
- Reports go through the ``report`` callback on the event loop, never from inside ``launch`` or
  ``kill`` (no re-entrancy into the caller). No subprocesses: the executor is only timers, and
  every run ends with the agent (``aclose`` stops them silently).
- It keeps the contract of ``agent.tasks.executors.base``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from fairshare.task_states import TaskState

from agent.core.records import PlaceholderSpec, TaskKey, TaskReason
from agent.tasks.executors.base import Report, TaskEvent

__all__ = ["PlaceholderExecutor"]


@dataclass(slots=True)
class _Run:
    key: TaskKey
    spec: PlaceholderSpec
    task: asyncio.Task[None] | None = None
    running: bool = False
    resumed: bool = False
    silent: bool = False
    kill_reason: TaskReason = TaskReason.UNSPECIFIED


class PlaceholderExecutor:
    """Starts, times and kills placeholder tasks; reports their states through ``report``."""

    def __init__(self, report: Report) -> None:
        self._report = report
        self._runs: dict[TaskKey, _Run] = {}
        self._unfinished: set[asyncio.Task[None]] = set()  # includes killed runs still ending

    def launch(self, key: TaskKey, spec: PlaceholderSpec, *, resume: bool = False) -> None:
        """Start a placeholder task (needs a running event loop); a live key is an error.

        ``resume``: the task is already RUNNING (recovered): run ``spec.duration`` silently.
        """
        if key in self._runs:
            raise ValueError(f"task {key[1]} of framework {key[0]} is already running")
        run = _Run(key, spec, running=resume, resumed=resume)
        run.task = asyncio.get_running_loop().create_task(self._run(run), name=f"task:{key[1]}")
        run.task.add_done_callback(lambda _task: self._finished(run))
        self._runs[key] = run
        self._unfinished.add(run.task)

    def kill(
        self,
        key: TaskKey,
        reason: TaskReason = TaskReason.UNSPECIFIED,
        *,
        silent: bool = False,
        grace: float | None = None,
    ) -> bool:
        """Cancel the task's run; it reports KILLED unless ``silent``. False if not running.
        A placeholder ends at once: ``grace`` changes nothing."""
        run = self._runs.pop(key, None)
        if run is None or run.task is None:
            return False
        run.kill_reason = reason
        run.silent = silent
        run.task.cancel()
        return True

    def kill_all(self, reason: TaskReason = TaskReason.UNSPECIFIED, *, silent: bool = False) -> int:
        """Kill every run; returns how many were running."""
        keys = list(self._runs)
        for key in keys:
            self.kill(key, reason, silent=silent)
        return len(keys)

    def running(self) -> list[TaskKey]:
        """Keys of the runs not ended yet."""
        return list(self._runs)

    async def wait_idle(self, timeout: float) -> bool:
        """Wait until every run has ended and reported (killed ones too); False on timeout."""
        if self._unfinished:
            _, not_done = await asyncio.wait(set(self._unfinished), timeout=timeout)
            if not_done:
                return False
        await asyncio.sleep(0)  # done-callbacks (KILLED reports) run one loop step later
        return True

    async def aclose(self) -> None:
        """Stop every run silently and wait for them to end."""
        self.kill_all(silent=True)
        if self._unfinished:
            await asyncio.wait(set(self._unfinished))

    async def _run(self, run: _Run) -> None:
        spec = run.spec
        if not run.resumed and not await self._start(run):
            return
        if spec.duration is None:
            await asyncio.Event().wait()  # holds its resources until killed
        else:
            await asyncio.sleep(spec.duration)
        self._release(run)
        if spec.exit_code == 0:
            finished = TaskState.FINISHED
            self._emit(run, TaskEvent(run.key, finished, message="exited 0", exit_code=0))
        else:
            code = spec.exit_code
            failed, reason = TaskState.FAILED, TaskReason.COMMAND_FAILED
            self._emit(run, TaskEvent(run.key, failed, reason, f"exited {code}", exit_code=code))

    async def _start(self, run: _Run) -> bool:
        """STARTING, the startup delay, RUNNING; False after FAILED (``fail_on_start``)."""
        spec = run.spec
        self._emit(run, TaskEvent(run.key, TaskState.STARTING))
        if spec.fail_on_start:
            self._release(run)
            failed = TaskState.FAILED
            reason = TaskReason.EXECUTOR_TERMINATED
            self._emit(run, TaskEvent(run.key, failed, reason, "failed on start (fail_on_start)"))
            return False
        if spec.startup_delay > 0:
            await asyncio.sleep(spec.startup_delay)
        run.running = True
        self._emit(run, TaskEvent(run.key, TaskState.RUNNING))
        return True

    def _release(self, run: _Run) -> None:
        """Free the run's key (before its terminal report; kills free it in ``kill``)."""
        if self._runs.get(run.key) is run:
            del self._runs[run.key]

    def _emit(self, run: _Run, event: TaskEvent) -> None:
        if not run.silent:
            self._report(event)

    def _finished(self, run: _Run) -> None:
        """Done-callback: free the key; report KILLED for a cancelled run (even unstarted)."""
        self._release(run)
        task = run.task
        if task is not None:
            self._unfinished.discard(task)
        if task is None or run.silent:
            return
        if task.cancelled():
            reason = run.kill_reason
            if not run.running and reason == TaskReason.UNSPECIFIED:
                reason = TaskReason.TASK_KILLED_DURING_LAUNCH
            self._report(TaskEvent(run.key, TaskState.KILLED, reason, "killed"))
        elif task.exception() is not None:
            message = f"placeholder task crashed: {task.exception()!r}"
            failed, reason = TaskState.FAILED, TaskReason.EXECUTOR_TERMINATED
            self._report(TaskEvent(run.key, failed, reason, message))
