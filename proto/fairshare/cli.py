"""The ``fairshare`` command (docs/architecture.md §7): one entry point, a table of subcommands.

``COMMANDS`` maps each subcommand to its one-line summary and the module that implements it,
named as a string: the kernel never imports ``master``, ``agent``, ``framework_sdk`` or
``client_commands`` itself
(an import-linter contract forbids it). ``main`` finds the subcommand in the arguments before
parsing them and imports that one module only; the other subcommands' parsers stay empty, so
``fairshare --help`` lists every subcommand with its summary without importing any of them, and
one subcommand never pays for another's imports. ``python -m fairshare.cli`` runs the same.

A command module provides ``add_arguments(parser) -> None`` (its flags, each with help text)
and ``main(args) -> int`` (the exit code). Two subcommands of one module are named
``"module:attribute"``, the attribute a ``Command`` holding the pair.

Contract: bad input prints ``fairshare SUBCOMMAND: <message naming the flag, variable or key>``
on stderr and exits 2, having changed nothing (argparse's usage errors exit 2 as well; a
``SettingsError`` a command raises is printed so); success exits 0; failures of the command
(an unreachable master, a daemon that cannot start) exit 1. No traceback reaches the user for
bad input. A reader that goes away (``fairshare status | head``) is not an error.
``fairshare --version`` prints ``fairshare <version>``.

Every subcommand's settings (``command_settings``) come from its flags, then
``FAIRSHARE_<COMMAND>_<SETTING>`` variables (and ``FAIRSHARE_MASTER``, ``FAIRSHARE_LOG_LEVEL``,
``FAIRSHARE_LOG_FORMAT`` for the shared ones), then the ``[command]`` table of the TOML file,
then the defaults (``fairshare.settings``); every subcommand logs through ``fairshare.logs``.
``main`` leaves the process's logging as it found it, so commands can run in-process (tests).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Final

from fairshare.logs import configure_logging
from fairshare.settings import Setting, SettingsError, resolve_settings

__all__ = [
    "COMMANDS",
    "Command",
    "build_parser",
    "command_settings",
    "load_command",
    "main",
    "note",
]

EXIT_BAD_INPUT: Final = 2
_running: list[str] = []  # the subcommand main() runs now (innermost last)

COMMANDS: Final[dict[str, tuple[str, str]]] = {
    "master": ("run the master daemon", "master.daemon"),
    "agent": ("run an agent daemon", "agent.daemon"),
    "status": ("show the cluster state", "client_commands.status:status_command"),
    "run": (
        "keep up to N placeholder tasks running, or run a command in N tasks (built-in framework)",
        "client_commands.run:run_command",
    ),
    "logs": (
        "print a command task's stdout or stderr from its sandbox",
        "client_commands.logs:logs_command",
    ),
    "up": ("run a master and N agents as local processes", "master.commands.up"),
    "credential": (
        "mint a principal's secret: its token file, and its hash in a credentials file",
        "master.commands.credential",
    ),
    "agents": (
        "list agents; deactivate, drain, reactivate (maintenance) or remove unreachable ones",
        "client_commands.agents:agents_command",
    ),
    "frameworks": (
        "list frameworks, or tear one down",
        "client_commands.cluster:frameworks_command",
    ),
    "tasks": ("list tasks, or kill one", "client_commands.cluster:tasks_command"),
    "stop": ("tear down the framework named NAME", "client_commands.cluster:stop_command"),
    "weights": (
        "list, set or clear operator weights of roles and frameworks",
        "client_commands.operator:weights_command",
    ),
    "quota": (
        "list the quotas of roles (guarantee, limit, consumption), or set or clear one",
        "client_commands.operator:quota_command",
    ),
    "reserve": (
        "reserve resources of an agent for a role (offered only to its subtree)",
        "client_commands.reservations:reserve_command",
    ),
    "unreserve": (
        "give back resources of a dynamic reservation",
        "client_commands.reservations:unreserve_command",
    ),
    "roles": (
        "show the role tree: weights, shares, frameworks and running tasks per role",
        "client_commands.roles",
    ),
    "allocate": ("offline allocation calculator", "analysis.calculator.command"),
    "simulate": ("trace-driven simulation", "analysis.sim.command"),
}
"""Subcommand -> (one-line summary, ``"module"`` or ``"module:attribute"``)."""


@dataclass(frozen=True, slots=True)
class Command:
    """What ``fairshare`` needs of a subcommand: its flags and its main."""

    add_arguments: Callable[[argparse.ArgumentParser], None]
    main: Callable[[argparse.Namespace], int]


def load_command(name: str) -> Command:
    """Import the module of subcommand ``name`` (one of ``COMMANDS``) and return its pair."""
    module_name, _, attribute = COMMANDS[name][1].partition(":")
    module = importlib.import_module(module_name)
    target: Any = getattr(module, attribute) if attribute else module
    return Command(target.add_arguments, target.main)


def version() -> str:
    """The installed distribution's version."""
    try:
        return metadata.version("fairshare")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


