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
import getpass
import random
import socket
from collections.abc import Iterable
from typing import Final

from fairshare.masters import MasterFinder
from fairshare.v1 import scheduler_pb2

from framework_sdk.acknowledgements import AckBatcher
from framework_sdk.delivery import DeliveryLedger
from framework_sdk.errors import NotConnectedError
from framework_sdk.events import Event, StatusUpdate
from framework_sdk.options import ClientOptions
from framework_sdk.scheduler_calls import OfferLike
from framework_sdk.session_loop import MAX_REDIRECTS, UNREACHABLE_WARNING_EVERY, SessionLoop
from framework_sdk.types import Demand, FrameworkInfo, UpdateSource

__all__ = ["MAX_REDIRECTS", "UNREACHABLE_WARNING_EVERY", "OfferLike", "SchedulerClient"]

_CLOSE_GRACE: Final = 2.0  # seconds close() lets in-flight acknowledgements finish


class SchedulerClient(SessionLoop):
    """One framework's connection to the master (see the module docstring for the contract).

    Its parts: the fields and properties (``framework_sdk.client_state``), the unary calls
    (``framework_sdk.scheduler_calls``), the connection loop (``framework_sdk.session_loop``);
    this class adds the lifecycle: start, wait, hand out and complete events, close, teardown.
    """

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
        self._stub = None
        self._queue = asyncio.Queue()
        self._subscribed = asyncio.Event()
        self._task = None
        self._background = set()
        self._closed = False
        self._stopping = False
        self._ended = False
        self._fatal = None
        self._last_error = "not connected yet"
        self._last_address = None
        self._diagnosed = False  # a failure was looked into (fairshare.tls_probe), once
        self._ledger = DeliveryLedger(self._options.delivery_memory)
        for task_id, uuid in handled:
            self._ledger.acknowledged(task_id, uuid)
        self._duplicates = 0
        self._acks = AckBatcher(self._send_acks, lambda: self._stub, self._spawn)

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
