"""``CoreLink``: the core's end of the I/O workers' links (docs/architecture.md §13).

Each worker opens one connection to the core's link socket (``protocol``). The core applies each
batch it receives, operation by operation in order, to the ``AgentCalls`` and ``FrameworkCalls``
of the leadership term that leads now (one synchronous step per operation, as the one-process
servicers make them), and sends back, batched, the sessions' and calls' outcomes and what the
sessions' channels give: one task per agent session or framework subscription awaits its channel
(``get_batch``, as the servicers' stream handlers do) and queues the items for the link's next
batch.

Invariants:
- a session opened over a link belongs to it: when the link ends (the worker exited or was
  killed), every one of its sessions is disconnected UNAVAILABLE, as a broken agent stream is in
  one process (the agent reconnects, to another worker or the restarted one, and reregisters);
  nothing of a session is applied after its link ended;
- an operation for a session the core already ended is ignored (the worker learns of the end by
  its ``END``); a refused message ends its session with the refusal's code, as in one process;
- backpressure: while more than ``MAX_OUTGOING`` operations wait to go to a worker, the core
  reads no more of that worker's batches and its sessions' tasks wait, so the socket's buffers
  fill and hold the worker back, and the worker, its clients' streams; the core sends a batch
  only once the previous one is in the socket's buffer (``drain``);
- the gate decides as for one process: while this master does not lead, an open, a call or a
  subscription is refused UNAVAILABLE with the gate's trailing metadata (the leader), or held
  while an election is on (``hold``, as the gate holds a call: also when the caller said the
  leader named could not be reached); a batch leaves only while the lease is current
  (``still_valid``): a deposed leader's batch keeps only the ends (commands and events are
  dropped, sessions and subscriptions opened and calls answered are refused UNAVAILABLE), as the
  gate refuses the streams and answers of one process;
- a framework call names a ``FrameworkCalls`` method of ``FRAMEWORK_METHODS`` only, and the
  principal the worker authenticated.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any, Final

from fairshare.logs import log_event

from master.core import CoreError
from master.io_workers.protocol import (
    ANSWERED,
    CALL,
    CLOSE,
    COMMANDS,
    END,
    EVENTS,
    FRAMEWORK_METHODS,
    HEARD,
    HELLO,
    MAX_BATCH,
    OPEN,
    OPENED,
    REFUSED,
    RPC_COUNTS,
    SUBSCRIBE,
    SUBSCRIBED,
    UNSUBSCRIBE,
    UPDATES,
    Operation,
    decode,
    encode,
    read_frame,
    write_frame,
)
from master.model import AgentCommand, FrameworkEvent, StreamEnd
from master.runtime.agents import AgentCalls
from master.runtime.frameworks import FrameworkCalls
from master.runtime.sessions import Channel
from master.service.agent import MAX_COMMANDS_PER_MESSAGE
from master.service.leader_gate import LeaderGate

__all__ = ["MAX_OUTGOING", "CoreLink"]

log = logging.getLogger("fairshare.master.io")

MAX_OUTGOING: Final = 20_000
"""Operations queued for one worker at most before the core waits for the link to drain."""
LINK_LOST: Final = StreamEnd("UNAVAILABLE", "the master's I/O worker serving this stream ended")


MAX_EVENTS_PER_BATCH: Final = 1000
"""A subscription's events in one operation at most."""


class _Session:
    __slots__ = ("agent_id", "calls", "channel", "task")

    def __init__(self, agent_id: str, calls: AgentCalls, channel: Channel[AgentCommand]) -> None:
        self.agent_id = agent_id
        self.calls = calls
        self.channel = channel
        self.task: asyncio.Task[None] | None = None


class _Subscription:
    __slots__ = ("calls", "channel", "framework_id", "task")

    def __init__(
        self, framework_id: str, calls: FrameworkCalls, channel: Channel[FrameworkEvent]
    ) -> None:
        self.framework_id = framework_id
        self.calls = calls
        self.channel = channel
        self.task: asyncio.Task[None] | None = None

    def end(self) -> None:
        """The framework's stream ended (the worker's or the link's end)."""
        if self.task is not None:
            self.task.cancel()
        self.calls.unsubscribe(self.framework_id, self.channel)


