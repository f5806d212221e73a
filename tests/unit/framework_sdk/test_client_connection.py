"""SDK client against the fake master: subscription, refusal, reconnection, heartbeats, errors."""

from __future__ import annotations

import dataclasses
import random
import socket
from typing import TypeVar

import grpc
import pytest
from fairshare.v1 import scheduler_pb2
from sdk_helpers import FAST, run_async, until

from framework_sdk import (
    DEFAULT_FAILOVER_TIMEOUT,
    Backoff,
    Capability,
    Demand,
    Disconnected,
    ErrorEvent,
    Event,
    Framework,
    FrameworkInfo,
    InvalidArgumentError,
    NotConnectedError,
    NotFoundError,
    ResourceVector,
    StatusUpdate,
    Subscribed,
    TaskState,
)
from framework_sdk.testing import FakeMaster

E = TypeVar("E", bound=Event)
INFO = FrameworkInfo(name="test-fw", role="analytics", weight=2.0)


async def next_of(fw: Framework, kind: type[E]) -> E:
    """The next event of type ``kind`` (others are skipped)."""
    while True:
        event = await fw.next_event()
        assert event is not None, f"events ended while waiting for {kind.__name__}"
        if isinstance(event, kind):
            return event


def test_subscribe_sends_framework_info_and_first_event_is_subscribed() -> None:
    async def scenario() -> None:
        async with FakeMaster() as master:
            info = dataclasses.replace(INFO, capabilities=frozenset({Capability.PARTITION_AWARE}))
            demand = Demand(ResourceVector.parse("cpus:1;mem:512"), max_tasks=4)
            async with Framework.connect(master.address, info, demand=demand, options=FAST) as fw:
                first = await fw.next_event()
                assert isinstance(first, Subscribed)
                assert first.framework_id == fw.framework_id == master.framework_id
                assert first.framework_id.startswith("fw-")
                assert first.master_id == fw.master_id == master.master_id
                assert not first.resubscribed
                assert first.weight == 2.0
                assert first.heartbeat_interval == pytest.approx(master.heartbeat_interval)
                assert fw.connected
            request = master.requests("Subscribe")[0]
            assert isinstance(request, scheduler_pb2.SubscribeRequest)
            sent = request.framework_info
            assert (sent.name, sent.role, sent.weight, sent.framework_id) == (
                "test-fw",
                "analytics",
                2.0,
                "",
            )
            assert sent.failover_timeout.seconds == DEFAULT_FAILOVER_TIMEOUT == 0  # Mesos
            assert sent.hostname == socket.gethostname()  # filled in like the Mesos driver
            assert list(sent.capabilities) == [1]  # CAPABILITY_PARTITION_AWARE
            assert [(r.name, r.millis) for r in request.demand.task_resources.items] == [
                ("cpus", 1000),
                ("mem", 512000),
            ]
            assert request.demand.max_tasks == 4
            assert not request.suppressed

    run_async(scenario())


def test_refused_subscription_raises_the_typed_error() -> None:
    async def scenario() -> None:
        async with FakeMaster() as master:
            master.fail_next("Subscribe", grpc.StatusCode.INVALID_ARGUMENT, "role is malformed")
            with pytest.raises(InvalidArgumentError) as caught:
                async with Framework.connect(master.address, INFO, options=FAST):
                    pass
            assert caught.value.code is grpc.StatusCode.INVALID_ARGUMENT
            assert caught.value.message == "role is malformed"
            assert caught.value.method == "Subscribe"
            assert len(master.requests("Subscribe")) == 1  # fatal: no retry

    run_async(scenario())


def test_unreachable_master_gives_not_connected_after_the_connect_timeout() -> None:
    async def scenario() -> None:
        async with FakeMaster() as master:
            address = master.address
        with pytest.raises(NotConnectedError, match=address):
            async with Framework.connect(address, INFO, connect_timeout=0.3, options=FAST):
                pass

    run_async(scenario())


def test_transient_subscribe_failures_are_retried_with_backoff() -> None:
    async def scenario() -> None:
        async with FakeMaster() as master:
            for _ in range(3):
                master.fail_next("Subscribe", grpc.StatusCode.UNAVAILABLE, "starting up")
            async with Framework.connect(master.address, INFO, options=FAST) as fw:
                assert fw.connected
                assert isinstance(await fw.next_event(), Subscribed)
            assert len(master.requests("Subscribe")) == 4

    run_async(scenario())


