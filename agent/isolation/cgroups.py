"""cgroups of command tasks: find the controllers, create a task's cgroup with its limits, move
a process into it, read what it used, end what is left in it, remove it.

Which hierarchy: cgroup v2 when a unified hierarchy offers both the ``memory`` and ``cpu``
controllers (a pure v2 host, or a hybrid one whose unified tree has them), v1 otherwise (the
``memory`` and ``cpu`` hierarchies, and ``cpuacct`` for CPU time, mounted together or apart).
``detect`` returns None when neither is there or the agent cannot create its directory in them
(not root, a read-only /sys/fs/cgroup).

Layout (like Mesos's ``--cgroups_root``): ``<hierarchy>/fairshare/<scope>/<task>`` in each
hierarchy used. ``scope`` names the agent (from its work dir, so a restarted agent on the same
work dir finds its tasks' cgroups and two agents on one host never share one), ``task`` the
task (from its framework and task ids).

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

Invariants: standard library only; every function works on the paths it is given (no global
state), so tests can point them at a fake tree; a ``TaskCgroup`` survives a JSON round trip
(the supervisor and a restarted agent read it from the task's run directory).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

__all__ = [
    "CPU_PERIOD_US",
    "ROOT_NAME",
    "Hierarchies",
    "TaskCgroup",
    "create",
    "detect",
    "join",
    "kill_all",
    "memory_now",
    "oom_killed",
    "procs",
    "remove",
    "scope_name",
    "task_cgroup",
    "task_name",
    "usage",
]

ROOT_NAME: Final = "fairshare"
CPU_PERIOD_US: Final = 100_000
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True, slots=True)
class Hierarchies:
    """Where this host's memory and cpu controllers are mounted (v2: all the same mount)."""

    version: int
    memory: str
    cpu: str
    cpuacct: str | None = None  # v1: where cpuacct is mounted (None: CPU time is unknown)

    def describe(self) -> str:
        """``cgroups v1 (memory /sys/fs/cgroup/memory, cpu ...)`` for the log."""
        if self.version == 2:
            return f"cgroups v2 ({self.memory})"
        acct = f", cpuacct {self.cpuacct}" if self.cpuacct else ", no cpuacct"
        return f"cgroups v1 (memory {self.memory}, cpu {self.cpu}{acct})"


@dataclass(frozen=True, slots=True)
class TaskCgroup:
    """One task's cgroup directories (v1: one per hierarchy; v2: ``memory`` is the one)."""

    version: int
    memory: str
    cpu: str
    cpuacct: str | None = None

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


def _mounts(text: str) -> list[tuple[str, str, set[str]]]:
    out = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4:
            mount_point = fields[1].replace("\\040", " ")
            out.append((mount_point, fields[2], set(fields[3].split(","))))
    return out


def _read(path: str | Path) -> str:
    with open(path, encoding="ascii", errors="replace") as file:
        return file.read()


def _write(path: str | Path, text: str) -> None:
    with open(path, "w", encoding="ascii") as file:
        file.write(text)


def _v2_mount(mounts: list[tuple[str, str, set[str]]]) -> str | None:
    for mount_point, fstype, _ in mounts:
        if fstype != "cgroup2":
            continue
        try:
            controllers = set(_read(Path(mount_point) / "cgroup.controllers").split())
        except OSError:
            continue
        if {"memory", "cpu"} <= controllers:
            return mount_point
    return None


def _v1_mounts(mounts: list[tuple[str, str, set[str]]]) -> Hierarchies | None:
    found: dict[str, str] = {}
    for mount_point, fstype, options in mounts:
        if fstype == "cgroup":
            for controller in ("memory", "cpu", "cpuacct"):
                if controller in options:
                    found.setdefault(controller, mount_point)
    if "memory" not in found or "cpu" not in found:
        return None
    return Hierarchies(1, found["memory"], found["cpu"], found.get("cpuacct"))


def detect(mounts_text: str | None = None) -> Hierarchies | None:
    """The hierarchies to use (v2 when it has memory and cpu, else v1), or None if there are
    none or the agent cannot create ``fairshare/`` in them."""
    try:
        text = _read("/proc/self/mounts") if mounts_text is None else mounts_text
    except OSError:
        return None
    mounts = _mounts(text)
    unified = _v2_mount(mounts)
    found = Hierarchies(2, unified, unified) if unified else _v1_mounts(mounts)
    if found is None:
        return None
    try:
        for mount_point in {m for m in (found.memory, found.cpu, found.cpuacct) if m}:
            root = Path(mount_point) / ROOT_NAME
            root.mkdir(exist_ok=True)
            if found.version == 2:
                _enable_controllers(Path(mount_point), root)
    except OSError:
        return None
    return found


def _enable_controllers(mount: Path, directory: Path) -> None:
    """v2: let ``memory`` and ``cpu`` reach the children of every level down to ``directory``."""
    levels = [mount]
    for part in directory.relative_to(mount).parts:
        levels.append(levels[-1] / part)
    for level in levels:
        _write(level / "cgroup.subtree_control", "+memory +cpu")


def _component(text: str, limit: int) -> str:
    cleaned = _UNSAFE.sub("_", text).lstrip(".") or "_"
    return cleaned[:limit]


def scope_name(work_dir: str | Path) -> str:
    """The agent's scope: ``agent-<hash of its work dir's real path>``."""
    digest = hashlib.sha256(os.path.realpath(work_dir).encode("utf-8", "surrogatepass"))
    return f"agent-{digest.hexdigest()[:16]}"


