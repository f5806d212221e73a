"""SDK unary calls against the fake master: what goes on the wire, acks, typed errors."""

from __future__ import annotations

import asyncio
import dataclasses

import grpc
import pytest
from fairshare.v1 import scheduler_pb2
from sdk_helpers import FAST, run_async, until

from framework_sdk import (
    AlreadyExistsError,
    CallError,
    Capability,
    DeadlineExceededError,
    FailedPreconditionError,
    Framework,
    FrameworkInfo,
    InvalidArgumentError,
    NotFoundError,
    OfferRescinded,
    OffersReceived,
    PermissionDeniedError,
    ResourceVector,
    StatusUpdate,
    Subscribed,
    TaskReason,
    TaskRef,
    TaskSpec,
    TaskState,
    UnauthenticatedError,
    UnavailableError,
    UpdateSource,
    acknowledgements,
)
from framework_sdk.testing import FakeMaster, OfferSpec

INFO = FrameworkInfo(name="calls")
SHAPE = ResourceVector.parse("cpus:1;mem:1024")


async def offer_of(fw: Framework, master: FakeMaster, spec: OfferSpec) -> OffersReceived:
    """Send one offer and return its OFFERS event."""
    master.send_offers(spec)
    while True:
        event = await fw.next_event()
        if isinstance(event, OffersReceived):
            return event


async def update_of(fw: Framework) -> StatusUpdate:
    while True:
        event = await fw.next_event()
        if isinstance(event, StatusUpdate):
            return event


def test_offers_arrive_typed_and_launch_sends_the_accept() -> None:
    async def scenario() -> None:
        async with (
            FakeMaster() as master,
            Framework.connect(master.address, INFO, options=FAST) as fw,
        ):
            spec = OfferSpec(
                "ag-1", "cpus:4;mem:8192", hostname="h1", attributes={"rack": "r1"}, fair_tasks=2
            )
            event = await offer_of(fw, master, spec)
            (offer,) = event.offers
            assert offer.agent_id == "ag-1" and offer.hostname == "h1"
            assert offer.resources == ResourceVector.parse("cpus:4;mem:8192")
            assert offer.attributes == {"rack": "r1"} and offer.fair_tasks == 2
            assert offer.framework_id == fw.framework_id
            tasks = [
                TaskSpec("t1", SHAPE, duration=2.5, labels={"k": "v"}),
                TaskSpec("t2", SHAPE, exit_code=3, startup_delay=0.25, fail_on_start=True),
            ]
            await fw.launch(offer, tasks, refuse_seconds=12.0)
            (accept,) = master.requests("Accept")
            assert isinstance(accept, scheduler_pb2.AcceptRequest)
            assert accept.framework_id == fw.framework_id
            assert list(accept.offer_ids) == [offer.offer_id]
            assert accept.filters.refuse_seconds == 12.0
            infos = accept.operations[0].launch.task_infos
            assert [t.task_id for t in infos] == ["t1", "t2"]
            assert {t.agent_id for t in infos} == {"ag-1"}  # filled from the offer
            assert [(r.name, r.millis) for r in infos[0].resources.items] == [
                ("cpus", 1000),
                ("mem", 1024000),
            ]
            assert infos[0].command.duration.seconds == 2 and infos[0].command.duration.nanos == 5e8
            assert dict(infos[0].labels) == {"k": "v"}
            assert not infos[1].command.HasField("duration")
            assert infos[1].command.exit_code == 3 and infos[1].command.fail_on_start
            assert infos[1].command.startup_delay.nanos == 2.5e8
            assert [t.task_id for t in master.launched_tasks] == ["t1", "t2"]
            assert master.outstanding_offers() == []

    run_async(scenario())


def test_launch_without_refuse_seconds_leaves_filters_to_the_master() -> None:
    async def scenario() -> None:
        async with (
            FakeMaster() as master,
            Framework.connect(master.address, INFO, options=FAST) as fw,
        ):
            (offer,) = (await offer_of(fw, master, OfferSpec("ag-1", "cpus:2"))).offers
            await fw.launch(offer.offer_id, [TaskSpec("t1", ResourceVector.parse("cpus:1"))])
            (accept,) = master.requests("Accept")
            assert isinstance(accept, scheduler_pb2.AcceptRequest)
            assert not accept.filters.HasField("refuse_seconds")
            assert accept.operations[0].launch.task_infos[0].agent_id == ""  # master fills it

    run_async(scenario())


