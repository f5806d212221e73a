"""Status updates reach the application once: ``DeliveryLedger`` alone, then the client and the
driver against the fake master re-sending copies (on the same stream, as the master does on an
agent's retry, and on resubscription)."""

from __future__ import annotations

import dataclasses
from typing import Any

import grpc
import pytest
from fairshare.v1 import common_pb2, scheduler_pb2
from sdk_helpers import FAST, run_async, until
from test_scheduler_driver import Recorder, make_driver, stopped

from framework_sdk import (
    ClientOptions,
    ErrorEvent,
    FrameworkInfo,
    NotFoundError,
    SchedulerClient,
    SchedulerDriver,
    StatusUpdate,
    Subscribed,
    TaskState,
)
from framework_sdk.delivery import Delivery, DeliveryLedger
from framework_sdk.testing import FakeMaster

INFO = FrameworkInfo(name="once", failover_timeout=60.0)
U1, U2, U3 = b"\x01" * 16, b"\x02" * 16, b"\x03" * 16
RUNNING, FINISHED = TaskState.RUNNING, TaskState.FINISHED
EXPLICIT = dataclasses.replace(FAST, implicit_acknowledgements=False)

# -- the ledger ------------------------------------------------------------------------------------


def test_ledger_delivers_once_then_tells_duplicates_from_acknowledged_copies() -> None:
    ledger = DeliveryLedger()
    assert ledger.admit("t1", U1) is Delivery.DELIVER
    assert ledger.admit("t1", U1) is Delivery.DUPLICATE
    assert ledger.admit("t2", U1) is Delivery.DELIVER  # keyed by (task id, uuid)
    ledger.acknowledged("t1", U1)
    assert ledger.admit("t1", U1) is Delivery.REACKNOWLEDGE
    assert ledger.admit("t1", U1) is Delivery.REACKNOWLEDGE
    ledger.release("t1", U1)  # acknowledged: release is a no-op
    assert ledger.admit("t1", U1) is Delivery.REACKNOWLEDGE


def test_ledger_always_delivers_updates_without_uuid_and_remembers_nothing_of_them() -> None:
    ledger = DeliveryLedger()
    assert [ledger.admit("t1", b"") for _ in range(3)] == [Delivery.DELIVER] * 3
    ledger.acknowledged("t1", b"")
    assert len(ledger) == 0


def test_ledger_release_makes_the_next_copy_deliverable() -> None:
    ledger = DeliveryLedger()
    assert ledger.admit("t1", U1) is Delivery.DELIVER
    ledger.release("t1", U1)
    assert ledger.admit("t1", U1) is Delivery.DELIVER
    assert ledger.admit("t1", U1) is Delivery.DUPLICATE


def test_ledger_memory_is_bounded_least_recently_seen_first() -> None:
    ledger = DeliveryLedger(capacity=3)
    for uuid in (U1, U2, U3):
        ledger.admit("t", uuid)
    assert ledger.admit("t", U1) is Delivery.DUPLICATE  # U1 is now the most recent
    ledger.acknowledged("t4", U1)  # a fourth pair evicts the least recently seen: U2
    assert len(ledger) == ledger.capacity == 3
    assert ledger.admit("t", U3) is Delivery.DUPLICATE
    assert ledger.admit("t", U1) is Delivery.DUPLICATE
    assert ledger.admit("t4", U1) is Delivery.REACKNOWLEDGE
    assert ledger.admit("t", U2) is Delivery.DELIVER  # forgotten: delivered again
    for i in range(1000):
        ledger.admit(f"x{i}", U1)
    assert len(ledger) == 3


def test_ledger_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="capacity"):
        DeliveryLedger(capacity=0)


# -- the client against the fake master ------------------------------------------------------------


def resend(master: FakeMaster, uuid: bytes, framework_id: str | None = None) -> None:
    """Send again an unacknowledged update on the open stream (the master forwarding an agent's
    retry of it)."""
    fid = framework_id or master.framework_id
    send_copy(master, master.state.frameworks[fid].unacked[uuid], fid)


