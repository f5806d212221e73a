"""Who a command task runs as: the agent's ``--task-user`` default and the checks of a task's
own ``user`` (docs/security.md, "Who a task runs as").

- An agent running as root switches every command task to an unprivileged user: the task's
  ``user`` when it names one (the master checked it against the ACL's ``run_tasks``), else
  ``--task-user`` (default ``nobody``). A user of uid 0, whatever its name, needs
  ``--allow-root-tasks`` (``UserRefused`` otherwise); the task then runs as the agent's own
  user, root.
- An agent not running as root cannot switch users: every task runs as the agent's own user
  (``--task-user`` is not used), and a task naming another user is refused.
- ``unreachable(path, user)`` is the first directory on the way to ``path`` that ``user``
  may not search (its mode bits for the user's uid and groups; POSIX ACLs are not read), so a
  work dir the task user cannot enter is said once at start and for each task refused, instead
  of failing in the task's ``chdir``.

Invariants: ``task_user`` returns None exactly when no switch is made (the task runs as the
agent's user), and never None for a uid-0 user unless ``allow_root``; nothing here changes any
state (``pwd``, ``os.stat`` and ``os.getgrouplist`` only).
"""

from __future__ import annotations

import os
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["DEFAULT_TASK_USER", "TaskUser", "UserRefused", "task_user", "unreachable"]

DEFAULT_TASK_USER: Final = "nobody"
"""The user command tasks run as when they name none (an agent running as root)."""


class UserRefused(Exception):
    """A task cannot run as the user it names (or the default one); the message says why."""


@dataclass(frozen=True, slots=True)
class TaskUser:
    """A user the agent switches a task to: name, uid, primary gid, groups, home directory."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str


def _lookup(name: str, what: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        raise UserRefused(f"{what} {name!r} does not exist on this agent") from None


def task_user(requested: str, default: str, allow_root: bool) -> TaskUser | None:
    """The user a task asking for ``requested`` (``""``: none) runs as, with ``default``
    (``--task-user``) and ``allow_root`` (``--allow-root-tasks``); None: the agent's own user.
    ``UserRefused`` when it cannot run as asked."""
    euid = os.geteuid()
    what = "user" if requested else "the agent's --task-user"
    if euid != 0:
        if not requested:
            return None  # the agent cannot switch: its own (unprivileged) user
        if _lookup(requested, what).pw_uid == euid:
            return None
        raise UserRefused(
            f"the agent runs as uid {euid}, not as root, and cannot run tasks as user {requested!r}"
        )
    name = requested or default
    entry = _lookup(name, what)
    if entry.pw_uid == 0:
        if not allow_root:
            raise UserRefused(
                f"{what} {name!r} is uid 0 (root): this agent runs no task as root (its"
                " --allow-root-tasks is off)"
            )
        return None  # the agent is root itself
    groups = tuple(os.getgrouplist(entry.pw_name, entry.pw_gid))
    return TaskUser(entry.pw_name, entry.pw_uid, entry.pw_gid, groups, entry.pw_dir)


def _searchable(info: os.stat_result, user: TaskUser) -> bool:
    mode = info.st_mode
    if info.st_uid == user.uid:
        return bool(mode & stat.S_IXUSR)
    if info.st_gid in user.groups:
        return bool(mode & stat.S_IXGRP)
    return bool(mode & stat.S_IXOTH)


def unreachable(path: Path, user: TaskUser) -> tuple[Path, int] | None:
    """The first directory from ``/`` down to ``path`` (itself included, when it exists) that
    ``user`` may not search, with its mode; None when ``user`` reaches ``path``."""
    target = Path(os.path.abspath(path))
    for directory in (*reversed(target.parents), target):
        try:
            info = os.stat(directory)
        except FileNotFoundError:
            return None  # made later by the agent, with a mode the task user may search
        except OSError:
            return directory, 0
        if not _searchable(info, user):
            return directory, stat.S_IMODE(info.st_mode)
    return None
