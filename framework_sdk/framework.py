"""The asyncio style of the SDK: ``async with Framework.connect(...) as fw`` and typed events.

Example::

    info = FrameworkInfo(name="batch", role="analytics")
    async with Framework.connect("127.0.0.1:5050", info) as fw:
        async for event in fw.events():
            match event:
                case OffersReceived(offers=offers):
                    for offer in offers:
                        await fw.launch(offer, [TaskSpec("t1", ResourceVector.parse("cpus:1"))])
                case StatusUpdate(state=TaskState.FINISHED):
                    await fw.teardown()

Invariants:
- ``__aenter__`` returns once subscribed (the ``Subscribed`` event is still the first event
  ``events()`` yields); it raises the master's refusal as a ``CallError`` or, after
  ``connect_timeout``, ``NotConnectedError``.
- With implicit acknowledgements (the default) a status update is acknowledged when the next
  event is asked for, i.e. after the body of the ``async for`` handled it, or at a clean exit
  of the ``async with`` block; an exception in the body leaves it unacknowledged, so the master
  delivers it again. Within one process no update is delivered twice; across a restart, the
  updates passed as ``handled`` are not delivered again either.
- ``events()`` ends after ``teardown()``, ``close()`` or a final ``ErrorEvent``.
- Every call raises ``NotConnectedError`` while disconnected and a ``CallError`` subclass
  when the master refuses it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterable, Sequence
from types import TracebackType

from fairshare.resources import ResourceVector

from framework_sdk.client import OfferLike, SchedulerClient
from framework_sdk.events import Event, StatusUpdate
from framework_sdk.options import ClientOptions
from framework_sdk.types import Demand, FrameworkInfo, LaunchOperation, TaskRef, TaskSpec

__all__ = ["Framework"]


class Framework:
    """A framework connected to the master, used from asyncio code."""

    def __init__(
        self,
        master: str,
        info: FrameworkInfo,
        *,
        demand: Demand | None = None,
        suppressed: bool = False,
        implicit_acknowledgements: bool = True,
        connect_timeout: float | None = 30.0,
        options: ClientOptions | None = None,
        handled: Iterable[tuple[str, bytes]] = (),
    ) -> None:
        options = dataclasses.replace(
            options or ClientOptions(), implicit_acknowledgements=implicit_acknowledgements
        )
        self._client = SchedulerClient(
            master, info, demand=demand, suppressed=suppressed, options=options, handled=handled
        )
        self._connect_timeout = connect_timeout
        self._pending: Event | None = None

    @classmethod
    def connect(
        cls,
        master: str,
        info: FrameworkInfo,
        *,
        demand: Demand | None = None,
        suppressed: bool = False,
        implicit_acknowledgements: bool = True,
        connect_timeout: float | None = 30.0,
        options: ClientOptions | None = None,
        handled: Iterable[tuple[str, bytes]] = (),
    ) -> Framework:
        """A framework for ``async with``: it subscribes on entry and closes on exit.

        ``handled``: the status updates (task id, uuid) this framework already handled, read
        from its own durable record after a restart; the copies the master re-sends (their
        acknowledgement may not have arrived before the crash) are acknowledged again instead
        of delivered, so an application that records what it handled sees each update once
        even across its own crash.
        """
        return cls(
            master,
            info,
            demand=demand,
            suppressed=suppressed,
            implicit_acknowledgements=implicit_acknowledgements,
            connect_timeout=connect_timeout,
            options=options,
            handled=handled,
        )

    async def __aenter__(self) -> Framework:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self._complete_pending()
        await self.close()

    async def start(self) -> None:
        """Subscribe (what ``async with`` does on entry)."""
        await self._client.start()
        try:
            await self._client.wait_subscribed(self._connect_timeout)
        except BaseException:
            await self._client.close()
            raise

    async def close(self) -> None:
        """Close the connection without teardown: the master keeps the framework for failover."""
        await self._client.close()

    # -- state ------------------------------------------------------------------------------

    @property
    def framework_id(self) -> str:
        """The framework id minted by the master."""
        return self._client.framework_id

    @property
    def master_id(self) -> str:
        """Id of the master instance of the current subscription."""
        return self._client.master_id

    @property
    def connected(self) -> bool:
        """True while subscribed (calls raise ``NotConnectedError`` otherwise)."""
        return self._client.connected

    @property
    def info(self) -> FrameworkInfo:
        """The FrameworkInfo, with the framework id."""
        return self._client.info

    # -- events -----------------------------------------------------------------------------

    def _complete_pending(self) -> None:
        if self._pending is not None:
            self._client.complete(self._pending)
            self._pending = None

    async def next_event(self) -> Event | None:
        """The next event (None once the framework has ended); completes the previous one."""
        self._complete_pending()
        event = await self._client.next_event()
        self._pending = event
        return event

    async def events(self) -> AsyncIterator[Event]:
        """Every event in order, until the framework ends."""
        while (event := await self.next_event()) is not None:
            yield event

    # -- calls ------------------------------------------------------------------------------

    async def launch(
        self,
        offers: OfferLike | Sequence[OfferLike],
        tasks: Sequence[TaskSpec],
        *,
        refuse_seconds: float | None = None,
    ) -> None:
        """Launch ``tasks`` on ``offers`` (one agent); unused resources are declined."""
        await self._client.launch(offers, tasks, refuse_seconds=refuse_seconds)

    async def accept(
        self,
        offers: OfferLike | Sequence[OfferLike],
        operations: Sequence[LaunchOperation],
        *,
        refuse_seconds: float | None = None,
    ) -> None:
        """Apply ``operations`` to ``offers``; unused resources are declined."""
        await self._client.accept(offers, operations, refuse_seconds=refuse_seconds)

    async def decline(
        self, offers: OfferLike | Sequence[OfferLike], *, refuse_seconds: float | None = None
    ) -> None:
        """Decline offers; their agents are not offered again for ``refuse_seconds``."""
        await self._client.decline(offers, refuse_seconds=refuse_seconds)

    async def revive(self) -> None:
        """Clear filters and resume offers."""
        await self._client.revive()

    async def suppress(self) -> None:
        """Stop offers until ``revive``."""
        await self._client.suppress()

    async def kill(self, task_id: str, agent_id: str = "") -> None:
        """Kill a task."""
        await self._client.kill(task_id, agent_id)

    async def acknowledge(self, update: StatusUpdate) -> None:
        """Acknowledge a status update (needed only with explicit acknowledgements)."""
        await self._client.acknowledge(update)

    async def reconcile(self, tasks: Iterable[TaskRef | StatusUpdate | str] = ()) -> None:
        """Ask for the latest status of ``tasks`` (none: of every task the master knows)."""
        await self._client.reconcile(tasks)

    async def update_demand(self, shape: ResourceVector | None, count: int | None = None) -> None:
        """Declare the task shape and wanted count (``shape`` None clears the demand)."""
        demand = None if shape is None else Demand(task_resources=shape, max_tasks=count)
        await self._client.update_demand(demand)

    async def teardown(self) -> None:
        """Remove the framework for good (its tasks are killed); ``events()`` then ends."""
        self._pending = None
        await self._client.teardown()
