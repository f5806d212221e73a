"""``RemoteAgents``: ``AgentCalls``' shape in an I/O worker, each call an operation on the
worker's link to the core (docs/architecture.md §13).

The worker's ``AgentServicer`` (the one-process servicer, unchanged) calls it as it calls
``AgentCalls``: ``register`` and ``reregister`` return a future the core's ``OPENED`` or
``REFUSED`` resolves; ``heard``, ``update_statuses`` and ``disconnect`` queue their operation and
return at once, or, while the ``WorkerLink``'s queue is full, an awaitable the reader waits on
(backpressure: the agent's stream is read no further until the link drains). Each session's
channel is a ``Channel`` here too, fed by the core's ``COMMANDS`` and closed by its ``END``.

Invariants: operations leave in the order they were queued, so one agent's messages stay in
order; a session's ``CLOSE`` is sent once, by whichever side ends it first here; when the link
ends, every waiting open fails UNAVAILABLE and every channel closes UNAVAILABLE (the worker then
exits, and its agents reconnect).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence

from master.io_workers.protocol import (
    CLOSE,
    COMMANDS,
    END,
    HEARD,
    OPEN,
    OPENED,
    REFUSED,
    UPDATES,
    Operation,
)
from master.io_workers.worker_link import (
    LinkChannel,
    RemoteRefusal,
    WorkerLink,
    end_waiting,
    link_lost,
    refusal_of,
)
from master.model import AgentCommand, AgentSpec, StreamEnd
from master.runtime.agents import AgentSession, ReportedTask, ReportedUpdate
from master.runtime.sessions import Channel

__all__ = ["RemoteAgents", "RemoteRefusal"]


class RemoteAgents:
    """register, reregister, heard, update_statuses, disconnect: over the link."""

    def __init__(self, link: WorkerLink) -> None:
        self.link = link
        self._opening: dict[int, asyncio.Future[AgentSession]] = {}
        self._channels: dict[int, LinkChannel[AgentCommand]] = {}
        link.handle((COMMANDS, END, OPENED, REFUSED), self._deliver)
        link.on_end(self._link_ended)

    def _open(self, operation: Operation) -> Awaitable[AgentSession]:
        future: asyncio.Future[AgentSession] = asyncio.get_running_loop().create_future()
        if self.link.ended:
            future.set_exception(link_lost())
            return future
        self._opening[operation[1]] = future
        self.link.push(operation)
        return future

    def register(self, spec: AgentSpec, principal: str | None = None) -> Awaitable[AgentSession]:
        """Ask the core to admit a new agent."""
        return self._open((OPEN, self.link.next_sid(), principal, None, spec, ()))

    def reregister(
        self,
        agent_id: str,
        spec: AgentSpec,
        tasks: Sequence[ReportedTask],
        principal: str | None = None,
    ) -> Awaitable[AgentSession]:
        """Ask the core to re-admit an agent with its tasks."""
        return self._open((OPEN, self.link.next_sid(), principal, agent_id, spec, list(tasks)))

    def heard(self, agent_id: str, channel: Channel[AgentCommand]) -> Awaitable[None] | None:
        """The agent's stream carried a heartbeat."""
        if not isinstance(channel, LinkChannel) or channel.sid not in self._channels:
            return None
        return self.link.push((HEARD, channel.sid))

    def update_statuses(
        self, agent_id: str, channel: Channel[AgentCommand], updates: Sequence[ReportedUpdate]
    ) -> Awaitable[None] | None:
        """The agent's stream carried status updates."""
        if not isinstance(channel, LinkChannel) or channel.sid not in self._channels:
            return None
        return self.link.push((UPDATES, channel.sid, list(updates)))

    def disconnect(
        self, agent_id: str, channel: Channel[AgentCommand], end: StreamEnd | None = None
    ) -> None:
        """The agent's stream ended (``end``: the refusal that ended it)."""
        if isinstance(channel, LinkChannel) and self._channels.pop(channel.sid, None) is not None:
            self.link.push((CLOSE, channel.sid, end))
        channel.close(end or StreamEnd())

    # -- the core's operations --------------------------------------------------------------------

    def _deliver(self, operation: Operation) -> None:
        kind, sid = operation[0], operation[1]
        if kind == COMMANDS:
            channel = self._channels.get(sid)
            if channel is not None:
                for item in operation[2]:
                    channel.put(item)
        elif kind == END:
            channel = self._channels.pop(sid, None)
            if channel is not None:
                channel.close(operation[2])
        elif kind == OPENED:
            self._opened(sid, operation)
        elif kind == REFUSED:
            future = self._opening.pop(sid, None)
            if future is not None and not future.done():
                future.set_exception(refusal_of(operation))

    def _opened(self, sid: int, operation: Operation) -> None:
        future = self._opening.pop(sid, None)
        if future is None or future.done():  # the agent went away meanwhile
            self.link.push((CLOSE, sid, None))
            return
        channel: LinkChannel[AgentCommand] = LinkChannel(sid)
        self._channels[sid] = channel
        agent_id, master_id, interval, jitter, epoch, log_key = operation[2:8]
        future.set_result(
            AgentSession(agent_id, master_id, interval, jitter, channel, epoch, log_key)
        )

    def _link_ended(self) -> None:
        """The core is gone: every open fails and every session ends UNAVAILABLE."""
        end_waiting(self._opening, self._channels)