def test_reconnects_after_the_stream_drops_resubscribes_and_reconciles() -> None:
    async def scenario() -> None:
        master = FakeMaster()
        async with master, Framework.connect(master.address, INFO, options=FAST) as fw:
            await next_of(fw, Subscribed)
            fid = fw.framework_id
            master.drop_stream()
            lost = await next_of(fw, Disconnected)
            assert isinstance(lost, Disconnected) and lost.reason
            again = await next_of(fw, Subscribed)
            assert isinstance(again, Subscribed)
            assert again.resubscribed and again.framework_id == fid
            await master.wait_for(lambda: master.requests("Reconcile"), what="reconcile")
            second = master.requests("Subscribe")[1]
            assert isinstance(second, scheduler_pb2.SubscribeRequest)
            assert second.framework_info.framework_id == fid
            reconcile = master.requests("Reconcile")[0]
            assert isinstance(reconcile, scheduler_pb2.ReconcileRequest)
            assert reconcile.framework_id == fid and not reconcile.tasks  # implicit

    run_async(scenario())


def test_clean_end_of_stream_also_reconnects() -> None:
    async def scenario() -> None:
        master = FakeMaster()
        async with master, Framework.connect(master.address, INFO, options=FAST) as fw:
            await next_of(fw, Subscribed)
            master.drop_stream(code=None)
            await next_of(fw, Disconnected)
            assert (await next_of(fw, Subscribed)).resubscribed

    run_async(scenario())


def test_calls_while_disconnected_raise_not_connected() -> None:
    async def scenario() -> None:
        master = FakeMaster()
        async with master, Framework.connect(master.address, INFO, options=FAST) as fw:
            await next_of(fw, Subscribed)
            for _ in range(1000):  # keep the framework disconnected for the test
                master.fail_next("Subscribe", grpc.StatusCode.UNAVAILABLE, "down")
            master.drop_stream()
            await next_of(fw, Disconnected)
            assert not fw.connected
            with pytest.raises(NotConnectedError, match="Revive: not subscribed"):
                await fw.revive()
            with pytest.raises(NotConnectedError):
                await fw.launch("of-1", [])
            with pytest.raises(NotConnectedError):
                await fw.kill("t1")
            calls = [name for name, _ in master.calls if name != "Subscribe"]
            assert calls == []  # nothing was sent

    run_async(scenario())


def test_missed_heartbeats_count_as_a_lost_connection() -> None:
    async def scenario() -> None:
        async with FakeMaster(heartbeat_interval=0.05) as master:
            options = dataclasses.replace(FAST, missed_heartbeats=3)
            async with Framework.connect(master.address, INFO, options=options) as fw:
                await next_of(fw, Subscribed)
                master.heartbeats_paused = True
                lost = await next_of(fw, Disconnected)
                assert isinstance(lost, Disconnected)
                assert "heartbeats missed" in lost.reason
                master.heartbeats_paused = False
                assert (await next_of(fw, Subscribed)).resubscribed

    run_async(scenario())


def test_error_event_is_final() -> None:
    async def scenario() -> None:
        master = FakeMaster()
        async with master, Framework.connect(master.address, INFO, options=FAST) as fw:
            await next_of(fw, Subscribed)
            master.send_error("failover timeout expired", grpc.StatusCode.NOT_FOUND)
            events = [event async for event in fw.events()]
            assert events == [
                ErrorEvent(message="failover timeout expired", code=grpc.StatusCode.NOT_FOUND)
            ]
            with pytest.raises(NotConnectedError):
                await fw.revive()
            assert len(master.requests("Subscribe")) == 1

    run_async(scenario())


def test_resubscribing_with_an_unknown_framework_id_is_fatal() -> None:
    async def scenario() -> None:
        async with FakeMaster() as master:
            info = dataclasses.replace(INFO, framework_id="fw-gone")
            with pytest.raises(NotFoundError, match="fw-gone"):
                async with Framework.connect(master.address, info, options=FAST):
                    pass

    run_async(scenario())


