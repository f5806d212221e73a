"""The unary calls of the Scheduler API a ``SchedulerClient`` makes.

Invariants:
- Every call made while not subscribed raises ``NotConnectedError`` before anything is sent; a
  call the master refuses raises the ``CallError`` subclass of its gRPC code; a call whose
  connection was lost or closed meanwhile raises ``NotConnectedError``; nothing is dropped
  silently.
- A launch on offers the master no longer has (NOT_FOUND) queues one DROPPED (LOST if not
  partition-aware) update per task, made by the SDK (``UpdateSource.SDK``: never acknowledged).
- Acknowledgements are recorded in the delivery ledger first (copies get acknowledged too), then
  coalesced into bulk ``Acknowledge`` calls (``framework_sdk.acknowledgements``).
- ``suppress``, ``revive`` and ``update_demand`` change what the next subscription sends only
  once the master accepted them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence

import grpc
from fairshare.logs import log_event
from fairshare.v1 import scheduler_pb2, scheduler_pb2_grpc

from framework_sdk import wire
from framework_sdk.acknowledgements import Acknowledgement
from framework_sdk.client_state import ClientState
from framework_sdk.errors import CallError, NotConnectedError, call_error
from framework_sdk.events import StatusUpdate
from framework_sdk.types import (
    Capability,
    Demand,
    LaunchOperation,
    Offer,
    TaskReason,
    TaskRef,
    TaskSpec,
    TaskState,
    UpdateSource,
)

__all__ = ["OfferLike", "SchedulerCalls"]

_LOG = logging.getLogger("framework_sdk")

OfferLike = Offer | str
"""An offer, or just its id."""


class SchedulerCalls(ClientState):
    """The Scheduler API's unary calls over the client's current subscription."""

    async def _acknowledge_quietly(self, update: StatusUpdate) -> None:
        try:
            await self.acknowledge(update)
        except (CallError, NotConnectedError) as error:
            log_event(
                _LOG, "acknowledgement.failed", logging.DEBUG, task_id=update.task_id, error=error
            )

    async def _reconcile_quietly(self) -> None:
        try:
            await self.reconcile(())
        except (CallError, NotConnectedError) as error:
            log_event(_LOG, "reconciliation.failed", logging.WARNING, error=error)

    # -- calls ------------------------------------------------------------------------------

    async def _invoke(
        self,
        method: str,
        send: Callable[[scheduler_pb2_grpc.SchedulerServiceAsyncStub, float], Awaitable[object]],
    ) -> None:
        stub = self._stub
        if stub is None:
            raise NotConnectedError(
                f"{method}: not subscribed to the master at {self._master}"
                f" ({'closed' if self._ended else 'connecting'}; last error: {self._last_error})"
            )
        try:
            await send(stub, self._options.call_timeout)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # our caller is being cancelled
            raise NotConnectedError(  # grpc cancelled the call: its channel was closed
                f"{method}: the connection to the master at {self._master} was closed"
            ) from None
        except grpc.aio.AioRpcError as error:
            code = error.code()
            if self._stub is not stub and code in (
                grpc.StatusCode.CANCELLED,
                grpc.StatusCode.UNAVAILABLE,
            ):
                raise NotConnectedError(
                    f"{method}: the connection to the master at {self._master} was lost"
                ) from None
            raise call_error(method, code, error.details() or "") from None

    async def accept(
        self,
        offers: OfferLike | Sequence[OfferLike],
        operations: Sequence[LaunchOperation],
        *,
        refuse_seconds: float | None = None,
    ) -> None:
        """Use ``offers`` (all on one agent) for ``operations``; leftovers are declined.

        Offers the master no longer has make every task of the launch come back as a DROPPED
        (LOST if not partition-aware) update with reason INVALID_OFFERS, as in Mesos.
        """
        offer_list = [offers] if isinstance(offers, (Offer, str)) else list(offers)
        agent_id = next((o.agent_id for o in offer_list if isinstance(o, Offer)), "")
        request = wire.accept_request(
            self._framework_id, _offer_ids(offer_list), operations, agent_id, refuse_seconds
        )
        try:
            await self._invoke("Accept", lambda stub, t: stub.Accept(request, timeout=t))
        except CallError as error:
            if error.code is not grpc.StatusCode.NOT_FOUND:
                raise
            self._drop_tasks([t for op in operations for t in op.tasks], agent_id, error.message)

    async def launch(
        self,
        offers: OfferLike | Sequence[OfferLike],
        tasks: Sequence[TaskSpec],
        *,
        refuse_seconds: float | None = None,
    ) -> None:
        """Launch ``tasks`` on ``offers``; unused offered resources are declined."""
        await self.accept(
            offers, [LaunchOperation(tasks=tuple(tasks))], refuse_seconds=refuse_seconds
        )

    def _drop_tasks(self, tasks: Sequence[TaskSpec], agent_id: str, why: str) -> None:
        aware = Capability.PARTITION_AWARE in self._info.capabilities
        for task in tasks:
            self._queue.put_nowait(
                StatusUpdate(
                    task_id=task.task_id,
                    agent_id=task.agent_id or agent_id,
                    state=TaskState.DROPPED if aware else TaskState.LOST,
                    reason=TaskReason.INVALID_OFFERS,
                    message=f"launch dropped: offers no longer valid ({why})",
                    source=UpdateSource.SDK,
                )
            )

    async def decline(
        self, offers: OfferLike | Sequence[OfferLike], *, refuse_seconds: float | None = None
    ) -> None:
        """Decline ``offers``, filtering their agents for ``refuse_seconds`` (None: default)."""
        offer_list = [offers] if isinstance(offers, (Offer, str)) else list(offers)
        request = scheduler_pb2.DeclineRequest(
            framework_id=self._framework_id, offer_ids=_offer_ids(offer_list)
        )
        wire.set_refuse_seconds(request.filters, refuse_seconds)
        await self._invoke("Decline", lambda stub, t: stub.Decline(request, timeout=t))

    async def revive(self) -> None:
        """Clear this framework's filters and resume offers after ``suppress``."""
        request = scheduler_pb2.ReviveRequest(framework_id=self._framework_id)
        await self._invoke("Revive", lambda stub, t: stub.Revive(request, timeout=t))
        self._suppressed = False

    async def suppress(self) -> None:
        """Stop offers until ``revive`` (kept across reconnections)."""
        request = scheduler_pb2.SuppressRequest(framework_id=self._framework_id)
        await self._invoke("Suppress", lambda stub, t: stub.Suppress(request, timeout=t))
        self._suppressed = True

    async def kill(self, task_id: str, agent_id: str = "") -> None:
        """Kill a task; KILLING/KILLED updates follow on the stream."""
        request = scheduler_pb2.KillRequest(
            framework_id=self._framework_id, task_id=task_id, agent_id=agent_id
        )
        await self._invoke("Kill", lambda stub, t: stub.Kill(request, timeout=t))

    async def acknowledge(self, update: StatusUpdate) -> None:
        """Acknowledge ``update`` (a no-op for updates without a uuid); acknowledgements made
        meanwhile share the call (see the module docstring)."""
        if not update.uuid or update.source is UpdateSource.SDK:
            return
        self._ledger.acknowledged(update.task_id, update.uuid)  # copies get acknowledged too
        if self._stub is None:
            await self._invoke("Acknowledge", _never)  # raises NotConnectedError
        ack = Acknowledgement(agent_id=update.agent_id, task_id=update.task_id, uuid=update.uuid)
        await self._acks.acknowledge(ack)

    async def _send_acks(self, acks: list[Acknowledgement]) -> None:
        request = scheduler_pb2.AcknowledgeRequest(
            framework_id=self._framework_id, acknowledgements=acks
        )
        await self._invoke("Acknowledge", lambda stub, t: stub.Acknowledge(request, timeout=t))

    async def reconcile(self, tasks: Iterable[TaskRef | StatusUpdate | str]) -> None:
        """Ask for the latest status of ``tasks`` (empty: of every task the master knows)."""
        pairs = [(t, "") if isinstance(t, str) else (t.task_id, t.agent_id) for t in tasks]
        request = scheduler_pb2.ReconcileRequest(
            framework_id=self._framework_id, tasks=wire.task_refs(pairs)
        )
        await self._invoke("Reconcile", lambda stub, t: stub.Reconcile(request, timeout=t))

    async def update_demand(self, demand: Demand | None) -> None:
        """Declare (or with None clear) the task shape and wanted count; kept across reconnects."""
        request = scheduler_pb2.UpdateDemandRequest(framework_id=self._framework_id)
        if demand is not None:
            request.demand.CopyFrom(wire.demand_to_pb(demand))
        await self._invoke("UpdateDemand", lambda stub, t: stub.UpdateDemand(request, timeout=t))
        self._demand = demand


async def _never(stub: scheduler_pb2_grpc.SchedulerServiceAsyncStub, timeout: float) -> None:
    """A call that is never made (``_invoke`` raises first when not subscribed)."""


def _offer_ids(offers: Sequence[OfferLike]) -> list[str]:
    return [o.offer_id if isinstance(o, Offer) else o for o in offers]
