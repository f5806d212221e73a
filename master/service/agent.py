"""``AgentServicer``: the Agent API (agent.proto, one ``Connect`` stream per agent session) as a
thin adapter over the runtime's ``AgentCalls``.

The first message (register or reregister) is converted (``convert`` validates wire input) and
handed to the runtime in one synchronous call, which admits the agent and attaches its channel;
``registered`` goes out first. Then two loops share the stream: a reader task turns each incoming
message into one runtime call (``heard``, ``update_statuses``), and this handler drains the
agent's channel, everything queued at once into one ``commands`` message. Whatever ends the
session (the agent ends or breaks its stream, a message the runtime refuses, the runtime closing
the channel), the runtime hears it through ``disconnect``, and the stream ends with the code of
the ``StreamEnd`` that closed the channel: a refused message ends it with its error's code and
nothing of that message was applied (an undecodable one: INVALID_ARGUMENT). The session belongs
to the principal that opened it (``caller()``): register and reregister name it to the runtime,
which binds the agent to it (the node restriction).

The servicer needs only ``AgentCalls``' shape (``AgentPort``): in the master's I/O workers
(``master.io_workers``) the same servicer runs over an adapter whose register and reregister
answer later (an awaitable: the core's answer comes back over the worker's link) and whose
message calls may ask the reader to wait (an awaitable: the link's queue is full, so the agent's
stream is read no further until there is room). ``AgentCalls`` itself answers at once (None).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Sequence
from typing import Any, Protocol

from fairshare.logs import log_event
from fairshare.rpc_guard import UndecodableRequest, caller
from fairshare.v1 import agent_pb2 as pb
from fairshare.v1 import agent_pb2_grpc
from grpc import aio

from master.core import CoreError, InvalidArgument
from master.model import AgentCommand, AgentSpec, StreamEnd
from master.runtime.agents import AgentSession, ReportedTask, ReportedUpdate
from master.runtime.sessions import Channel
from master.service import convert, streams
from master.service.errors import Context, abort_with, grpc_code

__all__ = [
    "FIRST_MESSAGE_TIMEOUT",
    "MAX_COMMANDS_PER_MESSAGE",
    "AgentPort",
    "AgentServicer",
    "add_agent_service",
]

log = logging.getLogger("fairshare.master.rpc")

FIRST_MESSAGE_TIMEOUT = 30.0
"""Seconds an agent has to send register or reregister after opening its stream."""
MAX_COMMANDS_PER_MESSAGE = 1000
"""Commands batched into one ``commands`` message at most."""


class AgentPort(Protocol):
    """What the servicer calls: ``AgentCalls`` (master.runtime.agents), or an adapter of its
    shape whose answers may come later (awaitables)."""

    def register(
        self, spec: AgentSpec, principal: str | None = None
    ) -> AgentSession | Awaitable[AgentSession]: ...

    def reregister(
        self,
        agent_id: str,
        spec: AgentSpec,
        tasks: Sequence[ReportedTask],
        principal: str | None = None,
    ) -> AgentSession | Awaitable[AgentSession]: ...

    def heard(self, agent_id: str, channel: Channel[AgentCommand]) -> Awaitable[None] | None: ...

    def update_statuses(
        self, agent_id: str, channel: Channel[AgentCommand], updates: Sequence[ReportedUpdate]
    ) -> Awaitable[None] | None: ...

    def disconnect(
        self, agent_id: str, channel: Channel[AgentCommand], end: StreamEnd | None = None
    ) -> None: ...


def add_agent_service(servicer: AgentServicer, server: Any) -> None:
    """Register ``servicer`` as the Agent API of ``server`` (a grpc.aio server)."""
    agent_pb2_grpc.add_AgentServiceServicer_to_server(servicer, server)


class AgentServicer(agent_pb2_grpc.AgentServiceServicer):
    """Agents' sessions, forwarded to the runtime."""

    def __init__(self, agents: AgentPort) -> None:
        self.agents = agents

    async def Connect(
        self, request_iterator: AsyncIterator[pb.ConnectRequest], context: Context
    ) -> AsyncIterator[pb.ConnectResponse]:
        """One agent session."""
        requests = aiter(request_iterator)
        try:
            async with asyncio.timeout(FIRST_MESSAGE_TIMEOUT):
                first = await anext(requests, None)
            if first is None:
                return  # the agent went away before saying who it is
            opened = self._open(first)
            session = opened if isinstance(opened, AgentSession) else await opened
        except Exception as error:
            await abort_with(context, _refusal(error), "Connect")
        agent_id, channel = session.agent_id, session.channel
        reader = asyncio.ensure_future(self._read(requests, agent_id, channel))
        try:
            yield pb.ConnectResponse(registered=streams.registered_to_pb(session))
            while True:
                items, end = await channel.get_batch(MAX_COMMANDS_PER_MESSAGE)
                for message in streams.agent_messages(items, session.epoch):
                    yield message
                if end is not None:
                    if end.code != "OK":
                        await context.abort(grpc_code(end.code), end.message)
                    return
        finally:
            reader.cancel()
            self.agents.disconnect(agent_id, channel)

    def _open(self, first: pb.ConnectRequest) -> AgentSession | Awaitable[AgentSession]:
        kind = first.WhichOneof("message")
        if kind == "register":
            return self.agents.register(convert.agent_spec(first.register.agent_info), caller())
        if kind == "reregister":
            message = first.reregister
            spec = convert.agent_spec(message.agent_info)
            tasks = convert.reported_tasks(message.tasks)
            return self.agents.reregister(message.agent_id, spec, tasks, caller())
        raise InvalidArgument(
            f"the first message must be register or reregister, not {kind or 'an empty one'}"
        )

    async def _read(
        self,
        requests: AsyncIterator[pb.ConnectRequest],
        agent_id: str,
        channel: Channel[AgentCommand],
    ) -> None:
        """Hand each message of the agent to the runtime until the stream or the session ends."""
        end = StreamEnd()
        try:
            async for message in requests:
                kind = message.WhichOneof("message")
                if kind == "updates":
                    updates = convert.agent_updates(message.updates.updates)
                    room = self.agents.update_statuses(agent_id, channel, updates)
                elif kind == "heartbeat":
                    room = self.agents.heard(agent_id, channel)
                else:
                    raise InvalidArgument(
                        f"{kind or 'an empty message'} is not allowed after the first message"
                    )
                if room is not None:
                    await room  # the worker's link is full: read no further until it drains
        except (CoreError, UndecodableRequest) as error:
            log_event(log, "rpc.refused", logging.DEBUG, method="Connect", code=error.code)
            end = StreamEnd(error.code, error.message)
        except aio.AbortError:
            pass  # the handler ended the stream (its code is already set)
        except Exception as error:  # a bug: the session ends, the daemon goes on
            log.error("rpc.failed method=Connect", exc_info=error)
            end = StreamEnd("INTERNAL", f"internal error in Connect: {error}")
        self.agents.disconnect(agent_id, channel, end)


def _refusal(error: BaseException) -> BaseException:
    """A timed-out first message is DEADLINE_EXCEEDED; other errors map as they are."""
    if isinstance(error, TimeoutError):
        return _DeadlineExceeded(
            f"no register or reregister within {FIRST_MESSAGE_TIMEOUT:g} s of opening the stream"
        )
    return error


class _DeadlineExceeded(CoreError):
    code = "DEADLINE_EXCEEDED"