def test_launch_exceeding_the_offer_is_invalid_argument_and_changes_nothing() -> None:
    async def scenario() -> None:
        async with (
            FakeMaster() as master,
            Framework.connect(master.address, INFO, options=FAST) as fw,
        ):
            (offer,) = (await offer_of(fw, master, OfferSpec("ag-1", "cpus:1;mem:1024"))).offers
            too_big = [TaskSpec("t1", SHAPE), TaskSpec("t2", SHAPE)]
            with pytest.raises(InvalidArgumentError, match="more than the offers hold") as caught:
                await fw.launch(offer, too_big)
            assert caught.value.code is grpc.StatusCode.INVALID_ARGUMENT
            assert master.outstanding_offers() == [offer.offer_id]
            await fw.launch(offer, too_big[:1])  # the offer is still good
            assert master.outstanding_offers() == []

    run_async(scenario())


@pytest.mark.parametrize("partition_aware", [True, False])
def test_launch_on_a_rescinded_offer_reports_the_tasks_dropped(partition_aware: bool) -> None:
    caps = frozenset({Capability.PARTITION_AWARE}) if partition_aware else frozenset()
    info = dataclasses.replace(INFO, capabilities=caps)

    async def scenario() -> None:
        async with (
            FakeMaster() as master,
            Framework.connect(master.address, info, options=FAST) as fw,
        ):
            (offer,) = (await offer_of(fw, master, OfferSpec("ag-1", "cpus:4;mem:8192"))).offers
            master.rescind(offer.offer_id, reason="agent lost")
            rescinded = await fw.next_event()
            assert rescinded == OfferRescinded(offer_id=offer.offer_id, reason="agent lost")
            await fw.launch(offer, [TaskSpec("t1", SHAPE), TaskSpec("t2", SHAPE)])
            dropped = [await update_of(fw), await update_of(fw)]
            assert [u.task_id for u in dropped] == ["t1", "t2"]
            expected = TaskState.DROPPED if partition_aware else TaskState.LOST
            for update in dropped:
                assert update.state is expected and update.state.is_terminal
                assert update.reason is TaskReason.INVALID_OFFERS
                assert update.agent_id == "ag-1" and update.source is UpdateSource.SDK
                assert not update.needs_acknowledgement
            assert master.requests("Acknowledge") == []

    run_async(scenario())


def test_decline_sends_offer_ids_and_filters() -> None:
    async def scenario() -> None:
        async with (
            FakeMaster() as master,
            Framework.connect(master.address, INFO, options=FAST) as fw,
        ):
            offers = (await offer_of(fw, master, OfferSpec("ag-1", "cpus:1"))).offers
            await fw.decline(offers, refuse_seconds=30.0)
            await fw.decline("of-unknown")  # ids no longer outstanding are ignored
            first, second = master.requests("Decline")
            assert isinstance(first, scheduler_pb2.DeclineRequest)
            assert isinstance(second, scheduler_pb2.DeclineRequest)
            assert list(first.offer_ids) == [offers[0].offer_id]
            assert first.filters.refuse_seconds == 30.0
            assert not second.filters.HasField("refuse_seconds")
            assert master.state.frameworks[fw.framework_id].filters  # agent filtered
            await fw.revive()
            assert not master.state.frameworks[fw.framework_id].filters
            with pytest.raises(InvalidArgumentError, match="refuse_seconds"):
                await fw.decline("of-x", refuse_seconds=-1.0)

    run_async(scenario())


def test_implicit_acknowledgement_after_the_event_is_handled() -> None:
    async def scenario() -> None:
        async with (
            FakeMaster() as master,
            Framework.connect(master.address, INFO, options=FAST) as fw,
        ):
            assert isinstance(await fw.next_event(), Subscribed)
            uuid = master.send_update("t1", TaskState.RUNNING, agent_id="ag-1")
            master.send_update("t1", TaskState.RUNNING, agent_id="ag-1", with_uuid=False)
            update = await fw.next_event()
            assert isinstance(update, StatusUpdate) and update.uuid == uuid
            assert update.source is UpdateSource.AGENT and update.needs_acknowledgement
            assert master.requests("Acknowledge") == []  # not before it was handled
            master_update = await fw.next_event()  # asking for the next one completes it
            assert isinstance(master_update, StatusUpdate) and not master_update.uuid
            await master.wait_for(lambda: master.requests("Acknowledge"), what="the ack")
            (call,) = master.requests("Acknowledge")
            assert isinstance(call, scheduler_pb2.AcknowledgeRequest)
            (ack,) = call.acknowledgements
            assert (call.framework_id, ack.agent_id, ack.task_id, ack.uuid) == (
                fw.framework_id,
                "ag-1",
                "t1",
                uuid,
            )
        # leaving the block cleanly completes the last event; it had no uuid: no ack
        assert len(master.acknowledgements) == 1

    run_async(scenario())


