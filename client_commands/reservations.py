"""``fairshare reserve`` and ``fairshare unreserve``: the operator's dynamic reservations
(Mesos's RESERVE_RESOURCES and UNRESERVE_RESOURCES operator calls).

``fairshare reserve --agent ID --role eng --resources 'cpus:4;mem:8192'`` sets aside unreserved
resources of a connected agent for the role path ``eng`` and the roles below it: from the next
allocation run they are offered only to those roles' frameworks, and they count toward the
quota consumption of ``eng`` and its ancestors. ``fairshare unreserve`` with the same flags
gives back part or all of a dynamic reservation (not one the agent declared with ``fairshare
agent --reserve``). Both are durable (the master's registry keeps them across restarts and
failovers). ``fairshare quota`` and ``fairshare agents`` show reservations.

Invariants (the ``fairshare`` CLI contract): bad input exits 2 with ``fairshare reserve:
--flag: <why>`` on stderr and sends nothing; a refusing or unreachable master exits 1 with the
master's reason (2 if the master says the input is invalid); success prints what was done and
exits 0.
"""

from __future__ import annotations

import argparse
import sys
from typing import Final

import grpc
from fairshare.cli import Command, command_settings
from fairshare.resources import ResourceError, ResourceVector
from fairshare.roles import DEFAULT_ROLE, RoleError, check_role
from fairshare.settings import add_setting_flags
from fairshare.v1 import operator_pb2, operator_pb2_grpc
from fairshare.wire import resources_to_pb

from client_commands.master_calls import MasterAddress, on_leader, report_refusal
from client_commands.operator import OPERATOR_SETTINGS

__all__ = ["reserve_command", "unreserve_command"]

EXIT_OK: Final = 0
EXIT_BAD_INPUT: Final = 2
CALL_TIMEOUT: Final = 10.0


def _arguments(verb: str) -> Command:
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        if verb == "reserve":
            parser.description = (
                "Reserve unreserved resources of a connected agent for a role path: they are"
                " offered only to the frameworks of that role and the roles below it, and count"
                " toward its quota consumption. Durable."
            )
        else:
            parser.description = (
                "Give back resources of a dynamic reservation (made with fairshare reserve; an"
                " agent's own --reserve is its own). Resources used by tasks cannot be"
                " unreserved. Durable."
            )
        parser.add_argument("--agent", metavar="ID", help="the agent's id (fairshare agents)")
        parser.add_argument("--role", help="the role path, e.g. eng or eng/ml (not '*')")
        parser.add_argument("--resources", metavar="RESOURCES", help="e.g. 'cpus:4;mem:8192'")
        add_setting_flags(parser, OPERATOR_SETTINGS)

    def main(args: argparse.Namespace) -> int:
        return _run(verb, args)

    return Command(add_arguments, main)


def _problem(args: argparse.Namespace) -> str | None:
    """Why the flags cannot be used (naming the flag), or None."""
    if not (args.agent or "").strip():
        return "--agent: name the agent (its id, as fairshare agents lists it)"
    role = (args.role or "").strip()
    if not role:
        return "--role: name the role path the resources are reserved for"
    try:
        role = check_role(role)
    except RoleError as error:
        return f"--role: {error}"
    if role == DEFAULT_ROLE:
        return "--role: '*' is the unreserved role; name a role path"
    if not (args.resources or "").strip():
        return "--resources: say what to reserve, e.g. 'cpus:4;mem:8192'"
    try:
        vector = ResourceVector.parse(args.resources)
    except ResourceError as error:
        return f"--resources: {error}"
    return None if vector else "--resources: names no resource (like 'cpus:4;mem:8192')"


def _run(verb: str, args: argparse.Namespace) -> int:
    master = MasterAddress.of(command_settings(verb, OPERATOR_SETTINGS, args))
    problem = _problem(args)
    if problem is not None:
        print(f"fairshare {verb}: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    agent_id, role = args.agent.strip(), check_role(args.role.strip())
    resources = ResourceVector.parse(args.resources)
    fields = {"agent_id": agent_id, "role": role, "resources": resources_to_pb(resources)}
    answer: operator_pb2.ReserveResponse | operator_pb2.UnreserveResponse
    try:
        if verb == "reserve":
            answer = on_leader(
                master,
                lambda channel: operator_pb2_grpc.OperatorServiceStub(channel).Reserve(
                    operator_pb2.ReserveRequest(**fields), timeout=CALL_TIMEOUT
                ),
            )
        else:
            answer = on_leader(
                master,
                lambda channel: operator_pb2_grpc.OperatorServiceStub(channel).Unreserve(
                    operator_pb2.UnreserveRequest(**fields), timeout=CALL_TIMEOUT
                ),
            )
    except grpc.RpcError as error:
        return report_refusal(verb, master, error)
    done = "reserved" if verb == "reserve" else "unreserved"
    print(f"{done} {resources} of agent {agent_id} for {role}")
    if answer.rescinded_offers:
        print(f"rescinded {answer.rescinded_offers} offer(s) on the agent to free them")
    return EXIT_OK


reserve_command: Final = _arguments("reserve")
unreserve_command: Final = _arguments("unreserve")
