"""``SchedulerServicer``: the Scheduler API (scheduler.proto) as a thin adapter over the runtime.

Each method converts the request (``convert`` validates wire input), makes one synchronous call
into the runtime's ``FrameworkCalls`` on the event loop, and converts the result; errors become
precise status codes (``maps_errors``). Every call names its caller (``fairshare.rpc_guard.caller``:
the principal the server's guard authenticated) to the runtime, which checks it owns the
framework. Subscribe sends ``subscribed`` first, then drains the
framework's channel until the runtime closes it or the client goes away; either way the runtime
hears that the stream ended.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from fairshare.rpc_guard import caller
from fairshare.v1 import scheduler_pb2 as pb
from fairshare.v1 import scheduler_pb2_grpc

from master.model import StreamEnd
from master.runtime.frameworks import FrameworkCalls
from master.service import convert, streams
from master.service.errors import Context, abort_with, grpc_code, maps_errors

__all__ = ["SchedulerServicer"]


class SchedulerServicer(scheduler_pb2_grpc.SchedulerServiceServicer):
    """Frameworks' calls, forwarded to the runtime."""

    def __init__(self, frameworks: FrameworkCalls) -> None:
        self.frameworks = frameworks

    async def Subscribe(
        self, request: pb.SubscribeRequest, context: Context
    ) -> AsyncIterator[pb.SubscribeResponse]:
        """Register or re-register, then stream events."""
        try:
            spec = convert.framework_spec(request.framework_info)
            demand = convert.demand_spec(request.demand, request.HasField("demand"))
            result = self.frameworks.subscribe(spec, demand, request.suppressed, caller())
        except Exception as error:
            await abort_with(context, error, "Subscribe")
        subscribed = pb.SubscribedEvent(
            framework_id=result.framework_id,
            heartbeat_interval=convert.duration(result.heartbeat_interval),
            master_id=result.master_id,
            resubscribed=result.resubscribed,
            weight=result.weight,
        )
        try:
            yield pb.SubscribeResponse(subscribed=subscribed)
            while True:
                event = await result.channel.get()
                if isinstance(event, StreamEnd):
                    if event.code != "OK":
                        await context.abort(grpc_code(event.code), event.message)
                    return
                for message in streams.event_messages(event):
                    yield message
        finally:
            self.frameworks.unsubscribe(result.framework_id, result.channel)

    @maps_errors
    async def Accept(self, request: pb.AcceptRequest, context: Context) -> pb.AcceptResponse:
        """Launch tasks on offers."""
        tasks = [
            convert.task_launch(info)
            for operation in request.operations
            if operation.HasField("launch")
            for info in operation.launch.task_infos
        ]
        refuse = convert.refuse_seconds(request.filters, request.HasField("filters"))
        self.frameworks.accept(
            request.framework_id, list(request.offer_ids), tasks, refuse, caller()
        )
        return pb.AcceptResponse()

    @maps_errors
    async def Decline(self, request: pb.DeclineRequest, context: Context) -> pb.DeclineResponse:
        """Decline offers."""
        refuse = convert.refuse_seconds(request.filters, request.HasField("filters"))
        self.frameworks.decline(request.framework_id, list(request.offer_ids), refuse, caller())
        return pb.DeclineResponse()

    @maps_errors
    async def Revive(self, request: pb.ReviveRequest, context: Context) -> pb.ReviveResponse:
        """Clear filters and resume offers."""
        self.frameworks.revive(request.framework_id, request.role, caller())
        return pb.ReviveResponse()

    @maps_errors
    async def Suppress(self, request: pb.SuppressRequest, context: Context) -> pb.SuppressResponse:
        """Stop offers."""
        self.frameworks.suppress(request.framework_id, request.role, caller())
        return pb.SuppressResponse()

    @maps_errors
    async def Kill(self, request: pb.KillRequest, context: Context) -> pb.KillResponse:
        """Kill a task."""
        self.frameworks.kill(request.framework_id, request.task_id, request.agent_id, caller())
        return pb.KillResponse()

    @maps_errors
    async def Acknowledge(
        self, request: pb.AcknowledgeRequest, context: Context
    ) -> pb.AcknowledgeResponse:
        """Acknowledge status updates."""
        acks = [(a.agent_id, a.task_id, a.uuid) for a in request.acknowledgements]
        self.frameworks.acknowledge_many(request.framework_id, acks, caller())
        return pb.AcknowledgeResponse()

    @maps_errors
    async def Reconcile(
        self, request: pb.ReconcileRequest, context: Context
    ) -> pb.ReconcileResponse:
        """Resend task states."""
        refs = [(ref.task_id, ref.agent_id) for ref in request.tasks]
        self.frameworks.reconcile(request.framework_id, refs, caller())
        return pb.ReconcileResponse()

    @maps_errors
    async def Teardown(self, request: pb.TeardownRequest, context: Context) -> pb.TeardownResponse:
        """Remove the framework."""
        self.frameworks.teardown(request.framework_id, caller())
        return pb.TeardownResponse()

    @maps_errors
    async def UpdateDemand(
        self, request: pb.UpdateDemandRequest, context: Context
    ) -> pb.UpdateDemandResponse:
        """Declare, change or clear the demand."""
        demand = convert.demand_spec(request.demand, request.HasField("demand"))
        self.frameworks.update_demand(request.framework_id, demand, caller())
        return pb.UpdateDemandResponse()