SHARED_FLAGS: Final = ("--master", "--log-level", "--log-format")
"""The flags of settings shared by every command that has them (``FAIRSHARE_<SETTING>``)."""


def _epilog(name: str, flags: Sequence[str] = SHARED_FLAGS) -> str:
    """Where ``name``'s settings come from; ``flags``: the shared ones it has."""
    prefix = f"FAIRSHARE_{name.upper()}_"
    shared = ", ".join(flags[:-1]) + f" and {flags[-1]}" if len(flags) > 1 else "".join(flags)
    notes = [f"{prefix}LOG_LEVEL for --log-level"] if "--log-level" in flags else []
    if flags:
        notes.append(f"FAIRSHARE_<SETTING> too for {shared}")
    said = f" ({'; '.join(notes)})" if notes else ""
    top = f" ({shared} also at its top level)" if flags else ""
    return (
        f"Settings come from flags, then {prefix}<SETTING> variables{said}, then the [{name}]"
        f" table of the --config TOML file{top}, then the defaults."
    )


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``fairshare`` parser; only ``command``'s subparser gets its flags (its module is
    imported), the others are listed with their summaries."""
    parser = argparse.ArgumentParser(
        prog="fairshare",
        description="A Mesos-style resource-offer manager with Dominant Resource Fairness.",
    )
    parser.add_argument(
        "--version", action="version", version=f"fairshare {version()}", help="print the version"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (summary, _) in COMMANDS.items():
        child = sub.add_parser(name, help=summary, description=summary, epilog=_epilog(name))
        if name == command:
            load_command(name).add_arguments(child)
            has = [flag for flag in SHARED_FLAGS if flag in child._option_string_actions]
            child.epilog = _epilog(name, has)  # only the shared settings it has (up: no --master)
    return parser


def _command_in(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv``: its first word that is not an option."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def command_settings(
    command: str, settings: Sequence[Setting], args: argparse.Namespace
) -> dict[str, Any]:
    """Resolve ``settings`` of ``command`` (flags in ``args``, the process's environment, the
    TOML file, defaults) and send log lines to stderr in its ``log_format`` at its
    ``log_level``; raises ``SettingsError`` naming the source of a bad value."""
    values = resolve_settings(command, settings, args, os.environ)
    configure_logging(values.get("log_format") or "text", values.get("log_level") or "INFO")
    return values


@contextlib.contextmanager
def _logging_restored() -> Iterator[None]:
    """Put the root logger's handlers and level back as they were (commands configure them)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
        for handler in handlers:
            if handler not in root.handlers:
                root.addHandler(handler)
        root.setLevel(level)


def note(message: str) -> None:
    """Print ``fairshare SUBCOMMAND: message`` on stderr (a command's word to the user that is
    not its result, such as ``no leader yet: election in progress``)."""
    prefix = f"fairshare {_running[-1]}" if _running else "fairshare"
    print(f"{prefix}: {message}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``fairshare`` with ``argv`` (default: the process's arguments); the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # gRPC's C core prints its own lines (a failed TLS handshake: "I1127 ... ssl_transport_
    # security.cc ...") outside the commands' log format; its errors only, unless asked.
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    name = _command_in(argv)
    args = build_parser(name).parse_args(argv)  # exits 2 on usage errors, 0 for --help
    command = load_command(args.command)
    _running.append(args.command)
    with _logging_restored():
        try:
            return command.main(args)
        except SettingsError as error:
            print(f"fairshare {args.command}: {error}", file=sys.stderr)
            return EXIT_BAD_INPUT
        except BrokenPipeError:  # the reader went away (`fairshare status | head`): not an error
            sys.stderr.close()
            return 0
        finally:
            _running.pop()


if __name__ == "__main__":
    sys.exit(main())
