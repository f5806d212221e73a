"""The settings of ``fairshare run``: its table, flags and the validated ``RunConfig``.

Invariants: ``run_config`` returns a fully checked config or raises ``SettingsError`` naming the
flag, variable or key (exit 2, nothing sent); a command task names no ``--duration``; the
failover timeout is 0 attached and ``DETACHED_FAILOVER_TIMEOUT`` detached unless given.
``RUN_SETTINGS`` is the one declaration of each setting: ``RunConfig`` reads its defaults from it
and takes every setting named like one of its fields (``fairshare.setting_tables.built_from``).
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import Final

from fairshare.cli import command_settings
from fairshare.resources import ResourceError, ResourceVector
from fairshare.roles import check_role
from fairshare.setting_tables import built_from, table_defaults
from fairshare.settings import (
    CLIENT_SETTINGS,
    Setting,
    SettingsError,
    add_setting_flags,
    client_security,
    duration,
    non_empty_text,
    optional_positive_duration,
    positive_duration,
    positive_int,
    positive_number,
)
from fairshare.transport import INSECURE, ClientSecurity

from framework_sdk.types import Command as TaskCommand

__all__ = [
    "CONNECT_TIMEOUT",
    "DETACHED_FAILOVER_TIMEOUT",
    "DETACH_WAIT",
    "RUN_SETTINGS",
    "RunConfig",
    "add_run_arguments",
    "run_config",
]

EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1
STATUS_TIMEOUT: Final = 5.0
CONNECT_TIMEOUT: Final = 30.0
DETACH_WAIT: Final = 30.0
"""How long ``run --detach`` waits for all its tasks before leaving with those that run."""
DETACHED_FAILOVER_TIMEOUT: Final = 7 * 24 * 3600.0
"""A detached run's failover timeout: its tasks keep running with nobody attached, so the master
must keep them much longer than any restart of a scheduler, as a submitted job (Nomad's ``job
run``) lives until stopped; a week (Mesos operators' usual production setting) bounds how long a
forgotten run holds resources. ``fairshare stop NAME`` ends it sooner."""


def _optional_duration(raw: object) -> float | None:
    """A duration (0 allowed), or ``None`` for the default."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    return duration(raw)


def _role(raw: object) -> str:
    """A role path (``fairshare.roles``: ``eng``, ``eng/dev``, ``*``), stripped."""
    return check_role(non_empty_text(raw))


RUN_SETTINGS: Final = (
    *(
        # A command prints results; its log lines are for when they are asked for.
        dataclasses.replace(setting, default="WARNING") if setting.name == "log_level" else setting
        for setting in CLIENT_SETTINGS
    ),
    Setting("count", positive_int, 1, "how many tasks to keep running", metavar="N"),
    Setting(
        "duration",
        optional_positive_duration,
        None,
        "each task ends after this long (and is replaced); default: runs until killed",
        metavar="DURATION",
    ),
    Setting("role", _role, "*", "the framework's role, a path such as eng or eng/dev"),
    Setting("weight", positive_number, 1.0, "the framework's weight", metavar="W"),
    Setting(
        "failover_timeout",
        _optional_duration,
        None,
        "how long the master keeps the framework and its tasks once this command is gone"
        " (default: 0, or a week with --detach)",
        metavar="DURATION",
    ),
    Setting(
        "connect_timeout",
        positive_duration,
        f"{CONNECT_TIMEOUT:g}s",
        "give up (exit 1) when no master has answered within this long",
        metavar="DURATION",
    ),
    Setting(
        "detach_wait",
        positive_duration,
        f"{DETACH_WAIT:g}s",
        "with --detach: give up (exit 1, the framework torn down) when none of its tasks runs"
        " within this long",
        metavar="DURATION",
    ),
)
"""The settings of ``fairshare run`` (``--name`` and ``--task`` are its arguments)."""

_DEFAULT: Final = table_defaults(RUN_SETTINGS)


@dataclass(frozen=True, slots=True)
class RunConfig:
    """Validated settings of ``fairshare run``."""

    master: str
    name: str
    role: str
    weight: float
    shape: ResourceVector
    count: int
    duration: float | None
    connect_timeout: float = _DEFAULT["connect_timeout"]
    detach: bool = False
    failover_timeout: float | None = _DEFAULT["failover_timeout"]
    detach_wait: float = _DEFAULT["detach_wait"]
    security: ClientSecurity = INSECURE
    command: str | None = None  # a command task's shell line; None: placeholder tasks
    preemptible: bool = True  # its tasks' TaskInfo.preemptible
    log_level: str = _DEFAULT["log_level"]  # the detached follower logs at this level too

    @property
    def effective_failover_timeout(self) -> float:
        """The failover timeout the framework subscribes with."""
        if self.failover_timeout is not None:
            return self.failover_timeout
        return DETACHED_FAILOVER_TIMEOUT if self.detach else 0.0


def run_config(args: argparse.Namespace) -> RunConfig:
    """The validated settings of ``fairshare run`` (raises ``SettingsError`` naming the flag,
    variable or key); logs are configured from them."""
    values = command_settings("run", RUN_SETTINGS, args)
    try:
        shape = ResourceVector.parse(args.task)
    except ResourceError as error:
        raise SettingsError(f"--task {args.task!r}: {error}") from None
    if not shape:
        raise SettingsError(f"--task {args.task!r}: names no resources")
    if not args.name.strip():
        raise SettingsError(f"--name {args.name!r}: must not be empty")
    command = getattr(args, "task_command", None)
    if command is not None:
        if values["duration"] is not None:
            raise SettingsError("--duration: describes placeholder tasks; a --command ends itself")
        try:
            TaskCommand(shell=command)
        except ValueError as error:
            raise SettingsError(f"--command: {error}") from None
    return built_from(  # every setting named like a field of RunConfig, then its arguments
        RunConfig,
        values,
        name=args.name.strip(),
        shape=shape,
        detach=bool(getattr(args, "detach", False)),
        security=client_security(values),
        command=command,
        preemptible=_preemptible(args, command),
    )


def _preemptible(args: argparse.Namespace, command: str | None) -> bool:
    """``--preemptible``/``--no-preemptible``; unset: placeholder tasks are, command tasks not."""
    chosen = getattr(args, "preemptible", None)
    return command is None if chosen is None else bool(chosen)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``fairshare run``."""
    parser.description = (
        "The built-in framework: keep up to --count placeholder tasks of one shape running,"
        " replacing those that end, or with --command run a command in --count tasks once;"
        " Ctrl-C or SIGTERM tears the framework down."
    )
    parser.add_argument("--name", required=True, help="the framework's name (and task id prefix)")
    parser.add_argument(
        "--task",
        required=True,
        metavar="RESOURCES",
        help="task shape, e.g. 'cpus:1;mem:4096'; a shape with gpus makes the framework"
        " GPU-capable: agents with GPUs are offered only to GPU-capable frameworks",
    )
    parser.add_argument(
        "--detach",
        action="store_true",
        help="return once the tasks run; the master keeps them (fairshare stop NAME ends them)",
    )
    parser.add_argument(
        "--command",
        dest="task_command",  # "command" is the subcommand's name (fairshare.cli)
        metavar="CMD",
        help="run CMD (with /bin/sh -c) in --count command tasks once and exit when all have"
        " ended (0 if all finished); their output: fairshare logs TASK_ID",
    )
    parser.add_argument(
        "--preemptible",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="let a master started with --rebalance kill these tasks (after its grace period,"
        " reason PREEMPTED) to move the cluster toward its fair allocation; placeholder tasks"
        " are replaced as any that end. Default: placeholder tasks are preemptible, --command"
        " tasks are not",
    )
    add_setting_flags(parser, RUN_SETTINGS)
