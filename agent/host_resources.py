"""This host's resources: what an agent offers when ``--resources`` is not given.

``cpus`` counts the CPUs this process may run on (its affinity mask when the OS has one),
``mem`` is MemTotal of /proc/meminfo (else physical pages times page size), ``disk`` the total
size of the file system holding the work dir, all in whole units (MiB).

Invariants: the probe never raises for an unusual host, and a resource it cannot measure is
left out rather than guessed.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from fairshare.resources import ResourceVector

__all__ = ["host_resources"]

_MIB = 1024 * 1024


def _cpus() -> int | None:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or None
    return os.cpu_count()


def _mem_mib(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    try:
        for line in meminfo.read_text(encoding="ascii").splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024  # kB -> MiB
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // _MIB
    except (AttributeError, ValueError, OSError):
        return None


def _disk_mib(work_dir: Path) -> int | None:
    try:
        return shutil.disk_usage(work_dir).total // _MIB
    except OSError:
        return None


def host_resources(work_dir: Path) -> ResourceVector:
    """``cpus``, ``mem`` and ``disk`` of this host (disk of the file system of ``work_dir``)."""
    found = {"cpus": _cpus(), "mem": _mem_mib(), "disk": _disk_mib(work_dir)}
    return ResourceVector({name: value for name, value in found.items() if value})
