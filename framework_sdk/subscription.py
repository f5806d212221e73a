"""One ``Subscribe`` stream to one master: its SUBSCRIBED event, then its events, kept honest.

``EventStream`` is what a ``SchedulerClient`` session reads (the reconnection loop, the queue
and the calls stay in ``framework_sdk.client``).

Invariants:
- ``first()`` returns the SUBSCRIBED event within ``ClientOptions.subscribe_timeout`` or raises
  ``StreamLostError`` (``grpc.aio.AioRpcError`` when the master refused the call); ``events()``
  then yields every later event in stream order and ends only by raising: ``StreamLostError``
  (the master ended the stream, or went silent) or ``AioRpcError``. A malformed message is
  logged (ERROR ``event.malformed``) and skipped; repeated SUBSCRIBED events and unknown
  messages are skipped.
- Silence is checked two ways. A master that sent nothing for ``PING_INTERVAL`` seconds is
  asked for its health on the stream's own connection; no answer within ``PING_TIMEOUT`` ends
  the stream, so a master that hangs (SIGSTOP) or whose host went away is left within about
  15 s: HTTP/2 keepalive alone does not notice a stopped process whose kernel still acknowledges
  (the agent's session does the same, ``agent.runtime.stream``). A master that answers health checks
  but sends no event for ``missed_heartbeats`` heartbeat intervals is left too.
- The pending read is never cancelled by a timeout (cancelling a read cancels the call); it is
  cancelled only by ``close()`` (synchronous), which also cancels the call.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Final

import grpc
from fairshare.health import answers_health_check
from fairshare.logs import log_event
from fairshare.v1 import scheduler_pb2

from framework_sdk import wire
from framework_sdk.events import Event, Subscribed

__all__ = ["CHANNEL_OPTIONS", "PING_INTERVAL", "PING_TIMEOUT", "EventStream", "StreamLostError"]

_LOG = logging.getLogger("framework_sdk")

PING_INTERVAL: Final = 10.0
"""Seconds of silence after which the master is asked for its health."""
PING_TIMEOUT: Final = 5.0
"""Seconds the master has to answer that health check."""
CHANNEL_OPTIONS: Final = [
    ("grpc.primary_user_agent", "fairshare-sdk/0.1"),
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.http2.max_pings_without_data", 0),
]

SubscribeCall = grpc.aio.UnaryStreamCall[
    scheduler_pb2.SubscribeRequest, scheduler_pb2.SubscribeResponse
]


class StreamLostError(Exception):
    """The event stream ended or went silent; reconnect."""


class EventStream:
    """The events of one ``Subscribe`` call to the master at ``address`` (module docstring)."""

    def __init__(
        self,
        call: SubscribeCall,
        channel: grpc.aio.Channel,
        address: str,
        *,
        subscribe_timeout: float,
        missed_heartbeats: int,
        ping_interval: float = PING_INTERVAL,
        ping_timeout: float = PING_TIMEOUT,
    ) -> None:
        self._call = call
        self._channel = channel
        self._address = address
        self._subscribe_timeout = subscribe_timeout
        self._missed_heartbeats = missed_heartbeats
        self._ping_interval = ping_interval
        self._ping_timeout = ping_timeout
        self._heartbeat_interval = 0.0
        self._pending: asyncio.Future[object] | None = None

    async def first(self) -> Subscribed:
        """The SUBSCRIBED event that opens the stream."""
        timeout = self._subscribe_timeout
        message = await self._read(timeout)
        if message is None:
            raise StreamLostError(f"no SUBSCRIBED event within {timeout:g} s")
        try:
            event = wire.event_from_pb(message, self._address)
        except ValueError as error:
            raise StreamLostError(f"malformed SUBSCRIBED event: {error}") from None
        if not isinstance(event, Subscribed):
            raise StreamLostError(f"the master's first event was not SUBSCRIBED: {event!r}")
        self._heartbeat_interval = event.heartbeat_interval
        return event

    async def events(self) -> AsyncIterator[Event]:
        """The events after SUBSCRIBED, in stream order, until the stream is lost (raises)."""
        loop = asyncio.get_running_loop()
        misses = self._missed_heartbeats
        silence_limit = self._heartbeat_interval * misses if self._heartbeat_interval > 0 else None
        last_heard = loop.time()
        while True:
            wait = self._ping_interval
            if silence_limit is not None:
                wait = min(wait, max(0.0, last_heard + silence_limit - loop.time()))
            message = await self._read(wait)
            if message is None:  # silent: for too long, or is the master still there?
                silent = loop.time() - last_heard
                if silence_limit is not None and silent >= silence_limit:
                    raise StreamLostError(
                        f"no message from the master for {silent:.1f} s"
                        f" ({misses} heartbeats missed)"
                    )
                if silent >= self._ping_interval and not await answers_health_check(
                    self._channel, self._ping_timeout
                ):
                    raise StreamLostError(
                        f"the master sent nothing for {silent:.0f} s and did not answer a health"
                        f" check within {self._ping_timeout:g} s"
                    )
                continue
            last_heard = loop.time()
            try:
                event = wire.event_from_pb(message, self._address)
            except ValueError as error:  # includes ResourceError: a malformed message
                log_event(_LOG, "event.malformed", logging.ERROR, master=self._address, error=error)
                continue
            if event is None or isinstance(event, Subscribed):
                continue
            yield event

    async def _read(self, timeout: float) -> scheduler_pb2.SubscribeResponse | None:
        """The next message, or None after ``timeout`` seconds without one (the read stays
        pending for the next call); ``StreamLostError`` when the master ended the stream."""
        if self._pending is None:
            self._pending = asyncio.ensure_future(self._call.read())
            self._pending.add_done_callback(_retrieve)  # a read left behind raises nothing
        done, _ = await asyncio.wait({self._pending}, timeout=timeout)
        if not done:
            return None
        pending, self._pending = self._pending, None
        message = pending.result()  # raises the call's AioRpcError
        if not isinstance(message, scheduler_pb2.SubscribeResponse):  # grpc.aio.EOF
            raise StreamLostError("the master ended the event stream")
        return message

    def close(self) -> None:
        """Cancel the call and the pending read (the channel is the caller's); synchronous, so
        a caller being cancelled still runs what follows it."""
        self._call.cancel()
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None


def _retrieve(read: asyncio.Future[object]) -> None:
    """Mark the outcome of a read nobody awaits any more as seen."""
    if not read.cancelled():
        read.exception()
