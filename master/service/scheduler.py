"""``SchedulerServicer``: the Scheduler API (scheduler.proto) as a thin adapter over the runtime.

Each method converts the request (``convert`` validates wire input), makes one synchronous call
into the runtime's ``FrameworkCalls`` on the event loop, and converts the result; errors become
precise status codes (``maps_errors``). Every call names its caller (``fairshare.rpc_guard.caller``:
the principal the server's guard authenticated) to the runtime, which checks it owns the
framework. Subscribe sends ``subscribed`` first, then drains the
framework's channel until the runtime closes it or the client goes away; either way the runtime
hears that the stream ended.

The servicer needs only ``FrameworkCalls``' shape (``FrameworkPort``): in the master's I/O
workers (``master.io_workers``) the same servicer runs over an adapter whose answers come later
(an awaitable: the core applies the call it was sent over the worker's link, and answers);
``FrameworkCalls`` itself answers at once (None, or the ``SubscribeResult``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Sequence
from typing import Any, Protocol

from fairshare.rpc_guard import caller
from fairshare.v1 import scheduler_pb2 as pb
from fairshare.v1 import scheduler_pb2_grpc

from master.core import TaskLaunch
from master.model import Demand, FrameworkEvent, FrameworkInfo, StreamEnd
from master.runtime.frameworks import SubscribeResult
from master.runtime.sessions import Channel
from master.service import convert, streams
from master.service.errors import Context, abort_with, grpc_code, maps_errors

__all__ = ["FrameworkPort", "SchedulerServicer", "add_scheduler_service"]

Answer = Awaitable[None] | None


class FrameworkPort(Protocol):
    """What the servicer calls: ``FrameworkCalls`` (master.runtime.frameworks), or an adapter
    of its shape whose answers come later (awaitables)."""

    def subscribe(
        self, spec: FrameworkInfo, demand: Demand | None, suppressed: bool, principal: str | None
    ) -> SubscribeResult | Awaitable[SubscribeResult]: ...

    def unsubscribe(self, framework_id: str, channel: Channel[FrameworkEvent]) -> None: ...

    def accept(
        self,
        framework_id: str,
        offer_ids: Sequence[str],
        launches: Sequence[TaskLaunch],
        refuse_seconds: float | None,
        principal: str | None,
    ) -> Answer: ...

    def decline(
        self,
        framework_id: str,
        offer_ids: Sequence[str],
        refuse_seconds: float | None,
        principal: str | None,
    ) -> Answer: ...

    def revive(self, framework_id: str, role: str, principal: str | None) -> Answer: ...

    def suppress(self, framework_id: str, role: str, principal: str | None) -> Answer: ...

    def kill(
        self, framework_id: str, task_id: str, agent_id: str, principal: str | None
    ) -> Answer: ...

    def acknowledge_many(
        self, framework_id: str, acks: Sequence[tuple[str, str, bytes]], principal: str | None
    ) -> Answer: ...

    def reconcile(
        self, framework_id: str, refs: Sequence[tuple[str, str]], principal: str | None
    ) -> Answer: ...

    def teardown(self, framework_id: str, principal: str | None) -> Answer: ...

    def update_demand(
        self, framework_id: str, demand: Demand | None, principal: str | None
    ) -> Answer: ...


def add_scheduler_service(servicer: SchedulerServicer, server: Any) -> None:
    """Register ``servicer`` as the Scheduler API of ``server`` (a grpc.aio server)."""
    scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server(servicer, server)


async def _answered(answer: Answer) -> None:
    if answer is not None:
        await answer


class SchedulerServicer(scheduler_pb2_grpc.SchedulerServiceServicer):
    """Frameworks' calls, forwarded to the runtime."""

    def __init__(self, frameworks: FrameworkPort) -> None:
        self.frameworks = frameworks

    async def Subscribe(
        self, request: pb.SubscribeRequest, context: Context
    ) -> AsyncIterator[pb.SubscribeResponse]:
        """Register or re-register, then stream events."""
        try:
            spec = convert.framework_spec(request.framework_info)
            demand = convert.demand_spec(request.demand, request.HasField("demand"))
            subscribed = self.frameworks.subscribe(spec, demand, request.suppressed, caller())
            result = subscribed if isinstance(subscribed, SubscribeResult) else await subscribed
        except Exception as error:
            await abort_with(context, error, "Subscribe")
        first = pb.SubscribedEvent(
            framework_id=result.framework_id,
            heartbeat_interval=convert.duration(result.heartbeat_interval),
            master_id=result.master_id,
            resubscribed=result.resubscribed,
            weight=result.weight,
        )
        try:
            yield pb.SubscribeResponse(subscribed=first)
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
        await _answered(
            self.frameworks.accept(
                request.framework_id, list(request.offer_ids), tasks, refuse, caller()
            )
        )
        return pb.AcceptResponse()

    @maps_errors
    async def Decline(self, request: pb.DeclineRequest, context: Context) -> pb.DeclineResponse:
        """Decline offers."""
        refuse = convert.refuse_seconds(request.filters, request.HasField("filters"))
        await _answered(
            self.frameworks.decline(request.framework_id, list(request.offer_ids), refuse, caller())
        )
        return pb.DeclineResponse()

    @maps_errors
    async def Revive(self, request: pb.ReviveRequest, context: Context) -> pb.ReviveResponse:
        """Clear filters and resume offers."""
        await _answered(self.frameworks.revive(request.framework_id, request.role, caller()))
        return pb.ReviveResponse()

    @maps_errors
    async def Suppress(self, request: pb.SuppressRequest, context: Context) -> pb.SuppressResponse:
        """Stop offers."""
        await _answered(self.frameworks.suppress(request.framework_id, request.role, caller()))
        return pb.SuppressResponse()

    @maps_errors
    async def Kill(self, request: pb.KillRequest, context: Context) -> pb.KillResponse:
        """Kill a task."""
        await _answered(
            self.frameworks.kill(request.framework_id, request.task_id, request.agent_id, caller())
        )
        return pb.KillResponse()

    @maps_errors
    async def Acknowledge(
        self, request: pb.AcknowledgeRequest, context: Context
    ) -> pb.AcknowledgeResponse:
        """Acknowledge status updates."""
        acks = [(a.agent_id, a.task_id, a.uuid) for a in request.acknowledgements]
        await _answered(self.frameworks.acknowledge_many(request.framework_id, acks, caller()))
        return pb.AcknowledgeResponse()

    @maps_errors
    async def Reconcile(
        self, request: pb.ReconcileRequest, context: Context
    ) -> pb.ReconcileResponse:
        """Resend task states."""
        refs = [(ref.task_id, ref.agent_id) for ref in request.tasks]
        await _answered(self.frameworks.reconcile(request.framework_id, refs, caller()))
        return pb.ReconcileResponse()

    @maps_errors
    async def Teardown(self, request: pb.TeardownRequest, context: Context) -> pb.TeardownResponse:
        """Remove the framework."""
        await _answered(self.frameworks.teardown(request.framework_id, caller()))
        return pb.TeardownResponse()

    @maps_errors
    async def UpdateDemand(
        self, request: pb.UpdateDemandRequest, context: Context
    ) -> pb.UpdateDemandResponse:
        """Declare, change or clear the demand."""
        demand = convert.demand_spec(request.demand, request.HasField("demand"))
        await _answered(self.frameworks.update_demand(request.framework_id, demand, caller()))
        return pb.UpdateDemandResponse()
