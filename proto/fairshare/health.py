"""The standard gRPC health service (``grpc.health.v1.Health``: Check and Watch) for the daemons.

Shared by the master and the agent (both import the wire-level ``fairshare`` package, and the
agent may not import the master). No new dependency: its two messages are built at import time
from a ``FileDescriptorProto`` in a private descriptor pool, so they are wire-compatible with
grpcio-health-checking clients (``grpc_health_probe``, Kubernetes probes) without that package.

Invariants: ``""`` (the whole server) and every registered service name have a status; Check of
an unknown name fails with NOT_FOUND, Watch of one reports SERVICE_UNKNOWN; every Watch stream
receives the current status first and then each change, and ends when the server stops.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory

Context = grpc.aio.ServicerContext[Any, Any]


__all__ = [
    "NOT_SERVING",
    "SERVICE_NAME",
    "SERVICE_UNKNOWN",
    "SERVING",
    "HealthCheckRequest",
    "HealthCheckResponse",
    "HealthServicer",
    "answers_health_check",
]

SERVICE_NAME = "grpc.health.v1.Health"
UNKNOWN, SERVING, NOT_SERVING, SERVICE_UNKNOWN = 0, 1, 2, 3


def _build_messages() -> tuple[type[message.Message], type[message.Message]]:
    fdp = descriptor_pb2.FileDescriptorProto(
        name="grpc/health/v1/health.proto", package="grpc.health.v1", syntax="proto3"
    )
    field = descriptor_pb2.FieldDescriptorProto
    request = fdp.message_type.add(name="HealthCheckRequest")
    request.field.add(name="service", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    response = fdp.message_type.add(name="HealthCheckResponse")
    status = response.enum_type.add(name="ServingStatus")
    for name, number in (
        ("UNKNOWN", 0),
        ("SERVING", 1),
        ("NOT_SERVING", 2),
        ("SERVICE_UNKNOWN", 3),
    ):
        status.value.add(name=name, number=number)
    response.field.add(
        name="status",
        number=1,
        type=field.TYPE_ENUM,
        type_name=".grpc.health.v1.HealthCheckResponse.ServingStatus",
        label=field.LABEL_OPTIONAL,
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return (
        message_factory.GetMessageClass(
            pool.FindMessageTypeByName("grpc.health.v1.HealthCheckRequest")
        ),
        message_factory.GetMessageClass(
            pool.FindMessageTypeByName("grpc.health.v1.HealthCheckResponse")
        ),
    )


HealthCheckRequest, HealthCheckResponse = _build_messages()


class HealthServicer:
    """Serving status per service name, with Watch streams."""

    def __init__(self, services: Iterable[str]) -> None:
        self._status: dict[str, int] = {name: SERVING for name in ("", *services)}
        self._watchers: set[asyncio.Queue[int | None]] = set()

    def set_all(self, status: int) -> None:
        """Set every service's status (e.g. NOT_SERVING when draining)."""
        for name in self._status:
            self._status[name] = status
        for queue in self._watchers:
            queue.put_nowait(status)

    def close(self) -> None:
        """End every Watch stream."""
        for queue in self._watchers:
            queue.put_nowait(None)

    def status(self, service: str) -> int:
        """The status of ``service`` (SERVICE_UNKNOWN if not registered)."""
        return self._status.get(service, SERVICE_UNKNOWN)

    async def check(self, request: Any, context: Context) -> Any:
        """Health.Check."""
        status = self.status(request.service)
        if status == SERVICE_UNKNOWN:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"unknown service {request.service!r}")
        return HealthCheckResponse(status=status)

    async def watch(self, request: Any, context: Context) -> AsyncIterator[Any]:
        """Health.Watch: the current status, then each change."""
        queue: asyncio.Queue[int | None] = asyncio.Queue()
        self._watchers.add(queue)
        try:
            last = self.status(request.service)
            yield HealthCheckResponse(status=last)
            while await queue.get() is not None:
                current = self.status(request.service)
                if current != last:
                    last = current
                    yield HealthCheckResponse(status=current)
        finally:
            self._watchers.discard(queue)

    def handler(self) -> grpc.GenericRpcHandler[Any, Any]:
        """The generic handler to add to a server."""
        serialize = HealthCheckResponse.SerializeToString
        return grpc.method_handlers_generic_handler(
            SERVICE_NAME,
            {
                "Check": grpc.unary_unary_rpc_method_handler(
                    self.check,
                    request_deserializer=HealthCheckRequest.FromString,
                    response_serializer=serialize,
                ),
                "Watch": grpc.unary_stream_rpc_method_handler(
                    self.watch,
                    request_deserializer=HealthCheckRequest.FromString,
                    response_serializer=serialize,
                ),
            },
        )


async def answers_health_check(channel: grpc.aio.Channel, timeout: float) -> bool:
    """True when the server behind ``channel`` answers ``Health/Check`` within ``timeout``
    seconds (whatever the status: the process is there); on the channel's own connection, so a
    client learns whether the peer of its open streams still runs (a SIGSTOPped process's kernel
    keeps the TCP connection up, so keepalive alone may not tell)."""
    check = channel.unary_unary(
        f"/{SERVICE_NAME}/Check",
        request_serializer=HealthCheckRequest.SerializeToString,
        response_deserializer=HealthCheckResponse.FromString,
    )
    try:
        await check(HealthCheckRequest(), timeout=timeout)
    except grpc.aio.AioRpcError:
        return False
    return True
