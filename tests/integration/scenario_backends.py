"""The two masters the scenario suite runs against, and a framework session that records events.

- ``fake_backend()``: ``framework_sdk.testing.ThreadedFakeMaster`` simulating one agent of
  ``AGENT_RESOURCES`` (its own loop thread, so a test drives both backends the same way);
- ``real_cluster(work_dir)``: a ``fairshare master`` and one ``fairshare agent`` process of
  ``AGENT_RESOURCES`` on 127.0.0.1, port 0 (``daemons.py``), shared by a module's scenarios;
  ``idle(backend)`` waits until what the previous scenario left is gone.
- ``Session``: a ``Framework`` with a reader task keeping every event in ``events``; ``wait``
  polls a condition over them with a deadline.

Invariants: both backends have the same settings where a framework can see them (one agent of
``AGENT_RESOURCES``, a 5 s default decline filter: Mesos's and the real master's); every wait is
bounded (``WAIT``); a ``Session`` is closed (its reader cancelled, its client closed) whatever
the scenario did; the processes and the fake master's thread are stopped in teardown by the
fixtures (``conftest.py``'s reaper for the processes).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from conftest import INTERNAL_ERRORS
from daemons import STARTED, Daemon, start_agent, start_master

from framework_sdk import (
    ClientOptions,
    Demand,
    Event,
    Framework,
    FrameworkInfo,
    Offer,
    OfferRescinded,
    OffersReceived,
    ResourceVector,
    StatusUpdate,
    TaskState,
)
from framework_sdk.testing import FakeAgent, ThreadedFakeMaster

AGENT_RESOURCES = "cpus:4;mem:8192"
WAIT = 10.0
"""Seconds any one wait of a scenario may take before it fails."""
POLL = 0.01
QUIET = 1.0
"""Seconds a scenario watches for something that must not happen (no offer while filtered)."""
FAST = ClientOptions(call_timeout=5.0, subscribe_timeout=5.0)
_T = TypeVar("_T")


SCENARIO_TIMEOUT = 30.0


def run_scenario(scenario: Coroutine[Any, Any, None], timeout: float = SCENARIO_TIMEOUT) -> None:
    """Run a scenario on a fresh loop; it fails after ``timeout`` seconds."""
    asyncio.run(asyncio.wait_for(scenario, timeout))


@dataclass(frozen=True, slots=True)
class Backend:
    """A master a scenario runs against: its address and its kind ("fake" or "real")."""

    kind: str
    address: str


@contextlib.contextmanager
def fake_backend() -> Iterator[Backend]:
    """The SDK's fake master simulating one agent of ``AGENT_RESOURCES``."""
    agent = FakeAgent("ag-fake-1", ResourceVector.parse(AGENT_RESOURCES))
    fake = ThreadedFakeMaster(agents=[agent], default_refuse_seconds=5.0, allocation_interval=0.05)
    try:
        yield Backend("fake", fake.address)
    finally:
        fake.close()


@contextlib.contextmanager
def real_cluster(work_dir: Path) -> Iterator[Backend]:
    """A real master (50 ms allocation interval, core invariants checked) and one agent, for a
    whole module (starting them takes seconds); both killed on exit, and a master that logged
    an internal error fails the run."""
    master: Daemon | None = None
    agent: Daemon | None = None
    try:
        master = start_master(
            work_dir / "master", "--allocation-interval", "50ms", "--validate",
            "--shutdown-grace", "1s",
        )  # fmt: skip
        agent = start_agent(master.address, work_dir / "agent", resources=AGENT_RESOURCES)
        for daemon in (master, agent):  # this fixture kills them, not each test's reaper
            STARTED.remove(daemon)
        yield Backend("real", master.address)
    finally:
        for started in (agent, master):
            if started is not None:
                started.kill()
    log = master.log() if master is not None else ""
    assert not any(mark in log for mark in INTERNAL_ERRORS), f"see {master.log_path}"


async def idle(backend: Backend) -> None:
    """Wait until a new framework is offered the whole agent: what an earlier scenario left
    (frameworks in failover, tasks being killed) is gone."""
    async with session(backend, "idle-probe") as probe:
        whole = ResourceVector.parse(AGENT_RESOURCES)
        await probe.wait(
            lambda: probe.offered() == whole, "the whole agent offered to a new framework"
        )


class Session:
    """A subscribed ``Framework`` whose events a reader task records in ``events``."""

    def __init__(self, framework: Framework) -> None:
        self.fw = framework
        self.events: list[Event] = []
        self.ended = False
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        try:
            async for event in self.fw.events():
                self.events.append(event)
        finally:
            self.ended = True

    async def close(self) -> None:
        """Stop reading and close the client (no teardown)."""
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader
        await self.fw.close()

    async def wait(
        self, condition: Callable[[], _T | None], what: str, timeout: float = WAIT
    ) -> _T:
        """Poll ``condition`` until it returns something truthy; AssertionError after
        ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not (result := condition()):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
            await asyncio.sleep(POLL)
        return result

    async def quiet(
        self, condition: Callable[[], object], what: str, period: float = QUIET
    ) -> None:
        """Watch for ``period`` seconds that ``condition`` stays false."""
        deadline = time.monotonic() + period
        while time.monotonic() < deadline:
            assert not condition(), f"unexpected: {what}"
            await asyncio.sleep(POLL)

    # -- views of the events ------------------------------------------------------------------

    def offers(self) -> list[Offer]:
        """Every offer received so far, in order."""
        return [o for e in self.events if isinstance(e, OffersReceived) for o in e.offers]

    def offered(self, after: int = 0) -> ResourceVector:
        """The resources of the offers received after the first ``after``, but those rescinded
        (what the framework holds if it used none of them)."""
        gone = set(self.rescinded())
        total = ResourceVector()
        for offer in self.offers()[after:]:
            if offer.offer_id not in gone:
                total = total + offer.resources
        return total

    def rescinded(self) -> list[str]:
        """Ids of the offers rescinded so far."""
        return [e.offer_id for e in self.events if isinstance(e, OfferRescinded)]

    def updates(self, task_id: str | None = None) -> list[StatusUpdate]:
        """The status updates received (of ``task_id``), in order."""
        return [
            e
            for e in self.events
            if isinstance(e, StatusUpdate) and (task_id is None or e.task_id == task_id)
        ]

    def states(self, task_id: str) -> list[TaskState]:
        """The states of ``task_id``'s updates, in order."""
        return [u.state for u in self.updates(task_id)]

    async def next_offer(self, after: int = 0, what: str = "an offer") -> Offer:
        """The first offer received after the first ``after`` ones."""
        offers = await self.wait(lambda: self.offers()[after:], what)
        return offers[0]


@contextlib.asynccontextmanager
async def session(
    backend: Backend,
    name: str = "scenario",
    *,
    info: FrameworkInfo | None = None,
    demand: Demand | None = None,
    implicit_acknowledgements: bool = True,
    **options: Any,
) -> AsyncIterator[Session]:
    """Subscribe a framework to ``backend`` and record its events; closed on exit."""
    framework = Framework(
        backend.address,
        info or FrameworkInfo(name=name),
        demand=demand,
        implicit_acknowledgements=implicit_acknowledgements,
        connect_timeout=WAIT,
        options=FAST,
        **options,
    )
    await framework.start()
    recorder = Session(framework)
    try:
        yield recorder
    finally:
        await recorder.close()
