"""Connections of frameworks and agents to the master: the queues their streams drain.

The runtime pushes events and commands with non-blocking calls on its event loop; each gRPC
stream handler awaits its ``Channel`` and writes what it gets, an agent's handler everything
queued at once (``get_batch``: one stream message for many commands). One owner: only the
runtime creates, replaces and closes channels.

Invariants:
- a ``Channel`` accepts nothing after ``close``; the ``StreamEnd`` it was closed with is the last
  item its reader gets, so a reader always terminates;
- an ``AgentLink`` has at most one open stream; commands sent while no stream is open wait in its
  outbox and go first on the next stream (commands a closed stream never took go back to it),
  unless the agent reregisters (then they are dropped and the agent is reconciled instead);
- a ``FrameworkLink``'s ``channel`` is ``None`` exactly while the framework is disconnected;
  updates the master generates meanwhile (UNREACHABLE, LOST, ...) are held and go first on the
  next stream, so a framework that fails over still hears of every task it lost.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from master.model import (
    AgentCommand,
    AgentSettings,
    AgentSpec,
    Demand,
    ErrorEvent,
    FrameworkEvent,
    FrameworkInfo,
    StreamEnd,
    UpdateEvent,
)

__all__ = ["AgentLink", "Channel", "DepartedAgent", "FrameworkLink"]

T = TypeVar("T")
HELD_UPDATES = 10_000


class Channel(Generic[T]):
    """An unbounded queue for one stream that ends with a ``StreamEnd``."""

    __slots__ = ("_queue", "closed")

    def __init__(self) -> None:
        self._queue: asyncio.Queue[T | StreamEnd] = asyncio.Queue()
        self.closed = False

    def put(self, item: T) -> None:
        """Queue ``item`` unless the channel is closed (then it is dropped)."""
        if not self.closed:
            self._queue.put_nowait(item)

    def close(self, end: StreamEnd) -> None:
        """Queue ``end`` as the last item; later puts are dropped."""
        if not self.closed:
            self.closed = True
            self._queue.put_nowait(end)

    async def get(self) -> T | StreamEnd:
        """The next item (waits for one)."""
        return await self._queue.get()

    async def get_batch(self, limit: int) -> tuple[list[T], StreamEnd | None]:
        """Wait for an item, then take everything queued behind it (at most ``limit`` items);
        returns them and the ``StreamEnd`` if it was reached."""
        item = await self._queue.get()
        items: list[T] = []
        while not isinstance(item, StreamEnd):
            items.append(item)
            if len(items) >= limit or self._queue.empty():
                return items, None
            item = self._queue.get_nowait()
        return items, item

    def get_nowait(self) -> T | StreamEnd | None:
        """The next item if one is queued, else ``None``."""
        try:
            return self._queue.get_nowait()
        except asyncio.QueueEmpty:
            return None

    def drain(self) -> list[T]:
        """Take every queued item that is not the closing ``StreamEnd``."""
        items: list[T] = []
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if not isinstance(item, StreamEnd):
                items.append(item)
        return items


@dataclass(eq=False)
class FrameworkLink:
    """A registered framework as the runtime sees it (the core holds its allocation)."""

    spec: FrameworkInfo
    registered_at: float  # wall clock
    demand: Demand | None = None
    channel: Channel[FrameworkEvent] | None = None
    failover_deadline: float | None = None  # wall clock, while disconnected
    failover_timer: asyncio.TimerHandle | None = None
    held: deque[UpdateEvent] = field(default_factory=lambda: deque(maxlen=HELD_UPDATES))

    @property
    def framework_id(self) -> str:
        """The framework's id."""
        return self.spec.framework_id

    def send(self, event: FrameworkEvent) -> None:
        """Queue an event on the open stream. While disconnected, task updates the master made
        itself (no uuid: no agent will retry them) are held for the next stream, the last
        ``HELD_UPDATES`` of them; other events are dropped (offers are void, agent updates are
        forwarded again when the agent retries them)."""
        if self.channel is not None:
            self.channel.put(event)
        elif isinstance(event, UpdateEvent) and not event.status.uuid:
            self.held.append(event)

    def attach(self) -> Channel[FrameworkEvent]:
        """Open a new stream (held updates first); an open one is failed over (error event,
        then closed)."""
        self.detach_current(
            ErrorEvent("framework failed over: a newer Subscribe replaced this stream", "ABORTED")
        )
        self.channel = Channel()
        while self.held:
            self.channel.put(self.held.popleft())
        return self.channel

    def detach_current(self, error: ErrorEvent | None, end: StreamEnd | None = None) -> None:
        """Close the open stream, if any, with ``error`` (then ``end``, default OK)."""
        channel, self.channel = self.channel, None
        if channel is not None:
            if error is not None:
                channel.put(error)
            channel.close(end or StreamEnd())


@dataclass(eq=False)
class AgentLink:
    """A registered agent: identity, liveness, and the way to its stream."""

    agent_id: str
    spec: AgentSpec
    registered_at: float  # wall clock
    last_heard: float  # runtime (monotonic) clock
    in_pool: bool = False  # its resources were added to the core
    recovering: bool = False  # known from the registry after a restart, not reregistered yet
    channel: Channel[AgentCommand] | None = None
    outbox: deque[AgentCommand] = field(default_factory=deque)

    @property
    def connected(self) -> bool:
        """True while a stream is open."""
        return self.channel is not None

    def send(self, command: AgentCommand) -> None:
        """Queue a command on the open stream, or in the outbox until one opens (settings are
        for the open stream only: the next one starts with its own)."""
        if self.channel is not None:
            self.channel.put(command)
        elif not isinstance(command, AgentSettings):
            self.outbox.append(command)

    def attach(self) -> Channel[AgentCommand]:
        """Open a new stream: an open one ends, and unsent commands move to the new one."""
        pending: list[AgentCommand] = []
        old = self.channel
        if old is not None:
            pending = old.drain()
            old.close(StreamEnd("ABORTED", "a newer stream of this agent replaced this one"))
        channel: Channel[AgentCommand] = Channel()
        for command in [*pending, *self.outbox]:
            channel.put(command)
        self.outbox.clear()
        self.channel = channel
        return channel

    def detach(self, channel: Channel[AgentCommand], end: StreamEnd | None = None) -> bool:
        """The stream ``channel`` ended (closed with ``end``, default OK); commands it never
        took go back to the outbox. False if it was not the open stream."""
        if self.channel is not channel:
            return False
        self.channel = None
        self.outbox.extend(c for c in channel.drain() if not isinstance(c, AgentSettings))
        channel.close(end or StreamEnd())
        return True

    def discard_pending(self) -> None:
        """Forget every command not sent yet (a reregistering agent is reconciled instead)."""
        self.outbox.clear()
        if self.channel is not None:
            self.channel.drain()

    def end_stream(self, end: StreamEnd) -> None:
        """Close the open stream with ``end`` and forget queued commands."""
        channel, self.channel = self.channel, None
        if channel is not None:
            channel.drain()
            channel.close(end)
        self.outbox.clear()


@dataclass(frozen=True, slots=True)
class DepartedAgent:
    """An agent that left the pool: ``state`` is ``"UNREACHABLE"`` or ``"GONE"``."""

    agent_id: str
    spec: AgentSpec
    state: str
    registered_at: float
    last_heard: float
