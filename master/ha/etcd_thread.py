"""``EtcdThread``: the HA master's etcd client on an event loop of its own, in its own thread.

Two things need etcd while the runtime's loop must not wait on it: the election (lease
keepalives must go out on time even while the runtime's loop is busy with an allocation run or
a registry write) and the registry's writes, which the runtime makes *synchronously* (every
runtime call is one atomic step on its loop, and the write comes before the change it records,
as with SQLite: ``master.registry.operations``). So the etcd client (``fairshare.etcd``, aetcd's
asyncio client) lives on this thread's loop: ``submit`` starts a coroutine there and returns at
once; ``run`` starts one and blocks the calling thread until it ends or ``timeout`` passes.

Invariants: every coroutine that touches the ``EtcdClient`` runs on this thread's loop (the
client belongs to it); ``run`` never waits longer than its timeout (the coroutine is cancelled
then and ``TimeoutError`` raised; what etcd did with a request in flight is unknown); ``stop``
cancels what still runs, closes the client and joins the thread (idempotent).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from fairshare.etcd import EtcdClient
from fairshare.etcd_security import PLAIN_ETCD, EtcdSecurity
from fairshare.master_target import EtcdTarget

__all__ = ["EtcdThread"]

T = TypeVar("T")


class EtcdThread:
    """A thread running an asyncio loop that owns one ``EtcdClient``."""

    def __init__(
        self, target: EtcdTarget, timeout: float, security: EtcdSecurity = PLAIN_ETCD
    ) -> None:
        self.client = EtcdClient(target, timeout, security)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="fairshare-etcd", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start ``coroutine`` on the etcd loop; its future (a thread-safe one)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run ``coroutine`` on the etcd loop and wait for its result (``TimeoutError``)."""
        future = self.submit(coroutine)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"etcd did not answer within {timeout:g} s") from None

    def stop(self) -> None:
        """Cancel what runs on the etcd loop, close the client, end the thread."""
        if not self._thread.is_alive():
            return

        async def shutdown() -> None:
            current = asyncio.current_task()
            tasks = [task for task in asyncio.all_tasks() if task is not current]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.client.close()

        with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
            self.submit(shutdown()).result(5.0)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5.0)
        if not self._thread.is_alive():
            self._loop.close()
