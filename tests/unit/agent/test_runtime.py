"""``AgentRuntime`` and the agent's health service, in process (no agent subprocess).

Regression: on Python 3.11 ``asyncio.wait_for`` swallows a cancellation that races with its
awaitable completing; the update sender used it and SIGTERM could hang the agent. Every wait is
bounded with ``asyncio.wait(..., timeout=...)`` so a regression fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import socket

import grpc
from fairshare.health import (
    NOT_SERVING,
    SERVICE_UNKNOWN,
    SERVING,
    HealthCheckRequest,
    HealthCheckResponse,
    HealthServicer,
)
from fairshare.resources import ResourceVector
from fairshare.task_states import TaskState
from fairshare.v1 import common_pb2

from agent.core.records import AgentSpec
from agent.runtime import AgentRuntime, RuntimeConfig
from agent.wire import task_spec

DEADLINE = 5.0


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def task_info(task_id: str) -> common_pb2.TaskInfo:
    info = common_pb2.TaskInfo(task_id=task_id)
    info.resources.items.add(name="cpus", millis=100)
    return info


def make_runtime() -> AgentRuntime:
    config = RuntimeConfig(master=f"127.0.0.1:{closed_port()}", reconnect_initial=0.01)
    return AgentRuntime(config, AgentSpec("h", 0, ResourceVector.parse("cpus:1;mem:64")))


def test_sender_loop_ends_when_cancelled_in_the_same_step_as_a_wake() -> None:
    async def main() -> None:
        runtime = make_runtime()
        state, now = runtime.state, asyncio.get_running_loop().time()
        state.on_registered("ag-1", "m-1")
        state.on_connected(now)
        state.handle_launch("fw", [task_spec(task_info("t"))], now, 0.0)
        state.handle_task_status(("fw", "t"), TaskState.STARTING, now, 0.0)
        assert len(state.take_due(now)) == 1  # sent; its retry is due in about a second,
        for _ in range(20):  # so the sender waits with a finite timeout
            sender = asyncio.ensure_future(runtime._send_updates(stream=None))  # type: ignore[arg-type]
            await asyncio.sleep(0)
            runtime._wake.set()
            sender.cancel()
            await asyncio.wait({sender}, timeout=DEADLINE)
            assert sender.cancelled()

    asyncio.run(main())


def test_run_retries_an_absent_master_and_stops_promptly() -> None:
    async def main() -> None:
        runtime = make_runtime()
        task = asyncio.ensure_future(runtime.run())
        deadline = asyncio.get_running_loop().time() + DEADLINE
        while runtime.reconnects_total < 2:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.01)
        runtime.stop()
        done, _ = await asyncio.wait({task}, timeout=DEADLINE)
        assert task in done and task.result() is None
        metrics = runtime.metrics()
        assert not metrics.connected and metrics.agent_id is None
        assert metrics.registrations_total == 0 and metrics.reconnects_total >= 2
        assert metrics.resources_total_millis == {"cpus": 1000, "mem": 64000}
        assert metrics.tasks_by_state == {} and metrics.pending_updates == 0

    asyncio.run(main())


def test_stop_before_run_returns_at_once() -> None:
    async def main() -> None:
        runtime = make_runtime()
        runtime.stop()
        await asyncio.wait_for(runtime.run(), DEADLINE)
        assert runtime.reconnects_total == 0

    asyncio.run(main())


def test_health_check_and_watch_follow_the_status() -> None:
    async def main() -> None:
        health = HealthServicer(())
        health.set_all(NOT_SERVING)
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((health.handler(),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                check = channel.unary_unary(
                    "/grpc.health.v1.Health/Check",
                    request_serializer=HealthCheckRequest.SerializeToString,
                    response_deserializer=HealthCheckResponse.FromString,
                )
                watch = channel.unary_stream(
                    "/grpc.health.v1.Health/Watch",
                    request_serializer=HealthCheckRequest.SerializeToString,
                    response_deserializer=HealthCheckResponse.FromString,
                )
                assert (await check(HealthCheckRequest(), timeout=DEADLINE)).status == NOT_SERVING  # type: ignore[attr-defined]
                stream = watch(HealthCheckRequest(), timeout=DEADLINE)
                unknown = watch(HealthCheckRequest(service="other"), timeout=DEADLINE)
                assert (await stream.read()).status == NOT_SERVING  # type: ignore[union-attr]
                health.set_all(SERVING)
                assert (await stream.read()).status == SERVING  # type: ignore[union-attr]
                assert (await check(HealthCheckRequest(), timeout=DEADLINE)).status == SERVING  # type: ignore[attr-defined]
                health.set_all(NOT_SERVING)
                assert (await stream.read()).status == NOT_SERVING  # type: ignore[union-attr]
                assert (await unknown.read()).status == SERVICE_UNKNOWN  # type: ignore[union-attr]
                stream.cancel()
                unknown.cancel()
        finally:
            await server.stop(0)

    asyncio.run(main())