class _Link:
    """One worker's link: its sessions and the operations waiting to go to it."""

    def __init__(
        self,
        gate: LeaderGate,
        worker: str,
        on_ready: asyncio.Event,
        opened: asyncio.Event,
        rpc_counts: dict[tuple[str, str], int],
    ) -> None:
        self.gate = gate
        self.rpc_counts = rpc_counts
        self.on_ready = on_ready
        self.opened = opened
        self.ready = False  # the worker serves the public port
        self.worker = worker
        self.sessions: dict[int, _Session] = {}
        self.subscriptions: dict[int, _Subscription] = {}
        self.pending: set[asyncio.Future[None]] = set()  # opens waiting for an election
        self.out: list[Operation] = []
        self.wake = asyncio.Event()
        self.room = asyncio.Event()
        self.room.set()
        self.ended = False
        self.depth = 0  # what the worker said it had queued, with its last batch

    def push(self, operation: Operation) -> None:
        self.out.append(operation)
        self.wake.set()
        if len(self.out) >= MAX_OUTGOING:
            self.room.clear()

    async def read(self, requests: AsyncIterator[bytes]) -> None:
        """Apply every batch the worker sends, in order, until its stream ends."""
        try:
            async for data in requests:
                depth, operations = decode(data)
                self.depth = depth
                for operation in operations:
                    self.apply(operation)
                await self.room.wait()
        finally:
            self.ended = True
            self.wake.set()

    def apply(self, operation: Operation) -> None:
        kind, sid = operation[0], operation[1]
        if kind == HELLO:
            self.ready = True
            self.on_ready.set()
            return
        if kind == OPEN:
            self.open(sid, *operation[2:])
            return
        if kind in (CALL, SUBSCRIBE):
            self.framework_call(operation)
            return
        if kind == RPC_COUNTS:
            for key, count in operation[2].items():
                self.rpc_counts[key] = self.rpc_counts.get(key, 0) + count
            return
        if kind == UNSUBSCRIBE:
            subscription = self.subscriptions.pop(sid, None)
            if subscription is not None:
                subscription.end()
            return
        session = self.sessions.get(sid)
        if session is None:
            return  # ended already: the worker hears of it by its END
        calls, agent_id, channel = session.calls, session.agent_id, session.channel
        if kind == CLOSE:
            calls.disconnect(agent_id, channel, operation[2])
            return
        try:
            if kind == UPDATES:
                calls.update_statuses(agent_id, channel, operation[2])
            elif kind == HEARD:
                calls.heard(agent_id, channel)
        except CoreError as error:
            calls.disconnect(agent_id, channel, StreamEnd(error.code, error.message))
        except Exception as error:  # a bug: the session ends, the daemon goes on
            log.error("rpc.failed method=Connect", exc_info=error)
            calls.disconnect(agent_id, channel, StreamEnd("INTERNAL", f"internal error: {error}"))

    def open(
        self,
        sid: int,
        principal: str | None,
        agent_id: str | None,
        spec: Any,
        tasks: Any,
        held: bool = False,
    ) -> None:
        servicer = self.gate.servicer("agent")
        if servicer is None and not held and self.gate.should_hold_for(None):
            # An election is on: the open waits for its outcome, as the gate holds a call (the
            # agent's later messages wait for its answer, so nothing of it overtakes this).
            waiting = asyncio.ensure_future(self.held_open(sid, principal, agent_id, spec, tasks))
            self.pending.add(waiting)
            waiting.add_done_callback(self.pending.discard)
            return
        if servicer is None:
            message, hint = self.gate.refusal()  # as the gate refuses a call
            self.push((REFUSED, sid, "UNAVAILABLE", message, hint))
            return
        calls: AgentCalls = servicer.agents
        try:
            if agent_id is None:
                session = calls.register(spec, principal)
            else:
                session = calls.reregister(agent_id, spec, tasks, principal)
        except CoreError as error:
            self.push((REFUSED, sid, error.code, error.message))
            return
        except Exception as error:  # a bug: this session is refused, the daemon goes on
            log.error("rpc.failed method=Connect", exc_info=error)
            self.push((REFUSED, sid, "INTERNAL", f"internal error in Connect: {error}"))
            return
        self.push(
            (
                OPENED,
                sid,
                session.agent_id,
                session.master_id,
                session.heartbeat_interval,
                session.reconnect_jitter,
                session.epoch,
                session.log_key,
            )
        )
        attached = _Session(session.agent_id, calls, session.channel)
        self.sessions[sid] = attached
        attached.task = asyncio.ensure_future(self.drain(sid, attached))

    def framework_call(self, operation: Any, held: bool = False) -> None:
        """Apply a ``CALL`` or a ``SUBSCRIBE`` to the leading term's ``FrameworkCalls``."""
        kind, sid, principal, unreachable = operation[:4]
        servicer = self.gate.servicer("scheduler")
        if servicer is None and not held and self.gate.should_hold_for(unreachable):
            waiting = asyncio.ensure_future(self.held_call(operation, unreachable))
            self.pending.add(waiting)
            waiting.add_done_callback(self.pending.discard)
            return
        if servicer is None:
            message, hint = self.gate.refusal()
            self.push((REFUSED, sid, "UNAVAILABLE", message, hint))
            return
        calls: FrameworkCalls = servicer.frameworks
        try:
            if kind == SUBSCRIBE:
                self.subscribe(calls, sid, principal, *operation[4:])
                return
            method, args = operation[4], operation[5]
            if method not in FRAMEWORK_METHODS:
                raise ValueError(f"{method!r} is not a framework call")
            getattr(calls, method)(*args, principal)
        except CoreError as error:
            self.push((REFUSED, sid, error.code, error.message))
            return
        except Exception as error:  # a bug: this call is refused, the daemon goes on
            log.error("rpc.failed method=Scheduler", exc_info=error)
            self.push((REFUSED, sid, "INTERNAL", f"internal error: {error}"))
            return
        self.push((ANSWERED, sid))

    async def held_call(self, operation: Any, unreachable: str | None) -> None:
        """``framework_call`` once the election has an outcome (or ``hold`` seconds passed)."""
        await self.gate.await_leader(unreachable)
        if not self.ended:
            self.framework_call(operation, held=True)

    def subscribe(
        self,
        calls: FrameworkCalls,
        sid: int,
        principal: str | None,
        spec: Any,
        demand: Any,
        suppressed: bool,
    ) -> None:
        result = calls.subscribe(spec, demand, suppressed, principal)
        self.push(
            (
                SUBSCRIBED,
                sid,
                result.framework_id,
                result.master_id,
                result.heartbeat_interval,
                result.resubscribed,
                result.weight,
            )
        )
        subscription = _Subscription(result.framework_id, calls, result.channel)
        self.subscriptions[sid] = subscription
        subscription.task = asyncio.ensure_future(self.drain_events(sid, subscription))

    async def drain_events(self, sid: int, subscription: _Subscription) -> None:
        """Queue the events the subscription's channel gives, until it closes."""
        try:
            await self.forward(sid, subscription.channel, EVENTS, MAX_EVENTS_PER_BATCH)
        finally:
            if self.subscriptions.get(sid) is subscription:
                del self.subscriptions[sid]
            subscription.calls.unsubscribe(subscription.framework_id, subscription.channel)

    async def held_open(
        self, sid: int, principal: str | None, agent_id: str | None, spec: Any, tasks: Any
    ) -> None:
        """``open`` once the election has an outcome (or ``hold`` seconds passed)."""
        await self.gate.await_leader(None)
        if not self.ended:
            self.open(sid, principal, agent_id, spec, tasks, held=True)

    async def drain(self, sid: int, session: _Session) -> None:
        """Queue what the session's channel gives, until it closes."""
        try:
            await self.forward(sid, session.channel, COMMANDS, MAX_COMMANDS_PER_MESSAGE)
        finally:
            if self.sessions.get(sid) is session:
                del self.sessions[sid]
            session.calls.disconnect(session.agent_id, session.channel)

    async def forward(self, sid: int, channel: Channel[Any], kind: int, limit: int) -> None:
        """Queue what ``channel`` gives, as ``kind`` operations of ``sid`` (at most ``limit``
        items each, waiting while the link is full), then its ``END``."""
        while True:
            items, end = await channel.get_batch(limit)
            if items:
                self.push((kind, sid, items))
            if end is not None:
                self.push((END, sid, end))
                return
            await self.room.wait()

    async def batches(self) -> AsyncIterator[bytes]:
        """What goes to the worker: once the core serves (``CoreLink.open``), an empty batch (the
        worker may serve), then everything queued at once, as one batch."""
        await self.opened.wait()
        yield encode([])
        while True:
            await self.wake.wait()
            await asyncio.sleep(0)  # what this loop iteration queues joins the batch
            self.wake.clear()
            operations, self.out = self.out[:MAX_BATCH], self.out[MAX_BATCH:]
            if self.out:
                self.wake.set()
            if len(self.out) < MAX_OUTGOING:
                self.room.set()
            if operations:
                if not self.gate.still_valid():
                    operations = _fenced(operations)
                yield encode(operations)
            if self.ended:
                return

    def end_all(self) -> None:
        """The link ended: every session of it ends as a broken stream does."""
        self.ended = True
        for waiting in list(self.pending):
            waiting.cancel()
        sessions, self.sessions = self.sessions, {}
        for session in sessions.values():
            session.calls.disconnect(session.agent_id, session.channel, LINK_LOST)
            if session.task is not None:
                session.task.cancel()
        subscriptions, self.subscriptions = self.subscriptions, {}
        for subscription in subscriptions.values():
            subscription.end()


