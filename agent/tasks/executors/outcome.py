"""What a command task's end means, and what command tasks use.

``exit_event`` turns a supervisor's ``exited`` record (``agent.tasks.executors.supervisor``) into
the task's terminal ``TaskEvent``, in this order: a run whose supervisor got the kill before the
task's process ended is KILLED (with the kill's reason, whatever its exit status; a kill that
came after the end changes nothing: the task is reported as it ended); the OOM killer in its
cgroup is FAILED, REASON_MEMORY_LIMIT; exit 0 is FINISHED; another exit code FAILED,
REASON_COMMAND_FAILED, with the code and the last lines of stderr; death by a signal FAILED,
REASON_EXECUTOR_TERMINATED.
The event carries the record's usage and is stamped with the record's end time.

``UsageTally`` keeps what ended command tasks used (CPU seconds, a histogram of peak memory:
bounded, no per-task series); ``live_usage`` reads what one running task uses now, from its
cgroup or, without one, from ``/proc`` (its main process and the children it waited for).
"""

from __future__ import annotations

import bisect
import contextlib
import os
import signal
from pathlib import Path
from typing import Any

from fairshare.command import ResourceUsage
from fairshare.task_states import TaskState

from agent.core.records import MEMORY_PEAK_BUCKETS, CommandTask, TaskKey, TaskReason
from agent.tasks.executors.base import TaskEvent
from agent.tasks.isolation import cgroups
from agent.tasks.isolation.modes import TaskLimits
from agent.tasks.sandbox import read_tail

__all__ = ["UsageTally", "exit_event", "live_usage", "record_usage"]

_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def record_usage(record: dict[str, Any]) -> ResourceUsage | None:
    """The usage an exit record holds (None if it holds none or nonsense)."""
    cpu, peak = record.get("cpu_seconds"), record.get("memory_peak_bytes")
    if not isinstance(cpu, int | float) or not isinstance(peak, int):
        return None
    with contextlib.suppress(ValueError):
        return ResourceUsage(cpu_seconds=float(cpu), memory_peak_bytes=peak)
    return None


def exit_event(
    key: TaskKey,
    task: CommandTask,
    sandbox: Path,
    record: dict[str, Any],
    kill: TaskReason | None,
) -> TaskEvent:
    """The terminal event of an ``exited`` record; ``kill``: the reason of a kill the agent
    asked for (None: none was)."""
    stamp = record.get("ended_at")
    when = float(stamp) if isinstance(stamp, int | float) else None
    usage = record_usage(record)
    code, signum = record.get("exit_code"), record.get("signal")

    def event(
        state: TaskState, reason: TaskReason, message: str, exit_code: int | None = None
    ) -> TaskEvent:
        return TaskEvent(key, state, reason, message, exit_code, timestamp=when, usage=usage)

    if record.get("killed"):
        how = "SIGKILL after the grace period" if record.get("hard_killed") else "SIGTERM"
        return event(TaskState.KILLED, kill or TaskReason.UNSPECIFIED, f"killed ({how})")
    if record.get("oom"):
        limit = task.resources.millis("mem") // 1000
        message = f"out of memory: the task needed more than its mem ({limit} MiB) and was killed"
        return event(TaskState.FAILED, TaskReason.MEMORY_LIMIT, message)
    if code == 0:
        return event(TaskState.FINISHED, TaskReason.UNSPECIFIED, "exited 0", 0)
    tail = read_tail(sandbox, "stderr")
    stderr = f"; stderr:\n{tail}" if tail else ""
    if isinstance(code, int):
        return event(TaskState.FAILED, TaskReason.COMMAND_FAILED, f"exited {code}{stderr}", code)
    reason = TaskReason.EXECUTOR_TERMINATED
    return event(TaskState.FAILED, reason, f"killed by signal {_signal_name(signum)}{stderr}")


def _signal_name(signum: object) -> str:
    if isinstance(signum, int):
        with contextlib.suppress(ValueError):
            return f"{signum} ({signal.Signals(signum).name})"
        return str(signum)
    return "unknown"


def live_usage(limits: TaskLimits, task_pid: int | None) -> tuple[float, int]:
    """(CPU seconds, memory bytes now) of a running task; zeros for what cannot be read."""
    if limits.cgroup is not None:
        cpu, _ = cgroups.usage(limits.cgroup)
        return cpu or 0.0, cgroups.memory_now(limits.cgroup) or 0
    if task_pid is None:
        return 0.0, 0
    try:
        fields = Path(f"/proc/{task_pid}/stat").read_text().rsplit(")", 1)[1].split()
        resident = int(Path(f"/proc/{task_pid}/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0, 0
    ticks = sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
    return ticks / _TICKS, resident * _PAGE


class UsageTally:
    """What ended command tasks used, in all (CPU seconds, a histogram of peak memory)."""

    def __init__(self) -> None:
        self.cpu_seconds = 0.0
        self.peaks = [0] * (len(MEMORY_PEAK_BUCKETS) + 1)
        self.peak_sum = 0

    def add(self, usage: ResourceUsage | None) -> None:
        """Count one ended task's usage (nothing if unknown)."""
        if usage is None:
            return
        self.cpu_seconds += usage.cpu_seconds
        self.peaks[bisect.bisect_left(MEMORY_PEAK_BUCKETS, usage.memory_peak_bytes)] += 1
        self.peak_sum += usage.memory_peak_bytes
