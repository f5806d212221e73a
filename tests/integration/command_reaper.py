"""Clean up after command tasks run by real agents: their processes outlive an agent that is
killed (by design), so a test that kills agents must end what they leave.

``reap(root)`` kills every supervisor and task process recorded in the run directories of the
agent work dirs under ``root`` and every process in those agents' cgroups, removes the cgroups,
and returns what it found still alive (a test whose tasks all ended expects nothing).
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from agent.tasks.executors.supervisor import SUPERVISOR_FILE, TASK_FILE, read_json, record_alive
from agent.tasks.isolation import cgroup_discovery, cgroups


def reap(root: Path) -> list[str]:
    """End every command task process and cgroup of the agents under ``root``."""
    leaks: list[str] = []
    for name in (TASK_FILE, SUPERVISOR_FILE):
        for record_file in sorted(root.glob(f"*/runs/*/*/{name}")):
            record = read_json(record_file)
            if record is not None and record_alive(record):
                leaks.append(f"process {record['pid']} ({record_file})")
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(int(record["pid"]), signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(record["pid"]), signal.SIGKILL)
    found = cgroup_discovery.detect()
    if found is None:
        return leaks
    mounts = {m for m in (found.memory, found.cpu, found.cpuacct) if m}
    for work_dir in sorted(p for p in root.iterdir() if (p / "runs").is_dir()):
        scope = cgroup_discovery.scope_name(work_dir)
        for mount in sorted(mounts):
            directory = Path(mount) / cgroups.ROOT_NAME / scope
            for child in sorted(p for p in directory.glob("*") if p.is_dir()):
                leaks.append(f"cgroup {child}")
                task = cgroups.TaskCgroup(found.version, str(child), str(child))
                cgroups.kill_all(task)
                cgroups.remove(task, timeout=5.0)
            with contextlib.suppress(OSError):
                directory.rmdir()  # an agent killed -9 leaves its (empty) scope behind
    return leaks
