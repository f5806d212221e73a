"""Finding this host's cgroup hierarchies and naming a command task's cgroup in them.

The agent's part of ``agent.tasks.isolation.cgroups``: the task supervisor never loads this
module (it only reads the ``TaskCgroup`` its launch record names).

Which hierarchy: cgroup v2 when a unified hierarchy offers both the ``memory`` and ``cpu``
controllers (a pure v2 host, or a hybrid one whose unified tree has them), v1 otherwise (the
``memory`` and ``cpu`` hierarchies, and ``cpuacct`` for CPU time, mounted together or apart).
``detect`` returns None when neither is there or the agent cannot create its directory in them
(not root, a read-only /sys/fs/cgroup).

Layout (like Mesos's ``--cgroups_root``): ``<hierarchy>/fairshare/<scope>/<task>`` in each
hierarchy used. ``scope`` names the agent (from its work dir, so a restarted agent on the same
work dir finds its tasks' cgroups and two agents on one host never share one), ``task`` the
task (from its framework and task ids).

Invariants: standard library only; every function works on what it is given (``detect`` reads
``/proc/self/mounts`` only when given no text), so tests can point them at a fake tree; a
task's cgroup name depends on its framework and task ids only, and an agent's scope on the real
path of its work dir only, so a restarted agent finds the cgroups of its tasks again.
"""

from __future__ import annotations

import hashlib
import os

from agent.tasks.isolation.cgroups import (
    ROOT_NAME,
    TaskCgroup,
    Value,
    enable_controllers,
    join_path,
    read_text,
)

__all__ = ["Hierarchies", "detect", "scope_name", "task_cgroup", "task_name"]


class Hierarchies(Value):
    """Where this host's memory and cpu controllers are mounted (v2: all the same mount);
    ``cpuacct``: v1's cpuacct mount (None: CPU time is unknown)."""

    __slots__ = ("cpu", "cpuacct", "memory", "version")
    _fields = ("version", "memory", "cpu", "cpuacct")
    version: int
    memory: str
    cpu: str
    cpuacct: str | None

    def __init__(self, version: int, memory: str, cpu: str, cpuacct: str | None = None) -> None:
        for name, value in zip(self._fields, (version, memory, cpu, cpuacct), strict=True):
            object.__setattr__(self, name, value)

    def describe(self) -> str:
        """``cgroups v1 (memory /sys/fs/cgroup/memory, cpu ...)`` for the log."""
        if self.version == 2:
            return f"cgroups v2 ({self.memory})"
        acct = f", cpuacct {self.cpuacct}" if self.cpuacct else ", no cpuacct"
        return f"cgroups v1 (memory {self.memory}, cpu {self.cpu}{acct})"


def _mounts(text: str) -> list[tuple[str, str, set[str]]]:
    out = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4:
            mount_point = fields[1].replace("\\040", " ")
            out.append((mount_point, fields[2], set(fields[3].split(","))))
    return out


def _v2_mount(mounts: list[tuple[str, str, set[str]]]) -> str | None:
    for mount_point, fstype, _ in mounts:
        if fstype != "cgroup2":
            continue
        try:
            controllers = set(read_text(join_path(mount_point, "cgroup.controllers")).split())
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
        text = read_text("/proc/self/mounts") if mounts_text is None else mounts_text
    except OSError:
        return None
    mounts = _mounts(text)
    unified = _v2_mount(mounts)
    found = Hierarchies(2, unified, unified) if unified else _v1_mounts(mounts)
    if found is None:
        return None
    try:
        for mount_point in {m for m in (found.memory, found.cpu, found.cpuacct) if m}:
            root = join_path(mount_point, ROOT_NAME)
            os.makedirs(root, exist_ok=True)
            if found.version == 2:
                enable_controllers(mount_point, root)
    except OSError:
        return None
    return found


def scope_name(work_dir: str | os.PathLike[str]) -> str:
    """The agent's scope: ``agent-<hash of its work dir's real path>``."""
    digest = hashlib.sha256(os.path.realpath(work_dir).encode("utf-8", "surrogatepass"))
    return f"agent-{digest.hexdigest()[:16]}"


def task_name(framework_id: str, task_id: str) -> str:
    """A task's cgroup name: its id made safe, then a hash of both ids (unique per task)."""
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "_.-") else "_" for c in task_id)
    safe = safe.lstrip(".")[:64] or "_"
    both = f"{framework_id}\0{task_id}".encode("utf-8", "surrogatepass")
    return f"{safe}-{hashlib.sha256(both).hexdigest()[:12]}"


def task_cgroup(hierarchies: Hierarchies, scope: str, name: str) -> TaskCgroup:
    """The directories of task ``name``'s cgroup in the agent ``scope``."""

    def under(mount: str) -> str:
        return join_path(mount, ROOT_NAME, scope, name)

    cpuacct = under(hierarchies.cpuacct) if hierarchies.cpuacct else None
    if hierarchies.version == 2:
        return TaskCgroup(2, under(hierarchies.memory), under(hierarchies.memory))
    return TaskCgroup(1, under(hierarchies.memory), under(hierarchies.cpu), cpuacct)
