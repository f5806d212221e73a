"""cgroups of command tasks: find the controllers, create a task's cgroup with its limits, move
a process into it, read what it used, end what is left in it, remove it.

Finding the hierarchies and naming a task's cgroup in them is
``agent.tasks.isolation.cgroup_discovery`` (the agent's part only: the supervisor never loads
it), which builds on this module; this module never imports it.

Limits: memory is a hard limit at the task's ``mem`` (v1 ``memory.limit_in_bytes`` and, where
swap is accounted, ``memory.memsw.limit_in_bytes`` at the same value so swapping cannot go past
it; v2 ``memory.max`` and ``memory.swap.max`` 0). When the task's processes need more, the
kernel's OOM killer kills inside the cgroup, never the agent or the task's supervisor (both are
outside it). CPU: shares in proportion to ``cpus`` (v1 ``cpu.shares`` 1024 per CPU, v2
``cpu.weight`` 100 per CPU) and a hard quota of ``cpus`` CPUs per 100 ms period
(``cpu.cfs_quota_us``, ``cpu.max``). A task without ``mem`` or ``cpus`` gets no limit of that
kind.

What it used: CPU time (v1 ``cpuacct.usage``, v2 ``cpu.stat`` usage_usec; unknown on a v1 host
without cpuacct), peak memory (v1 ``memory.max_usage_in_bytes``, v2 ``memory.peak``, or
``memory.current`` on kernels without it), and whether the OOM killer killed in it (v1
``memory.oom_control``, v2 ``memory.events``: ``oom_kill``).

Invariants: standard library only, and only its cheapest modules at import (no dataclasses,
pathlib, typing, re or hashlib: the supervisor of every command task loads this module, and its
start time is part of every launch); every function works on the paths it is given (no global
state), so tests can point them at a fake tree; a ``TaskCgroup`` survives a JSON round trip
(the supervisor and a restarted agent read it from the task's run directory).
"""

from __future__ import annotations

import errno
import os
import signal
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs the supervisor's start time; annotations are not evaluated
    from typing import Any, Final

__all__ = [
    "CPU_PERIOD_US",
    "ROOT_NAME",
    "TaskCgroup",
    "create",
    "join",
    "kill_all",
    "memory_now",
    "oom_killed",
    "procs",
    "remove",
    "usage",
]

ROOT_NAME: Final = "fairshare"
CPU_PERIOD_US: Final = 100_000


