"""``Isolation``: how the agent confines its command tasks, chosen once when it starts.

Every command task runs in its own session and process group whatever the mode; the modes
differ in what limits its resources (``--isolation``):

- ``cgroups``: a cgroup per task (``agent.tasks.isolation.cgroups``, v2 when the host has memory and
  cpu there, v1 otherwise): a hard memory limit at the task's ``mem`` (over it, the kernel's OOM
  killer ends the task: FAILED, REASON_MEMORY_LIMIT), CPU shares and a quota of ``cpus``; CPU
  time and peak memory read from the cgroup; every process the task starts is found and killed
  through it.
- ``rlimits``: ``RLIMIT_AS`` (address space) at the task's ``mem``: allocations past it fail
  inside the task, which then usually exits non-zero (FAILED, REASON_COMMAND_FAILED: without a
  cgroup the agent cannot tell an out-of-memory exit from another); no CPU limit; usage from the
  kernel's accounting of the task's process.
- ``none``: no limits (like Nomad's ``raw_exec``); usage as with rlimits.

``choose(None, ...)`` picks the strongest available: cgroups when ``cgroup_discovery.detect``
finds writable memory and cpu controllers, rlimits otherwise (the caller logs the choice once,
with why). Asking for cgroups where there are none is an ``IsolationError`` (the daemon exits 1).

Invariants: one ``Isolation`` per agent; ``prepare`` either returns the task's limits with its
cgroup created or raises ``OSError`` having created nothing that stays; the agent's scope
directory is removed by ``close`` once no task cgroup is left in it.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from fairshare.resources import ResourceVector

from agent.core.records import TaskKey
from agent.tasks.isolation import cgroup_discovery, cgroups

__all__ = ["MODES", "Isolation", "IsolationError", "TaskLimits", "choose"]

MODES: Final = ("none", "rlimits", "cgroups")
_MIB: Final = 1 << 20


class IsolationError(Exception):
    """The isolation asked for is not available on this host; the message says why."""


@dataclass(frozen=True, slots=True)
class TaskLimits:
    """What confines one task: its cgroup (cgroups mode) or its address-space rlimit."""

    cgroup: cgroups.TaskCgroup | None = None
    rlimit_as: int | None = None


def memory_bytes(resources: ResourceVector) -> int | None:
    """The task's ``mem`` (MiB) in bytes; None when it declares none."""
    millis = resources.millis("mem")
    return millis * _MIB // 1000 if millis > 0 else None


def cpus(resources: ResourceVector) -> float | None:
    """The task's ``cpus``; None when it declares none."""
    millis = resources.millis("cpus")
    return millis / 1000 if millis > 0 else None


class Isolation:
    """The agent's isolation mode and, with cgroups, where its tasks' cgroups live."""

    def __init__(
        self, mode: str, hierarchies: cgroup_discovery.Hierarchies | None = None, scope: str = ""
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"isolation {mode!r} is not one of {', '.join(MODES)}")
        if mode == "cgroups" and hierarchies is None:
            raise ValueError("cgroups isolation needs the cgroup hierarchies")
        self.mode = mode
        self.hierarchies = hierarchies
        self.scope = scope

    def describe(self) -> str:
        """What the mode enforces, for the log line at start."""
        if self.mode == "cgroups" and self.hierarchies is not None:
            return (
                f"{self.hierarchies.describe()}: memory hard limit and CPU shares and quota"
                f" per task, under fairshare/{self.scope}"
            )
        if self.mode == "rlimits":
            return "rlimits: address-space limit at the task's mem, no CPU limit"
        return "none: tasks run without resource limits"

    def prepare(self, key: TaskKey, resources: ResourceVector) -> TaskLimits:
        """The limits of a task about to start (its cgroup created); ``OSError`` if refused."""
        if self.mode == "rlimits":
            return TaskLimits(rlimit_as=memory_bytes(resources))
        if self.mode != "cgroups" or self.hierarchies is None:
            return TaskLimits()
        cgroup = cgroup_discovery.task_cgroup(
            self.hierarchies, self.scope, cgroup_discovery.task_name(*key)
        )
        try:
            cgroups.create(cgroup, memory_bytes(resources), cpus(resources))
        except OSError:
            with contextlib.suppress(OSError):
                cgroups.remove(cgroup)
            raise
        return TaskLimits(cgroup=cgroup)

    def release(self, limits: TaskLimits) -> None:
        """Undo ``prepare`` for a task that never started (best effort)."""
        if limits.cgroup is not None:
            with contextlib.suppress(OSError):
                cgroups.kill_all(limits.cgroup)
                cgroups.remove(limits.cgroup)

    def scope_dirs(self) -> list[Path]:
        """The agent's scope directory in each hierarchy (cgroups mode), else nothing."""
        found = self.hierarchies
        if self.mode != "cgroups" or found is None:
            return []
        mounts = {found.memory, found.cpu, *([found.cpuacct] if found.cpuacct else [])}
        return [Path(mount) / cgroups.ROOT_NAME / self.scope for mount in sorted(mounts)]

    def close(self) -> None:
        """Remove the agent's scope directories if no task cgroup is left in them."""
        for directory in self.scope_dirs():
            with contextlib.suppress(OSError):
                os.rmdir(directory)


def choose(requested: str | None, work_dir: Path) -> tuple[Isolation, str]:
    """The isolation to use and a sentence saying why; ``IsolationError`` for ``cgroups``
    asked for where the agent cannot use them."""
    if requested in ("none", "rlimits"):
        return Isolation(requested), f"--isolation {requested}"
    hierarchies = cgroup_discovery.detect()
    if hierarchies is not None:
        scope = cgroup_discovery.scope_name(work_dir)
        why = "--isolation cgroups" if requested else "the strongest available"
        return Isolation("cgroups", hierarchies, scope), why
    problem = (
        "no writable cgroup memory and cpu controllers (v2 with both, or v1 memory and cpu"
        " mounts; the agent must run as root)"
    )
    if requested == "cgroups":
        raise IsolationError(f"--isolation cgroups: {problem}")
    return Isolation("rlimits"), f"rlimits instead of cgroups: {problem}"
