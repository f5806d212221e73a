"""The fake master on a loop thread of its own (``framework_sdk.testing``), for synchronous
tests such as those of a callback-style ``Scheduler``.

Invariants: every method runs on the fake master's loop and waits for it (at most
``_THREAD_CALL_TIMEOUT`` seconds); ``close`` stops the master, the loop and the thread, and is
idempotent.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

from framework_sdk._fake_master import POLL_STEP, FakeMaster
from framework_sdk._fake_types import OfferSpec
from framework_sdk.types import TaskState

__all__ = ["ThreadedFakeMaster"]

_THREAD_CALL_TIMEOUT: Final = 10.0
_T = TypeVar("_T")


class ThreadedFakeMaster:
    """A ``FakeMaster`` on its own loop thread, for synchronous tests (callback frameworks).

    ::

        with ThreadedFakeMaster(agents=[FakeAgent("ag-1", ResourceVector.parse("cpus:4"))]) as fm:
            driver = SchedulerDriver(MyScheduler(), FrameworkInfo(name="x"), fm.address)
            driver.start()
            fm.wait_for(lambda: len(fm.master.launched_tasks) == 4)

    Every method runs on the fake master's loop and waits for it; ``wait_for`` evaluates the
    condition there too, so it may read ``fm.master`` freely.
    """

    def __init__(self, **options: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="fake-master", daemon=True
        )
        self._thread.start()
        self.master: FakeMaster = self._run(FakeMaster.start_new(**options))

    def _run(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(_THREAD_CALL_TIMEOUT)

    def call(self, function: Callable[[], _T]) -> _T:
        """Run ``function()`` on the fake master's loop and return its result."""

        async def invoke() -> _T:
            return function()

        return self._run(invoke())

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT`` of the fake master."""
        return self.master.address

    def send_offers(self, *specs: OfferSpec, framework_id: str | None = None) -> list[str]:
        """``FakeMaster.send_offers`` from any thread."""
        return self.call(lambda: self.master.send_offers(*specs, framework_id=framework_id))

    def send_update(self, task_id: str, state: TaskState, **fields: Any) -> bytes:
        """``FakeMaster.send_update`` from any thread."""
        return self.call(lambda: self.master.send_update(task_id, state, **fields))

    def drop_stream(self, framework_id: str | None = None) -> None:
        """``FakeMaster.drop_stream`` from any thread."""
        self.call(lambda: self.master.drop_stream(framework_id))

    def wait_for(self, condition: Callable[[], object], timeout: float = 5.0) -> None:
        """Poll ``condition`` (on the fake master's loop) until true, at most ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while not self.call(condition):
            if time.monotonic() > deadline:
                raise TimeoutError(f"fake master: timed out after {timeout:g} s: {condition}")
            time.sleep(POLL_STEP)

    def close(self) -> None:
        """Stop the fake master and its thread."""
        if self._loop.is_closed():
            return
        self._run(self.master.stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(_THREAD_CALL_TIMEOUT)
        self._loop.close()

    def __enter__(self) -> ThreadedFakeMaster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