def test_a_newer_subscription_replaces_the_old_stream() -> None:
    async def scenario() -> None:
        master = FakeMaster()
        async with master, Framework.connect(master.address, INFO, options=FAST) as first:
            await next_of(first, Subscribed)
            failover = dataclasses.replace(INFO, framework_id=first.framework_id)
            async with Framework.connect(master.address, failover, options=FAST) as second:
                event = await next_of(second, Subscribed)
                assert isinstance(event, Subscribed) and event.resubscribed
                error = await next_of(first, ErrorEvent)
                assert isinstance(error, ErrorEvent) and "replaced" in error.message
                assert await first.next_event() is None

    run_async(scenario())


def test_suppression_and_demand_survive_reconnection() -> None:
    async def scenario() -> None:
        master = FakeMaster()
        async with master, Framework.connect(master.address, INFO, options=FAST) as fw:
            await next_of(fw, Subscribed)
            await fw.suppress()
            await fw.update_demand(ResourceVector.parse("cpus:2"), 3)
            master.drop_stream()
            await next_of(fw, Disconnected)
            await next_of(fw, Subscribed)
            again = master.requests("Subscribe")[1]
            assert isinstance(again, scheduler_pb2.SubscribeRequest)
            assert again.suppressed
            assert again.demand.max_tasks == 3
            assert [(r.name, r.millis) for r in again.demand.task_resources.items] == [
                ("cpus", 2000)
            ]

    run_async(scenario())


def test_unacknowledged_updates_are_resent_but_delivered_once() -> None:
    async def scenario() -> None:
        async with (
            FakeMaster() as master,
            Framework.connect(
                master.address, INFO, implicit_acknowledgements=False, options=FAST
            ) as fw,
        ):
            await next_of(fw, Subscribed)
            uuid = master.send_update("t1", TaskState.RUNNING, agent_id="ag-1")
            first = await next_of(fw, StatusUpdate)
            assert first.uuid == uuid
            master.drop_stream()
            await next_of(fw, Subscribed)  # the fake master re-sends t1's update right after
            master.send_update("t2", TaskState.RUNNING, agent_id="ag-1")
            following = await next_of(fw, StatusUpdate)
            assert following.task_id == "t2"  # the copy of t1's update was dropped
            await fw.acknowledge(first)  # acknowledging the first copy still works
            await until(
                lambda: (
                    [s.task_id for s in master.state.frameworks[fw.framework_id].unacked.values()]
                    == ["t2"]
                )
            )

    run_async(scenario())


def test_updates_handled_before_a_restart_are_acknowledged_not_delivered() -> None:
    """A framework restarted from its own record passes what it handled: the master's copy of
    an update whose acknowledgement was lost in the crash is acknowledged, not delivered."""

    async def scenario() -> None:
        async with FakeMaster() as master:
            info = dataclasses.replace(INFO, failover_timeout=60.0)
            first = Framework(master.address, info, implicit_acknowledgements=False, options=FAST)
            await first.start()
            await next_of(first, Subscribed)
            uuid = master.send_update("t1", TaskState.RUNNING, agent_id="ag-1")
            assert (await next_of(first, StatusUpdate)).uuid == uuid  # handled, never acked
            await first.close()  # the crash: the master keeps the framework and t1's update

            again = dataclasses.replace(info, framework_id=first.framework_id)
            handled = [("t1", uuid)]
            async with Framework.connect(
                master.address, again, options=FAST, handled=handled
            ) as fw:
                assert (await next_of(fw, Subscribed)).resubscribed
                master.send_update("t2", TaskState.RUNNING, agent_id="ag-1")
                assert (await next_of(fw, StatusUpdate)).task_id == "t2"  # t1's copy dropped
                unacked = master.state.frameworks[fw.framework_id].unacked
                await until(  # t2 is acknowledged once the next event is asked for
                    lambda: [s.task_id for s in unacked.values()] == ["t2"],
                    what="t1's copy acknowledged",
                )

    run_async(scenario())


def test_backoff_is_jittered_exponential_and_capped() -> None:
    backoff = Backoff(initial=0.5, maximum=4.0, multiplier=2.0)
    rng = random.Random(1)
    for attempt, ceiling in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (11, 4.0), (500, 4.0)]:
        delays = [backoff.delay(attempt, rng) for _ in range(200)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 100  # jittered, not a constant
