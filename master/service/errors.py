"""Mapping of runtime errors to gRPC status codes, shared by the servicers.

Invariant: a ``CoreError`` raised by conversion or by the runtime (which then changed nothing)
ends the call with the status code its class names and its message (logged at DEBUG, a few
lines a second at most: ``LogLimiter``), and so does an undecodable request stream message
(INVALID_ARGUMENT); an error with ``trailing_metadata`` ends it with that metadata too (an I/O
worker's refusal relays the core's leader hint); any other exception is a bug: it is logged
with its traceback and the call ends with INTERNAL, and the daemon keeps serving. A unary answer
larger than the message limit (``fairshare.transport.MAX_MESSAGE_BYTES``; GetState is trimmed
below it, so none should be) ends the call with RESOURCE_EXHAUSTED saying its size, logged once
per method and minute at most, instead of gRPC's traceback per call.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn, TypeVar

import grpc
from fairshare.logs import LogLimiter, log_event
from fairshare.rpc_guard import UndecodableRequest
from fairshare.transport import MAX_MESSAGE_BYTES
from google.protobuf.message import Message
from grpc import aio

from master.core.errors import CoreError

__all__ = ["abort_with", "grpc_code", "maps_errors"]

log = logging.getLogger("fairshare.master.rpc")

S = TypeVar("S")
Req = TypeVar("Req")
Resp = TypeVar("Resp")
Context = aio.ServicerContext[Any, Any]
_REFUSED = LogLimiter()
_OVERSIZE = LogLimiter(rate=1 / 60, burst=1)


def grpc_code(name: str) -> grpc.StatusCode:
    """The ``grpc.StatusCode`` named ``name`` (UNKNOWN if there is none)."""
    code: grpc.StatusCode = getattr(grpc.StatusCode, name, grpc.StatusCode.UNKNOWN)
    return code


async def abort_with(context: Context, error: BaseException, method: str) -> NoReturn:
    """End the call for ``error``: its own code for a ``CoreError``, INTERNAL otherwise."""
    if isinstance(error, (CoreError, UndecodableRequest)):
        if log.isEnabledFor(logging.DEBUG):
            held = _REFUSED.allow((method, error.code))
            if held is not None:
                log_event(
                    log,
                    "rpc.refused",
                    logging.DEBUG,
                    method=method,
                    code=error.code,
                    error=error,
                    suppressed=held,
                )
        trailing = getattr(error, "trailing_metadata", ())
        if trailing:
            context.set_trailing_metadata(trailing)
        await context.abort(grpc_code(error.code), error.message)
    log_event(log, "rpc.failed", logging.ERROR, exc_info=error, method=method)
    await context.abort(grpc.StatusCode.INTERNAL, f"internal error in {method}: {error}")


def maps_errors(
    method: Callable[[S, Req, Context], Awaitable[Resp]],
) -> Callable[[S, Req, Context], Awaitable[Resp]]:
    """Decorate a unary servicer method: errors become precise status codes."""

    @functools.wraps(method)
    async def wrapper(self: S, request: Req, context: Context) -> Resp:
        try:
            response = await method(self, request, context)
        except aio.AbortError:
            raise
        except Exception as error:  # every error must become a status
            await abort_with(context, error, method.__name__)
        if isinstance(response, Message) and response.ByteSize() > MAX_MESSAGE_BYTES:
            await _abort_oversize(context, method.__name__, response.ByteSize())
        return response

    return wrapper


async def _abort_oversize(context: Context, method: str, size: int) -> NoReturn:
    held = _OVERSIZE.allow(method)
    if held is not None:
        log_event(log, "rpc.oversize", logging.WARNING, method=method, bytes=size, suppressed=held)
    await context.abort(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        f"{method}: the answer is {size} bytes, more than the {MAX_MESSAGE_BYTES}-byte message"
        " limit",
    )
