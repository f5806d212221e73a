"""One daemon per work directory: an exclusive ``flock`` on ``<work-dir>/<name>.lock``.

``WorkDirLock.acquire(work_dir, name, holder)`` takes the lock without waiting and writes
``holder`` (one line: who holds it, e.g. ``pid 1234, fairshare master``) into the lock file;
a second process asking for the same lock gets ``WorkDirLocked`` whose message names the
holder as the first process wrote it. ``describe`` updates that line (the address once the
daemon serves).

Invariants:
- the kernel holds the lock while the file descriptor is open: a process that dies, even by
  kill -9, releases it, so a stale lock file never blocks a restart;
- a process refused the lock has written nothing to the work dir (the lock file of the holder
  is only read), so nothing of the running daemon is touched;
- ``release`` closes the descriptor (idempotent); the lock file stays, it is harmless.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

__all__ = ["WorkDirLock", "WorkDirLocked"]


class WorkDirLocked(Exception):
    """Another process holds the work dir's lock; the message names it."""


class WorkDirLock:
    """An exclusive lock on a work directory, held until ``release`` or the process ends."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd

    @classmethod
    def acquire(
        cls, work_dir: Path, name: str, holder: str, file_stem: str | None = None
    ) -> WorkDirLock:
        """Take ``work_dir/<file_stem or name>.lock`` for a daemon of kind ``name`` (``master``,
        ``agent``) and record ``holder``; ``WorkDirLocked`` if taken, ``OSError`` if the file
        cannot be opened."""
        path = work_dir / f"{file_stem or name}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise WorkDirLocked(
                f"work dir {work_dir} is in use by another {name} ({_holder(path)}; lock {path}):"
                f" each {name} needs its own --work-dir"
            ) from None
        lock = cls(path, fd)
        lock.describe(holder)
        return lock

    def describe(self, holder: str) -> None:
        """Replace the holder line the next process refused the lock will read."""
        if self._fd < 0:
            return
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"{holder}\n".encode(), 0)

    def release(self) -> None:
        """Release the lock (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _holder(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        text = ""
    return f"held by {text}" if text else "held by a process that has not said who it is"
