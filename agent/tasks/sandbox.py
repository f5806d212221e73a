"""Sandboxes of command tasks: where they are, how a task's working directory and files are
checked, how old ones are collected.

Layout under the agent's work dir:

- ``sandboxes/<framework>/<task>/``: the task's sandbox (mode 0700, owned by the user the task
  runs as), its working area and default working directory, with the files ``stdout`` and
  ``stderr`` (what ``fairshare logs`` reads); ``sandboxes/`` and ``sandboxes/<framework>/``
  are mode 0711, so no task user lists the other tasks' ids;
- ``runs/<framework>/<task>/``: its run directory (mode 0700): the records the agent and the
  task's supervisor keep (``agent.tasks.executors.supervisor``); the task never writes there.

``<framework>`` and ``<task>`` are the ids as one safe path component (``path_component``).
Launching a task id again in the same framework reuses its sandbox: files of the earlier run
stay, ``stdout`` and ``stderr`` start empty.

Invariants:
- a task's working directory is inside its sandbox once symbolic links are resolved; one that
  reaches outside through a link (``a/escape`` -> ``/``) is refused with ``SandboxError``
  before anything starts;
- the agent follows no symbolic link the task may have planted: ``stdout`` and ``stderr`` are
  opened with ``O_NOFOLLOW`` and must be regular files, ownership is changed without following
  links, and directories are removed with ``shutil.rmtree`` (which does not follow them);
- garbage collection (``collect``) never removes the sandbox of a task the agent still tracks
  (live, or terminal with an update the master has not acknowledged: the master still knows
  it) nor of a task whose supervisor still runs; it removes sandboxes whose task ended more
  than ``max_age`` ago, then the oldest ones while all sandboxes together take more than the
  disk budget.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import quote, unquote

from agent.core.records import TaskKey
from agent.tasks.executors.supervisor import EXIT_FILE, SUPERVISOR_FILE, read_json, record_alive

__all__ = [
    "LOG_FILES",
    "Prepared",
    "SandboxError",
    "Sandboxes",
    "open_log",
    "path_component",
    "read_tail",
]

LOG_FILES: Final = ("stdout", "stderr")
_MAX_COMPONENT: Final = 200


class SandboxError(Exception):
    """A sandbox path or file the agent refuses to use; the message says why."""


def path_component(identifier: str) -> str:
    """``identifier`` as one path component: ``[A-Za-z0-9_.-]`` kept, the rest percent-encoded,
    ``.`` and ``..`` (and a leading ``.``) encoded, long ids cut and made unique with a hash."""
    text = quote(identifier, safe="")
    if text.startswith("."):
        text = "%2E" + text[1:]
    if not text:
        text = "%00"
    if len(text) > _MAX_COMPONENT:
        digest = hashlib.sha256(identifier.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        text = f"{text[: _MAX_COMPONENT - 17]}~{digest}"
    return text


def open_log(sandbox: Path, name: str) -> int:
    """A read-only descriptor of the sandbox's ``stdout`` or ``stderr``; ``SandboxError`` if it
    is missing, a symbolic link or not a regular file."""
    if name not in LOG_FILES:
        raise SandboxError(f"{name!r} is not one of {', '.join(LOG_FILES)}")
    try:
        fd = os.open(sandbox / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise SandboxError(f"the sandbox has no {name} file") from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise SandboxError(f"{name} in the sandbox is not a regular file (a link)") from None
        raise SandboxError(f"{name} in the sandbox cannot be read: {error.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise SandboxError(f"{name} in the sandbox is not a regular file")
    return fd


def read_tail(sandbox: Path, name: str, lines: int = 5, limit: int = 1024) -> str:
    """The last ``lines`` non-empty lines of a log file (at most ``limit`` bytes), "" if none
    or unreadable."""
    try:
        fd = open_log(sandbox, name)
    except SandboxError:
        return ""
    try:
        size = os.fstat(fd).st_size
        data = os.pread(fd, limit, max(0, size - limit))
    finally:
        os.close(fd)
    kept = [line for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


@dataclass(frozen=True, slots=True)
class Prepared:
    """A sandbox ready for a run: its path, the working directory and the log files."""

    sandbox: Path
    cwd: Path
    stdout: Path
    stderr: Path


class Sandboxes:
    """The sandboxes and run directories of one agent's work dir."""

    def __init__(self, work_dir: Path) -> None:
        work_dir = work_dir.absolute()  # paths handed to supervisors must not depend on a cwd
        self.root = work_dir / "sandboxes"
        self.runs = work_dir / "runs"

    def sandbox(self, key: TaskKey) -> Path:
        """``<work-dir>/sandboxes/<framework>/<task>``."""
        return self.root / path_component(key[0]) / path_component(key[1])

    def run_dir(self, key: TaskKey) -> Path:
        """``<work-dir>/runs/<framework>/<task>``."""
        return self.runs / path_component(key[0]) / path_component(key[1])

    def prepare(self, key: TaskKey, working_dir: str, owner: tuple[int, int] | None) -> Prepared:
        """Create (or reuse) the task's sandbox and a fresh run directory; empty ``stdout`` and
        ``stderr`` owned by ``owner`` (uid, gid; None: the agent's). ``SandboxError`` if the
        working directory leaves the sandbox or a log file is not a regular file; ``OSError``
        for the file system's refusals."""
        sandbox = self.sandbox(key)
        run_dir = self.run_dir(key)
        for directory in (self.root, sandbox.parent):  # searchable, not listable
            directory.mkdir(mode=0o711, parents=True, exist_ok=True)
            directory.chmod(0o711)
        for directory in (self.runs, run_dir.parent):
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        sandbox.mkdir(mode=0o700, exist_ok=True)
        sandbox.chmod(0o700)  # its task's user's alone (and the agent's)
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(mode=0o700)
        cwd = self._working_dir(sandbox, working_dir)
        logs = [self._fresh_log(sandbox, name) for name in LOG_FILES]
        if owner is not None:
            for path in (sandbox, *logs):
                os.chown(path, *owner, follow_symlinks=False)
            if cwd != sandbox:
                self._chown_below(sandbox, cwd, owner)
        return Prepared(sandbox, cwd, logs[0], logs[1])

    @staticmethod
    def _working_dir(sandbox: Path, working_dir: str) -> Path:
        real_sandbox = Path(os.path.realpath(sandbox))
        target = sandbox / working_dir if working_dir else sandbox
        if not Path(os.path.realpath(target)).is_relative_to(real_sandbox):
            raise SandboxError(
                f"working_dir {working_dir!r} leaves the sandbox through a symbolic link"
            )
        target.mkdir(mode=0o755, parents=True, exist_ok=True)
        if not Path(os.path.realpath(target)).is_relative_to(real_sandbox):  # raced by a link
            raise SandboxError(
                f"working_dir {working_dir!r} leaves the sandbox through a symbolic link"
            )
        return target

    @staticmethod
    def _chown_below(sandbox: Path, cwd: Path, owner: tuple[int, int]) -> None:
        path = sandbox
        for part in cwd.relative_to(sandbox).parts:
            path = path / part
            os.chown(path, *owner, follow_symlinks=False)

    @staticmethod
    def _fresh_log(sandbox: Path, name: str) -> Path:
        path = sandbox / name
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(path, flags, 0o644)
        except OSError as error:
            problem = f"{name} in the sandbox cannot be written: {error.strerror}"
            if error.errno == errno.ELOOP:
                problem = f"{name} in the sandbox is not a regular file (a link)"
            raise SandboxError(problem) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise SandboxError(f"{name} in the sandbox is not a regular file")
        finally:
            os.close(fd)
        return path

    def find(self, task_id: str, framework_id: str = "") -> list[tuple[str, Path]]:
        """``(framework_id, sandbox)`` of every sandbox of ``task_id`` (of ``framework_id`` if
        given), sorted by framework."""
        if framework_id:
            sandbox = self.sandbox((framework_id, task_id))
            return [(framework_id, sandbox)] if sandbox.is_dir() else []
        component = path_component(task_id)
        found = []
        try:
            frameworks = sorted(os.listdir(self.root))
        except FileNotFoundError:
            return []
        for name in frameworks:
            sandbox = self.root / name / component
            if sandbox.is_dir():
                found.append((unquote(name), sandbox))
        return found

    def collect(
        self,
        tracked: Iterable[TaskKey],
        max_age: float,
        budget_bytes: int | None,
        min_age: float = 5.0,
    ) -> list[Path]:
        """Remove the sandboxes (and run directories) that may go; returns the sandboxes removed.

        A run directory changed in the last ``min_age`` seconds is spared whatever the budget
        (a launch may be preparing it right now). Blocking (it walks the directories): run it
        in a thread.
        """
        keep = {self.sandbox(key) for key in tracked}
        candidates = []  # (ended_at, size, sandbox, run_dir)
        total = 0
        now = time.time()
        for sandbox, run_dir in self._all():
            size = _disk_usage(sandbox)
            total += size
            if sandbox in keep or record_alive(read_json(run_dir / SUPERVISOR_FILE)):
                continue
            if now - _mtime(run_dir) < min_age:
                continue
            candidates.append((_ended_at(sandbox, run_dir), size, sandbox, run_dir))
        removed = []
        for ended_at, size, sandbox, run_dir in sorted(candidates, key=lambda c: c[0]):
            old = now - ended_at > max_age
            over = budget_bytes is not None and total > budget_bytes
            if not (old or over):
                continue
            shutil.rmtree(sandbox, ignore_errors=True)
            shutil.rmtree(run_dir, ignore_errors=True)
            total -= size
            removed.append(sandbox)
        return removed

    def _all(self) -> list[tuple[Path, Path]]:
        out = []
        for framework in _listdir(self.root):
            for task in _listdir(self.root / framework):
                out.append((self.root / framework / task, self.runs / framework / task))
        return out


def _listdir(path: Path) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _ended_at(sandbox: Path, run_dir: Path) -> float:
    """When the task ended (its exit record), else when its sandbox last changed."""
    record = read_json(run_dir / EXIT_FILE)
    if record and isinstance(record.get("ended_at"), int | float):
        return float(record["ended_at"])
    try:
        return sandbox.stat().st_mtime
    except OSError:
        return 0.0


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _disk_usage(path: Path) -> int:
    """Bytes the files under ``path`` take on disk (links not followed)."""
    total = 0
    for directory, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_blocks * 512
            except OSError:
                continue
    return total
