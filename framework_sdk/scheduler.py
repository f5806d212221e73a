"""The callback style of the SDK, named like pymesos (in snake_case).

Subclass ``Scheduler``, override the callbacks you need, and run it with a ``SchedulerDriver``::

    class Batch(Scheduler):
        def resource_offers(self, driver, offers):
            for offer in offers:
                driver.launch_tasks(offer, [TaskSpec("t1", ResourceVector.parse("cpus:1"))])

    driver = SchedulerDriver(Batch(), FrameworkInfo(name="batch"), "127.0.0.1:5050")
    driver.run()

Invariants:
- The driver runs one ``SchedulerClient`` on its own asyncio loop in a background thread.
  Callbacks run one at a time, in stream order, on a single dedicated callback thread (not the
  loop thread), so driver methods called inside a callback can wait for the master's answer
  and raise its refusal as a typed exception without blocking the connection (heartbeats are
  still read while a callback runs).
- Driver methods are thread-safe; each waits for the master's answer. While disconnected they
  raise ``NotConnectedError`` (never dropped silently, unlike pymesos); refusals raise the
  ``CallError`` subclass of the gRPC code.
- With implicit acknowledgements (the default) a status update is acknowledged after
  ``status_update`` returns; if the callback raises, the exception is logged and the update is
  left unacknowledged, so the master delivers it again.
- ``status_update`` sees each update (task id, uuid) once: copies the master re-sends are
  dropped, and acknowledged again if the update was acknowledged (see ``SchedulerClient``);
  only an update whose callback raised is delivered again when the master re-sends it.
- Failover: ``stop(failover=True)`` or ``abort()`` (or a dead process) leaves the framework
  registered for ``FrameworkInfo.failover_timeout`` seconds. A new driver with
  ``FrameworkInfo(framework_id=<the id given to registered>)`` and the same name and role takes
  over its tasks (``reregistered``, then reconciliation answers); after the timeout its tasks
  are killed and the new driver gets ``error`` (NOT_FOUND).
- ``error`` is the last callback: the master refused or ended the subscription, or no master
  answered within ``ClientOptions.registration_timeout`` (60 s) of the start; the driver is then
  ABORTED. A master that does not answer is logged as a WARNING meanwhile.
- Ctrl-C during ``run()`` stops the driver like ``stop()`` (teardown) and ``run()`` returns
  STOPPED, without a traceback.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import logging
import threading
import traceback
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any, Final

from fairshare.logs import log_event
from fairshare.resources import ResourceVector

from framework_sdk.client import OfferLike, SchedulerClient
from framework_sdk.errors import NotConnectedError
from framework_sdk.events import (
    ErrorEvent,
    Event,
    StatusUpdate,
)
from framework_sdk.options import ClientOptions
from framework_sdk.scheduler_callbacks import DriverStatus, Scheduler, dispatch
from framework_sdk.types import (
    Demand,
    FrameworkInfo,
    LaunchOperation,
    TaskRef,
    TaskSpec,
)

__all__ = ["DriverStatus", "Scheduler", "SchedulerDriver"]

_LOG = logging.getLogger("framework_sdk")
_STARTUP_TIMEOUT: Final = 10.0
_STOP_TIMEOUT: Final = 10.0  # how long run() waits for the driver to end after Ctrl-C


class SchedulerDriver:
    """Connects a ``Scheduler`` to the master and carries its calls (thread-safe)."""

    def __init__(
        self,
        scheduler: Scheduler,
        framework_info: FrameworkInfo,
        master: str,
        *,
        implicit_acknowledgements: bool = True,
        demand: Demand | None = None,
        suppressed: bool = False,
        options: ClientOptions | None = None,
    ) -> None:
        self._scheduler = scheduler
        self._info = framework_info
        self._master = master
        self._demand = demand
        self._suppressed = suppressed
        self._options = dataclasses.replace(
            options or ClientOptions(), implicit_acknowledgements=implicit_acknowledgements
        )
        self._status = DriverStatus.NOT_STARTED
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._done = threading.Event()
        self._closing = False  # set on the loop thread when the loop starts to end
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: SchedulerClient | None = None
        self._thread: threading.Thread | None = None
        self._pending: set[concurrent.futures.Future[None]] = set()
        self._callback_thread: threading.Thread | None = None
        self._callbacks = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="fairshare-callbacks"
        )

    # -- lifecycle --------------------------------------------------------------------------

    @property
    def status(self) -> DriverStatus:
        """The driver's lifecycle status."""
        return self._status

    @property
    def framework_id(self) -> str:
        """The framework id ('' until registered)."""
        return self._client.framework_id if self._client is not None else self._info.framework_id

    @property
    def connected(self) -> bool:
        """True while subscribed to the master."""
        return self._client is not None and self._client.connected

    def start(self) -> DriverStatus:
        """Start connecting in the background; callbacks follow. Returns RUNNING."""
        with self._lock:
            if self._status is not DriverStatus.NOT_STARTED:
                return self._status
            self._status = DriverStatus.RUNNING
            self._thread = threading.Thread(
                target=self._thread_main, name="fairshare-driver", daemon=True
            )
            self._thread.start()
        if not self._ready.wait(_STARTUP_TIMEOUT):
            raise RuntimeError("the driver thread did not start")
        return self._status

    def stop(self, failover: bool = False) -> DriverStatus:
        """Stop the driver; without ``failover`` the framework is torn down (tasks killed).

        With ``failover=True`` the master keeps the framework and its tasks for its
        failover_timeout, so a new driver with the same framework id can take over.
        """
        with self._lock:
            if self._status is not DriverStatus.RUNNING:
                return self._status
            self._status = DriverStatus.STOPPED
        if not failover:
            try:
                self._call("Teardown", lambda client: client.teardown())
            except Exception as error:
                log_event(_LOG, "framework.teardown.failed", logging.WARNING, error=error)
        self._submit(lambda client: client.close())
        return DriverStatus.STOPPED

    def abort(self) -> DriverStatus:
        """Stop at once without teardown (the master keeps the framework for failover)."""
        with self._lock:
            if self._status is not DriverStatus.RUNNING:
                return self._status
            self._status = DriverStatus.ABORTED
        self._submit(lambda client: client.close())
        return DriverStatus.ABORTED

    def join(self, timeout: float | None = None) -> DriverStatus:
        """Wait until the driver stopped or aborted (or ``timeout`` passed); its status."""
        if self._status is DriverStatus.NOT_STARTED:
            return self._status
        if threading.current_thread() is self._callback_thread:
            raise RuntimeError("join() inside a callback would wait for itself forever")
        self._done.wait(timeout)
        return self._status

    def run(self) -> DriverStatus:
        """``start()`` then ``join()``. Ctrl-C (KeyboardInterrupt) while it runs stops the
        driver as ``stop()`` does (the framework is torn down, its tasks killed) and returns
        STOPPED: no traceback; a script that wants failover instead calls ``stop(failover=True)``
        from its own handler."""
        try:
            self.start()
            return self.join()
        except KeyboardInterrupt:
            log_event(_LOG, "driver.interrupted", framework_id=self.framework_id)
            status = self.stop()
            self.join(_STOP_TIMEOUT)
            return status

    def _thread_main(self) -> None:
        try:
            asyncio.run(self._main())
        finally:
            with self._lock:
                if self._status is DriverStatus.RUNNING:
                    self._status = DriverStatus.STOPPED
            self._callbacks.shutdown(wait=False)
            self._fail_pending()
            self._ready.set()
            self._done.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        client = SchedulerClient(
            self._master,
            self._info,
            demand=self._demand,
            suppressed=self._suppressed,
            options=self._options,
        )
        self._client = client
        await client.start()
        self._ready.set()
        try:
            while (event := await client.next_event()) is not None:
                if isinstance(event, ErrorEvent):
                    with self._lock:
                        if self._status is DriverStatus.RUNNING:
                            self._status = DriverStatus.ABORTED
                handled = await self._loop.run_in_executor(self._callbacks, self._dispatch, event)
                if handled:
                    client.complete(event)
                elif isinstance(event, StatusUpdate):
                    client.release(event)  # not handled: deliver the master's next copy
        finally:
            self._closing = True  # from now on _submit starts nothing on this loop
            await client.close()

    def _dispatch(self, event: Event) -> bool:
        """Run the callback of ``event`` on the callback thread; False if it raised."""
        self._callback_thread = threading.current_thread()
        try:
            self._callback(event)
        except Exception:
            log_event(
                _LOG,
                "scheduler.callback.failed",
                logging.ERROR,
                callback=type(event).__name__,
                error=traceback.format_exc(),
            )
            return False
        return True

    def _callback(self, event: Event) -> None:
        dispatch(self._scheduler, self, event)

    # -- calls ------------------------------------------------------------------------------

    def _submit(
        self, make: Callable[[SchedulerClient], Coroutine[Any, Any, None]]
    ) -> concurrent.futures.Future[None] | None:
        """Run ``make(client)`` on the driver's loop; the coroutine is created there, so a
        loop that stops first leaves no coroutine un-awaited (the future then fails)."""
        loop, client = self._loop, self._client
        if loop is None or client is None or self._done.is_set():
            return None
        future: concurrent.futures.Future[None] = concurrent.futures.Future()

        def begin() -> None:
            if not future.set_running_or_notify_cancel():
                return
            if self._closing:  # the loop is ending: a task made now would never run
                future.set_exception(NotConnectedError("the driver has stopped"))
                return
            task = loop.create_task(make(client))
            task.add_done_callback(lambda done: _settle(future, done))

        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._forget)
        try:
            loop.call_soon_threadsafe(begin)
        except RuntimeError:  # the loop closed meanwhile
            future.cancel()
            return None
        return future

    def _forget(self, future: concurrent.futures.Future[None]) -> None:
        with self._lock:
            self._pending.discard(future)

    def _fail_pending(self) -> None:
        with self._lock:
            pending = list(self._pending)
        for future in pending:
            with contextlib.suppress(concurrent.futures.InvalidStateError):
                future.set_exception(NotConnectedError("the driver has stopped"))

    def _call(
        self, method: str, make: Callable[[SchedulerClient], Coroutine[Any, Any, None]]
    ) -> None:
        if self._thread is not None and threading.current_thread() is self._thread:
            raise RuntimeError(f"{method}: driver methods cannot run on the driver's loop thread")
        if self._status is not DriverStatus.RUNNING and method != "Teardown":
            raise NotConnectedError(f"{method}: the driver is {self._status.value}")
        if not self.connected:
            raise NotConnectedError(f"{method}: not subscribed to the master at {self._master}")
        future = self._submit(make)
        if future is None:
            raise NotConnectedError(f"{method}: the driver has stopped")
        try:
            future.result(timeout=self._options.call_timeout * 2 + 5)
        except concurrent.futures.CancelledError:
            raise NotConnectedError(f"{method}: the driver has stopped") from None

    def launch_tasks(
        self,
        offer_ids: OfferLike | Sequence[OfferLike],
        tasks: Sequence[TaskSpec],
        refuse_seconds: float | None = None,
    ) -> None:
        """Launch ``tasks`` on the offers (one agent); unused resources are declined."""
        self._call("Accept", lambda c: c.launch(offer_ids, tasks, refuse_seconds=refuse_seconds))

    def accept_offers(
        self,
        offer_ids: OfferLike | Sequence[OfferLike],
        operations: Sequence[LaunchOperation],
        refuse_seconds: float | None = None,
    ) -> None:
        """Apply ``operations`` to the offers; unused resources are declined."""
        self._call(
            "Accept", lambda c: c.accept(offer_ids, operations, refuse_seconds=refuse_seconds)
        )

    def decline_offer(
        self, offer_ids: OfferLike | Sequence[OfferLike], refuse_seconds: float | None = None
    ) -> None:
        """Decline offers; their agents are not offered again for ``refuse_seconds``."""
        self._call("Decline", lambda c: c.decline(offer_ids, refuse_seconds=refuse_seconds))

    def revive_offers(self) -> None:
        """Clear filters and resume offers."""
        self._call("Revive", lambda c: c.revive())

    def suppress_offers(self) -> None:
        """Stop offers until ``revive_offers``."""
        self._call("Suppress", lambda c: c.suppress())

    def kill_task(self, task_id: str, agent_id: str = "") -> None:
        """Kill a task; KILLING/KILLED updates follow."""
        self._call("Kill", lambda c: c.kill(task_id, agent_id))

    def acknowledge_status_update(self, update: StatusUpdate) -> None:
        """Acknowledge a status update (needed only with explicit acknowledgements)."""
        self._call("Acknowledge", lambda c: c.acknowledge(update))

    def reconcile_tasks(self, tasks: Iterable[TaskRef | StatusUpdate | str] = ()) -> None:
        """Ask for the latest status of ``tasks`` (none: of every task the master knows)."""
        task_list = list(tasks)
        self._call("Reconcile", lambda c: c.reconcile(task_list))

    def update_demand(self, shape: ResourceVector | None, count: int | None = None) -> None:
        """Declare the task shape and wanted count (``shape`` None clears the demand)."""
        demand = None if shape is None else Demand(task_resources=shape, max_tasks=count)
        self._call("UpdateDemand", lambda c: c.update_demand(demand))


def _settle(future: concurrent.futures.Future[None], task: asyncio.Task[None]) -> None:
    """Copy the outcome of ``task`` (on the loop) into ``future`` (for the calling thread)."""
    if future.done():
        return
    if task.cancelled():
        future.set_exception(NotConnectedError("the call was cancelled: the driver stopped"))
    elif (error := task.exception()) is not None:
        future.set_exception(error)
    else:
        future.set_result(None)
