"""Callback style: ``Scheduler`` + ``SchedulerDriver`` against the fake master.

The fake master runs on the test's loop; the driver runs its own loop in its own thread, so
blocking driver calls from the test go through ``asyncio.to_thread``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any

import grpc
import pytest
from fairshare.v1 import scheduler_pb2
from sdk_helpers import FAST, run_async, until

from framework_sdk import (
    DriverStatus,
    FrameworkInfo,
    InvalidArgumentError,
    MasterInfo,
    NotConnectedError,
    Offer,
    ResourceVector,
    Scheduler,
    SchedulerDriver,
    StatusUpdate,
    TaskSpec,
    TaskState,
)
from framework_sdk.testing import FakeAgent, FakeMaster, OfferSpec

INFO = FrameworkInfo(name="callbacks")
SHAPE = ResourceVector.parse("cpus:1;mem:1024")


class Recorder(Scheduler):
    """Records every callback (name, args) and the thread it ran on."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.threads: set[str] = set()
        self.on_offers: Callable[[SchedulerDriver, Sequence[Offer]], None] | None = None
        self.on_update: Callable[[SchedulerDriver, StatusUpdate], None] | None = None

    def _record(self, *call: Any) -> None:
        self.calls.append(call)
        self.threads.add(threading.current_thread().name)

    def names(self) -> list[str]:
        return [call[0] for call in self.calls]

    def registered(self, driver: SchedulerDriver, framework_id: str, master: MasterInfo) -> None:
        self._record("registered", framework_id, master)

    def reregistered(self, driver: SchedulerDriver, master: MasterInfo) -> None:
        self._record("reregistered", master)

    def disconnected(self, driver: SchedulerDriver) -> None:
        self._record("disconnected")

    def resource_offers(self, driver: SchedulerDriver, offers: Sequence[Offer]) -> None:
        self._record("resource_offers", offers)
        if self.on_offers is not None:
            self.on_offers(driver, offers)

    def offer_rescinded(self, driver: SchedulerDriver, offer_id: str) -> None:
        self._record("offer_rescinded", offer_id)

    def status_update(self, driver: SchedulerDriver, update: StatusUpdate) -> None:
        self._record("status_update", update)
        if self.on_update is not None:
            self.on_update(driver, update)

    def agent_lost(self, driver: SchedulerDriver, agent_id: str) -> None:
        self._record("agent_lost", agent_id)

    def error(self, driver: SchedulerDriver, message: str) -> None:
        self._record("error", message)


def make_driver(scheduler: Scheduler, master: FakeMaster, **options: Any) -> SchedulerDriver:
    return SchedulerDriver(scheduler, INFO, master.address, options=FAST, **options)


async def stopped(driver: SchedulerDriver, failover: bool = False) -> DriverStatus:
    await asyncio.to_thread(driver.stop, failover)
    return await asyncio.to_thread(driver.join, 5.0)


def test_registered_then_stop_tears_down() -> None:
    async def scenario() -> None:
        async with FakeMaster() as master:
            sched = Recorder()
            driver = make_driver(sched, master)
            assert driver.status is DriverStatus.NOT_STARTED
            assert driver.start() is DriverStatus.RUNNING
            await until(lambda: sched.names() == ["registered"])
            _, framework_id, info = sched.calls[0]
            assert framework_id == driver.framework_id == master.framework_id
            assert info == MasterInfo(master_id=master.master_id, address=master.address)
            assert driver.connected
            assert sched.threads == {"fairshare-callbacks_0"}  # not the loop thread
            assert await stopped(driver) is DriverStatus.STOPPED
            assert [name for name, _ in master.calls] == ["Subscribe", "Teardown"]
            assert master.state.frameworks[framework_id].removed
            with pytest.raises(NotConnectedError, match="STOPPED"):
                driver.revive_offers()

    run_async(scenario())


