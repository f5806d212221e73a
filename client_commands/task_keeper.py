"""The built-in framework's behaviour: ``TaskKeeper`` keeps ``--count`` tasks of one shape (or
runs a command in them once) on an SDK ``Framework``; ``keep_running`` drives it until stopped,
done or detached.

Invariants: at most ``count`` non-terminal tasks at any time; a task that ends is replaced
unless it is a command task or the run is detached; offers are suppressed while every wanted
task is launched and revived when one ends; every update is handled in the order the stream
delivers it; a run with nothing running says why (attached: once after ``WAIT_NOTE``;
detached: gives up after ``detach_wait`` and tears the framework down).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Any, Final

from fairshare.cli import note
from fairshare.logs import log_event
from fairshare.resources import ResourceVector

from client_commands.run_config import DETACH_WAIT, EXIT_FAILURE, EXIT_OK, RunConfig
from framework_sdk.errors import FairshareError
from framework_sdk.events import (
    Disconnected,
    ErrorEvent,
    Event,
    OffersReceived,
    StatusUpdate,
    Subscribed,
)
from framework_sdk.framework import Framework
from framework_sdk.types import Command as TaskCommand
from framework_sdk.types import (
    Offer,
    TaskSpec,
    TaskState,
)

__all__ = ["EXIT_DETACHED", "EXIT_INTERRUPTED", "WAIT_NOTE", "TaskKeeper", "keep_running"]

_LOG = logging.getLogger("fairshare.run")


class TaskKeeper:
    """The built-in framework: keeps ``count`` tasks of one shape alive on a ``Framework``."""

    def __init__(self, fw: Framework, config: RunConfig, done: asyncio.Event | None = None) -> None:
        self._fw = fw
        self._config = config
        self.live: dict[str, TaskState] = {}
        self.finished = 0
        self.ended: dict[str, StatusUpdate] = {}  # command tasks: how each ended
        self._done = done or asyncio.Event()  # set once every command task has ended
        self._launched = 0
        self._suppressed = False
        self._said_running = False

    @property
    def wanted(self) -> int:
        """How many tasks it keeps running."""
        return self._config.count

    @property
    def shape(self) -> ResourceVector:
        """The shape of its tasks."""
        return self._config.shape

    def running(self) -> int:
        """How many of its tasks are RUNNING."""
        return sum(1 for state in self.live.values() if state is TaskState.RUNNING)

    def all_running(self) -> bool:
        """Every wanted task is RUNNING."""
        return self.running() >= self._config.count

    async def handle(self, event: Event) -> None:
        """React to one event."""
        match event:
            case Subscribed():  # the SDK logs the subscription itself
                if self._suppressed and len(self.live) < self._still_to_launch():
                    await self._revive()
            case OffersReceived():
                for offer in event.offers:
                    await self._use(offer)
                if len(self.live) >= self._still_to_launch() and not self._suppressed:
                    await self._fw.suppress()
                    self._suppressed = True
            case StatusUpdate():
                await self._on_update(event)
            case Disconnected():
                log_event(_LOG, "master.disconnected", logging.WARNING, reason=event.reason)
            case _:
                pass

    def _still_to_launch(self) -> int:
        """How many tasks should be live now (a command task is launched ``count`` times)."""
        if self._config.command is None:
            return self._config.count
        return min(self._config.count, self._config.count - self._launched + len(self.live))

    def _new_task(self) -> TaskSpec:
        self._launched += 1
        task_id = f"{self._config.name}-{self._launched}"
        if self._config.command is not None:
            command = TaskCommand(shell=self._config.command)
            return TaskSpec(
                task_id=task_id,
                resources=self._config.shape,
                command=command,
                preemptible=self._config.preemptible,
            )
        return TaskSpec(
            task_id=task_id,
            resources=self._config.shape,
            duration=self._config.duration,
            preemptible=self._config.preemptible,
        )

    async def _use(self, offer: Offer) -> None:
        wanted = self._still_to_launch() - len(self.live)
        fits = self._config.shape.times_fits_in(offer.resources)
        number = min(wanted, fits)
        if number <= 0:
            await self._fw.decline(offer)
            return
        tasks = [self._new_task() for _ in range(number)]
        # Leftovers are declined; filter the agent only once nothing more is wanted.
        more = len(self.live) + number < self._still_to_launch()
        await self._fw.launch(offer, tasks, refuse_seconds=0.0 if more else None)
        for task in tasks:
            self.live[task.task_id] = TaskState.STAGING
        log_event(
            _LOG,
            "tasks.launched",
            tasks=number,
            shape=self._config.shape,
            agent_id=offer.agent_id,
            live=len(self.live),
            wanted=self._config.count,
        )

    async def _on_update(self, update: StatusUpdate) -> None:
        if update.task_id not in self.live:
            return
        if not update.state.is_terminal:
            if self.live[update.task_id] is not update.state:
                log_event(
                    _LOG,
                    "task.state.changed",
                    task_id=update.task_id,
                    state=update.state.value,
                    agent_id=update.agent_id,
                )
            self.live[update.task_id] = update.state
            if not self._said_running and self._config.command is None and self.all_running():
                self._said_running = True
                if not self._config.detach:
                    print(
                        f"{self._config.name} (framework {self._fw.framework_id}) runs"
                        f" {self.running()} task(s) of {self._config.shape}; Ctrl-C tears it"
                        " down",
                        flush=True,
                    )
            return
        del self.live[update.task_id]
        if update.state is TaskState.FINISHED:
            self.finished += 1
        log_event(
            _LOG,
            "task.ended",
            task_id=update.task_id,
            state=update.state.value,
            reason=update.reason.value,
            message=update.message,
        )
        if self._config.command is not None:
            self.ended[update.task_id] = update
            if len(self.ended) >= self._config.count:
                self._done.set()
            return
        if self._suppressed:
            await self._revive()

    async def _revive(self) -> None:
        await self._fw.revive()
        self._suppressed = False


EXIT_DETACHED: Final = -1  # internal: every task runs, leave them to the master
EXIT_INTERRUPTED: Final = 130  # Ctrl-C (128 + SIGINT), as a shell reports it
WAIT_NOTE: Final = 10.0
"""An attached run with no task running after this long says why (once)."""


async def keep_running(
    fw: Framework,
    keeper: TaskKeeper,
    stop: asyncio.Event,
    detach: bool = False,
    detach_wait: float = DETACH_WAIT,
    why: Callable[[], Awaitable[str]] | None = None,
) -> int:
    """Keep the tasks until ``stop`` (then tear down), the command tasks ended, or (detached)
    they all run; detached with none running after ``detach_wait``, say ``why`` and tear down
    (exit 1); attached with none running after ``WAIT_NOTE``, say ``why`` once."""
    started = asyncio.get_running_loop().time()

    def detached() -> bool:
        if not detach or not keeper.running():
            return False
        waited = asyncio.get_running_loop().time() - started
        return keeper.all_running() or waited >= detach_wait

    async def consume() -> int:
        async for event in fw.events():
            if isinstance(event, ErrorEvent):
                print(
                    f"fairshare run: the master ended the framework: {event.message}",
                    file=sys.stderr,
                )
                return EXIT_FAILURE
            await keeper.handle(event)
            if detached():
                return EXIT_DETACHED
        return EXIT_OK

    async def reason() -> str:
        if why is None:
            return "no offer fitted"
        try:
            return await why()
        except Exception as error:  # the reason is a courtesy: never fail the run for it
            return f"the master's state could not be read ({error})"

    consumer = asyncio.ensure_future(consume())
    stopper = asyncio.ensure_future(stop.wait())
    timer: asyncio.Future[Any] = asyncio.ensure_future(
        asyncio.sleep(detach_wait if detach else WAIT_NOTE)
    )
    nothing_runs = False
    try:
        while True:
            await asyncio.wait({consumer, stopper, timer}, return_when=asyncio.FIRST_COMPLETED)
            if consumer.done() or stopper.done() or not timer.done():
                break
            if keeper.running():
                if detach:
                    consumer.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await consumer
                    return EXIT_DETACHED
            elif detach:
                nothing_runs = True
                print(
                    f"fairshare run: none of the {keeper.wanted} task(s) of {keeper.shape} runs"
                    f" after {detach_wait:g}s: {await reason()}; the framework is torn down",
                    file=sys.stderr,
                )
                break
            else:
                note(f"no task of {keeper.shape} runs yet: {await reason()}; still waiting")
            timer = asyncio.get_running_loop().create_future()  # once
    finally:
        stopper.cancel()
        timer.cancel()
    if consumer.done():
        return consumer.result()
    consumer.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await consumer
    log_event(
        _LOG, "framework.teardown", framework_id=fw.framework_id, tasks_killed=len(keeper.live)
    )
    try:
        await fw.teardown()
    except FairshareError as error:
        log_event(_LOG, "framework.teardown.failed", logging.WARNING, error=error)
    return EXIT_FAILURE if nothing_runs else EXIT_OK
