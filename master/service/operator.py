"""``OperatorServicer``: the Operator API (operator.proto) as a thin adapter over the runtime.

GetState is one synchronous snapshot of the runtime (consistent by construction: it runs in one
step of the event loop), as much of it as the caller may see. Every call names its caller
(``fairshare.rpc_guard.caller``) to the runtime, which authorizes it by the ACL. SetWeight
checks the request's shape (a target; no weight with clear) here, and the runtime checks the
weight by the core's one rule; DeactivateAgents and
ReactivateAgents pass the ids through (the runtime checks them all before changing anything);
TeardownFramework, KillTask and RemoveAgent pass their ids through (the runtime checks them);
errors become precise status codes.
"""

from __future__ import annotations

from fairshare.rpc_guard import caller
from fairshare.v1 import operator_pb2 as pb
from fairshare.v1 import operator_pb2_grpc

from master.core.errors import InvalidArgument
from master.runtime.operator import OperatorCalls
from master.service import convert
from master.service.errors import Context, maps_errors
from master.service.state import state_to_pb

__all__ = ["OperatorServicer"]


def _weight(kind: str, target: str, weight: float) -> pb.Weight:
    if kind == "role":
        return pb.Weight(role=target, weight=weight)
    return pb.Weight(framework_id=target, weight=weight)


class OperatorServicer(operator_pb2_grpc.OperatorServiceServicer):
    """Operators' calls, forwarded to the runtime."""

    def __init__(self, operator: OperatorCalls) -> None:
        self.operator = operator

    @maps_errors
    async def GetState(self, request: pb.GetStateRequest, context: Context) -> pb.GetStateResponse:
        """The whole cluster state."""
        return state_to_pb(self.operator.view(caller()))

    @maps_errors
    async def SetWeight(
        self, request: pb.SetWeightRequest, context: Context
    ) -> pb.SetWeightResponse:
        """Set or clear one weight."""
        target = request.WhichOneof("target")
        if target is None:
            raise InvalidArgument("set either role or framework_id")
        if request.clear and request.weight != 0:
            raise InvalidArgument("weight must be 0 when clear is true")
        role = convert.check_role(request.role) if target == "role" else None
        framework_id = request.framework_id if target == "framework_id" else None
        stored = self.operator.set_weight(
            role, framework_id, request.weight, request.clear, caller()
        )
        if stored is None:
            return pb.SetWeightResponse()
        return pb.SetWeightResponse(weight=_weight(*stored))

    @maps_errors
    async def GetWeights(
        self, request: pb.GetWeightsRequest, context: Context
    ) -> pb.GetWeightsResponse:
        """The operator-set weights."""
        return pb.GetWeightsResponse(weights=[_weight(*w) for w in self.operator.weights(caller())])

    @maps_errors
    async def DeactivateAgents(
        self, request: pb.DeactivateAgentsRequest, context: Context
    ) -> pb.DeactivateAgentsResponse:
        """Take agents out of offer rotation (maintenance)."""
        self.operator.deactivate_agents(list(request.agent_ids), caller())
        return pb.DeactivateAgentsResponse()

    @maps_errors
    async def ReactivateAgents(
        self, request: pb.ReactivateAgentsRequest, context: Context
    ) -> pb.ReactivateAgentsResponse:
        """Put agents back into offer rotation."""
        self.operator.reactivate_agents(list(request.agent_ids), caller())
        return pb.ReactivateAgentsResponse()

    @maps_errors
    async def TeardownFramework(
        self, request: pb.TeardownFrameworkRequest, context: Context
    ) -> pb.TeardownFrameworkResponse:
        """Remove a framework for good."""
        self.operator.teardown_framework(request.framework_id, caller())
        return pb.TeardownFrameworkResponse()

    @maps_errors
    async def KillTask(self, request: pb.KillTaskRequest, context: Context) -> pb.KillTaskResponse:
        """Kill one task on its framework's behalf."""
        self.operator.kill_task(request.framework_id, request.task_id, caller())
        return pb.KillTaskResponse()

    @maps_errors
    async def RemoveAgent(
        self, request: pb.RemoveAgentRequest, context: Context
    ) -> pb.RemoveAgentResponse:
        """Mark an unreachable agent gone."""
        self.operator.remove_agent(request.agent_id, caller())
        return pb.RemoveAgentResponse()
