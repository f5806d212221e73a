"""The runtime's event-loop primitives: its clock, the waits ``stop()`` ends, bounded waits, and
the errors that end ``run()``.

Invariants: only the runtime's event loop runs this code (one owner of state, no locks); a wait
on the master is bounded (``within``) or ends when the stop event is set (``unless_stopped``,
``sleep_unless_stopped``). Timeouts use ``asyncio.timeout``, never ``asyncio.wait_for``: on
Python 3.11 ``wait_for`` swallows a cancellation that races with its awaitable completing,
which hung shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["AgentFatalError", "Stopped", "now", "sleep_unless_stopped", "unless_stopped", "within"]

T = TypeVar("T")


class AgentFatalError(Exception):
    """The master rejected the agent in a way no retry can fix, or a checkpoint write failed."""


class Stopped(Exception):
    """``stop()`` was called while waiting for the master."""


def now() -> float:
    """The event loop's clock: monotonic seconds, for retries, heartbeats and deadlines."""
    return asyncio.get_running_loop().time()


async def unless_stopped(awaitable: Awaitable[T], stop: asyncio.Event) -> T:
    """Await ``awaitable`` unless ``stop`` is set first (then cancel it, raise ``Stopped``)."""
    work = asyncio.ensure_future(awaitable)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({work, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
    if work.done():
        return work.result()
    work.cancel()
    raise Stopped


async def within(awaitable: Awaitable[T], seconds: float) -> T:
    """Await ``awaitable`` for at most ``seconds`` (``TimeoutError`` after)."""
    async with asyncio.timeout(seconds):
        return await awaitable


async def sleep_unless_stopped(delay: float, stop: asyncio.Event) -> None:
    """Sleep ``delay`` seconds, or until ``stop`` is set."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(delay):
            await stop.wait()