class Value:
    """A small immutable value: equal, hashable and printed by its fields (``_fields``)."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def _key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({shown})"

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")


class TaskCgroup(Value):
    """One task's cgroup directories (v1: one per hierarchy; v2: ``memory`` is the one)."""

    __slots__ = ("cpu", "cpuacct", "memory", "version")
    _fields = ("version", "memory", "cpu", "cpuacct")
    version: int
    memory: str
    cpu: str
    cpuacct: str | None

    def __init__(self, version: int, memory: str, cpu: str, cpuacct: str | None = None) -> None:
        for name, value in zip(self._fields, (version, memory, cpu, cpuacct), strict=True):
            object.__setattr__(self, name, value)

    @property
    def dirs(self) -> list[str]:
        """Every distinct directory of the cgroup."""
        out: list[str] = []
        for path in (self.memory, self.cpu, self.cpuacct):
            if path and path not in out:
                out.append(path)
        return out

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (``from_json`` reads it back)."""
        return {
            "version": self.version,
            "memory": self.memory,
            "cpu": self.cpu,
            "cpuacct": self.cpuacct,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TaskCgroup:
        """The cgroup ``to_json`` wrote; ``ValueError`` for anything else."""
        try:
            cpuacct = data.get("cpuacct")
            acct = None if cpuacct is None else str(cpuacct)
            return cls(int(data["version"]), str(data["memory"]), str(data["cpu"]), acct)
        except (KeyError, TypeError) as error:
            raise ValueError(f"not a task cgroup: {data!r}") from error


def join_path(*parts: str) -> str:
    return os.path.join(*parts)


def read_text(path: str) -> str:
    with open(path, encoding="ascii", errors="replace") as file:
        return file.read()


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as file:
        file.write(text)


def enable_controllers(mount: str, directory: str) -> None:
    """v2: let ``memory`` and ``cpu`` reach the children of every level down to ``directory``."""
    level = mount
    levels = [mount]
    for part in os.path.relpath(directory, mount).split(os.sep):
        if part not in ("", "."):
            level = join_path(level, part)
            levels.append(level)
    for path in levels:
        _write(join_path(path, "cgroup.subtree_control"), "+memory +cpu")


def create(cgroup: TaskCgroup, memory_bytes: int | None, cpus: float | None) -> None:
    """Create the cgroup (and its parents) with its limits; ``OSError`` if the kernel refuses.

    A directory left from an earlier run of the same task is reused after ending what is in it.
    """
    if cgroup.version == 2:
        scope = os.path.dirname(cgroup.memory)  # <mount>/fairshare/<scope>/<task>
        os.makedirs(scope, exist_ok=True)
        enable_controllers(os.path.dirname(os.path.dirname(scope)), scope)
    for directory in cgroup.dirs:
        os.makedirs(directory, exist_ok=True)
    kill_all(cgroup)
    if memory_bytes is not None:
        _limit_memory(cgroup, memory_bytes)
    if cpus is not None and cpus > 0:
        _limit_cpu(cgroup, cpus)


def _limit_memory(cgroup: TaskCgroup, limit: int) -> None:
    memory = cgroup.memory
    if cgroup.version == 2:
        _write(join_path(memory, "memory.max"), str(limit))
        try:  # noqa: SIM105 - contextlib would cost the supervisor's start time
            _write(join_path(memory, "memory.swap.max"), "0")
        except FileNotFoundError:  # no swap accounting on this kernel
            pass
        return
    swap = join_path(memory, "memory.memsw.limit_in_bytes")
    if os.path.exists(swap) and int(read_text(swap)) < limit:  # memsw must stay >= the limit
        _write(swap, str(limit))
        _write(join_path(memory, "memory.limit_in_bytes"), str(limit))
        return
    _write(join_path(memory, "memory.limit_in_bytes"), str(limit))
    if os.path.exists(swap):
        _write(swap, str(limit))


def _limit_cpu(cgroup: TaskCgroup, cpus: float) -> None:
    cpu = cgroup.cpu
    quota = max(1000, round(cpus * CPU_PERIOD_US))
    if cgroup.version == 2:
        _write(join_path(cpu, "cpu.weight"), str(min(10_000, max(1, round(cpus * 100)))))
        _write(join_path(cpu, "cpu.max"), f"{quota} {CPU_PERIOD_US}")
        return
    _write(join_path(cpu, "cpu.shares"), str(max(2, round(cpus * 1024))))
    _write(join_path(cpu, "cpu.cfs_period_us"), str(CPU_PERIOD_US))
    _write(join_path(cpu, "cpu.cfs_quota_us"), str(quota))


def join(cgroup: TaskCgroup, pid: int) -> None:
    """Move process ``pid`` into the cgroup (every hierarchy of it)."""
    for directory in cgroup.dirs:
        _write(join_path(directory, "cgroup.procs"), str(pid))


def procs(cgroup: TaskCgroup) -> set[int]:
    """Processes in the cgroup (empty when it does not exist)."""
    found: set[int] = set()
    for directory in cgroup.dirs:
        try:
            found.update(
                int(line) for line in read_text(join_path(directory, "cgroup.procs")).split()
            )
        except FileNotFoundError:
            continue
    return found


def kill_all(cgroup: TaskCgroup, timeout: float = 2.0) -> bool:
    """SIGKILL every process in the cgroup until it is empty; False if some remain after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    kill_file = join_path(cgroup.memory, "cgroup.kill")
    if cgroup.version == 2 and os.path.exists(kill_file):
        try:  # noqa: SIM105 - contextlib would cost the supervisor's start time
            _write(kill_file, "1")
        except OSError:
            pass
    while True:
        remaining = procs(cgroup)
        if not remaining:
            return True
        if time.monotonic() > deadline:
            return False
        for pid in remaining:
            try:  # noqa: SIM105 - contextlib would cost the supervisor's start time
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.005)


def _field(text: str, name: str) -> int | None:
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == name:
            return int(parts[1])
    return None


def usage(cgroup: TaskCgroup) -> tuple[float | None, int | None]:
    """(CPU seconds, peak memory bytes) of the cgroup so far; None for what is unknown."""
    cpu: float | None = None
    peak: int | None = None
    memory = cgroup.memory
    try:
        if cgroup.version == 2:
            micros = _field(read_text(join_path(cgroup.cpu, "cpu.stat")), "usage_usec")
            cpu = None if micros is None else micros / 1e6
            name = (
                "memory.peak"
                if os.path.exists(join_path(memory, "memory.peak"))
                else "memory.current"
            )
            peak = int(read_text(join_path(memory, name)))
        else:
            if cgroup.cpuacct:
                cpu = int(read_text(join_path(cgroup.cpuacct, "cpuacct.usage"))) / 1e9
            peak = int(read_text(join_path(memory, "memory.max_usage_in_bytes")))
    except (OSError, ValueError):
        pass
    return cpu, peak


def memory_now(cgroup: TaskCgroup) -> int | None:
    """Memory the cgroup uses now, in bytes (None if unreadable)."""
    name = "memory.current" if cgroup.version == 2 else "memory.usage_in_bytes"
    try:
        return int(read_text(join_path(cgroup.memory, name)))
    except (OSError, ValueError):
        return None


def oom_killed(cgroup: TaskCgroup) -> bool:
    """True if the kernel's OOM killer killed a process of the cgroup."""
    name = "memory.events" if cgroup.version == 2 else "memory.oom_control"
    try:
        count = _field(read_text(join_path(cgroup.memory, name)), "oom_kill")
    except (OSError, ValueError):
        return False
    return bool(count)


def remove(cgroup: TaskCgroup, timeout: float = 2.0) -> bool:
    """Remove the cgroup's directories (it must be empty; retried while the kernel still
    counts exiting processes); False if one could not be removed within ``timeout``."""
    deadline = time.monotonic() + timeout
    removed = True
    for directory in cgroup.dirs:
        while True:
            try:
                os.rmdir(directory)
                break
            except FileNotFoundError:
                break
            except OSError as error:
                if error.errno != errno.EBUSY or time.monotonic() > deadline:
                    removed = False
                    break
                time.sleep(0.005)
    return removed
