"""``RpcMetricsInterceptor``: counts every RPC the master serves by method and status code.

A grpc.aio server interceptor. It wraps each handler's behaviour (a coroutine, or an async
generator whose responses pass through one ``async for``) and, when the call ends however it
ends, adds one to ``counts[(method, code)]`` on the event loop.

Invariants:
- ``method`` is ``Service/Method`` without the package (``SchedulerService/Accept``,
  ``Health/Check``); calls to methods the server does not implement are not counted, so a client
  cannot grow the label set;
- ``code`` is the status code's name: the code the handler set or aborted with, ``OK`` for a
  normal end, ``CANCELLED`` for a call the client abandoned, ``UNKNOWN`` for an escaped error;
- ``counts`` is a plain dict mutated only on the server's loop; readers take ``dict(counts)``
  on that loop (``master.metrics`` does);
- the wrapped handler of a method is built once and reused (a server's handlers never change
  once it serves), so a call costs the interceptor one dict lookup;
- given ``services``, only the methods of those services are counted (an I/O worker counts the
  calls it serves itself; those it forwards, the core counts).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

import grpc
from grpc import aio

__all__ = ["RpcMetricsInterceptor", "method_label"]

Behavior = Callable[..., Any]
Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"


def method_label(full_method: str) -> str:
    """``/fairshare.v1.SchedulerService/Accept`` -> ``SchedulerService/Accept``."""
    service, _, method = full_method.lstrip("/").rpartition("/")
    return f"{service.rpartition('.')[2]}/{method}"


def _code_name(context: aio.ServicerContext[Any, Any]) -> str:
    code = context.code()
    if code is None:
        return "OK"
    if isinstance(code, grpc.StatusCode):
        return code.name
    for status in grpc.StatusCode:  # grpc.aio may hand back the integer value
        if status.value[0] == code:
            return status.name
    return "UNKNOWN"


class RpcMetricsInterceptor(aio.ServerInterceptor):  # type: ignore[type-arg]
    """Counts finished RPCs per (method, code) in ``counts``."""

    def __init__(self, services: frozenset[str] | None = None) -> None:
        self.counts: dict[tuple[str, str], int] = {}
        self.services = services
        self._wrapped: dict[str, Handler] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler:
        wrapped = self._wrapped.get(handler_call_details.method)
        if wrapped is not None:
            return wrapped
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        service = handler_call_details.method.lstrip("/").rpartition("/")[0]
        if self.services is not None and service not in self.services:
            self._wrapped[handler_call_details.method] = handler
            return handler
        wrapped = self._wrap_handler(handler, method_label(handler_call_details.method))
        self._wrapped[handler_call_details.method] = wrapped
        return wrapped

    def _wrap_handler(self, handler: Handler, label: str) -> Handler:
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._wrap(handler.unary_unary, label),
                handler.request_deserializer,
                handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._wrap(handler.unary_stream, label),
                handler.request_deserializer,
                handler.response_serializer,
            )
        if handler.stream_unary is not None:
            return grpc.stream_unary_rpc_method_handler(
                self._wrap(handler.stream_unary, label),
                handler.request_deserializer,
                handler.response_serializer,
            )
        assert handler.stream_stream is not None
        return grpc.stream_stream_rpc_method_handler(
            self._wrap(handler.stream_stream, label),
            handler.request_deserializer,
            handler.response_serializer,
        )

    def _count(self, label: str, context: aio.ServicerContext[Any, Any], error: Any) -> None:
        if isinstance(error, asyncio.CancelledError):
            code = "CANCELLED"
        elif error is not None and not isinstance(error, aio.AbortError):
            code = "UNKNOWN"  # grpc ends the call with UNKNOWN for an escaped error
        else:
            code = _code_name(context)
        key = (label, code)
        self.counts[key] = self.counts.get(key, 0) + 1

    def _wrap(self, behavior: Behavior, label: str) -> Behavior:
        if inspect.iscoroutinefunction(behavior):

            async def unary(request: Any, context: aio.ServicerContext[Any, Any]) -> Any:
                error: BaseException | None = None
                try:
                    return await behavior(request, context)
                except BaseException as raised:
                    error = raised
                    raise
                finally:
                    self._count(label, context, error)

            return unary
        if not inspect.isasyncgenfunction(behavior):
            return behavior  # a synchronous handler: none on this server

        async def streaming(request: Any, context: aio.ServicerContext[Any, Any]) -> Any:
            error: BaseException | None = None
            try:
                async with contextlib.aclosing(behavior(request, context)) as responses:
                    async for response in responses:
                        yield response
            except BaseException as raised:
                error = raised
                raise
            finally:
                self._count(label, context, error)

        return streaming
