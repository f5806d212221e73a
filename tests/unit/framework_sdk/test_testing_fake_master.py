"""``framework_sdk.testing.FakeMaster`` itself, driven with raw gRPC stubs: it must keep the
Scheduler API contract (codes, no state change on refusal) so frameworks tested against it
behave the same against the real master."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import grpc
import pytest
from fairshare.v1 import common_pb2, scheduler_pb2, scheduler_pb2_grpc
from fairshare.wire import resources_to_pb
from sdk_helpers import run_async

from framework_sdk import (
    FrameworkInfo,
    Offer,
    ResourceVector,
    Scheduler,
    SchedulerDriver,
    StatusUpdate,
    TaskSpec,
    TaskState,
)
from framework_sdk.testing import FakeAgent, FakeMaster, OfferSpec, ThreadedFakeMaster

Stream = grpc.aio.UnaryStreamCall[Any, scheduler_pb2.SubscribeResponse]
CPU = ResourceVector.parse("cpus:1;mem:1024")


def subscribe_request(name: str = "raw", **fields: object) -> scheduler_pb2.SubscribeRequest:
    return scheduler_pb2.SubscribeRequest(
        framework_info=common_pb2.FrameworkInfo(name=name),
        **fields,  # type: ignore[arg-type]
    )


async def read_until(stream: Stream, kind: str) -> scheduler_pb2.SubscribeResponse:
    async for message in stream:
        if message.WhichOneof("event") == kind:
            return message
    raise AssertionError(f"stream ended before a {kind} event")


def task(task_id: str, resources: ResourceVector = CPU, agent_id: str = "") -> common_pb2.TaskInfo:
    return common_pb2.TaskInfo(
        task_id=task_id, agent_id=agent_id, resources=resources_to_pb(resources)
    )


def accept(
    fid: str, offer_ids: list[str], *tasks: common_pb2.TaskInfo
) -> scheduler_pb2.AcceptRequest:
    launch = scheduler_pb2.Operation(launch=scheduler_pb2.Operation.Launch(task_infos=tasks))
    return scheduler_pb2.AcceptRequest(framework_id=fid, offer_ids=offer_ids, operations=[launch])


async def code_of(call: object) -> grpc.StatusCode:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call  # type: ignore[misc]
    return caught.value.code()


def test_calls_before_subscribe_and_after_disconnect() -> None:
    async def scenario() -> None:
        async with FakeMaster() as master, grpc.aio.insecure_channel(master.address) as channel:
            stub: scheduler_pb2_grpc.SchedulerServiceAsyncStub = (
                scheduler_pb2_grpc.SchedulerServiceStub(channel)
            )
            unknown = scheduler_pb2.ReviveRequest(framework_id="fw-unknown")
            assert await code_of(stub.Revive(unknown)) is grpc.StatusCode.NOT_FOUND
            call = stub.Subscribe(subscribe_request())
            first = await call.read()
            assert isinstance(first, scheduler_pb2.SubscribeResponse)
            fid = first.subscribed.framework_id
            call.cancel()
            await master.wait_for(lambda: not master.connected(fid))
            revive = scheduler_pb2.ReviveRequest(framework_id=fid)
            assert await code_of(stub.Revive(revive)) is grpc.StatusCode.FAILED_PRECONDITION
            assert await code_of(stub.Subscribe(subscribe_request(name="")).read()) is (
                grpc.StatusCode.INVALID_ARGUMENT
            )

    run_async(scenario())


def test_accept_validation_codes_change_nothing() -> None:
    async def scenario() -> None:
        async with FakeMaster() as master, grpc.aio.insecure_channel(master.address) as channel:
            stub: scheduler_pb2_grpc.SchedulerServiceAsyncStub = (
                scheduler_pb2_grpc.SchedulerServiceStub(channel)
            )
            mine = stub.Subscribe(subscribe_request("mine"))
            fid = (await read_until(mine, "subscribed")).subscribed.framework_id
            other = stub.Subscribe(subscribe_request("other"))
            other_fid = (await read_until(other, "subscribed")).subscribed.framework_id
            a1, a2 = master.send_offers(
                OfferSpec("ag-1", "cpus:2;mem:2048"), OfferSpec("ag-2", "cpus:2;mem:2048"),
                framework_id=fid,
            )  # fmt: skip
            (foreign,) = master.send_offers(OfferSpec("ag-3", "cpus:2"), framework_id=other_fid)
            invalid, not_found = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND
            negative = common_pb2.TaskInfo(
                task_id="neg",
                resources=common_pb2.Resources(items=[common_pb2.Resource(name="cpus", millis=-1)]),
            )
            cases = [
                (accept(fid, ["of-nope"], task("t1")), not_found),
                (accept(fid, [foreign], task("t1")), not_found),
                (accept(fid, [a1, a2], task("t1")), invalid),
                (accept(fid, [a1], task("t1"), task("t1")), invalid),
                (accept(fid, [a1], task("t1", agent_id="ag-2")), invalid),
                (accept(fid, [a1], task("t1", CPU * 3)), invalid),
                (accept(fid, [a1], negative), invalid),
                (accept(fid, [], task("t1")), invalid),
            ]
            for request, expected in cases:
                assert await code_of(stub.Accept(request)) is expected, request
            assert sorted(master.outstanding_offers()) == sorted([a1, a2, foreign])
            assert master.launched_tasks == []
            await stub.Accept(accept(fid, [a1], task("t1"), task("t2")))
            assert [t.agent_id for t in master.launched_tasks] == ["ag-1", "ag-1"]
            assert await code_of(stub.Accept(accept(fid, [a1], task("t3")))) is not_found  # used
            assert await code_of(stub.Accept(accept(fid, [a2], task("t1")))) is invalid  # live id
            ack = scheduler_pb2.AcknowledgeRequest.Acknowledgement
            empty_ack = scheduler_pb2.AcknowledgeRequest(
                framework_id=fid, acknowledgements=[ack(task_id="t1")]
            )
            assert await code_of(stub.Acknowledge(empty_ack)) is invalid
            none = scheduler_pb2.AcknowledgeRequest(framework_id=fid)
            assert await code_of(stub.Acknowledge(none)) is invalid
            stale = scheduler_pb2.AcknowledgeRequest(
                framework_id=fid, acknowledgements=[ack(task_id="t-ended", uuid=b"x")]
            )
            await stub.Acknowledge(stale)  # stale acknowledgements succeed
            never = scheduler_pb2.AcknowledgeRequest(
                framework_id=fid, acknowledgements=[ack(task_id="t1", uuid=b"x")]
            )
            assert await code_of(stub.Acknowledge(never)) is not_found  # live t1 never had it
            bad_role = scheduler_pb2.SuppressRequest(framework_id=fid, role="other-role")
            assert await code_of(stub.Suppress(bad_role)) is invalid
            mine.cancel()
            other.cancel()

    run_async(scenario())


def test_simulated_cluster_offers_filters_suppression_and_task_lifecycle() -> None:
    agents = [FakeAgent("ag-1", ResourceVector.parse("cpus:2;mem:2048"))]

    async def scenario() -> None:
        async with (
            FakeMaster(agents=agents) as master,
            grpc.aio.insecure_channel(master.address) as channel,
        ):
            stub: scheduler_pb2_grpc.SchedulerServiceAsyncStub = (
                scheduler_pb2_grpc.SchedulerServiceStub(channel)
            )
            stream = stub.Subscribe(subscribe_request())
            fid = (await read_until(stream, "subscribed")).subscribed.framework_id
            offer = (await read_until(stream, "offers")).offers.offers[0]
            assert offer.agent_id == "ag-1" and offer.fair_tasks == 0  # coarse: whole agent
            decline = scheduler_pb2.DeclineRequest(
                framework_id=fid, offer_ids=[offer.offer_id],
                filters=common_pb2.Filters(refuse_seconds=0.2),
            )  # fmt: skip
            loop_time = master._clock
            declined_at = loop_time()
            await stub.Decline(decline)
            again = (await read_until(stream, "offers")).offers.offers[0]
            assert loop_time() - declined_at >= 0.2  # the filter was honoured
            failing = task("t-fail")
            failing.command.fail_on_start = True
            exiting = task("t-exit")
            exiting.command.duration.FromMilliseconds(10)
            exiting.command.exit_code = 3
            await stub.Accept(accept(fid, [again.offer_id], failing, exiting))
            seen: dict[str, int] = {}
            while len(seen) < 2 or any(s not in (5, 6, 7) for s in seen.values()):
                status = (await read_until(stream, "update")).update.status
                seen[status.task_id] = status.state
                ack = scheduler_pb2.AcknowledgeRequest.Acknowledgement(
                    agent_id=status.agent_id, task_id=status.task_id, uuid=status.uuid
                )  # a task's next update waits for this one's acknowledgement, as on an agent
                await stub.Acknowledge(
                    scheduler_pb2.AcknowledgeRequest(framework_id=fid, acknowledgements=[ack])
                )
                if status.task_id == "t-exit" and status.state == common_pb2.TASK_STATE_FAILED:
                    assert status.exit_code == 3
                    assert status.reason == common_pb2.TaskStatus.REASON_COMMAND_FAILED
            assert seen == {
                "t-fail": common_pb2.TASK_STATE_FAILED,
                "t-exit": common_pb2.TASK_STATE_FAILED,
            }
            await stub.Suppress(scheduler_pb2.SuppressRequest(framework_id=fid))
            outstanding = master.outstanding_offers()
            if outstanding:
                await stub.Decline(
                    scheduler_pb2.DeclineRequest(
                        framework_id=fid, offer_ids=outstanding,
                        filters=common_pb2.Filters(refuse_seconds=0),
                    )
                )  # fmt: skip
            await asyncio.sleep(4 * master.allocation_interval)  # several allocation runs
            assert master.outstanding_offers() == []  # suppressed: nothing offered
            await stub.Revive(scheduler_pb2.ReviveRequest(framework_id=fid))
            await master.wait_for(lambda: master.outstanding_offers(), what="offers after revive")
            stream.cancel()

    run_async(scenario())


def test_threaded_fake_master_serves_a_synchronous_callback_test() -> None:
    """How a framework author tests a callback Scheduler without any asyncio in the test."""

    class LaunchAll(Scheduler):
        def __init__(self) -> None:
            self.finished: list[str] = []

        def resource_offers(self, driver: SchedulerDriver, offers: Sequence[Offer]) -> None:
            # Suppress first: once the tasks finish (10 ms) the fake offers their resources
            # again, and a suppression sent after the launch could arrive after that offer.
            driver.suppress_offers()
            for offer in offers:
                count = CPU.times_fits_in(offer.resources)
                tasks = [
                    TaskSpec(f"{offer.agent_id}-{i}", CPU, duration=0.01) for i in range(count)
                ]
                driver.launch_tasks(offer, tasks)

        def status_update(self, driver: SchedulerDriver, update: StatusUpdate) -> None:
            if update.state is TaskState.FINISHED:
                self.finished.append(update.task_id)

    agents = [FakeAgent("ag-1", ResourceVector.parse("cpus:2;mem:2048"))]
    with ThreadedFakeMaster(agents=agents, heartbeat_interval=0.5) as fake:
        scheduler = LaunchAll()
        driver = SchedulerDriver(scheduler, FrameworkInfo(name="sync"), fake.address)
        driver.start()
        try:
            fake.wait_for(lambda: len(scheduler.finished) == 2)
            assert sorted(scheduler.finished) == ["ag-1-0", "ag-1-1"]
            assert [t.task_id for t in fake.master.launched_tasks] == ["ag-1-0", "ag-1-1"]
            fake.wait_for(lambda: len(fake.master.acknowledgements) == 6)  # 3 updates per task
            assert fake.call(lambda: len(fake.master.accepts)) == 1
        finally:
            driver.stop()
            driver.join(5.0)
        assert fake.master.requests("Teardown")
