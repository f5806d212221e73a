"""``WorkerLink``: a worker's end of its link to the core, shared by ``RemoteAgents`` and
``RemoteFrameworks`` (docs/architecture.md §13).

It holds the operations waiting to go to the core (``push``), numbers the worker's sessions and
calls (``next_sid``: one sequence for agents' streams, frameworks' streams and calls, so a
``REFUSED`` or an ``END`` names one of them), sends everything queued as one batch
(``batches``), hands each operation of the core's batches to the port that registered its kind
(``deliver``), and tells every port when the link ends (``link_ended``).

Invariants: operations leave in the order they were queued; at most ``limit`` wait: a push beyond
returns an awaitable the caller waits on (backpressure: the reader of a client's stream reads no
further until the link drains); after the link ended nothing is pushed and every port was told.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final, TypeVar

from master.core import CoreError
from master.io_workers.protocol import HELLO, MAX_BATCH, Operation, decode, encode
from master.model import StreamEnd
from master.runtime.sessions import Channel

T = TypeVar("T")

__all__ = [
    "LINK_ENDED",
    "QUEUE_LIMIT",
    "LinkChannel",
    "RemoteRefusal",
    "WorkerLink",
    "end_waiting",
    "link_lost",
    "refusal_of",
]

QUEUE_LIMIT: Final = 10_000
"""Operations a worker queues for the core at most before its clients' readers wait."""
LINK_ENDED: Final = StreamEnd("UNAVAILABLE", "the master's I/O worker lost the master")


class RemoteRefusal(CoreError):
    """The core refused an open, a call or a subscription (``code`` is the core's;
    ``trailing_metadata``: what the stream ends with, a follower's ``fairshare-leader``)."""

    def __init__(
        self, code: str, message: str, trailing_metadata: tuple[tuple[str, str], ...] = ()
    ) -> None:
        super().__init__(message)
        self.code = code
        self.trailing_metadata = trailing_metadata


def link_lost() -> RemoteRefusal:
    """The refusal of what was asked of a link that ended (``LINK_ENDED``)."""
    return RemoteRefusal(LINK_ENDED.code, LINK_ENDED.message)


def refusal_of(operation: Operation) -> RemoteRefusal:
    """The refusal a ``REFUSED`` operation carries."""
    hint = operation[4] if len(operation) > 4 else ()
    return RemoteRefusal(operation[2], operation[3], hint)


class LinkChannel(Channel[T]):
    """A session's channel in the worker, known to the link by its number ``sid``."""

    __slots__ = ("sid",)

    def __init__(self, sid: int) -> None:
        super().__init__()
        self.sid = sid


def end_waiting(
    futures: dict[int, asyncio.Future[Any]], channels: dict[int, LinkChannel[Any]]
) -> None:
    """The link ended: every answer still awaited fails and every channel closes, both
    UNAVAILABLE (``LINK_ENDED``); both maps are emptied."""
    waiting, ended = list(futures.values()), list(channels.values())
    futures.clear()
    channels.clear()
    for future in waiting:
        if not future.done():
            future.set_exception(link_lost())
    for channel in ended:
        channel.close(LINK_ENDED)


class WorkerLink:
    """The queue to the core, and the dispatch of what the core sends."""

    def __init__(self, limit: int = QUEUE_LIMIT) -> None:
        self.limit = limit
        self._sids = itertools.count(1)
        self._out: list[Operation] = []
        self._wake = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._handlers: dict[int, list[Callable[[Operation], None]]] = {}
        self._on_end: list[Callable[[], None]] = []
        self.ended = False

    def handle(self, kinds: tuple[int, ...], handler: Callable[[Operation], None]) -> None:
        """Send the core's operations of ``kinds`` to ``handler`` (a kind two ports share,
        ``REFUSED`` or ``END``, goes to both: each ignores the numbers that are not its own)."""
        for kind in kinds:
            self._handlers.setdefault(kind, []).append(handler)

    def on_end(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when the link ends."""
        self._on_end.append(callback)

    @property
    def depth(self) -> int:
        """Operations waiting to go to the core."""
        return len(self._out)

    def next_sid(self) -> int:
        """A new session or call number of this worker (never reused)."""
        return next(self._sids)

    def push(self, operation: Operation) -> Awaitable[None] | None:
        """Queue ``operation``; an awaitable when the queue is full (wait for room)."""
        self._out.append(operation)
        self._wake.set()
        if len(self._out) < self.limit:
            return None
        self._room.clear()
        return self._wait_room()

    async def _wait_room(self) -> None:
        await self._room.wait()

    def hello(self) -> None:
        """Tell the core this worker serves the public port now."""
        self.push((HELLO, 0))

    async def batches(self) -> AsyncIterator[bytes]:
        """What goes to the core: everything queued at once, as one batch."""
        while not self.ended:
            await self._wake.wait()
            await asyncio.sleep(0)  # what this loop iteration queues joins the batch
            self._wake.clear()
            operations, self._out = self._out[:MAX_BATCH], self._out[MAX_BATCH:]
            if self._out:
                self._wake.set()
            if len(self._out) < self.limit:
                self._room.set()
            if operations:
                yield encode((len(operations) + len(self._out), operations))

    def deliver(self, data: bytes) -> None:
        """Apply one batch from the core."""
        handlers = self._handlers
        for operation in decode(data):
            for handler in handlers.get(operation[0], ()):
                handler(operation)

    def link_ended(self) -> None:
        """The core is gone: every port hears it (its opens fail, its sessions end)."""
        self.ended = True
        self._wake.set()
        self._room.set()
        for callback in self._on_end:
            callback()
