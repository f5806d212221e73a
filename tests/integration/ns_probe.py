"""What an observer inside the multi-host sandbox sees, as one JSON object on stdout.

``python tests/integration/ns_probe.py --masters A,B,C --http H1,H2,H3`` (run with ``ip netns
exec``, from a namespace of the sandbox): ``roles`` (each master's ``/health`` role, "" when it
does not answer within 0.5 s), and from the one master that answers GetState: ``leader`` (its
address and epoch), ``agents`` ({agent id: state}), ``running`` ({task id: agent id}) and
``offers`` (how many are outstanding). Every call is bounded; it never waits longer than a few
seconds.
"""

from __future__ import annotations

import argparse
import json
import urllib.request
from typing import Any

import grpc
from fairshare.v1 import common_pb2, operator_pb2, operator_pb2_grpc

TIMEOUT = 0.5
AGENT_STATE = operator_pb2.GetStateResponse.Agent.State


def role(http: str) -> str:
    try:
        with urllib.request.urlopen(f"http://{http}/health", timeout=TIMEOUT) as answer:
            return str(json.loads(answer.read()).get("role", ""))
    except (OSError, ValueError):
        return ""


def state(masters: list[str]) -> dict[str, Any]:
    for address in masters:
        with grpc.insecure_channel(address) as channel:
            stub = operator_pb2_grpc.OperatorServiceStub(channel)
            try:
                found = stub.GetState(operator_pb2.GetStateRequest(), timeout=2 * TIMEOUT)
            except grpc.RpcError:
                continue
        running = common_pb2.TASK_STATE_RUNNING
        return {
            "leader": {"address": found.leader.address, "epoch": found.leader.epoch},
            "agents": {
                a.agent_id: AGENT_STATE.Name(a.state).removeprefix("STATE_") for a in found.agents
            },
            "running": {
                t.info.task_id: t.info.agent_id for t in found.tasks if t.status.state == running
            },
            "offers": len(found.offers),
        }
    return {}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--masters", required=True)
    parser.add_argument("--http", required=True)
    args = parser.parse_args()
    masters = args.masters.split(",")
    document = {
        "roles": {m: role(h) for m, h in zip(masters, args.http.split(","), strict=True)},
        **state(masters),
    }
    print(json.dumps(document))


if __name__ == "__main__":
    main()
