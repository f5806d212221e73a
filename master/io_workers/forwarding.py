"""``Forwarder``: in an I/O worker, every call but the Agent API's, passed to the core as it
came (docs/architecture.md §13).

A generic handler that serves any method (but ``skip``'s services) as a raw-bytes stream in
both directions, so unary and streaming calls alike reach the core's own servicers (Scheduler,
Operator, health) over its Unix socket unchanged: the messages are not decoded here. The worker's
``RpcGuard`` has authenticated the caller before the forwarder runs; the forwarded call names the
principal in ``FORWARDED_PRINCIPAL`` (the core's guard trusts it, and only workers can reach
that socket) and carries the caller's other metadata but its token, and its deadline.

Invariants: the caller gets the core's answer as the core gave it: its messages, its status
code and details, and its trailing metadata (a follower's ``fairshare-leader`` hint); a caller
that goes away cancels the forwarded call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Final

import grpc
from fairshare.rpc_guard import caller

from master.io_workers.protocol import FORWARDED_PRINCIPAL

__all__ = ["Forwarder"]

_DROPPED: Final = frozenset({"authorization", FORWARDED_PRINCIPAL, "user-agent"})
_NO_DEADLINE: Final = 1e8  # what grpc says is left of a call without a deadline is larger


class Forwarder(grpc.GenericRpcHandler):  # type: ignore[type-arg]
    """Serves every method of a service other than ``skip``'s by forwarding it to ``core``."""

    def __init__(self, core: grpc.aio.Channel, skip: frozenset[str]) -> None:
        self.core = core
        self.skip = skip

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Any:
        method: str = handler_call_details.method
        if method.lstrip("/").rpartition("/")[0] in self.skip:
            return None
        return grpc.stream_stream_rpc_method_handler(self._forwarding(method))

    def _forwarding(self, method: str) -> Callable[..., AsyncIterator[bytes]]:
        core = self.core

        async def forward(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
            metadata = [
                (key, value)
                for key, value in context.invocation_metadata() or ()
                if key not in _DROPPED and not key.startswith("grpc-")
            ]
            principal = caller()
            if principal is not None:
                metadata.append((FORWARDED_PRINCIPAL, principal))
            remaining = context.time_remaining()
            timeout = remaining if remaining is not None and remaining < _NO_DEADLINE else None
            stub = core.stream_stream(method, request_serializer=None, response_deserializer=None)
            call = stub(requests, metadata=metadata, timeout=timeout)
            try:
                async for response in call:
                    yield response
            except grpc.aio.AioRpcError as error:
                hint = error.trailing_metadata()
                if hint:
                    context.set_trailing_metadata(tuple(hint))
                await context.abort(error.code(), error.details() or "")
            finally:
                call.cancel()
            trailing = await call.trailing_metadata()
            if trailing:
                context.set_trailing_metadata(tuple(trailing))

        return forward
