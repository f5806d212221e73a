"""The asyncio scheduler client shared by the callback and the asyncio styles of the SDK.

``SchedulerClient`` keeps one ``Subscribe`` stream to the master open, turns its messages into
typed events on a queue, and makes the unary calls of the Scheduler API.

Invariants:
- One task (``_run``) owns the connection: it subscribes, reads the stream
  (``framework_sdk.subscription.EventStream``), and on a lost connection (stream error or end,
  ``missed_heartbeats`` heartbeat intervals without any message, or a silent master that did not
  answer a health check: a hung leader is left within about 15 s) emits ``Disconnected``,
  waits a jittered exponential backoff and resubscribes with the framework id, the current
  demand and the current suppression, then reconciles implicitly. Only a refused subscription
  or an ``ErrorEvent`` ends it for good (with an ``ErrorEvent`` as the last event), or
  ``close``/``teardown``; so does a master that never answered: a client that has not
  subscribed once within ``ClientOptions.registration_timeout`` gives up with an
  ``ErrorEvent`` (UNAVAILABLE). Until then a master that does not answer is
  logged as a WARNING (``master.unreachable``: at the first failure, then every
  ``UNREACHABLE_WARNING_EVERY`` seconds), so even a script that configured no logging says so.
- Events are queued in stream order and handed out by ``next_event``; after the last one it
  returns None forever. ``complete(event)`` acknowledges a status update with a uuid when
  acknowledgements are implicit; a failed acknowledgement is harmless (the master resends).
- A status update with a uuid reaches the application once per client: copies the master
  re-sends are dropped (never reordered: per-task FIFO holds), a copy of an acknowledged one is
  acknowledged again (the first ack may be lost); ``release`` undoes a delivery that failed.
  Updates the application says it ``handled`` before a restart count as acknowledged.
  Bounded by ``ClientOptions.delivery_memory`` (``framework_sdk.delivery``).
- Every unary call made while not subscribed raises ``NotConnectedError`` before anything is
  sent; a call the master refuses raises the ``CallError`` subclass of its gRPC code; nothing is
  ever dropped silently. A launch on offers the master no longer has (NOT_FOUND) is reported as
  the SDK does in Mesos: one DROPPED (LOST if not partition-aware) update per task.
- Acknowledgements (implicit and explicit) are coalesced into bulk ``Acknowledge`` calls
  (``framework_sdk.acknowledgements``): at once while no call is in flight, else with the
  next batch; each caller gets its own outcome.

Several masters (``master``: a list ``a:5050,b:5050,c:5050`` or ``etcd://...``, see
``fairshare.masters``): each session subscribes to the address ``MasterFinder`` names; a master
that does not lead ends the subscription UNAVAILABLE naming the leader, which is tried at once
(at most ``MAX_REDIRECTS`` times in a row before backing off), and a master whose stream ended
is not tried first next time. ``Subscribed.address`` is the master that answered.

Failover (a new process takes over): save the ``framework_id`` of the first ``Subscribed``
and start the new client with ``FrameworkInfo(name, role, framework_id=saved,
failover_timeout=...)`` (same name and role). Within the failover timeout the master keeps the
tasks and answers ``Subscribed(resubscribed=True)``; the client reconciles implicitly and the
master re-sends unacknowledged updates (delivered once to the new client). After it, or a
teardown, the tasks are killed and subscribing fails with NOT_FOUND (``NotFoundError``).
``close()``, unlike ``teardown()``, leaves the framework to be taken over.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import getpass
import logging
import math
import random
import socket
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from typing import Any, Final

import grpc
from fairshare.logs import log_event
from fairshare.masters import MasterFinder, MasterUnknown, leader_hint, open_channel
from fairshare.tls_probe import diagnose, worth_diagnosing
from fairshare.v1 import scheduler_pb2, scheduler_pb2_grpc

from framework_sdk import wire
from framework_sdk.acknowledgements import AckBatcher, Acknowledgement
from framework_sdk.delivery import Delivery, DeliveryLedger
from framework_sdk.errors import CallError, NotConnectedError, call_error
from framework_sdk.events import Disconnected, ErrorEvent, Event, StatusUpdate, Subscribed
from framework_sdk.options import ClientOptions
from framework_sdk.subscription import CHANNEL_OPTIONS, EventStream, StreamLostError
from framework_sdk.types import (
    Capability,
    Demand,
    FrameworkInfo,
    LaunchOperation,
    Offer,
    TaskReason,
    TaskRef,
    TaskSpec,
    TaskState,
    UpdateSource,
)

__all__ = ["OfferLike", "SchedulerClient"]

_LOG = logging.getLogger("framework_sdk")
UNREACHABLE_WARNING_EVERY: Final = 30.0
"""Seconds between two ``master.unreachable`` warnings of a client that never subscribed."""
_FATAL_SUBSCRIBE_CODES: Final = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.UNIMPLEMENTED,
    }
)
MAX_REDIRECTS: Final = 3
"""Redirects to a named leader followed at once in a row; then the backoff applies."""
_CLOSE_GRACE: Final = 2.0  # seconds close() lets in-flight acknowledgements finish

OfferLike = Offer | str
"""An offer, or just its id."""


class _Outcome(enum.Enum):
    REDIRECTED = "redirected to the leader"
    LOST_BEFORE_SUBSCRIBED = "lost before subscribed"
    LOST_AFTER_SUBSCRIBED = "lost after subscribed"
    FATAL = "fatal"


class SchedulerClient:
    """One framework's connection to the master (see the module docstring for the contract)."""

    def __init__(
        self,
        master: str,
        info: FrameworkInfo,
        *,
        demand: Demand | None = None,
        suppressed: bool = False,
        options: ClientOptions | None = None,
        handled: Iterable[tuple[str, bytes]] = (),
    ) -> None:
        """``handled``: status updates (task id, uuid) the application handled before a
        restart (``Framework.connect``); their copies are acknowledged, not delivered."""
        self._master = master
        self._info = _with_host_defaults(info)
        self._demand = demand
        self._suppressed = suppressed
        self._options = options or ClientOptions()
        self._rng = random.Random(self._options.seed)
        self._finder = MasterFinder(master, self._rng, etcd_security=self._options.security.etcd)
        self._framework_id = info.framework_id
        self._master_id = ""
        self._stub: scheduler_pb2_grpc.SchedulerServiceAsyncStub | None = None
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self._subscribed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._closed = False
        self._stopping = False
        self._ended = False
        self._fatal: CallError | None = None
        self._last_error = "not connected yet"
        self._last_address: str | None = None  # the master tried last
        self._diagnosed = False  # a failure was looked into (fairshare.tls_probe), once
        self._ledger = DeliveryLedger(self._options.delivery_memory)
        for task_id, uuid in handled:
            self._ledger.acknowledged(task_id, uuid)
        self._duplicates = 0
        self._acks = AckBatcher(self._send_acks, lambda: self._stub, self._spawn)

    # -- state ------------------------------------------------------------------------------

    @property
    def master(self) -> str:
        """Where the master is, as given (HOST:PORT, a list, or etcd://...)."""
        return self._master

    @property
    def framework_id(self) -> str:
        """The framework id ('' until the first subscription)."""
        return self._framework_id

    @property
    def master_id(self) -> str:
        """Id of the master instance of the last subscription ('' before)."""
        return self._master_id

    @property
    def connected(self) -> bool:
        """True while the event stream is open and subscribed."""
        return self._stub is not None

    @property
    def info(self) -> FrameworkInfo:
        """The FrameworkInfo, with the framework id once known."""
        return dataclasses.replace(self._info, framework_id=self._framework_id)

    @property
    def duplicates_dropped(self) -> int:
        """How many re-sent copies of already delivered status updates were dropped so far."""
        return self._duplicates

    @property
    def fatal_error(self) -> CallError | None:
        """Why the client stopped for good, if the master refused or ended the subscription."""
        return self._fatal

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Start connecting in the background (returns at once; see ``wait_subscribed``)."""
        if self._task is not None:
            raise RuntimeError("SchedulerClient.start() called twice")
        self._task = asyncio.get_running_loop().create_task(self._run(), name="fairshare-sdk")

    async def wait_subscribed(self, timeout: float | None) -> None:
        """Wait until subscribed; raise the master's refusal, or NotConnectedError on timeout."""
        if self._task is None:
            raise RuntimeError("SchedulerClient.start() was not called")
        waiter = asyncio.ensure_future(self._subscribed.wait())
        try:
            await asyncio.wait(
                {waiter, self._task}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            waiter.cancel()
        if self.connected:
            return
        if self._fatal is not None:
            raise self._fatal
        if self._task.done():
            raise NotConnectedError("the client is closed")
        raise NotConnectedError(
            f"could not subscribe to the master at {self._master} within {timeout:g} s"
            f" (last error: {self._last_error})"
        )

    async def next_event(self) -> Event | None:
        """The next event, waiting for it; None once the client has ended for good."""
        if self._ended and self._queue.empty():
            return None
        event = await self._queue.get()
        if event is None:
            self._queue.put_nowait(None)  # keep answering None
        return event

    def complete(self, event: Event) -> None:
        """Mark ``event`` handled: acknowledges it if acknowledgements are implicit."""
        if (
            self._options.implicit_acknowledgements
            and not self._closed
            and isinstance(event, StatusUpdate)
            and event.uuid
            and event.source is not UpdateSource.SDK
        ):
            self._ledger.acknowledged(event.task_id, event.uuid)
            self._spawn(self._acknowledge_quietly(event))

    def release(self, update: StatusUpdate) -> None:
        """Undo the delivery of unacknowledged ``update`` (handling failed): copies get through."""
        self._ledger.release(update.task_id, update.uuid)

    async def close(self) -> None:
        """Close without tearing down (the master keeps the framework for failover).

        Events not yet handed out are discarded; ``next_event`` returns None from now on.
        """
        self._closed = True
        await asyncio.sleep(0)  # acknowledgements just spawned (the last event's) get queued
        self._acks.flush()  # waiting acknowledgements go out now, within the grace below
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._background:  # acknowledgements in flight, then the channel's closing
            await asyncio.wait(set(self._background), timeout=_CLOSE_GRACE)
        for task in list(self._background):
            task.cancel()
        self._stub = None
        self._ended = True
        while not self._queue.empty():  # undelivered events are void once closed
            self._queue.get_nowait()
        self._queue.put_nowait(None)

    # -- connection -------------------------------------------------------------------------

    async def _run(self) -> None:
        failures, redirects = 0, 0
        loop = asyncio.get_running_loop()
        started, warned, subscribed_once = loop.time(), -math.inf, False
        try:
            while not (self._closed or self._stopping):
                outcome = await self._session()
                if outcome is _Outcome.FATAL or self._closed or self._stopping:
                    return
                redirects = redirects + 1 if outcome is _Outcome.REDIRECTED else 0
                if 0 < redirects <= MAX_REDIRECTS:
                    continue  # a master named the leader: try it at once
                if outcome is _Outcome.LOST_AFTER_SUBSCRIBED:
                    failures, subscribed_once = 0, True
                elif not subscribed_once:  # is a master there at all?
                    waited = loop.time() - started
                    if self._gave_up(waited) or await self._misconfigured():
                        return
                    if loop.time() - warned >= UNREACHABLE_WARNING_EVERY:
                        warned = loop.time()
                        log_event(
                            _LOG,
                            "master.unreachable",
                            logging.WARNING,
                            master=self._master,
                            waited=f"{waited:.0f}s",
                            error=self._last_error,
                        )
                delay = self._options.backoff.delay(failures + 1, self._rng)  # retry number
                failures += 1
                log_event(
                    _LOG,
                    "master.reconnecting",
                    master=self._master,
                    delay=f"{delay:.3f}s",
                    reason=self._last_error,
                )
                await asyncio.sleep(delay)
        finally:
            self._stub = None
            self._subscribed.clear()
            self._ended = True
            self._queue.put_nowait(None)
            await self._finder.close()

    async def _misconfigured(self) -> bool:
        """Once, after a failure that may be a TLS or port mistake (plaintext against a TLS
        master, a foreign CA, no client certificate, the dashboard's port): ask the port itself
        (``fairshare.tls_probe``) and, if it names one, end with an ``ErrorEvent`` saying so at
        once; no backoff will cure it."""
        address = self._last_address
        if self._diagnosed or address is None or not worth_diagnosing(self._last_error):
            return False
        self._diagnosed = True
        mistake = await asyncio.to_thread(diagnose, address, self._options.security)
        if mistake is None:
            return False
        message = (
            f"{mistake} (the SDK: ClientOptions(security=ClientSecurity(ca=..., cert=...,"
            " key=..., token=...)), or the FAIRSHARE_TLS_* variables)"
        )
        self._last_error = message
        self._fatal = call_error("Subscribe", grpc.StatusCode.UNAVAILABLE, message)
        self._queue.put_nowait(ErrorEvent(message=message, code=grpc.StatusCode.UNAVAILABLE))
        log_event(_LOG, "master.misconfigured", logging.ERROR, error=message)
        return True

    def _gave_up(self, waited: float) -> bool:
        """After ``registration_timeout`` without ever subscribing: a last ``ErrorEvent``."""
        limit = self._options.registration_timeout
        if limit is None or waited < limit:
            return False
        message = (
            f"no master answered at {self._master} within {limit:g}s"
            f" (last error: {self._last_error})"
        )
        self._fatal = call_error("Subscribe", grpc.StatusCode.UNAVAILABLE, message)
        self._queue.put_nowait(ErrorEvent(message=message, code=grpc.StatusCode.UNAVAILABLE))
        log_event(_LOG, "master.unreachable.gave_up", logging.ERROR, error=message)
        return True

    def _subscribe_request(self) -> scheduler_pb2.SubscribeRequest:
        request = scheduler_pb2.SubscribeRequest(
            framework_info=wire.framework_info_to_pb(self.info), suppressed=self._suppressed
        )
        if self._demand is not None:
            request.demand.CopyFrom(wire.demand_to_pb(self._demand))
        return request

    async def _session(self) -> _Outcome:
        try:
            address = await self._finder.next()
        except MasterUnknown as error:
            self._last_error = error.details()
            return _Outcome.LOST_BEFORE_SUBSCRIBED
        self._last_address = address
        outcome = await self._session_with(address)
        if outcome in (_Outcome.LOST_BEFORE_SUBSCRIBED, _Outcome.LOST_AFTER_SUBSCRIBED):
            self._finder.failed(address)
        return outcome

    async def _session_with(self, address: str) -> _Outcome:
        channel = open_channel(address, CHANNEL_OPTIONS, self._options.security)
        stub: scheduler_pb2_grpc.SchedulerServiceAsyncStub = (
            scheduler_pb2_grpc.SchedulerServiceStub(channel)
        )
        call = stub.Subscribe(self._subscribe_request(), metadata=self._finder.report() or None)
        stream = EventStream(
            call,
            channel,
            address,
            subscribe_timeout=self._options.subscribe_timeout,
            missed_heartbeats=self._options.missed_heartbeats,
        )
        subscribed = False
        outcome = _Outcome.LOST_BEFORE_SUBSCRIBED
        try:
            first = await stream.first()
            self._finder.answered(address)
            self._on_subscribed(first, stub)
            subscribed = True
            outcome = await self._pump(stream)
        except grpc.aio.AioRpcError as error:
            outcome = self._on_stream_error(error, subscribed)
            hint = leader_hint(error.trailing_metadata())
            if (
                not subscribed
                and error.code() == grpc.StatusCode.UNAVAILABLE
                and self._finder.redirected(address, hint)
            ):
                outcome = _Outcome.REDIRECTED
        except StreamLostError as lost:
            self._last_error = str(lost)
            outcome = _Outcome.LOST_AFTER_SUBSCRIBED if subscribed else outcome
        finally:
            stream.close()
            self._stub = None
            self._subscribed.clear()
            if (
                subscribed
                and outcome is not _Outcome.FATAL
                and not (self._closed or self._stopping)
            ):
                warning = logging.WARNING
                log_event(_LOG, "master.disconnected", warning, reason=self._last_error)
                self._queue.put_nowait(Disconnected(reason=self._last_error))
            # Unary calls in flight on this channel (a Teardown, acknowledgements) finish
            # within their deadline; the next session uses a new channel meanwhile.
            self._spawn(channel.close(grace=self._options.call_timeout))
        return outcome

    def _on_subscribed(
        self, event: Subscribed, stub: scheduler_pb2_grpc.SchedulerServiceAsyncStub
    ) -> None:
        resubscribing = bool(self._framework_id)
        self._framework_id = event.framework_id
        self._master_id = event.master_id
        self._stub = stub
        self._subscribed.set()
        self._queue.put_nowait(event)
        log_event(
            _LOG,
            "framework.subscribed",
            master=event.address,
            framework_id=event.framework_id,
            master_id=event.master_id,
            resubscribed=event.resubscribed,
        )
        if resubscribing and self._options.reconcile_on_resubscribe:
            self._spawn(self._reconcile_quietly())

    async def _pump(self, stream: EventStream) -> _Outcome:
        """Queue the stream's events until it ends (raises) or an ``ErrorEvent`` ends it."""
        async for event in stream.events():
            if isinstance(event, StatusUpdate) and not self._admit(event):
                continue
            self._queue.put_nowait(event)
            if isinstance(event, ErrorEvent):
                self._last_error = event.message
                if self._stopping or self._closed:  # the expected end of a teardown
                    log_event(_LOG, "subscription.ended", message=event.message)
                    return _Outcome.FATAL
                self._fatal = call_error("Subscribe", event.code, event.message)
                log_event(_LOG, "subscription.ended", logging.ERROR, message=event.message)
                return _Outcome.FATAL
        raise StreamLostError("the event stream ended")  # events() ends only by raising

    def _on_stream_error(self, error: grpc.aio.AioRpcError, subscribed: bool) -> _Outcome:
        code, details = error.code(), error.details() or ""
        self._last_error = f"{code.name}: {details}"
        if not subscribed and code in _FATAL_SUBSCRIBE_CODES:
            self._fatal = call_error("Subscribe", code, details)
            self._queue.put_nowait(ErrorEvent(message=details, code=code))
            log_event(_LOG, "subscription.refused", logging.ERROR, error=self._last_error)
            return _Outcome.FATAL
        return _Outcome.LOST_AFTER_SUBSCRIBED if subscribed else _Outcome.LOST_BEFORE_SUBSCRIBED

    def _admit(self, update: StatusUpdate) -> bool:
        """True if ``update`` goes to the application; a dropped copy may be acknowledged."""
        verdict = self._ledger.admit(update.task_id, update.uuid)
        if verdict is Delivery.DELIVER:
            return True
        self._duplicates += 1
        ids = f"{update.task_id}/{update.uuid.hex()}"
        log_event(_LOG, "status_update.duplicate", logging.DEBUG, update=ids, verdict=verdict.name)
        if verdict is Delivery.REACKNOWLEDGE:
            self._spawn(self._acknowledge_quietly(update))
        return False

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

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

    async def teardown(self) -> None:
        """Remove the framework for good (its tasks are killed), then close the client.

        The client is closed whatever the outcome; a refusal is raised after closing.
        """
        self._stopping = True
        request = scheduler_pb2.TeardownRequest(framework_id=self._framework_id)
        try:
            await self._invoke("Teardown", lambda stub, t: stub.Teardown(request, timeout=t))
        finally:
            await self.close()


async def _never(stub: scheduler_pb2_grpc.SchedulerServiceAsyncStub, timeout: float) -> None:
    """A call that is never made (``_invoke`` raises first when not subscribed)."""


def _offer_ids(offers: Sequence[OfferLike]) -> list[str]:
    return [o.offer_id if isinstance(o, Offer) else o for o in offers]


def _with_host_defaults(info: FrameworkInfo) -> FrameworkInfo:
    """``info`` with ``hostname`` and ``user`` filled from this process when left empty."""
    hostname = info.hostname or socket.gethostname()
    user = info.user
    if not user:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):  # no passwd entry (some containers)
            user = ""
    return dataclasses.replace(info, hostname=hostname, user=user)
