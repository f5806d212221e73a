"""The gRPC face of the fake master (``framework_sdk.testing``): a thin adapter from the
Scheduler API's servicer methods to the ``FakeMaster`` serving them.

Invariants: no state and no rules here; every call goes to the master's ``_unary`` (recorded,
failure injection, refusals as gRPC status codes) or ``_subscribe`` (the event stream).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any, Protocol

import grpc
from fairshare.v1 import scheduler_pb2, scheduler_pb2_grpc
from google.protobuf import message as protobuf_message

from framework_sdk._fake_cluster import FakeClusterState

__all__ = ["FakeServicer", "ServedMaster", "ServicerContext"]

ServicerContext = grpc.aio.ServicerContext[Any, Any]


class ServedMaster(Protocol):
    """What the servicer needs of the fake master."""

    state: FakeClusterState

    def _subscribe(
        self, request: scheduler_pb2.SubscribeRequest, context: ServicerContext
    ) -> AsyncGenerator[scheduler_pb2.SubscribeResponse, None]: ...

    async def _unary(
        self,
        method: str,
        request: protobuf_message.Message,
        context: ServicerContext,
        apply: Callable[[], object],
    ) -> None: ...

    def _accept(self, request: scheduler_pb2.AcceptRequest) -> None: ...

    def _teardown(self, request: scheduler_pb2.TeardownRequest) -> None: ...


class FakeServicer(scheduler_pb2_grpc.SchedulerServiceServicer):
    """Thin adapter from gRPC to the FakeMaster."""

    def __init__(self, master: ServedMaster) -> None:
        self._m = master

    async def Subscribe(
        self, request: scheduler_pb2.SubscribeRequest, context: ServicerContext
    ) -> AsyncIterator[scheduler_pb2.SubscribeResponse]:
        stream = self._m._subscribe(request, context)
        try:
            async for event in stream:
                yield event
        finally:
            await stream.aclose()

    async def Accept(
        self, request: scheduler_pb2.AcceptRequest, context: ServicerContext
    ) -> scheduler_pb2.AcceptResponse:
        await self._m._unary("Accept", request, context, lambda: self._m._accept(request))
        return scheduler_pb2.AcceptResponse()

    async def Decline(
        self, request: scheduler_pb2.DeclineRequest, context: ServicerContext
    ) -> scheduler_pb2.DeclineResponse:
        await self._m._unary("Decline", request, context, lambda: self._m.state.decline(request))
        return scheduler_pb2.DeclineResponse()

    async def Revive(
        self, request: scheduler_pb2.ReviveRequest, context: ServicerContext
    ) -> scheduler_pb2.ReviveResponse:
        await self._m._unary("Revive", request, context, lambda: self._m.state.revive(request))
        return scheduler_pb2.ReviveResponse()

    async def Suppress(
        self, request: scheduler_pb2.SuppressRequest, context: ServicerContext
    ) -> scheduler_pb2.SuppressResponse:
        await self._m._unary("Suppress", request, context, lambda: self._m.state.suppress(request))
        return scheduler_pb2.SuppressResponse()

    async def Kill(
        self, request: scheduler_pb2.KillRequest, context: ServicerContext
    ) -> scheduler_pb2.KillResponse:
        await self._m._unary("Kill", request, context, lambda: self._m.state.kill(request))
        return scheduler_pb2.KillResponse()

    async def Acknowledge(
        self, request: scheduler_pb2.AcknowledgeRequest, context: ServicerContext
    ) -> scheduler_pb2.AcknowledgeResponse:
        apply = lambda: self._m.state.acknowledge(request)  # noqa: E731
        await self._m._unary("Acknowledge", request, context, apply)
        return scheduler_pb2.AcknowledgeResponse()

    async def Reconcile(
        self, request: scheduler_pb2.ReconcileRequest, context: ServicerContext
    ) -> scheduler_pb2.ReconcileResponse:
        apply = lambda: self._m.state.reconcile(request)  # noqa: E731
        await self._m._unary("Reconcile", request, context, apply)
        return scheduler_pb2.ReconcileResponse()

    async def Teardown(
        self, request: scheduler_pb2.TeardownRequest, context: ServicerContext
    ) -> scheduler_pb2.TeardownResponse:
        await self._m._unary("Teardown", request, context, lambda: self._m._teardown(request))
        return scheduler_pb2.TeardownResponse()

    async def UpdateDemand(
        self, request: scheduler_pb2.UpdateDemandRequest, context: ServicerContext
    ) -> scheduler_pb2.UpdateDemandResponse:
        apply = lambda: self._m.state.update_demand(request)  # noqa: E731
        await self._m._unary("UpdateDemand", request, context, apply)
        return scheduler_pb2.UpdateDemandResponse()