def test_the_last_update_is_acknowledged_on_a_clean_exit_only() -> None:
    async def scenario() -> None:
        async with FakeMaster() as master:
            async with Framework.connect(master.address, INFO, options=FAST) as fw:
                await fw.next_event()
                master.send_update("t1", TaskState.RUNNING, agent_id="ag-1")
                await update_of(fw)
            await master.wait_for(lambda: len(master.acknowledgements) == 1)
            with pytest.raises(RuntimeError):
                async with Framework.connect(master.address, INFO, options=FAST) as fw:
                    await fw.next_event()
                    master.send_update("t2", TaskState.RUNNING, agent_id="ag-1")
                    await update_of(fw)
                    raise RuntimeError("the handler failed")
            assert len(master.acknowledgements) == 1  # t2 stays unacknowledged

    run_async(scenario())


def test_explicit_acknowledgements_are_sent_only_when_asked() -> None:
    async def scenario() -> None:
        async with (
            FakeMaster() as master,
            Framework.connect(
                master.address, INFO, implicit_acknowledgements=False, options=FAST
            ) as fw,
        ):
            await fw.next_event()
            master.send_update("t1", TaskState.FINISHED, agent_id="ag-1", exit_code=0)
            master.send_update("t2", TaskState.FAILED, agent_id="ag-1", exit_code=1)
            first = await update_of(fw)
            second = await update_of(fw)
            assert first.exit_code == 0 and second.exit_code == 1
            master.send_update("t3", TaskState.RUNNING, agent_id="ag-1")
            await update_of(fw)
            assert master.requests("Acknowledge") == []
            await fw.acknowledge(second)
            (ack,) = master.acknowledgements
            assert ack.task_id == "t2"
            unacked = master.state.frameworks[fw.framework_id].unacked
            assert {s.task_id for s in unacked.values()} == {"t1", "t3"}

    run_async(scenario())


def test_reconcile_kill_suppress_revive_and_demand_on_the_wire() -> None:
    async def scenario() -> None:
        async with (
            FakeMaster() as master,
            Framework.connect(master.address, INFO, options=FAST) as fw,
        ):
            await fw.next_event()
            await fw.reconcile([TaskRef("t1", "ag-1"), "t2"])
            answers = [await update_of(fw), await update_of(fw)]
            assert [(u.task_id, u.state) for u in answers] == [
                ("t1", TaskState.LOST),  # UNKNOWN, told as LOST to a framework not partition-aware
                ("t2", TaskState.LOST),
            ]
            assert all(u.reason is TaskReason.RECONCILIATION for u in answers)
            await fw.suppress()
            await fw.revive()
            await fw.update_demand(ResourceVector.parse("cpus:0.5;mem:64"), 7)
            await fw.update_demand(None)
            with pytest.raises(NotFoundError, match="t9"):
                await fw.kill("t9")
            reconcile = master.requests("Reconcile")[0]
            assert isinstance(reconcile, scheduler_pb2.ReconcileRequest)
            assert [(t.task_id, t.agent_id) for t in reconcile.tasks] == [
                ("t1", "ag-1"),
                ("t2", ""),
            ]
            set_demand, cleared = master.requests("UpdateDemand")
            assert isinstance(set_demand, scheduler_pb2.UpdateDemandRequest)
            assert isinstance(cleared, scheduler_pb2.UpdateDemandRequest)
            assert set_demand.demand.max_tasks == 7
            assert not cleared.HasField("demand")
            names = [name for name, _ in master.calls]
            assert names == [
                "Subscribe", "Reconcile", "Suppress", "Revive", "UpdateDemand", "UpdateDemand",
                "Kill",
            ]  # fmt: skip

    run_async(scenario())


CODES = [
    (grpc.StatusCode.INVALID_ARGUMENT, InvalidArgumentError),
    (grpc.StatusCode.NOT_FOUND, NotFoundError),
    (grpc.StatusCode.FAILED_PRECONDITION, FailedPreconditionError),
    (grpc.StatusCode.PERMISSION_DENIED, PermissionDeniedError),
    (grpc.StatusCode.UNAUTHENTICATED, UnauthenticatedError),
    (grpc.StatusCode.ALREADY_EXISTS, AlreadyExistsError),
    (grpc.StatusCode.UNAVAILABLE, UnavailableError),
    (grpc.StatusCode.DEADLINE_EXCEEDED, DeadlineExceededError),
    (grpc.StatusCode.INTERNAL, CallError),
]


