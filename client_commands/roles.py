"""``fairshare roles``: the role tree as the allocator sees it (Mesos's /roles, for a tree).

Prints one row per role, indented by its depth (``eng``, then ``  eng/dev``): its weight, its
share and weighted share (share / weight: what the allocator orders sibling roles by under the
``hdrf`` and ``naive`` hierarchies), its dominant resource, the frameworks of its subtree and of
its own, the RUNNING tasks and the resources allocated to its subtree; then which hierarchy the
master uses. ``--json`` prints one object ``{"hierarchy", "roles": [...]}`` whose roles are
those of ``fairshare status --json`` (``fairshare.role_tree``). ``--role PATH`` keeps ``PATH``
and the roles below it.

The tree lists every role that holds a framework (connected, or disconnected within its
failover timeout) and every ancestor of one; a role with an operator weight but no framework is
not in it (``fairshare weights`` lists the weights).

Invariants (the ``fairshare`` CLI contract): bad input exits 2 with ``fairshare roles: --flag:
<why>`` on stderr and asks the master nothing; a master that is down, refuses, or is not a
master exits 1 with one line saying so; success prints the tree (``(no roles ...)`` when it is
empty) and exits 0. Settings: ``--master``, the log flags and the client's TLS and identity
(``CLIENT_SETTINGS``, as every operator command).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Final

from fairshare.cli import command_settings
from fairshare.role_tree import ROLE_HEADER, hierarchy_note, role_rows, roles_to_dicts
from fairshare.roles import RoleError, check_role, is_within
from fairshare.settings import CLIENT_SETTINGS, add_setting_flags
from fairshare.v1 import operator_pb2

from client_commands.master_calls import (
    CALL_TIMEOUT,
    CommandFailed,
    MasterAddress,
    call_master,
    render_rows,
)

__all__ = ["add_arguments", "main", "roles_document"]

EXIT_OK: Final = 0
EXIT_BAD_INPUT: Final = 2


def _subtree(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """``(role, None)`` from ``--role`` (None when not given), or ``(None, why)``."""
    if args.role is None:
        return None, None
    role = args.role.strip()
    if not role:
        return None, "--role: the role is empty"
    try:
        return check_role(role, "--role"), None
    except RoleError as error:
        return None, str(error)


def roles_document(state: operator_pb2.GetStateResponse, subtree: str | None) -> dict[str, Any]:
    """``{"hierarchy", "roles"}``: the master's role tree, or ``subtree`` and below."""
    roles = [
        role
        for role in roles_to_dicts(state.roles)
        if subtree is None or is_within(role["role"], subtree)
    ]
    return {"hierarchy": state.hierarchy, "roles": roles}


def _render(document: dict[str, Any], subtree: str | None) -> str:
    where = f" in role {subtree} or below it" if subtree else ""
    empty = f"(no roles: no framework is registered{where})"
    table = render_rows(ROLE_HEADER, role_rows(document["roles"]), empty)
    return f"{table}\n{hierarchy_note(document['hierarchy'])}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``fairshare roles``."""
    parser.description = (
        "Show the role tree as the allocator sees it: each role indented by its depth, with its"
        " weight, share, weighted share (share / weight), dominant resource, frameworks, running"
        " tasks and allocation, summed over the roles below it."
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object (machine-readable)"
    )
    parser.add_argument(
        "--role", metavar="PATH", help="only this role and the roles below it (e.g. eng)"
    )
    add_setting_flags(parser, CLIENT_SETTINGS)


def main(args: argparse.Namespace) -> int:
    """``fairshare roles``; returns the exit code."""
    master = MasterAddress.of(command_settings("roles", CLIENT_SETTINGS, args))
    subtree, problem = _subtree(args)
    if problem is not None:
        print(f"fairshare roles: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        state = call_master(
            master, lambda s: s.GetState(operator_pb2.GetStateRequest(), timeout=CALL_TIMEOUT)
        )
    except CommandFailed as failure:
        print(f"fairshare roles: {failure}", file=sys.stderr)
        return failure.code
    document = roles_document(state, subtree)
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        print(_render(document, subtree))
    return EXIT_OK
