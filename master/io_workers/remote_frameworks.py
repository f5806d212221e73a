"""``RemoteFrameworks``: ``FrameworkCalls``' shape in an I/O worker, each call an operation on the
worker's link to the core (docs/architecture.md §13).

The worker's ``SchedulerServicer`` (the one-process servicer) calls it as it calls
``FrameworkCalls``, with requests it has already decoded and checked (``master.service.convert``):
each call (Accept, Decline, Acknowledge, Kill, Revive, Suppress, Reconcile, Teardown,
UpdateDemand) becomes one ``CALL`` and returns a future the core's ``ANSWERED`` or ``REFUSED``
resolves; ``subscribe`` a future of the ``SubscribeResult`` whose channel the core's ``EVENTS``
feed and its ``END`` closes. So the core applies a batch of calls and events in one message of
the link instead of one gRPC call or message each, and the conversions run in the workers.

Invariants: one framework's calls on one connection reach the core in the order they were
made (one ordered link); a call is answered only after the core applied it (and, for a write,
after its registry commit: the core answers when the synchronous call returned); the caller's
principal is the one the worker's guard authenticated; ``unsubscribe`` is sent once, only for a
subscription the core opened; when the link ends, every waiting call and subscription fails
UNAVAILABLE and every event channel closes UNAVAILABLE (the framework resubscribes through
another worker).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Sequence
from typing import Any

from master.core import TaskLaunch
from master.io_workers.protocol import (
    ANSWERED,
    CALL,
    END,
    EVENTS,
    REFUSED,
    SUBSCRIBE,
    SUBSCRIBED,
    UNSUBSCRIBE,
    Operation,
)
from master.io_workers.worker_link import (
    LinkChannel,
    WorkerLink,
    end_waiting,
    link_lost,
    refusal_of,
)
from master.model import Demand, FrameworkEvent, FrameworkInfo
from master.runtime.frameworks import SubscribeResult
from master.runtime.sessions import Channel

__all__ = ["UNREACHABLE_LEADER", "RemoteFrameworks"]

UNREACHABLE_LEADER: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "fairshare_unreachable_leader"
)
"""The leader the current caller said it could not reach (set by the worker's guard): an
election's hold applies to its call in the core as to a call the gate holds."""


class RemoteFrameworks:
    """Subscribe and the framework calls: over the link."""

    def __init__(self, link: WorkerLink) -> None:
        self.link = link
        self._calls: dict[int, asyncio.Future[Any]] = {}
        self._channels: dict[int, LinkChannel[FrameworkEvent]] = {}
        link.handle((ANSWERED, SUBSCRIBED, REFUSED, EVENTS, END), self._deliver)
        link.on_end(self._link_ended)

    def _ask(self, kind: int, *rest: Any) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self.link.ended:
            future.set_exception(link_lost())
            return future
        sid = self.link.next_sid()
        self._calls[sid] = future
        self.link.push((kind, sid, rest[0], UNREACHABLE_LEADER.get(None), *rest[1:]))
        return future

    def _call(self, method: str, principal: str | None, *args: Any) -> Awaitable[None]:
        return self._ask(CALL, principal, method, args)

    # -- FrameworkCalls' shape --------------------------------------------------------------------

    def subscribe(
        self,
        spec: FrameworkInfo,
        demand: Demand | None,
        suppressed: bool,
        principal: str | None = None,
    ) -> Awaitable[SubscribeResult]:
        """Ask the core to register or re-register the framework and open its event stream."""
        return self._ask(SUBSCRIBE, principal, spec, demand, suppressed)

    def unsubscribe(self, framework_id: str, channel: Channel[FrameworkEvent]) -> None:
        """The framework's stream ended here."""
        if not isinstance(channel, LinkChannel):
            return
        if self._channels.pop(channel.sid, None) is not None:
            self.link.push((UNSUBSCRIBE, channel.sid))

    def accept(
        self,
        framework_id: str,
        offer_ids: Sequence[str],
        launches: Sequence[TaskLaunch],
        refuse_seconds: float | None,
        principal: str | None = None,
    ) -> Awaitable[None]:
        """Launch tasks on offers."""
        return self._call(
            "accept", principal, framework_id, list(offer_ids), list(launches), refuse_seconds
        )

    def decline(
        self,
        framework_id: str,
        offer_ids: Sequence[str],
        refuse_seconds: float | None,
        principal: str | None = None,
    ) -> Awaitable[None]:
        """Decline offers."""
        return self._call("decline", principal, framework_id, list(offer_ids), refuse_seconds)

    def revive(
        self, framework_id: str, role: str = "", principal: str | None = None
    ) -> Awaitable[None]:
        """Clear filters and resume offers."""
        return self._call("revive", principal, framework_id, role)

    def suppress(
        self, framework_id: str, role: str = "", principal: str | None = None
    ) -> Awaitable[None]:
        """Stop offers."""
        return self._call("suppress", principal, framework_id, role)

    def kill(
        self, framework_id: str, task_id: str, agent_id: str = "", principal: str | None = None
    ) -> Awaitable[None]:
        """Kill a task."""
        return self._call("kill", principal, framework_id, task_id, agent_id)

    def acknowledge_many(
        self,
        framework_id: str,
        acks: Sequence[tuple[str, str, bytes]],
        principal: str | None = None,
    ) -> Awaitable[None]:
        """Acknowledge status updates."""
        return self._call("acknowledge_many", principal, framework_id, list(acks))

    def reconcile(
        self, framework_id: str, refs: Sequence[tuple[str, str]], principal: str | None = None
    ) -> Awaitable[None]:
        """Resend task states."""
        return self._call("reconcile", principal, framework_id, list(refs))

    def teardown(self, framework_id: str, principal: str | None = None) -> Awaitable[None]:
        """Remove the framework."""
        return self._call("teardown", principal, framework_id)

    def update_demand(
        self, framework_id: str, demand: Demand | None, principal: str | None = None
    ) -> Awaitable[None]:
        """Declare, change or clear the demand."""
        return self._call("update_demand", principal, framework_id, demand)

    # -- the core's operations --------------------------------------------------------------------

    def _deliver(self, operation: Operation) -> None:
        kind, sid = operation[0], operation[1]
        if kind == EVENTS:
            channel = self._channels.get(sid)
            if channel is not None:
                for event in operation[2]:
                    channel.put(event)
            return
        if kind == END:
            ended = self._channels.pop(sid, None)
            if ended is not None:
                ended.close(operation[2])
            return
        future = self._calls.pop(sid, None)
        if kind == SUBSCRIBED:
            self._subscribed(sid, future, operation)
        elif future is not None and not future.done():
            if kind == ANSWERED:
                future.set_result(None)
            else:
                future.set_exception(refusal_of(operation))

    def _subscribed(
        self, sid: int, future: asyncio.Future[Any] | None, operation: Operation
    ) -> None:
        if future is None or future.done():  # the framework went away meanwhile
            self.link.push((UNSUBSCRIBE, sid))
            return
        channel: LinkChannel[FrameworkEvent] = LinkChannel(sid)
        self._channels[sid] = channel
        framework_id, master_id, interval, resubscribed, weight = operation[2:7]
        future.set_result(
            SubscribeResult(framework_id, master_id, interval, resubscribed, weight, channel)
        )

    def _link_ended(self) -> None:
        """The core is gone: every call fails and every event stream ends UNAVAILABLE."""
        end_waiting(self._calls, self._channels)
