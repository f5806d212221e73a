"""``fairshare agents``: the agents, and their maintenance (Mesos's DEACTIVATE_AGENT,
REACTIVATE_AGENT and DRAIN_AGENT) and removal (MARK_AGENT_GONE).

Without an action it lists the agents (id, address, state, attributes, total, used, free,
reservations, last heard). ``--remove ID`` marks an unreachable agent gone for good (its tasks
are GONE, it is no longer listed, it is never readmitted). ``--deactivate ID [ID ...]`` takes
agents out of offer rotation: their outstanding offers are rescinded and nothing of them is
offered, while their tasks keep running and their resources stay in the pool.
``--reactivate ID [ID ...]`` puts them back, all in one call, so that one allocation run sees
them together, ending their drains. ``--drain ID [--deadline DURATION]`` drains one
(``client_commands.drain``: no offers at once, its tasks killed at the deadline, then DRAINED).

It talks to ``--master`` (``OPERATOR_SETTINGS``); ``agents_command`` is its entry in
``fairshare.cli``'s table.

Invariants (the ``fairshare`` CLI contract): bad input exits 2 with ``fairshare agents: --flag:
<why>`` on stderr and sends nothing; an unknown agent, a refusing or unreachable master exits 1
with the master's reason (2 if the master says the input is invalid); success prints what was
done and exits 0. The master applies a call to all named agents or to none.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Final

import grpc
from fairshare.cli import Command, command_settings
from fairshare.settings import add_setting_flags
from fairshare.v1 import common_pb2, operator_pb2, operator_pb2_grpc
from fairshare.wire import WireRangeError, resources_from_pb, seconds_from_timestamp

from client_commands.drain import bad_drain_input, drain_agent
from client_commands.master_calls import (
    CommandFailed,
    MasterAddress,
    call_master,
    master_failure,
    on_leader,
    render_rows,
)
from client_commands.operator import OPERATOR_SETTINGS

__all__ = ["agent_rows", "agents_command"]

EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1
EXIT_BAD_INPUT: Final = 2
CALL_TIMEOUT: Final = 10.0


def _bad_input(args: argparse.Namespace) -> str | None:
    """Why the flags cannot be used (naming the flag), or None."""
    if args.remove is not None:
        return "--remove: the agent id is empty" if not args.remove.strip() else None
    flag = "--deactivate" if args.deactivate is not None else "--reactivate"
    if any(not agent_id.strip() for agent_id in args.deactivate or args.reactivate):
        return f"{flag}: an agent id is empty"
    return None


def _text(resources: common_pb2.Resources) -> str:
    vector = resources_from_pb(resources)
    return str(vector) if vector else "-"


def agent_rows(state: operator_pb2.GetStateResponse) -> list[list[str]]:
    """One row per agent: what ``fairshare agents`` prints."""
    now = time.time()
    rows = []
    for agent in state.agents:
        info = agent.agent_info
        try:
            heard = now - seconds_from_timestamp(agent.last_heartbeat_at, "last_heartbeat_at")
        except WireRangeError:
            heard = math.nan
        rows.append(
            [
                agent.agent_id,
                f"{info.hostname}:{info.port}",
                operator_pb2.GetStateResponse.Agent.State.Name(agent.state).removeprefix("STATE_"),
                ";".join(f"{a.name}:{a.value}" for a in info.attributes) or "-",
                _text(info.resources),
                _text(agent.used),
                _text(agent.free),
                " ".join(
                    f"{r.role}{'' if r.dynamic else '(static)'}={_text(r.resources)}"
                    for r in agent.reservations
                )
                or "-",
                f"{max(0.0, heard):.0f}s ago"
                if agent.HasField("last_heartbeat_at") and not math.isnan(heard)
                else "-",
            ]
        )
    return rows


def _list_agents(master: MasterAddress) -> int:
    state = call_master(
        master, lambda s: s.GetState(operator_pb2.GetStateRequest(), timeout=CALL_TIMEOUT)
    )
    header = ["AGENT", "ADDRESS", "STATE", "ATTRIBUTES", "TOTAL", "USED", "FREE", "RESERVED"]
    header.append("HEARD")
    print(render_rows(header, agent_rows(state), "(no agents)"))
    return EXIT_OK


def _remove_agent(master: MasterAddress, agent_id: str) -> int:
    request = operator_pb2.RemoveAgentRequest(agent_id=agent_id)
    call_master(master, lambda s: s.RemoveAgent(request, timeout=CALL_TIMEOUT))
    print(f"removed agent {agent_id}: its tasks are GONE; it is no longer listed")
    return EXIT_OK


def _call(master: MasterAddress, deactivate: bool, agent_ids: list[str]) -> None:
    """One DeactivateAgents or ReactivateAgents call on the leader (raises ``grpc.RpcError``)."""

    def call(channel: grpc.Channel) -> None:
        stub = operator_pb2_grpc.OperatorServiceStub(channel)
        if deactivate:
            stub.DeactivateAgents(
                operator_pb2.DeactivateAgentsRequest(agent_ids=agent_ids), timeout=CALL_TIMEOUT
            )
        else:
            stub.ReactivateAgents(
                operator_pb2.ReactivateAgentsRequest(agent_ids=agent_ids), timeout=CALL_TIMEOUT
            )

    on_leader(master, call)


def add_agents_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``fairshare agents``."""
    parser.description = (
        "Without an action: list the agents. Deactivate agents (their offers are rescinded and"
        " nothing of them is offered; their tasks keep running) or reactivate them, all named"
        " agents in one call; drain one (no offers; its tasks killed at the deadline, then it is"
        " DRAINED); or remove an unreachable agent for good (its tasks become GONE)."
    )
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--deactivate", nargs="+", metavar="AGENT_ID", help="agents to deactivate")
    action.add_argument("--reactivate", nargs="+", metavar="AGENT_ID", help="agents to reactivate")
    action.add_argument(
        "--remove", metavar="AGENT_ID", help="an unreachable agent to remove for good"
    )
    action.add_argument(
        "--drain",
        metavar="AGENT_ID",
        help="drain an agent: no offers now, its tasks killed at --deadline, then DRAINED"
        " (--reactivate ends it)",
    )
    parser.add_argument(
        "--deadline",
        metavar="DURATION",
        help="with --drain: how long its tasks may run on ('10m'; '0s' kills them at once;"
        " default: to their end)",
    )
    add_setting_flags(parser, OPERATOR_SETTINGS)


