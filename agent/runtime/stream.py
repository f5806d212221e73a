"""``MasterStream``: one agent session's ``Connect`` stream to the master (agent.proto).

The runtime opens a stream per session: ``open`` writes the first message (register or
reregister) and reads the master's first answer, ``registered``; then ``send`` queues messages
(heartbeats, batched status updates) for the stream while ``messages`` yields what the master
sends (batched commands, settings), until either side ends the stream. ``finish`` half-closes the
stream after what is queued and yields what the master still sends until it ends the stream.

Invariants:
- after ``open``, one reader task and one writer task own the call: only they await its
  ``read`` and ``write`` (grpc.aio cancels the whole call when a pending read or write is
  cancelled, so the runtime's loops, which are cancelled at every session end, never await the
  call themselves); both end when the call ends, and ``close`` cancels them with it;
- messages are written in the order they were queued, one write at a time;
- ``messages`` ends when the master ended the stream with OK and raises ``AioRpcError`` with the
  stream's status otherwise; a failed write is not an error of its own (the reader reports the
  status the stream ended with);
- ``classify`` maps the error contract of agent.proto: NOT_FOUND -> reregister at once,
  FAILED_PRECONDITION -> removed (register afresh), anything else -> reconnect with backoff;
  a master that does not lead (HA masters) refuses the first message UNAVAILABLE with the
  leader's address in its trailing metadata (``RefusedError.leader``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from enum import Enum
from typing import Any, Final

import grpc
from fairshare.health import answers_health_check
from fairshare.masters import leader_hint, open_channel
from fairshare.transport import INSECURE, ClientSecurity
from fairshare.v1 import agent_pb2, agent_pb2_grpc

__all__ = [
    "CHANNEL_OPTIONS",
    "PING_INTERVAL",
    "PING_TIMEOUT",
    "MasterStream",
    "Outcome",
    "RefusedError",
    "classify",
]

PING_INTERVAL: Final = 10.0
PING_TIMEOUT: Final = 5.0
"""A master that sent nothing for ``PING_INTERVAL`` is asked for its health on the session's
own connection; no answer within ``PING_TIMEOUT`` ends the session: a master that hangs
(SIGSTOP) or whose host went away is left within 15 s (HTTP/2 keepalive alone did not notice a
stopped master that the kernel still acknowledges for), so an agent follows a new leader within
the new leader's reregistration window."""

CHANNEL_OPTIONS: Final = [
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
]
_HALF_CLOSE: Final = object()


class Outcome(Enum):
    """Why a session ended, most urgent first (the lowest value wins when several coincide)."""

    STOP = (0, "stopping")
    REMOVED = (1, "removed by the master: registering afresh")
    REREGISTER = (2, "registration lost or new master: reregistering")
    RECONNECT = (3, "master unavailable")
    REDIRECTED = (4, "that master does not lead: trying the leader it named")

    @property
    def rank(self) -> int:
        """Urgency: lower wins."""
        return self.value[0]

    @property
    def why(self) -> str:
        """For the log."""
        return self.value[1]


class RefusedError(Exception):
    """The master ended the stream in answer to the first message (``code``, ``details``;
    ``leader``: the leader it named, when it does not lead)."""

    def __init__(self, code: grpc.StatusCode, details: str, leader: str | None = None) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details
        self.leader = leader


def classify(code: grpc.StatusCode) -> Outcome:
    """What the agent does after its stream ended with ``code``."""
    if code == grpc.StatusCode.NOT_FOUND:
        return Outcome.REREGISTER
    if code == grpc.StatusCode.FAILED_PRECONDITION:
        return Outcome.REMOVED
    return Outcome.RECONNECT