def send_copy(
    master: FakeMaster, status: common_pb2.TaskStatus, framework_id: str | None = None
) -> None:
    """Send ``status`` on the framework's open stream, as it is."""
    event = scheduler_pb2.SubscribeResponse(update=scheduler_pb2.UpdateEvent(status=status))
    master._send(framework_id or master.framework_id, event)


def unacked(master: FakeMaster, framework_id: str | None = None) -> list[str]:
    return [
        s.task_id
        for s in master.state.frameworks[framework_id or master.framework_id].unacked.values()
    ]


def acked_uuids(master: FakeMaster) -> list[bytes]:
    return [r.uuid for r in master.acknowledgements]


async def updates_until(client: SchedulerClient, task_id: str, state: TaskState) -> list[Any]:
    """(task, state) of every update the application gets until ``task_id`` reaches ``state``;
    each is completed (acknowledged when acknowledgements are implicit)."""
    seen: list[Any] = []
    while True:
        event = await client.next_event()
        assert event is not None, f"events ended before {task_id} {state}"
        if isinstance(event, StatusUpdate):
            seen.append((event.task_id, event.state))
            if (event.task_id, event.state) == (task_id, state):
                client.complete(event)
                return seen
        client.complete(event)


async def started(
    master: FakeMaster, options: ClientOptions = FAST, **info: Any
) -> SchedulerClient:
    client = SchedulerClient(master.address, dataclasses.replace(INFO, **info), options=options)
    await client.start()
    await client.wait_subscribed(5.0)
    first = await client.next_event()
    assert isinstance(first, Subscribed)
    return client


def test_copies_on_the_same_stream_are_dropped_and_order_per_task_is_kept() -> None:
    async def scenario() -> None:
        async with FakeMaster() as master:
            client = await started(master, EXPLICIT)
            u_a = master.send_update("a", TaskState.STARTING, agent_id="ag-1")
            master.send_update("b", TaskState.RUNNING, agent_id="ag-1")
            resend(master, u_a)  # the agent retried a's update: the master forwards it again
            resend(master, u_a)
            master.send_update("b", TaskState.FINISHED, agent_id="ag-1")
            seen: list[tuple[str, TaskState]] = []
            while len(seen) < 3:
                event = await client.next_event()
                if isinstance(event, StatusUpdate):
                    seen.append((event.task_id, event.state))
                    if event.task_id == "b":
                        await client.acknowledge(event)
            assert seen == [
                ("a", TaskState.STARTING),
                ("b", TaskState.RUNNING),
                ("b", TaskState.FINISHED),
            ]
            # >=: a reconnection (seen once on a loaded box) re-sends more copies
            assert client.duplicates_dropped >= 2
            assert len(master.acknowledgements) == 2  # b's two; a's copies were not acknowledged
            assert unacked(master) == ["a"]
            await client.close()

    run_async(scenario())


def test_a_copy_of_an_acknowledged_update_is_acknowledged_again_not_delivered() -> None:
    async def scenario() -> None:
        async with FakeMaster() as master:
            client = await started(master)
            master.fail_next("Acknowledge", grpc.StatusCode.UNAVAILABLE)  # the ack gets lost
            uuid = master.send_update("t1", TaskState.RUNNING, agent_id="ag-1")
            assert await updates_until(client, "t1", TaskState.RUNNING) == [("t1", RUNNING)]
            await until(lambda: len(master.acknowledgements) == 1, what="the lost ack")
            assert unacked(master) == ["t1"]
            master.drop_stream()  # on resubscription the fake master re-sends t1's update
            await until(lambda: len(master.requests("Subscribe")) == 2 and master.connected())
            master.send_update("t1", TaskState.FINISHED, agent_id="ag-1")
            assert await updates_until(client, "t1", TaskState.FINISHED) == [("t1", FINISHED)]
            await until(lambda: not unacked(master), what="the re-acknowledgement")
            assert acked_uuids(master).count(uuid) >= 2
            assert client.duplicates_dropped >= 1
            await client.close()

    run_async(scenario())