@pytest.mark.parametrize(("code", "error_type"), CODES, ids=[c.name for c, _ in CODES])
def test_grpc_codes_map_to_typed_errors(code: grpc.StatusCode, error_type: type[CallError]) -> None:
    async def scenario() -> None:
        async with (
            FakeMaster() as master,
            Framework.connect(master.address, INFO, options=FAST) as fw,
        ):
            master.fail_next("Suppress", code, f"refused with {code.name}")
            with pytest.raises(error_type) as caught:
                await fw.suppress()
            assert type(caught.value) is error_type
            assert caught.value.code is code and caught.value.method == "Suppress"
            assert caught.value.message == f"refused with {code.name}"
            assert code.name in str(caught.value)
            await fw.suppress()  # the next call goes through
            assert fw.connected

    run_async(scenario())


def test_teardown_ends_the_events_and_the_framework() -> None:
    async def scenario() -> None:
        async with (
            FakeMaster() as master,
            Framework.connect(master.address, INFO, options=FAST) as fw,
        ):
            await fw.next_event()
            fid = fw.framework_id
            await fw.teardown()
            assert [event async for event in fw.events()] == []
            assert not fw.connected
            assert master.state.frameworks[fid].removed
            await until(lambda: not master.connected(fid))
            assert len(master.requests("Subscribe")) == 1  # no reconnection after teardown

    run_async(scenario())


def test_acknowledgements_made_while_calls_are_in_flight_share_one_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(acknowledgements, "MAX_CALLS", 1)  # one call in flight at most

    async def scenario() -> None:
        async with (
            FakeMaster() as master,
            Framework.connect(
                master.address, INFO, implicit_acknowledgements=False, options=FAST
            ) as fw,
        ):
            await fw.next_event()
            for task_id in ("t1", "t2", "t3"):
                master.send_update(task_id, TaskState.RUNNING, agent_id="ag-1")
            updates = [await update_of(fw) for _ in range(3)]
            await asyncio.gather(*(fw.acknowledge(update) for update in updates))
            first, second = master.requests("Acknowledge")  # t1 at once, then t2 and t3
            assert isinstance(first, scheduler_pb2.AcknowledgeRequest)
            assert isinstance(second, scheduler_pb2.AcknowledgeRequest)
            assert first.framework_id == second.framework_id == fw.framework_id
            sent = [*first.acknowledgements, *second.acknowledgements]
            assert [len(first.acknowledgements), len(second.acknowledgements)] == [1, 2]
            assert [(a.task_id, a.uuid) for a in sent] == [(u.task_id, u.uuid) for u in updates]
            assert not master.state.frameworks[fw.framework_id].unacked

    run_async(scenario())


def test_a_refused_batch_is_retried_one_acknowledgement_per_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(acknowledgements, "MAX_CALLS", 1)  # one call in flight at most

    async def scenario() -> None:
        async with (
            FakeMaster() as master,
            Framework.connect(
                master.address, INFO, implicit_acknowledgements=False, options=FAST
            ) as fw,
        ):
            await fw.next_event()
            for task_id in ("t1", "t2", "t3"):
                master.send_update(task_id, TaskState.RUNNING, agent_id="ag-1")
            updates = [await update_of(fw) for _ in range(3)]
            for _ in range(3):  # t1's call, then the batch of t2 and t3, then t2's own call
                master.fail_next("Acknowledge", grpc.StatusCode.NOT_FOUND)
            outcomes = await asyncio.gather(
                *(fw.acknowledge(update) for update in updates), return_exceptions=True
            )
            assert isinstance(outcomes[0], NotFoundError)
            assert isinstance(outcomes[1], NotFoundError) and outcomes[2] is None
            calls = master.requests("Acknowledge")
            sizes = [len(c.acknowledgements) for c in calls]  # type: ignore[attr-defined]
            assert sizes == [1, 2, 1, 1]
            unacked = master.state.frameworks[fw.framework_id].unacked
            assert sorted(s.task_id for s in unacked.values()) == ["t1", "t2"]

    run_async(scenario())


def test_a_quiet_client_acknowledges_each_update_at_once() -> None:
    async def scenario() -> None:
        async with (
            FakeMaster() as master,
            Framework.connect(
                master.address, INFO, implicit_acknowledgements=False, options=FAST
            ) as fw,
        ):
            await fw.next_event()
            for task_id in ("t1", "t2", "t3"):
                master.send_update(task_id, TaskState.RUNNING, agent_id="ag-1")
            updates = [await update_of(fw) for _ in range(3)]
            for update in updates:  # one after the other: no call in flight, none waits
                await fw.acknowledge(update)
            calls = master.requests("Acknowledge")
            assert [len(c.acknowledgements) for c in calls] == [1, 1, 1]  # type: ignore[attr-defined]
            assert not master.state.frameworks[fw.framework_id].unacked

    run_async(scenario())
