"""Finding the processes a test session started (``tests/conftest.py`` fails the run on them).

Every process the tests start inherits ``SESSION_MARK=<this session's id>`` in its environment;
``marked_processes`` lists the live ones (zombies excluded) by reading ``/proc``.
"""

from __future__ import annotations

import os
from pathlib import Path

SESSION_MARK = "PYTEST_FAIRSHARE_SESSION"


def marked_processes(mark: str) -> dict[int, str]:
    """``{pid: command line}`` of the live processes (not zombies) carrying ``mark``."""
    found: dict[int, str] = {}
    needle = f"{SESSION_MARK}={mark}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        found[int(entry.name)] = command.strip()
    return found
