"""``fairshare agents --drain AGENT_ID [--deadline DURATION]``: drain an agent for maintenance
(``OperatorService.DrainAgent``; Mesos's DRAIN_AGENT, ``nomad node drain -deadline``).

The agent is offered to nobody from now on; its tasks may run on until the deadline
(``--deadline 10m``; ``0s`` kills them at once; without it they may run to their end), when the
master kills those still running; once none runs the agent is DRAINED. ``fairshare agents``
shows DRAINING (with its deadline in ``fairshare status``) and DRAINED; ``fairshare agents
--reactivate AGENT_ID`` ends the drain.

Invariants (the ``fairshare`` CLI contract, as ``client_commands.operator``): bad input (an empty
id, a ``--deadline`` that is not a non-negative duration, ``--deadline`` without ``--drain``)
exits 2 naming the flag and sends nothing; the master's refusal exits 1 with its reason (2 when
it says the input is invalid); success prints the agent's state and exits 0.
"""

from __future__ import annotations

import sys
import time
from typing import Final

import grpc
from fairshare.settings import duration
from fairshare.v1 import operator_pb2, operator_pb2_grpc
from fairshare.wire import WireRangeError, duration_to_pb, seconds_from_timestamp

from client_commands.master_calls import MasterAddress, on_leader, report_refusal

__all__ = ["bad_drain_input", "drain_agent"]

EXIT_OK: Final = 0
EXIT_BAD_INPUT: Final = 2
CALL_TIMEOUT: Final = 10.0
_State = operator_pb2.GetStateResponse.Agent.State


def bad_drain_input(agent_id: str | None, deadline: str | None) -> str | None:
    """Why ``--drain``/``--deadline`` cannot be used (naming the flag), or None."""
    if agent_id is None:
        return None if deadline is None else "--deadline: only with --drain AGENT_ID"
    if not agent_id.strip():
        return "--drain: the agent id is empty"
    if deadline is not None:
        try:
            duration(deadline)
        except ValueError as error:
            return f"--deadline: {error}"
    return None


def _deadline_text(response: operator_pb2.DrainAgentResponse) -> str:
    if not response.HasField("deadline"):
        return "its tasks may run to their end (no --deadline)"
    try:
        at = seconds_from_timestamp(response.deadline, "deadline")
    except WireRangeError:
        return "its tasks still running at the deadline are killed"
    when = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(at))
    return f"its tasks still running at {when} are killed"


def drain_agent(master: MasterAddress, agent_id: str, deadline: str | None) -> int:
    """Drain ``agent_id`` (inputs checked by ``bad_drain_input``); print what the master did
    and return the exit code."""
    request = operator_pb2.DrainAgentRequest(agent_id=agent_id.strip())
    if deadline is not None:
        request.deadline.CopyFrom(duration_to_pb(duration(deadline)))

    def call(channel: grpc.Channel) -> operator_pb2.DrainAgentResponse:
        stub = operator_pb2_grpc.OperatorServiceStub(channel)
        answer: operator_pb2.DrainAgentResponse = stub.DrainAgent(request, timeout=CALL_TIMEOUT)
        return answer

    try:
        response = on_leader(master, call)
    except grpc.RpcError as error:
        return report_refusal("agents", master, error)
    undo = f"(fairshare agents --reactivate {request.agent_id} ends it)"
    if response.state == _State.STATE_DRAINED:
        print(
            f"agent {request.agent_id} is DRAINED: it runs no task and is offered to nobody {undo}"
        )
    else:
        print(
            f"draining agent {request.agent_id}: it is offered to nobody;"
            f" {_deadline_text(response)}; then it is DRAINED {undo}"
        )
    sys.stdout.flush()
    return EXIT_OK
