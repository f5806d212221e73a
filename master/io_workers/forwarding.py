"""``Forwarder``: in an I/O worker, every call but the Agent API's, passed to the core as it
came (docs/architecture.md §13).

A generic handler that serves any method (but ``skip``'s services) with raw bytes, so calls reach
the core's own servicers (Scheduler, Operator, health) over its Unix socket unchanged: the
messages are not decoded here. A method of known shape (``shapes``: the gated services' and
health's) is forwarded as the same kind of call (a unary call costs grpc.aio much less than a
stream: no request-writing task, one batch of operations); any other as a stream both ways,
which carries every kind of call on the wire. The worker's
``RpcGuard`` has authenticated the caller before the forwarder runs; the forwarded call names the
principal in ``FORWARDED_PRINCIPAL`` (the core's guard trusts it, and only workers can reach
that socket) and carries the caller's other metadata but its token, and its deadline.

Invariants: the caller gets the core's answer as the core gave it: its messages, its status
code and details, and its trailing metadata (a follower's ``fairshare-leader`` hint); a caller
that goes away cancels the forwarded call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Final, NoReturn

import grpc
from fairshare.rpc_guard import caller

from master.io_workers.protocol import FORWARDED_PRINCIPAL

__all__ = ["Forwarder"]

_DROPPED: Final = frozenset({"authorization", FORWARDED_PRINCIPAL, "user-agent"})
_NO_DEADLINE: Final = 1e8  # what grpc says is left of a call without a deadline is larger
HEALTH_SHAPES: Final = {
    "/grpc.health.v1.Health/Check": (False, False),
    "/grpc.health.v1.Health/Watch": (False, True),
}


class Forwarder(grpc.GenericRpcHandler):  # type: ignore[type-arg]
    """Serves every method of a service other than ``skip``'s by forwarding it to ``core``;
    ``shapes``: (client streams, server streams) of the methods known."""

    def __init__(
        self,
        core: grpc.aio.Channel,
        skip: frozenset[str],
        shapes: Mapping[str, tuple[bool, bool]] = HEALTH_SHAPES,
    ) -> None:
        self.core = core
        self.skip = skip
        self.shapes = dict(shapes)

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Any:
        method: str = handler_call_details.method
        if method.lstrip("/").rpartition("/")[0] in self.skip:
            return None
        streams_in, streams_out = self.shapes.get(method, (True, True))
        if not streams_in and not streams_out:
            return grpc.unary_unary_rpc_method_handler(self._unary(method))
        if not streams_in:
            return grpc.unary_stream_rpc_method_handler(self._streaming(method, False))
        return grpc.stream_stream_rpc_method_handler(self._streaming(method, True))

    def _unary(self, method: str) -> Callable[..., Awaitable[bytes]]:
        stub = self.core.unary_unary(method, request_serializer=None, response_deserializer=None)

        async def forward(request: bytes, context: Any) -> bytes:
            metadata, timeout = _outgoing(context)
            call = stub(request, metadata=metadata, timeout=timeout)
            try:
                response: bytes = await call
            except grpc.aio.AioRpcError as error:
                await _relay_error(context, error)
            await _relay_trailing(context, call)
            return response

        return forward

    def _streaming(self, method: str, streams_in: bool) -> Callable[..., AsyncIterator[bytes]]:
        core = self.core

        async def forward(request: Any, context: Any) -> AsyncIterator[bytes]:
            metadata, timeout = _outgoing(context)
            if streams_in:
                stub: Any = core.stream_stream(
                    method, request_serializer=None, response_deserializer=None
                )
            else:
                stub = core.unary_stream(
                    method, request_serializer=None, response_deserializer=None
                )
            call = stub(request, metadata=metadata, timeout=timeout)
            try:
                async for response in call:
                    yield response
            except grpc.aio.AioRpcError as error:
                await _relay_error(context, error)
            finally:
                call.cancel()
            await _relay_trailing(context, call)

        return forward


def _outgoing(context: Any) -> tuple[list[tuple[str, Any]], float | None]:
    """The forwarded call's metadata (the caller's, but its token, with the principal the
    worker's guard authenticated) and timeout (what is left of the caller's deadline)."""
    metadata = [
        (key, value)
        for key, value in context.invocation_metadata() or ()
        if key not in _DROPPED and not key.startswith("grpc-")
    ]
    principal = caller()
    if principal is not None:
        metadata.append((FORWARDED_PRINCIPAL, principal))
    remaining = context.time_remaining()
    return metadata, remaining if remaining is not None and remaining < _NO_DEADLINE else None


async def _relay_error(context: Any, error: grpc.aio.AioRpcError) -> NoReturn:
    hint = error.trailing_metadata()
    if hint:
        context.set_trailing_metadata(tuple(hint))
    await context.abort(error.code(), error.details() or "")
    raise AssertionError("abort returned")  # pragma: no cover


async def _relay_trailing(context: Any, call: Any) -> None:
    trailing = await call.trailing_metadata()
    if trailing:
        context.set_trailing_metadata(tuple(trailing))