def test_offers_launch_tasks_with_leftovers_declined_and_updates_are_acked() -> None:
    agents = [FakeAgent("ag-1", ResourceVector.parse("cpus:4;mem:8192"), hostname="h1")]

    async def scenario() -> None:
        async with FakeMaster(agents=agents) as master:
            sched = Recorder()
            launched: list[str] = []

            def launch(driver: SchedulerDriver, offers: Sequence[Offer]) -> None:
                for offer in offers:
                    if launched:
                        driver.decline_offer(offer, refuse_seconds=60)
                        continue
                    tasks = [TaskSpec(f"t{i}", SHAPE, duration=0.05) for i in range(2)]
                    driver.launch_tasks(offer, tasks)
                    launched.extend(t.task_id for t in tasks)

            sched.on_offers = launch
            driver = make_driver(sched, master)
            driver.start()

            def finished() -> list[str]:
                return [
                    c[1].task_id for c in sched.calls
                    if c[0] == "status_update" and c[1].state is TaskState.FINISHED
                ]  # fmt: skip

            await until(lambda: sorted(finished()) == ["t0", "t1"], what="both tasks finished")
            accept = master.requests("Accept")[0]
            assert isinstance(accept, scheduler_pb2.AcceptRequest)
            assert [t.task_id for t in accept.operations[0].launch.task_infos] == ["t0", "t1"]
            assert not accept.filters.HasField("refuse_seconds")  # leftovers: master default
            states = [c[1].state for c in sched.calls if c[0] == "status_update"]
            assert states.count(TaskState.RUNNING) == 2
            # every update carried a uuid and was acknowledged after its callback returned
            await until(lambda: len(master.acknowledgements) == len(states))
            assert not master.state.frameworks[driver.framework_id].unacked
            assert await stopped(driver) is DriverStatus.STOPPED

    run_async(scenario())


def test_a_raising_callback_leaves_the_update_unacknowledged() -> None:
    async def scenario() -> None:
        async with FakeMaster() as master:
            sched = Recorder()

            def explode(driver: SchedulerDriver, update: StatusUpdate) -> None:
                if update.task_id == "bad":
                    raise RuntimeError("bug in the framework")

            sched.on_update = explode
            driver = make_driver(sched, master)
            driver.start()
            await until(lambda: sched.names() == ["registered"])
            master.send_update("bad", TaskState.RUNNING, agent_id="ag-1")
            master.send_update("good", TaskState.RUNNING, agent_id="ag-1")
            await until(lambda: len(master.acknowledgements) == 1)
            (ack,) = master.acknowledgements
            assert ack.task_id == "good"
            unacked = master.state.frameworks[driver.framework_id].unacked
            assert [s.task_id for s in unacked.values()] == ["bad"]
            assert driver.status is DriverStatus.RUNNING  # the driver survives
            await stopped(driver)

    run_async(scenario())


def test_reconnection_calls_disconnected_then_reregistered_and_reconciles() -> None:
    async def scenario() -> None:
        async with FakeMaster() as master:
            sched = Recorder()
            driver = make_driver(sched, master)
            driver.start()
            await until(lambda: sched.names() == ["registered"])
            fid = driver.framework_id
            master.drop_stream()
            await until(lambda: sched.names() == ["registered", "disconnected", "reregistered"])
            assert driver.framework_id == fid and driver.connected
            await master.wait_for(lambda: master.requests("Reconcile"))
            second = master.requests("Subscribe")[1]
            assert isinstance(second, scheduler_pb2.SubscribeRequest)
            assert second.framework_info.framework_id == fid
            await stopped(driver)

    run_async(scenario())


def test_driver_calls_while_disconnected_raise_not_connected() -> None:
    async def scenario() -> None:
        async with FakeMaster() as master:
            sched = Recorder()
            driver = make_driver(sched, master)
            driver.start()
            await until(lambda: sched.names() == ["registered"])
            for _ in range(1000):
                master.fail_next("Subscribe", grpc.StatusCode.UNAVAILABLE, "down")
            master.drop_stream()
            await until(lambda: "disconnected" in sched.names())
            for call in (
                driver.revive_offers,
                driver.suppress_offers,
                lambda: driver.kill_task("t1"),
                lambda: driver.launch_tasks("of-1", [TaskSpec("t1", SHAPE)]),
                lambda: driver.decline_offer("of-1"),
                lambda: driver.reconcile_tasks(),
                lambda: driver.update_demand(SHAPE, 2),
            ):
                with pytest.raises(NotConnectedError, match="not subscribed"):
                    call()
            assert await stopped(driver, failover=True) is DriverStatus.STOPPED

    run_async(scenario())


def test_refusals_inside_callbacks_raise_typed_errors() -> None:
    async def scenario() -> None:
        async with FakeMaster() as master:
            sched = Recorder()
            seen: list[BaseException] = []

            def too_big(driver: SchedulerDriver, offers: Sequence[Offer]) -> None:
                try:
                    driver.launch_tasks(offers[0], [TaskSpec("t1", SHAPE * 2)])
                except InvalidArgumentError as error:
                    seen.append(error)
                    driver.decline_offer(offers[0], refuse_seconds=5)

            sched.on_offers = too_big
            driver = make_driver(sched, master)
            driver.start()
            await until(lambda: sched.names() == ["registered"])
            master.send_offers(OfferSpec("ag-1", "cpus:1;mem:1024"))
            await until(lambda: master.requests("Decline"), what="the decline after the refusal")
            (error,) = seen
            assert isinstance(error, InvalidArgumentError)
            assert error.code is grpc.StatusCode.INVALID_ARGUMENT and error.method == "Accept"
            assert master.outstanding_offers() == []
            await stopped(driver)

    run_async(scenario())


