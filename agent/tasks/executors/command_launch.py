"""Launching a command task (``agent.tasks.executors.command``): who it runs as, its launch
record, starting its supervisor, and finding a supervisor again after an agent restart.

- ``launch_user``: the task's own user, else the agent's ``task_user`` (uid 0 only with
  ``allow_root_tasks``); ``LaunchRefused`` for a user the agent cannot or may not switch to, or
  one who cannot reach the sandboxes.
- ``launch_spec``: the launch record the supervisor reads (program, environment, sandbox paths,
  kill grace period, cgroup, address-space limit, user).
- ``start_supervisor``: the supervisor as a child in its own session, recorded (pid and start
  time) before it is let start the task; ``open_pidfd``: a pidfd of a recorded supervisor
  still running; ``kill_leftovers``: what is left of a task whose supervisor is gone without
  an exit record; ``supervisor_log_tail``: the end of a supervisor's own log.

Invariants: a refused launch raises ``LaunchRefused`` (ERROR, REASON_COMMAND_INVALID) before
anything starts; the supervisor is recorded before it starts the task; a pidfd is only ever
opened on the recorded process (checked after opening, so a reused pid is never taken for it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path
from typing import Any, Final

from agent.core.records import CommandTask, TaskKey
from agent.tasks.executors import supervisor as records
from agent.tasks.isolation import cgroups
from agent.tasks.isolation.modes import Isolation, TaskLimits
from agent.tasks.sandbox import Prepared, Sandboxes
from agent.tasks.users import TaskUser, UserRefused, task_user, unreachable

__all__ = [
    "LaunchRefused",
    "kill_leftovers",
    "launch_spec",
    "launch_user",
    "open_pidfd",
    "start_supervisor",
    "supervisor_log_tail",
    "task_environment",
]

_BOOT: Final = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from agent.tasks.executors.supervisor import main; sys.exit(main(sys.argv[2:]))"
)
_PACKAGE_ROOT: Final = str(Path(__file__).resolve().parents[3])  # the directory holding agent/
_DEFAULT_PATH: Final = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class LaunchRefused(Exception):
    """The task cannot run as described (ERROR, REASON_COMMAND_INVALID)."""


def launch_user(
    requested: str, default_user: str, allow_root: bool, sandboxes: Sandboxes
) -> TaskUser | None:
    """The user to switch to (None: the agent's own); ``LaunchRefused`` when the task may not
    run as it, or that user cannot reach the sandboxes."""
    try:
        user = task_user(requested, default_user, allow_root)
    except UserRefused as error:
        raise LaunchRefused(str(error)) from None
    if user is not None:
        blocked = unreachable(sandboxes.root, user)
        if blocked is not None:
            where, mode = blocked
            raise LaunchRefused(
                f"user {user.name!r} (uid {user.uid}) cannot reach this agent's sandboxes:"
                f" {where} has mode {mode:o} (the agent's --work-dir must be searchable by"
                " its task users)"
            )
    return user


def task_environment(
    key: TaskKey, task: CommandTask, sandbox: Path, user: TaskUser | None
) -> dict[str, str]:
    """The task's environment: PATH, HOME, the FAIRSHARE_* variables, then the task's own."""
    env = {
        # The agent's PATH, to a task of its own user; the system's to another user's
        # (root's PATH may name directories that user cannot search)
        "PATH": (os.environ.get("PATH") if user is None else None) or _DEFAULT_PATH,
        "HOME": user.home if user is not None and os.path.isdir(user.home) else str(sandbox),
        "FAIRSHARE_SANDBOX": str(sandbox),
        "FAIRSHARE_FRAMEWORK_ID": key[0],
        "FAIRSHARE_TASK_ID": key[1],
    }
    if user is not None:
        env["USER"] = env["LOGNAME"] = user.name
    env.update(task.command.env)
    return env


def launch_spec(
    key: TaskKey,
    task: CommandTask,
    sandbox: Path,
    prepared: Prepared,
    user: TaskUser | None,
    limits: TaskLimits,
    default_grace: float,
) -> dict[str, Any]:
    """The launch record of ``task`` (``sandbox``, ``prepared`` for this run; the supervisor
    reads it)."""
    command = task.command
    grace = command.kill_grace_period
    spec: dict[str, Any] = {
        "program": list(command.program),
        "env": task_environment(key, task, sandbox, user),
        "cwd": str(prepared.cwd),
        "stdout": str(prepared.stdout),
        "stderr": str(prepared.stderr),
        "grace": default_grace if grace is None else grace,
        "cgroup": None if limits.cgroup is None else limits.cgroup.to_json(),
        "rlimit_as": limits.rlimit_as,
    }
    if user is not None:
        spec["uid"], spec["gid"] = user.uid, user.gid
        spec["groups"] = list(user.groups)
    return spec


def start_supervisor(python: str, run_dir: Path) -> tuple[subprocess.Popen[bytes], int, int]:
    """Start the supervisor of the task whose launch record is in ``run_dir``, record it, then
    let it start the task; (the child, its pidfd, its stdout, non-blocking)."""
    with open(run_dir / "supervisor.log", "ab") as log:
        child = subprocess.Popen(
            [python, "-I", "-S", "-c", _BOOT, _PACKAGE_ROOT, str(run_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            cwd=run_dir,
            env={},
            start_new_session=True,
        )
    pidfd = os.pidfd_open(child.pid)
    records.write_json(run_dir / records.SUPERVISOR_FILE, records.process_record(child.pid))
    assert child.stdin is not None and child.stdout is not None
    with contextlib.suppress(BrokenPipeError):  # it died: its exit tells the rest
        child.stdin.write(b"go\n")
        child.stdin.close()
    output = child.stdout.fileno()
    os.set_blocking(output, False)
    return child, pidfd, output


def open_pidfd(record: dict[str, Any]) -> int | None:
    """A pidfd of the process ``record`` names if it still runs (checked after opening, so a
    reused pid is never taken for it)."""
    pid = record.get("pid")
    if not isinstance(pid, int) or not records.record_alive(record):
        return None
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return None
    if not records.record_alive(record):
        os.close(pidfd)
        return None
    return pidfd


def kill_leftovers(run_dir: Path, isolation: Isolation) -> None:
    """The supervisor is gone without a record: kill what is left of the task (its process
    group, if its recorded process still runs) and release its cgroup."""
    task = records.read_json(run_dir / records.TASK_FILE)
    if records.record_alive(task) and task is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(int(task["pid"]), signal.SIGKILL)
    launch = records.read_json(run_dir / records.LAUNCH_FILE)
    cgroup = launch.get("cgroup") if launch else None
    if cgroup:
        isolation.release(TaskLimits(cgroup=cgroups.TaskCgroup.from_json(cgroup)))


def supervisor_log_tail(run_dir: Path) -> str:
    """``": <the last 300 bytes of the supervisor's log>"``, or "" (none, or unreadable)."""
    try:
        with open(run_dir / "supervisor.log", "rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - 300))
            text = log.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""
    return f": {text}" if text else ""