_REFUSED_WHEN_FENCED: Final = frozenset({OPENED, SUBSCRIBED, ANSWERED})
_DROPPED_WHEN_FENCED: Final = frozenset({COMMANDS, EVENTS})


def _fenced(operations: list[Operation]) -> list[Operation]:
    """A deposed leader's batch: ends only (commands and events dropped, sessions,
    subscriptions and answers refused)."""
    kept: list[Operation] = []
    for operation in operations:
        if operation[0] in _REFUSED_WHEN_FENCED:
            kept.append((REFUSED, operation[1], "UNAVAILABLE", "this master no longer leads"))
        elif operation[0] not in _DROPPED_WHEN_FENCED:
            kept.append(operation)
    return kept


class CoreLink:
    """The core's end of every worker's link (the link method's servicer)."""

    def __init__(
        self, gate: LeaderGate, rpc_counts: dict[tuple[str, str], int] | None = None
    ) -> None:
        self.gate = gate
        self.rpc_counts = {} if rpc_counts is None else rpc_counts  # the core's, by reference
        self.links: dict[str, _Link] = {}
        self.changed = asyncio.Event()
        self.opened = asyncio.Event()

    def depths(self) -> dict[str, tuple[int, int]]:
        """Per worker: operations it had queued for the core, and queued here for it."""
        return {name: (link.depth, len(link.out)) for name, link in self.links.items()}

    def open(self) -> None:
        """Let the workers serve the public port (now, and at once after a restart)."""
        self.opened.set()

    async def linked(self, count: int, timeout: float) -> bool:
        """Wait until ``count`` workers have linked (False after ``timeout`` seconds)."""
        return await self._until(lambda: len(self.links) >= count, timeout)

    async def serving(self, count: int, timeout: float) -> bool:
        """Wait until ``count`` linked workers serve (False after ``timeout`` seconds)."""
        return await self._until(
            lambda: sum(x.ready for x in self.links.values()) >= count, timeout
        )

    async def _until(self, condition: Callable[[], bool], timeout: float) -> bool:
        try:
            async with asyncio.timeout(timeout):
                while not condition():
                    self.changed.clear()
                    await self.changed.wait()
        except TimeoutError:
            return False
        return True

    async def serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """One worker's connection to the link socket: its index first, then its link."""
        try:
            first = await read_frame(reader)
            if first is None:
                return
            worker = str(decode(first))
            # Closed however the loop ends (a write to a worker that died raises), so ``serve``
            # ends the link's sessions at once.
            async with contextlib.aclosing(self.serve(_frames(reader), worker)) as batches:
                async for batch in batches:
                    write_frame(writer, batch)
                    await writer.drain()
        except ConnectionError:
            pass  # the worker went away: its link ended (``serve`` ended its sessions)
        finally:
            writer.close()

    async def serve(
        self, requests: AsyncIterator[bytes], worker: str
    ) -> AsyncGenerator[bytes, None]:
        """Worker ``worker``'s link (its batches ``requests``), until it ends; what to send it."""
        link = _Link(self.gate, worker, self.changed, self.opened, self.rpc_counts)
        old = self.links.get(worker)
        if old is not None:
            old.end_all()
        self.links[worker] = link
        self.changed.set()
        log_event(log, "io_worker.linked", worker=worker)
        reader = asyncio.ensure_future(link.read(requests))
        try:
            async for batch in link.batches():
                yield batch
        finally:
            reader.cancel()
            sessions, subscriptions = len(link.sessions), len(link.subscriptions)
            link.end_all()
            if self.links.get(worker) is link:
                del self.links[worker]
            log_event(
                log,
                "io_worker.unlinked",
                worker=worker,
                sessions_ended=sessions,
                subscriptions_ended=subscriptions,
            )


async def _frames(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    while (frame := await read_frame(reader)) is not None:
        yield frame