def run_agents(args: argparse.Namespace) -> int:
    """``fairshare agents``: list, deactivate, reactivate or remove agents; the exit code."""
    master = MasterAddress.of(command_settings("agents", OPERATOR_SETTINGS, args))
    drain_problem = bad_drain_input(args.drain, args.deadline)
    if drain_problem is not None:
        print(f"fairshare agents: {drain_problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.drain is not None:
        return drain_agent(master, args.drain, args.deadline)
    if args.deactivate is None and args.reactivate is None:
        try:
            if args.remove is None:
                return _list_agents(master)
            if not args.remove.strip():
                print("fairshare agents: --remove: the agent id is empty", file=sys.stderr)
                return EXIT_BAD_INPUT
            return _remove_agent(master, args.remove.strip())
        except CommandFailed as failure:
            print(f"fairshare agents: {failure}", file=sys.stderr)
            return failure.code
    problem = _bad_input(args)
    if problem is not None:
        print(f"fairshare agents: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    deactivate = args.deactivate is not None
    agent_ids = [agent_id.strip() for agent_id in args.deactivate or args.reactivate]
    verb = "deactivate" if deactivate else "reactivate"
    try:
        _call(master, deactivate, agent_ids)
    except grpc.RpcError as error:
        code = error.code() if isinstance(error, grpc.Call) else grpc.StatusCode.UNKNOWN
        details = error.details() if isinstance(error, grpc.Call) else str(error)
        why = (
            master_failure(master, error)
            if code in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.UNAVAILABLE)
            else f"the master at {master} did not {verb} the agents: {code.name}: {details}"
        )
        print(f"fairshare agents: {why}", file=sys.stderr)
        return EXIT_FAILURE
    print(f"{verb}d {len(agent_ids)} agent(s): {' '.join(agent_ids)}")
    return EXIT_OK


agents_command: Final = Command(add_agents_arguments, run_agents)