class MasterStream:
    """One ``Connect`` call over its own channel (``fairshare.transport``: keepalive, message
    sizes, TLS and the agent's identity)."""

    def __init__(
        self,
        master: str,
        metadata: tuple[tuple[str, str], ...] = (),
        security: ClientSecurity = INSECURE,
    ) -> None:
        self._channel = open_channel(master, CHANNEL_OPTIONS, security)
        stub: agent_pb2_grpc.AgentServiceAsyncStub = agent_pb2_grpc.AgentServiceStub(self._channel)
        # No request iterator: messages are written with ``write`` (the stubs do not know that).
        self._call: Any = stub.Connect(metadata=metadata or None)  # type: ignore[call-arg]
        self._inbox: asyncio.Queue[agent_pb2.ConnectResponse | BaseException | None] = (
            asyncio.Queue()
        )
        self._outbox: asyncio.Queue[agent_pb2.ConnectRequest | object] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._open = False
        self.last_received = 0.0  # loop time of the master's last message

    async def open(self, first: agent_pb2.ConnectRequest) -> agent_pb2.AgentRegistered:
        """Send the first message; the master's ``registered`` answer, or ``RefusedError`` when
        it ended the stream instead (``AioRpcError`` for transport failures)."""
        try:
            await self._call.write(first)
            answer = await self._call.read()
        except grpc.aio.AioRpcError as error:  # a follower may end the call before it reads
            leader = leader_hint(error.trailing_metadata())
            if leader is None:
                raise
            raise RefusedError(error.code(), error.details() or "", leader) from None
        if not isinstance(answer, agent_pb2.ConnectResponse):  # grpc.aio.EOF
            code = await self._call.code()
            leader = leader_hint(await self._call.trailing_metadata())
            raise RefusedError(code, await self._call.details() or "the stream ended", leader)
        if answer.WhichOneof("message") != "registered":
            kind = answer.WhichOneof("message")
            raise RefusedError(grpc.StatusCode.INTERNAL, f"first message was {kind}")
        loop = asyncio.get_running_loop()
        self.last_received = loop.time()
        self._tasks = [loop.create_task(self._read()), loop.create_task(self._write())]
        self._open = True
        registered: agent_pb2.AgentRegistered = answer.registered
        return registered

    async def _read(self) -> None:
        try:
            while True:
                message = await self._call.read()
                if not isinstance(message, agent_pb2.ConnectResponse):  # grpc.aio.EOF: OK
                    self._inbox.put_nowait(None)
                    return
                self.last_received = asyncio.get_running_loop().time()
                self._inbox.put_nowait(message)
        except grpc.aio.AioRpcError as error:
            self._inbox.put_nowait(error)
        finally:
            self._open = False

    async def _write(self) -> None:
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
            while True:
                message = await self._outbox.get()
                if message is _HALF_CLOSE:
                    await self._call.done_writing()
                    return
                await self._call.write(message)
        self._open = False

    async def ping(self, timeout: float) -> bool:
        """The master answers a health check on this session's connection within
        ``timeout``."""
        return await answers_health_check(self._channel, timeout)

    def send(self, message: agent_pb2.ConnectRequest) -> bool:
        """Queue ``message`` for the stream; False if the stream is over (nothing queued)."""
        if not self._open:
            return False
        self._outbox.put_nowait(message)
        return True

    async def messages(self) -> AsyncIterator[agent_pb2.ConnectResponse]:
        """The master's messages until it ends the stream (``AioRpcError`` if not with OK)."""
        while True:
            item = await self._inbox.get()
            if item is None:
                self._inbox.put_nowait(None)  # the end stays the end
                return
            if isinstance(item, BaseException):
                self._inbox.put_nowait(item)
                raise item
            yield item

    async def finish(self) -> AsyncIterator[agent_pb2.ConnectResponse]:
        """Half-close after what is queued, then the master's remaining messages until it
        ends the stream."""
        self._outbox.put_nowait(_HALF_CLOSE)
        async for message in self.messages():
            yield message

    async def close(self) -> None:
        """Cancel the call (if still open) and close the channel."""
        self._open = False
        self._call.cancel()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._channel.close(None)