def test_rescind_agent_lost_and_fatal_error_callbacks() -> None:
    async def scenario() -> None:
        async with FakeMaster() as master:
            sched = Recorder()
            driver = make_driver(sched, master)
            driver.start()
            await until(lambda: sched.names() == ["registered"])
            (offer_id,) = master.send_offers(OfferSpec("ag-1", "cpus:1"))
            master.rescind(offer_id)
            master.send_agent_lost("ag-1", "unreachable")
            master.send_error("framework removed by the operator")
            assert await asyncio.to_thread(driver.join, 5.0) is DriverStatus.ABORTED
            assert sched.names() == [
                "registered", "resource_offers", "offer_rescinded", "agent_lost", "error",
            ]  # fmt: skip
            assert sched.calls[2] == ("offer_rescinded", offer_id)
            assert sched.calls[3] == ("agent_lost", "ag-1")
            assert sched.calls[4] == ("error", "framework removed by the operator")
            assert len(master.requests("Subscribe")) == 1  # no reconnection after ERROR
            assert driver.stop() is DriverStatus.ABORTED

    run_async(scenario())


def test_stop_with_failover_keeps_the_framework_for_a_new_driver() -> None:
    async def scenario() -> None:
        async with FakeMaster() as master:
            first = Recorder()
            driver = make_driver(first, master)
            driver.start()
            await until(lambda: first.names() == ["registered"])
            fid = driver.framework_id
            assert await stopped(driver, failover=True) is DriverStatus.STOPPED
            assert master.requests("Teardown") == []
            await until(lambda: not master.connected(fid))
            second = Recorder()
            info = FrameworkInfo(name=INFO.name, framework_id=fid)
            successor = SchedulerDriver(second, info, master.address, options=FAST)
            successor.start()
            await until(lambda: second.names() == ["reregistered"])
            assert successor.framework_id == fid
            await stopped(successor)

    run_async(scenario())


def test_explicit_acknowledgement_through_the_driver() -> None:
    async def scenario() -> None:
        async with FakeMaster() as master:
            sched = Recorder()
            driver = make_driver(sched, master, implicit_acknowledgements=False)
            driver.start()
            await until(lambda: sched.names() == ["registered"])
            master.send_update("t1", TaskState.RUNNING, agent_id="ag-1")
            await until(lambda: "status_update" in sched.names())
            await asyncio.sleep(0.05)
            assert master.requests("Acknowledge") == []
            update = sched.calls[-1][1]
            await asyncio.to_thread(driver.acknowledge_status_update, update)
            assert len(master.acknowledgements) == 1
            await stopped(driver)

    run_async(scenario())


def test_run_blocks_until_a_callback_stops_the_driver() -> None:
    async def scenario() -> None:
        async with FakeMaster() as master:
            sched = Recorder()

            def stop(driver: SchedulerDriver, update: StatusUpdate) -> None:
                driver.stop()

            sched.on_update = stop
            driver = make_driver(sched, master)
            runner = asyncio.ensure_future(asyncio.to_thread(driver.run))
            await master.wait_for(lambda: master.framework_ids and master.connected())
            master.send_update("t1", TaskState.FINISHED, agent_id="ag-1")
            assert await asyncio.wait_for(runner, 5.0) is DriverStatus.STOPPED
            assert master.requests("Teardown")

    run_async(scenario())


def test_join_inside_a_callback_is_refused_and_abort_keeps_the_framework() -> None:
    async def scenario() -> None:
        async with FakeMaster() as master:
            sched = Recorder()
            refused: list[RuntimeError] = []

            def join_inside(driver: SchedulerDriver, update: StatusUpdate) -> None:
                try:
                    driver.join()
                except RuntimeError as error:
                    refused.append(error)

            sched.on_update = join_inside
            driver = make_driver(sched, master)
            driver.start()
            await until(lambda: sched.names() == ["registered"])
            master.send_update("t1", TaskState.RUNNING, agent_id="ag-1")
            await until(lambda: refused, what="join refused inside the callback")
            assert driver.abort() is DriverStatus.ABORTED
            assert await asyncio.to_thread(driver.join, 5.0) is DriverStatus.ABORTED
            assert master.requests("Teardown") == []  # abort does not tear down
            assert not master.state.frameworks[master.framework_id].removed

    run_async(scenario())