def test_an_explicit_acknowledgement_covers_the_copies_that_follow_it() -> None:
    async def scenario() -> None:
        async with FakeMaster() as master:
            client = await started(master, EXPLICIT)
            uuid = master.send_update("t1", TaskState.RUNNING, agent_id="ag-1")
            update = await client.next_event()
            assert isinstance(update, StatusUpdate) and update.uuid == uuid
            resend(master, uuid)  # not acknowledged yet: dropped, and no ack is made up
            master.send_update("t2", TaskState.RUNNING, agent_id="ag-1")
            following = await client.next_event()
            assert isinstance(following, StatusUpdate) and following.task_id == "t2"
            assert master.acknowledgements == []
            status = master.state.frameworks[master.framework_id].unacked[uuid]
            await client.acknowledge(update)
            assert acked_uuids(master) == [uuid]
            send_copy(master, status)  # a copy crossed the acknowledgement: acked again
            await until(lambda: acked_uuids(master) == [uuid, uuid], what="the re-ack")
            assert client.duplicates_dropped >= 2
            await client.close()

    run_async(scenario())


def test_a_new_client_with_the_framework_id_takes_over_and_gets_pending_updates_once() -> None:
    async def scenario() -> None:
        async with FakeMaster() as master:
            first = await started(master, EXPLICIT)
            framework_id = first.framework_id
            uuid = master.send_update("t1", TaskState.RUNNING, agent_id="ag-1")
            assert isinstance(await first.next_event(), StatusUpdate)
            await first.close()  # the process "dies" before acknowledging: no teardown
            await until(lambda: not master.connected(framework_id))

            second = SchedulerClient(
                master.address, dataclasses.replace(INFO, framework_id=framework_id), options=FAST
            )
            await second.start()
            await second.wait_subscribed(5.0)
            subscribed = await second.next_event()
            assert isinstance(subscribed, Subscribed) and subscribed.resubscribed
            assert subscribed.framework_id == second.framework_id == framework_id
            pending = await second.next_event()  # re-sent by the master: new to this client
            assert isinstance(pending, StatusUpdate) and pending.uuid == uuid
            second.complete(pending)
            await until(lambda: not unacked(master, framework_id), what="the takeover's ack")
            await until(lambda: master.requests("Reconcile"), what="implicit reconciliation")
            request = master.requests("Subscribe")[1]
            assert isinstance(request, scheduler_pb2.SubscribeRequest)
            assert request.framework_info.framework_id == framework_id
            assert request.framework_info.failover_timeout.seconds == 60
            await second.teardown()

            third = SchedulerClient(
                master.address, dataclasses.replace(INFO, framework_id=framework_id), options=FAST
            )
            await third.start()
            with pytest.raises(NotFoundError):
                await third.wait_subscribed(5.0)
            error = await third.next_event()
            assert isinstance(error, ErrorEvent) and error.code is grpc.StatusCode.NOT_FOUND
            assert await third.next_event() is None
            await third.close()

    run_async(scenario())


# -- the driver ------------------------------------------------------------------------------------


def test_driver_delivers_again_only_an_update_whose_callback_raised() -> None:
    async def scenario() -> None:
        async with FakeMaster() as master:
            sched = Recorder()
            failures = [1]

            def flaky(driver: SchedulerDriver, update: StatusUpdate) -> None:
                if update.task_id == "bad" and failures:
                    failures.pop()
                    raise RuntimeError("transient bug in the framework")

            sched.on_update = flaky
            driver = make_driver(sched, master)
            driver.start()
            await until(lambda: sched.names() == ["registered"])
            bad = master.send_update("bad", TaskState.RUNNING, agent_id="ag-1")
            good = master.send_update("good", TaskState.RUNNING, agent_id="ag-1")
            good_status = master.state.frameworks[master.framework_id].unacked[good]
            await until(lambda: acked_uuids(master) == [good], what="good's ack")
            send_copy(master, good_status)  # acknowledged: acked again, not delivered
            resend(master, bad)  # its callback raised: delivered again, then acknowledged
            await until(lambda: sorted(acked_uuids(master)) == sorted([good, good, bad]))
            updates = [c[1] for c in sched.calls if c[0] == "status_update"]
            assert [u.task_id for u in updates] == ["bad", "good", "bad"]
            assert not unacked(master)
            await stopped(driver)

    run_async(scenario())
