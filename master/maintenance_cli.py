"""``fairshare agents``: agent maintenance by the operator (Mesos DEACTIVATE/REACTIVATE_AGENT).

``fairshare agents --master HOST:PORT --deactivate ID [ID ...]`` takes agents out of offer
rotation: their outstanding offers are rescinded and nothing of them is offered, while their
tasks keep running and their resources stay in the pool. ``--reactivate ID [ID ...]`` puts them
back, all in one call, so that one allocation run sees them together.

Invariants (the ``fairshare`` CLI contract): bad input exits 2 with ``fairshare agents: --flag:
<why>`` on stderr and sends nothing; an unknown agent, a refusing or unreachable master exits 1
with the master's reason; success prints one line and exits 0. The master applies a call to all
named agents or to none.
"""

from __future__ import annotations

import argparse
import sys
from typing import Final

import grpc
from fairshare.v1 import operator_pb2, operator_pb2_grpc

__all__ = ["run_agents"]

EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1
EXIT_BAD_INPUT: Final = 2
CALL_TIMEOUT: Final = 10.0


def _bad_input(args: argparse.Namespace) -> str | None:
    """Why the flags cannot be used (naming the flag), or None."""
    host, sep, port = args.master.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        return f"--master: {args.master!r} is not HOST:PORT"
    flag = "--deactivate" if args.deactivate is not None else "--reactivate"
    if any(not agent_id.strip() for agent_id in args.deactivate or args.reactivate):
        return f"{flag}: an agent id is empty"
    return None


def _call(master: str, deactivate: bool, agent_ids: list[str]) -> None:
    """One DeactivateAgents or ReactivateAgents call (raises ``grpc.RpcError``)."""
    with grpc.insecure_channel(master) as channel:
        stub = operator_pb2_grpc.OperatorServiceStub(channel)
        if deactivate:
            stub.DeactivateAgents(
                operator_pb2.DeactivateAgentsRequest(agent_ids=agent_ids), timeout=CALL_TIMEOUT
            )
        else:
            stub.ReactivateAgents(
                operator_pb2.ReactivateAgentsRequest(agent_ids=agent_ids), timeout=CALL_TIMEOUT
            )


def run_agents(args: argparse.Namespace) -> int:
    """``fairshare agents``: deactivate or reactivate agents; returns the exit code."""
    problem = _bad_input(args)
    if problem is not None:
        print(f"fairshare agents: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    deactivate = args.deactivate is not None
    agent_ids = [agent_id.strip() for agent_id in args.deactivate or args.reactivate]
    verb = "deactivate" if deactivate else "reactivate"
    try:
        _call(args.master, deactivate, agent_ids)
    except grpc.RpcError as error:
        code = error.code() if isinstance(error, grpc.Call) else grpc.StatusCode.UNKNOWN
        details = error.details() if isinstance(error, grpc.Call) else str(error)
        print(
            f"fairshare agents: the master at {args.master} did not {verb} the agents:"
            f" {code.name}: {details}",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    print(f"{verb}d {len(agent_ids)} agent(s): {' '.join(agent_ids)}")
    return EXIT_OK