def task_name(framework_id: str, task_id: str) -> str:
    """A task's cgroup name: its id made safe, then a hash of both ids (unique per task)."""
    both = f"{framework_id}\0{task_id}".encode("utf-8", "surrogatepass")
    return f"{_component(task_id, 64)}-{hashlib.sha256(both).hexdigest()[:12]}"


def task_cgroup(hierarchies: Hierarchies, scope: str, name: str) -> TaskCgroup:
    """The directories of task ``name``'s cgroup in the agent ``scope``."""

    def under(mount: str) -> str:
        return str(Path(mount) / ROOT_NAME / scope / name)

    cpuacct = under(hierarchies.cpuacct) if hierarchies.cpuacct else None
    if hierarchies.version == 2:
        return TaskCgroup(2, under(hierarchies.memory), under(hierarchies.memory))
    return TaskCgroup(1, under(hierarchies.memory), under(hierarchies.cpu), cpuacct)


def create(cgroup: TaskCgroup, memory_bytes: int | None, cpus: float | None) -> None:
    """Create the cgroup (and its parents) with its limits; ``OSError`` if the kernel refuses.

    A directory left from an earlier run of the same task is reused after ending what is in it.
    """
    if cgroup.version == 2:
        leaf = Path(cgroup.memory)
        leaf.parent.mkdir(parents=True, exist_ok=True)
        mount = leaf.parents[2]  # <mount>/fairshare/<scope>/<task>
        _enable_controllers(mount, leaf.parent)
    for directory in cgroup.dirs:
        Path(directory).mkdir(parents=True, exist_ok=True)
    kill_all(cgroup)
    if memory_bytes is not None:
        _limit_memory(cgroup, memory_bytes)
    if cpus is not None and cpus > 0:
        _limit_cpu(cgroup, cpus)


def _limit_memory(cgroup: TaskCgroup, limit: int) -> None:
    memory = Path(cgroup.memory)
    if cgroup.version == 2:
        _write(memory / "memory.max", str(limit))
        with contextlib.suppress(FileNotFoundError):  # no swap accounting on this kernel
            _write(memory / "memory.swap.max", "0")
        return
    swap = memory / "memory.memsw.limit_in_bytes"
    if swap.exists() and int(_read(swap)) < limit:  # memsw must stay >= the memory limit
        _write(swap, str(limit))
        _write(memory / "memory.limit_in_bytes", str(limit))
        return
    _write(memory / "memory.limit_in_bytes", str(limit))
    if swap.exists():
        _write(swap, str(limit))


def _limit_cpu(cgroup: TaskCgroup, cpus: float) -> None:
    cpu = Path(cgroup.cpu)
    quota = max(1000, round(cpus * CPU_PERIOD_US))
    if cgroup.version == 2:
        _write(cpu / "cpu.weight", str(min(10_000, max(1, round(cpus * 100)))))
        _write(cpu / "cpu.max", f"{quota} {CPU_PERIOD_US}")
        return
    _write(cpu / "cpu.shares", str(max(2, round(cpus * 1024))))
    _write(cpu / "cpu.cfs_period_us", str(CPU_PERIOD_US))
    _write(cpu / "cpu.cfs_quota_us", str(quota))


def join(cgroup: TaskCgroup, pid: int) -> None:
    """Move process ``pid`` into the cgroup (every hierarchy of it)."""
    for directory in cgroup.dirs:
        _write(Path(directory) / "cgroup.procs", str(pid))


def procs(cgroup: TaskCgroup) -> set[int]:
    """Processes in the cgroup (empty when it does not exist)."""
    found: set[int] = set()
    for directory in cgroup.dirs:
        try:
            found.update(int(line) for line in _read(Path(directory) / "cgroup.procs").split())
        except FileNotFoundError:
            continue
    return found


def kill_all(cgroup: TaskCgroup, timeout: float = 2.0) -> bool:
    """SIGKILL every process in the cgroup until it is empty; False if some remain after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    kill_file = Path(cgroup.memory) / "cgroup.kill"
    if cgroup.version == 2 and kill_file.exists():
        with contextlib.suppress(OSError):
            _write(kill_file, "1")
    while True:
        remaining = procs(cgroup)
        if not remaining:
            return True
        if time.monotonic() > deadline:
            return False
        for pid in remaining:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
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
    memory = Path(cgroup.memory)
    try:
        if cgroup.version == 2:
            micros = _field(_read(Path(cgroup.cpu) / "cpu.stat"), "usage_usec")
            cpu = None if micros is None else micros / 1e6
            name = "memory.peak" if (memory / "memory.peak").exists() else "memory.current"
            peak = int(_read(memory / name))
        else:
            if cgroup.cpuacct:
                cpu = int(_read(Path(cgroup.cpuacct) / "cpuacct.usage")) / 1e9
            peak = int(_read(memory / "memory.max_usage_in_bytes"))
    except (OSError, ValueError):
        pass
    return cpu, peak


def memory_now(cgroup: TaskCgroup) -> int | None:
    """Memory the cgroup uses now, in bytes (None if unreadable)."""
    name = "memory.current" if cgroup.version == 2 else "memory.usage_in_bytes"
    try:
        return int(_read(Path(cgroup.memory) / name))
    except (OSError, ValueError):
        return None


def oom_killed(cgroup: TaskCgroup) -> bool:
    """True if the kernel's OOM killer killed a process of the cgroup."""
    name = "memory.events" if cgroup.version == 2 else "memory.oom_control"
    try:
        count = _field(_read(Path(cgroup.memory) / name), "oom_kill")
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
