"""``LeaderGate``: the master's gRPC services, answered by the runtime that leads now
(docs/architecture.md §5), or, while this master does not lead, refused with the leader's address.

The Scheduler, Agent and Operator services are registered on the server once, through
forwarders: each call goes to the servicers the gate was given by ``lead`` (those of the
current leadership term, over one ``MasterRuntime``), or is refused while the gate ``follow``\\s.
The health service is not behind the gate: a follower serves health.

While an election is on (this master does not lead and knows no leader), or the caller says
the leader this master names did not answer (``fairshare-leader-unreachable``: a leader that
died keeps its key until its lease ends), a call waits up to ``hold`` seconds (HA masters: the
election's lease) for another leader: it is then served here if this master won, or refused
naming the winner; so agents and frameworks that lost their leader reach the new one as soon as
it is elected instead of after a backoff.

A refusal is UNAVAILABLE, with ``this master is a follower; the leader is HOST:PORT`` (or that
no master leads now) as its message and the leader's ``HOST:PORT`` in the trailing metadata
``fairshare-leader`` (``fairshare.masters``), or ``fairshare-election`` when it knows none.
UNAVAILABLE rather than FAILED_PRECONDITION: the
call is fine and would succeed at another server now, which is what UNAVAILABLE says; every
client already retries UNAVAILABLE (agent.proto's contract, the SDK's reconnection, the
commands' ``call_leader``) and reads the hint to go to the leader at once, while
FAILED_PRECONDITION tells a client its request does not fit the system's state and is not
retried.

Invariants: the forwarders are built once (so interceptors that cache a method's handler, such
as ``RpcMetricsInterceptor``, stay valid across terms); a call is forwarded only while
``valid()`` holds (the leadership's lease is current: ``master.ha.leadership``), checked when
the call starts, and again before every answer and every streamed message leaves: everything
a leader tells an agent or a framework passes here, so a master that was paused past its lease
(SIGSTOP) sends nothing when it wakes, whatever its timers run first (fencing); a streaming
call forwards its responses through one ``async for`` and closes the inner generator however it
ends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any, NamedTuple

import grpc
from fairshare.masters import ELECTION_METADATA, LEADER_METADATA, UNREACHABLE_LEADER_METADATA
from fairshare.v1 import (
    agent_pb2,
    agent_pb2_grpc,
    operator_pb2,
    operator_pb2_grpc,
    scheduler_pb2,
    scheduler_pb2_grpc,
)

from master.service.errors import Context

__all__ = ["LeaderGate", "Servicers", "method_shapes"]


class Servicers(NamedTuple):
    """The servicers of one leadership term."""

    scheduler: Any
    agent: Any
    operator: Any


_SERVICES: tuple[tuple[str, Any, str, Callable[[Any, Any], None]], ...] = (
    (
        "scheduler",
        scheduler_pb2,
        "SchedulerService",
        scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server,
    ),
    ("agent", agent_pb2, "AgentService", agent_pb2_grpc.add_AgentServiceServicer_to_server),
    (
        "operator",
        operator_pb2,
        "OperatorService",
        operator_pb2_grpc.add_OperatorServiceServicer_to_server,
    ),
)


class _Forwarder:
    """An object with one forwarding function per method of a service."""


def method_shapes() -> dict[str, tuple[bool, bool]]:
    """``/package.Service/Method`` of every gated method: (client streams, server streams)."""
    shapes: dict[str, tuple[bool, bool]] = {}
    for _, module, service, _ in _SERVICES:
        descriptor = module.DESCRIPTOR.services_by_name[service]
        for method in descriptor.methods:
            path = f"/{descriptor.full_name}/{method.name}"
            shapes[path] = (method.client_streaming, method.server_streaming)
    return shapes


class LeaderGate:
    """Routes the three services to the current term's servicers, or refuses with a hint."""

    def __init__(self, valid: Callable[[], bool], expired: Callable[[], None]) -> None:
        self._valid = valid
        self._expired = expired
        self._servicers: Servicers | None = None
        self.leader: str | None = None  # HOST:PORT of the leader, when known and not us
        self.hold = 0.0  # seconds a call waits while no leader is known (0: refused at once)
        self._waiters: set[asyncio.Future[None]] = set()

    def add_to_server(self, server: grpc.aio.Server) -> None:
        """Register the forwarders of the three services (once)."""
        for name, module, service, add in _SERVICES:
            forwarder = _Forwarder()
            for method in module.DESCRIPTOR.services_by_name[service].methods:
                make = _streaming if method.server_streaming else _unary
                setattr(forwarder, method.name, make(self, name, method.name))
            add(forwarder, server)

    def lead(self, servicers: Servicers) -> None:
        """Serve every call with ``servicers`` from now on."""
        self._servicers = servicers
        self.leader = None
        self._wake()

    def follow(self, leader: str | None) -> None:
        """Refuse every call from now on, naming ``leader`` (None: no leader known)."""
        self._servicers = None
        self.leader = leader
        self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def should_hold(self, context: Context) -> bool:
        """A refused call should wait for the election: none is known, or the one known is
        the leader the caller could not reach."""
        return self.should_hold_for(_unreachable(context))

    def should_hold_for(self, unreachable: str | None) -> bool:
        """``should_hold`` for a caller that said it could not reach ``unreachable``."""
        if self.hold <= 0 or self._servicers is not None:
            return False
        return self.leader is None or self.leader == unreachable

    async def await_leader(self, unreachable: str | None) -> None:
        """Wait (at most ``hold`` seconds) until this master leads or knows a leader other
        than ``unreachable``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.hold
        while self._servicers is None and self.leader in (None, unreachable):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            waiter = loop.create_future()
            self._waiters.add(waiter)
            try:
                await asyncio.wait_for(waiter, remaining)
            except TimeoutError:
                return
            finally:
                self._waiters.discard(waiter)

    @property
    def leading(self) -> bool:
        """Calls are forwarded now."""
        return self._servicers is not None

    def servicer(self, name: str) -> Any:
        """The current term's servicer ``name``, or None (the call is refused)."""
        servicers = self._servicers
        if servicers is None or not self.still_valid():
            return None
        return getattr(servicers, name)

    def still_valid(self) -> bool:
        """The lease is current (else the term ends now: the lease ran out before the elector
        said so)."""
        if self._valid():
            return True
        self._expired()
        return False

    def refusal(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        """Why a call is refused UNAVAILABLE here, and the trailing metadata naming the leader
        (or saying an election is on): the one wording of the gate and the I/O workers' link."""
        leader = self.leader
        if leader:
            message = f"this master is a follower; the leader is {leader}"
            return message, ((LEADER_METADATA, leader),)
        message = "this master does not lead and knows no leader now (an election is on)"
        return message, ((ELECTION_METADATA, "1"),)

    async def refuse(self, context: Context) -> None:
        """End the call UNAVAILABLE, naming the leader if known."""
        message, metadata = self.refusal()
        context.set_trailing_metadata(metadata)
        await context.abort(grpc.StatusCode.UNAVAILABLE, message)


def _unary(gate: LeaderGate, name: str, method: str) -> Callable[..., Any]:
    async def forward(request: Any, context: Context) -> Any:
        servicer = gate.servicer(name)
        if servicer is None and gate.should_hold(context):
            await gate.await_leader(_unreachable(context))  # the election's outcome decides
            servicer = gate.servicer(name)
        if servicer is None:
            await gate.refuse(context)
        response = await getattr(servicer, method)(request, context)
        if not gate.still_valid():  # the lease ran out while the call ran: say nothing
            await gate.refuse(context)
        return response

    return forward


def _streaming(gate: LeaderGate, name: str, method: str) -> Callable[..., Any]:
    async def forward(request: Any, context: Context) -> AsyncIterator[Any]:
        servicer = gate.servicer(name)
        if servicer is None and gate.should_hold(context):
            await gate.await_leader(_unreachable(context))
            servicer = gate.servicer(name)
        if servicer is None:
            await gate.refuse(context)
        async with contextlib.aclosing(getattr(servicer, method)(request, context)) as responses:
            async for response in responses:
                if not gate.still_valid():  # a deposed leader sends nothing more
                    await gate.refuse(context)
                yield response

    return forward


def _unreachable(context: Context) -> str | None:
    """The leader the caller said it could not reach, if it said so."""
    metadata = context.invocation_metadata() if context is not None else None
    for key, value in metadata or ():
        if key == UNREACHABLE_LEADER_METADATA:
            return value.decode() if isinstance(value, bytes) else str(value)
    return None
