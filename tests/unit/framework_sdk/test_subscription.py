"""``EventStream`` against a real in-process gRPC server whose master goes silent: a master that
does not answer the health check is left after one ping interval, one that answers is kept until
its heartbeats are missed, and a silent stream's pending read survives the pings."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc
import pytest
from fairshare.health import HealthServicer
from fairshare.v1 import scheduler_pb2, scheduler_pb2_grpc
from fairshare.wire import duration_to_pb
from sdk_helpers import run_async

from framework_sdk.events import Heartbeat
from framework_sdk.subscription import EventStream, StreamLostError

HEARTBEAT = 0.4  # the interval SUBSCRIBED announces, seconds


class _SilentMaster(scheduler_pb2_grpc.SchedulerServiceServicer):
    """SUBSCRIBED, then ``heartbeats`` heartbeats, then silence with the stream kept open."""

    def __init__(self, heartbeats: int) -> None:
        self.heartbeats = heartbeats

    async def Subscribe(
        self, request: scheduler_pb2.SubscribeRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[scheduler_pb2.SubscribeResponse]:
        subscribed = scheduler_pb2.SubscribedEvent(
            framework_id="fw-1", master_id="m-1", heartbeat_interval=duration_to_pb(HEARTBEAT)
        )
        yield scheduler_pb2.SubscribeResponse(subscribed=subscribed)
        for _ in range(self.heartbeats):
            await asyncio.sleep(0.05)
            yield scheduler_pb2.SubscribeResponse(heartbeat=scheduler_pb2.HeartbeatEvent())
        await asyncio.sleep(60)  # silent; cancelled when the client leaves


async def _with_stream(
    heartbeats: int,
    healthy: bool,
    body: Callable[[EventStream], Awaitable[None]],
    ping_interval: float = 0.3,
) -> None:
    server = grpc.aio.server()
    scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server(_SilentMaster(heartbeats), server)
    if healthy:
        server.add_generic_rpc_handlers((HealthServicer(()).handler(),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
    call = stub.Subscribe(scheduler_pb2.SubscribeRequest())
    stream = EventStream(
        call,
        channel,
        f"127.0.0.1:{port}",
        subscribe_timeout=5.0,
        missed_heartbeats=3,
        ping_interval=ping_interval,
        ping_timeout=0.5,
    )
    try:
        await asyncio.wait_for(body(stream), 10)
    finally:
        stream.close()
        await channel.close()
        await server.stop(None)


def test_a_silent_master_that_does_not_answer_health_checks_is_left_after_one_ping() -> None:
    async def body(stream: EventStream) -> None:
        first = await stream.first()
        assert first.framework_id == "fw-1" and first.heartbeat_interval == HEARTBEAT
        seen = []
        with pytest.raises(StreamLostError, match="did not answer a health check"):
            async for event in stream.events():
                seen.append(event)
        assert len(seen) == 2 and all(isinstance(e, Heartbeat) for e in seen)

    run_async(_with_stream(2, healthy=False, body=body))


def test_a_silent_master_that_answers_health_checks_is_left_once_heartbeats_are_missed() -> None:
    async def body(stream: EventStream) -> None:
        await stream.first()
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(StreamLostError, match="3 heartbeats missed"):
            async for _ in stream.events():
                pass
        assert loop.time() - started >= 3 * HEARTBEAT  # not before: it answered the pings

    run_async(_with_stream(0, healthy=True, body=body, ping_interval=0.2))


def test_events_keep_coming_across_pings() -> None:
    """A read left pending by a ping interval is the next read: no message is lost."""

    async def body(stream: EventStream) -> None:
        await stream.first()
        events = stream.events()
        for _ in range(3):
            assert isinstance(await anext(events), Heartbeat)
        with pytest.raises(StreamLostError):
            await anext(events)

    run_async(_with_stream(3, healthy=True, body=body, ping_interval=0.01))
