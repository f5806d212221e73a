"""Shared helpers of the SDK tests: run a coroutine with a deadline, poll a condition.

The SDK tests talk real gRPC on 127.0.0.1 to ``framework_sdk.testing.FakeMaster``; every wait
is bounded (a test that hangs fails after ``TEST_TIMEOUT`` seconds instead).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from framework_sdk import Backoff, ClientOptions

T = TypeVar("T")
TEST_TIMEOUT = 15.0
POLL = 0.005

# Fast reconnection and short deadlines so failure paths take milliseconds.
FAST = ClientOptions(
    backoff=Backoff(initial=0.02, maximum=0.1),
    call_timeout=3.0,
    subscribe_timeout=3.0,
    seed=7,
)


def run_async(coroutine: Coroutine[Any, Any, T], timeout: float = TEST_TIMEOUT) -> T:
    """Run ``coroutine`` on a fresh loop, failing it after ``timeout`` seconds."""
    return asyncio.run(asyncio.wait_for(coroutine, timeout))


async def until(condition: Callable[[], object], timeout: float = 5.0, what: str = "") -> None:
    """Poll ``condition`` until true; AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or condition}")
        await asyncio.sleep(POLL)
