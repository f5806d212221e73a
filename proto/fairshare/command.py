"""What a command task runs (``Command``) and what it used (``ResourceUsage``).

A command task runs a real process on its agent; a placeholder task only holds its resources
for a while. ``Command`` is the kernel's value of the wire's ``ProcessInfo``
(``fairshare.wire.command_from_pb``/``command_to_pb``): the SDK builds one, the master checks
its shape at Accept (a bad one is INVALID_ARGUMENT there, before any offer is used), and the
agent checks it again before it checks what only it can know (whether the user exists, whether
the working directory leaves the sandbox through a symbolic link).

Invariants, checked when a ``Command`` is built (``ValueError`` naming the field otherwise):
- exactly one of ``argv`` (non-empty, ``argv[0]`` non-empty) and ``shell`` (non-blank) is given;
- no string holds a NUL byte (``execve`` cannot pass one);
- at most ``MAX_ARGS`` arguments and ``MAX_COMMAND_BYTES`` bytes (UTF-8) of argv, shell and
  environment together: a task description stays small, since the master holds one per task
  and sends it again at every agent reregistration;
- environment names match ``[A-Za-z_][A-Za-z0-9_]*``; ``env`` is kept sorted by name;
- ``working_dir`` is relative and stays inside the sandbox lexically: not absolute, no ``..``
  component, at most ``MAX_WORKING_DIR_BYTES``; it is kept normalized (no ``.`` or empty
  components, ``""`` for the sandbox itself);
- ``user`` is empty (the agent's ``--task-user``) or a POSIX user name;
- ``kill_grace_period`` is None (the agent's default) or finite seconds in
  ``[0, MAX_KILL_GRACE]``.

Pure: standard library only, no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

__all__ = [
    "MAX_ARGS",
    "MAX_COMMAND_BYTES",
    "MAX_KILL_GRACE",
    "MAX_WORKING_DIR_BYTES",
    "SHELL",
    "Command",
    "ResourceUsage",
    "is_user_name",
    "normalize_working_dir",
]

MAX_ARGS: Final = 4096
"""Most arguments (argv entries) a command may have."""
MAX_COMMAND_BYTES: Final = 131_072
"""Most bytes of argv, shell and environment (names and values) together, UTF-8."""
MAX_WORKING_DIR_BYTES: Final = 1024
"""Longest working directory (relative to the sandbox), UTF-8."""
MAX_KILL_GRACE: Final = 3600.0
"""Longest time between SIGTERM and SIGKILL a task may ask for."""
SHELL: Final = "/bin/sh"
"""The shell that runs ``Command.shell`` (as ``/bin/sh -c SHELL``)."""

_ENV_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_USER_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?$")


def is_user_name(name: str) -> bool:
    """True for a POSIX user name (``[A-Za-z_][A-Za-z0-9_.-]{0,31}``, an optional final ``$``)."""
    return bool(_USER_NAME.match(name))


def _utf8(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _no_nul(what: str, text: str) -> None:
    if "\0" in text:
        raise ValueError(f"{what} contains a NUL byte")


def normalize_working_dir(path: str) -> str:
    """``path`` relative to the sandbox, normalized (``a/./b/`` -> ``a/b``, ``.`` -> ``""``);
    ``ValueError`` for an absolute path, a ``..`` component, a NUL byte or a too long path."""
    _no_nul("working_dir", path)
    if path.startswith("/"):
        raise ValueError(f"working_dir {path!r} is absolute: it must be relative to the sandbox")
    if _utf8(path) > MAX_WORKING_DIR_BYTES:
        raise ValueError(f"working_dir is longer than {MAX_WORKING_DIR_BYTES} bytes")
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"working_dir {path!r} has a '..' component: it must stay in the sandbox")
    return "/".join(parts)


@dataclass(frozen=True, slots=True, init=False)
class Command:
    """A real process to run: ``argv`` (no shell) or ``shell`` (``/bin/sh -c``), its extra
    environment, working directory inside the sandbox, user and kill grace period (seconds;
    None: the agent's default)."""

    argv: tuple[str, ...] = ()
    shell: str = ""
    env: tuple[tuple[str, str], ...] = ()
    working_dir: str = ""
    user: str = ""
    kill_grace_period: float | None = None

    def __init__(
        self,
        argv: Iterable[str] = (),
        shell: str = "",
        env: Mapping[str, str] | Iterable[tuple[str, str]] = (),
        working_dir: str = "",
        user: str = "",
        kill_grace_period: float | None = None,
    ) -> None:
        pairs = env.items() if isinstance(env, Mapping) else env
        object.__setattr__(self, "argv", tuple(argv))
        object.__setattr__(self, "shell", shell)
        object.__setattr__(self, "env", tuple(sorted((str(k), str(v)) for k, v in pairs)))
        object.__setattr__(self, "working_dir", working_dir)
        object.__setattr__(self, "user", user)
        object.__setattr__(self, "kill_grace_period", kill_grace_period)
        self._check()

    def _check(self) -> None:
        if bool(self.argv) == bool(self.shell):
            raise ValueError("give exactly one of argv and shell")
        if self.shell and not self.shell.strip():
            raise ValueError("shell is blank")
        if self.argv and not self.argv[0]:
            raise ValueError("argv[0] (the program) is empty")
        if len(self.argv) > MAX_ARGS:
            raise ValueError(f"argv has {len(self.argv)} arguments, more than {MAX_ARGS}")
        size = _utf8(self.shell)
        for position, argument in enumerate(self.argv):
            _no_nul(f"argv[{position}]", argument)
            size += _utf8(argument) + 1
        _no_nul("shell", self.shell)
        names = set()
        for name, value in self.env:
            if not _ENV_NAME.match(name):
                raise ValueError(f"env name {name!r} is not [A-Za-z_][A-Za-z0-9_]*")
            if name in names:
                raise ValueError(f"env name {name!r} is given twice")
            names.add(name)
            _no_nul(f"env {name}", value)
            size += _utf8(name) + _utf8(value) + 2
        if size > MAX_COMMAND_BYTES:
            raise ValueError(
                f"argv, shell and env take {size} bytes, more than {MAX_COMMAND_BYTES}"
            )
        object.__setattr__(self, "working_dir", normalize_working_dir(self.working_dir))
        if self.user and not _USER_NAME.match(self.user):
            raise ValueError(f"user {self.user!r} is not a valid user name")
        grace = self.kill_grace_period
        if grace is not None and not (math.isfinite(grace) and 0 <= grace <= MAX_KILL_GRACE):
            raise ValueError(
                f"kill_grace_period must be seconds in [0, {MAX_KILL_GRACE:.0f}], got {grace!r}"
            )

    @property
    def program(self) -> tuple[str, ...]:
        """The argv the agent executes (``/bin/sh -c SHELL`` for a shell command)."""
        return (SHELL, "-c", self.shell) if self.shell else self.argv

    def describe(self, limit: int = 80) -> str:
        """A one-line summary for logs (``shell`` or the joined argv, cut at ``limit``)."""
        text = self.shell or " ".join(self.argv)
        text = " ".join(text.split())
        return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True, slots=True)
class ResourceUsage:
    """What a command task's processes used: CPU seconds (user + system) and peak memory."""

    cpu_seconds: float = 0.0
    memory_peak_bytes: int = 0

    def __post_init__(self) -> None:
        if not math.isfinite(self.cpu_seconds) or self.cpu_seconds < 0:
            raise ValueError(f"cpu_seconds must be >= 0, got {self.cpu_seconds!r}")
        if self.memory_peak_bytes < 0:
            raise ValueError(f"memory_peak_bytes must be >= 0, got {self.memory_peak_bytes}")
