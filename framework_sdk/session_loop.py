"""The connection loop of a ``SchedulerClient``: subscribe, read the stream, reconnect.

One task (``_run``) owns the connection; the contract it keeps (when it reconnects, gives up,
redirects to a named leader, warns about an unreachable master) is stated in
``framework_sdk.client``.

Invariants:
- Only this loop sets ``_stub`` (when a ``Subscribed`` arrives) and clears it (when the
  session ends); each session uses a channel of its own, closed in the background afterwards.
- Events reach the queue in stream order; a status update goes there only if the delivery
  ledger admits it (a re-sent copy is dropped, and acknowledged again if it was acknowledged).
- A ``Disconnected`` is queued once per lost subscription, never after ``close``/``teardown``
  began; a fatal end (refused subscription, ``ErrorEvent``, misconfiguration, giving up) queues
  an ``ErrorEvent`` and sets ``_fatal``; when the loop ends, ``None`` closes the queue.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import math
from typing import Final

import grpc
from fairshare.logs import log_event
from fairshare.masters import MasterUnknown, leader_hint, open_channel
from fairshare.tls_probe import diagnose, worth_diagnosing
from fairshare.v1 import scheduler_pb2, scheduler_pb2_grpc

from framework_sdk import wire
from framework_sdk.delivery import Delivery
from framework_sdk.errors import call_error
from framework_sdk.events import Disconnected, ErrorEvent, StatusUpdate, Subscribed
from framework_sdk.scheduler_calls import SchedulerCalls
from framework_sdk.subscription import CHANNEL_OPTIONS, EventStream, StreamLostError

__all__ = ["MAX_REDIRECTS", "UNREACHABLE_WARNING_EVERY", "SessionLoop"]

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


class _Outcome(enum.Enum):
    REDIRECTED = "redirected to the leader"
    LOST_BEFORE_SUBSCRIBED = "lost before subscribed"
    LOST_AFTER_SUBSCRIBED = "lost after subscribed"
    FATAL = "fatal"


class SessionLoop(SchedulerCalls):
    """The client's connection: one subscription after another until closed or refused."""

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
