"""``OperatorServicer``: the Operator API (operator.proto) as a thin adapter over the runtime.

GetState is one synchronous snapshot of the runtime (consistent by construction: it runs in one
step of the event loop), as much of it as the caller may see. Every call names its caller
(``fairshare.rpc_guard.caller``) to the runtime, which authorizes it by the ACL. SetWeight
checks the request's shape (a target; no weight with clear) here, and the runtime checks the
weight by the core's one rule; SetQuota checks the request's shape here (a role; resources
well formed, each named one above 0; a guarantee or a limit, or clear alone; force only with a
limit), and the runtime checks the quota against the whole table (the core's rules) and what
the role holds; Reserve and Unreserve check the request's shape here (an agent id, a role path
that is not ``*``, non-empty resources) and the runtime the rest (``master.runtime
.reservations``); DeactivateAgents and
ReactivateAgents pass the ids through (the runtime checks them all before changing anything);
DrainAgent checks the deadline's shape (a non-negative Duration) here and passes the agent id
through (the runtime checks it and the deadline's range, ``master.runtime.agent_drains``);
TeardownFramework, KillTask and RemoveAgent pass their ids through (the runtime checks them);
GrantLogAccess passes the task and framework ids through (the runtime decides who may read and
signs the grant for each agent); errors become precise status codes.
"""

from __future__ import annotations

from fairshare.resources import ResourceVector
from fairshare.rpc_guard import caller
from fairshare.v1 import common_pb2, operator_pb2_grpc
from fairshare.v1 import operator_pb2 as pb

from master.core.errors import InvalidArgument
from master.core.quota import Quota
from master.core.reservations import checked_reservation_role
from master.runtime.operator import OperatorCalls, QuotaView
from master.service import convert
from master.service.errors import Context, maps_errors
from master.service.state import state_to_pb

__all__ = ["OperatorServicer"]


def _weight(kind: str, target: str, weight: float) -> pb.Weight:
    if kind == "role":
        return pb.Weight(role=target, weight=weight)
    return pb.Weight(framework_id=target, weight=weight)


def _quota_resources(message: common_pb2.Resources, what: str) -> ResourceVector:
    """A guarantee or a limit: well-formed resources, each named one above 0 (a resource left
    out is not guaranteed or not limited; a 0 would read as "not named")."""
    vector = convert.resources(message, what)
    for item in message.items:
        if item.millis == 0:
            raise InvalidArgument(
                f"{what}: {item.name} is 0 (leave a resource out to not guarantee or limit it)"
            )
    return vector


def _quota(view: QuotaView) -> pb.Quota:
    quota = view.quota
    message = pb.Quota(
        role=view.role,
        guarantee=convert.resources_to_pb(quota.guarantee),
        consumed=convert.resources_to_pb(view.consumed),
        reserved=convert.resources_to_pb(view.reserved),
    )
    if quota.limit is not None:
        message.limit.CopyFrom(convert.resources_to_pb(quota.limit))
    return message


def _requested_quota(request: pb.SetQuotaRequest) -> Quota:
    """The quota a SetQuota asks for (empty for clear); INVALID_ARGUMENT naming the field."""
    has_limit = request.HasField("limit")
    if request.clear:
        if request.guarantee.items or has_limit or request.force:
            raise InvalidArgument("guarantee, limit and force must be unset when clear is true")
        return Quota()
    guarantee = _quota_resources(request.guarantee, "guarantee")
    limit = _quota_resources(request.limit, "limit") if has_limit else None
    if limit is not None and not limit:
        raise InvalidArgument("limit names no resource (leave limit unset for no limit)")
    if not guarantee and limit is None:
        raise InvalidArgument("guarantee and limit are both unset: set one, or clear")
    if request.force and limit is None:
        raise InvalidArgument("force is only for a limit (below what the role holds)")
    return Quota(guarantee, limit)


def _reservation(request: pb.ReserveRequest | pb.UnreserveRequest) -> tuple[str, ResourceVector]:
    """The role and resources of a Reserve or Unreserve; INVALID_ARGUMENT naming the field."""
    if not request.agent_id:
        raise InvalidArgument("agent_id is empty")
    if not request.role:
        raise InvalidArgument("role is empty (reservations name a role path)")
    role = checked_reservation_role(request.role)
    resources = convert.resources(request.resources, "resources")
    if not resources:
        raise InvalidArgument("resources is empty")
    return role, resources


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
    async def SetQuota(self, request: pb.SetQuotaRequest, context: Context) -> pb.SetQuotaResponse:
        """Set or clear one role's quota."""
        if not request.role:
            raise InvalidArgument("role is empty (the default role is '*')")
        role = convert.check_role(request.role)
        quota = _requested_quota(request)
        stored, rescinded = self.operator.set_quota(role, quota, request.force, caller())
        response = pb.SetQuotaResponse(rescinded_offers=rescinded)
        if stored is not None:
            response.quota.CopyFrom(_quota(stored))
        return response

    @maps_errors
    async def Reserve(self, request: pb.ReserveRequest, context: Context) -> pb.ReserveResponse:
        """Reserve resources of one agent for a role."""
        role, resources = _reservation(request)
        rescinded = self.operator.reserve(request.agent_id, role, resources, caller())
        return pb.ReserveResponse(rescinded_offers=rescinded)

    @maps_errors
    async def Unreserve(
        self, request: pb.UnreserveRequest, context: Context
    ) -> pb.UnreserveResponse:
        """Give back resources of a dynamic reservation."""
        role, resources = _reservation(request)
        rescinded = self.operator.unreserve(request.agent_id, role, resources, caller())
        return pb.UnreserveResponse(rescinded_offers=rescinded)

    @maps_errors
    async def GetQuotas(
        self, request: pb.GetQuotasRequest, context: Context
    ) -> pb.GetQuotasResponse:
        """Every role's quota, with its consumption, against the pool."""
        table = self.operator.quotas(caller())
        return pb.GetQuotasResponse(
            quotas=[_quota(view) for view in table.quotas],
            guaranteed=convert.resources_to_pb(table.guaranteed),
            total=convert.resources_to_pb(table.total),
            overcommitted=table.overcommitted,
        )

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
    async def DrainAgent(
        self, request: pb.DrainAgentRequest, context: Context
    ) -> pb.DrainAgentResponse:
        """Drain an agent: no offers now, its tasks killed at the deadline, then DRAINED."""
        grace = None
        if request.HasField("deadline"):
            grace = convert.duration_seconds(request.deadline, "deadline")
        drain = self.operator.drain_agent(request.agent_id, grace, caller())
        response = pb.DrainAgentResponse(
            state=pb.GetStateResponse.Agent.State.Value(f"STATE_{drain.state}")
        )
        if drain.deadline is not None:
            response.deadline.CopyFrom(convert.timestamp(drain.deadline))
        return response

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

    @maps_errors
    async def GrantLogAccess(
        self, request: pb.GrantLogAccessRequest, context: Context
    ) -> pb.GrantLogAccessResponse:
        """A credential to read a task's logs, and the agents to read them from."""
        granted = self.operator.grant_logs(request.task_id, request.framework_id, caller())
        return pb.GrantLogAccessResponse(
            grant=granted.grant,
            expires_at=convert.timestamp(granted.expires_at),
            agents=[
                pb.LogAgent(
                    agent_id=a.agent_id, hostname=a.hostname, port=a.port, signature=a.signature
                )
                for a in granted.agents
            ],
        )
