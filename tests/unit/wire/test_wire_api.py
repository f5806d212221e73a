"""The generated ``fairshare.v1`` package: importable, complete, and working over grpc.aio."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest
from fairshare.resources import ResourceVector
from fairshare.task_states import TaskState
from fairshare.v1 import (
    agent_pb2_grpc,
    common_pb2,
    operator_pb2_grpc,
    scheduler_pb2,
    scheduler_pb2_grpc,
)
from google.protobuf import descriptor_pool

EXPECTED_METHODS = {
    "fairshare.v1.SchedulerService": {
        "Subscribe",
        "Accept",
        "Decline",
        "Revive",
        "Suppress",
        "Kill",
        "Acknowledge",
        "Reconcile",
        "Teardown",
        "UpdateDemand",
    },
    "fairshare.v1.AgentService": {"Connect"},
    "fairshare.v1.OperatorService": {
        "GetState",
        "SetWeight",
        "GetWeights",
        "SetQuota",
        "GetQuotas",
        "Reserve",
        "Unreserve",
        "DeactivateAgents",
        "TeardownFramework",
        "KillTask",
        "RemoveAgent",
        "ReactivateAgents",
        "DrainAgent",
        "GrantLogAccess",
    },
}


@pytest.mark.parametrize("service", sorted(EXPECTED_METHODS))
def test_services_have_every_rpc_of_the_design(service: str) -> None:
    descriptor = descriptor_pool.Default().FindServiceByName(service)
    assert {method.name for method in descriptor.methods} == EXPECTED_METHODS[service]


def test_agents_connect_over_one_bidirectional_stream() -> None:
    method = descriptor_pool.Default().FindMethodByName("fairshare.v1.AgentService.Connect")
    assert method.server_streaming and method.client_streaming
    requests = {f.name for f in method.input_type.oneofs_by_name["message"].fields}
    responses = {f.name for f in method.output_type.oneofs_by_name["message"].fields}
    assert requests == {"register", "reregister", "heartbeat", "updates"}
    assert responses == {"registered", "commands", "settings"}


def test_subscribe_is_a_server_stream_of_every_event_kind() -> None:
    method = descriptor_pool.Default().FindMethodByName("fairshare.v1.SchedulerService.Subscribe")
    assert method.server_streaming and not method.client_streaming
    events = {
        field.name
        for field in scheduler_pb2.SubscribeResponse.DESCRIPTOR.oneofs_by_name["event"].fields
    }
    assert {"subscribed", "offers", "rescind", "update", "heartbeat", "error"} <= events


def test_every_core_task_state_has_a_wire_state() -> None:
    wire = set(common_pb2.TaskState.keys())
    for state in TaskState:
        assert f"TASK_STATE_{state.name}" in wire


def test_resources_carry_exact_milli_quantities() -> None:
    vector = ResourceVector.parse("cpus:0.2;mem:204.8")
    message = common_pb2.Resources(
        items=[common_pb2.Resource(name=n, millis=m) for n, m in vector.millis_items()]
    )
    decoded = common_pb2.Resources.FromString(message.SerializeToString())
    assert ResourceVector.from_millis({i.name: i.millis for i in decoded.items}) == vector


class _OneEventScheduler(scheduler_pb2_grpc.SchedulerServiceServicer):
    """A servicer that answers Subscribe with SUBSCRIBED then one OFFERS event."""

    async def Subscribe(
        self, request: scheduler_pb2.SubscribeRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[scheduler_pb2.SubscribeResponse]:
        yield scheduler_pb2.SubscribeResponse(
            subscribed=scheduler_pb2.SubscribedEvent(framework_id="fw-1", master_id="m")
        )
        offer = common_pb2.Offer(offer_id="o-1", framework_id="fw-1", agent_id="a-1")
        yield scheduler_pb2.SubscribeResponse(offers=scheduler_pb2.OffersEvent(offers=[offer]))


async def _round_trip() -> list[str]:
    server = grpc.aio.server()
    scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server(_OneEventScheduler(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
            kinds = []
            async for event in stub.Subscribe(scheduler_pb2.SubscribeRequest(), timeout=10):
                kinds.append(event.WhichOneof("event"))
            return kinds
    finally:
        await server.stop(grace=None)


def test_generated_stubs_stream_over_grpc_aio_on_loopback() -> None:
    assert asyncio.run(_round_trip()) == ["subscribed", "offers"]


def test_agent_and_operator_stubs_exist() -> None:
    assert hasattr(agent_pb2_grpc, "AgentServiceStub")
    assert hasattr(operator_pb2_grpc, "OperatorServiceStub")
