"""Exceptions of the framework SDK.

Invariants:
- Every exception the SDK raises on purpose derives from ``FairshareError``.
- A call made while the SDK is not subscribed raises ``NotConnectedError`` at once; it is never
  queued or dropped silently.
- A call the master refused raises a ``CallError`` subclass chosen by the gRPC status code
  (``InvalidArgumentError`` for INVALID_ARGUMENT, ...); ``.code`` and ``.message`` carry the
  master's status code and message unchanged, ``.method`` the RPC name.
"""

from __future__ import annotations

from typing import Final

import grpc

__all__ = [
    "AlreadyExistsError",
    "CallError",
    "DeadlineExceededError",
    "FailedPreconditionError",
    "FairshareError",
    "InvalidArgumentError",
    "NotConnectedError",
    "NotFoundError",
    "PermissionDeniedError",
    "UnauthenticatedError",
    "UnavailableError",
    "call_error",
]


class FairshareError(Exception):
    """Base class of the SDK's exceptions."""


class NotConnectedError(FairshareError):
    """The framework is not subscribed to the master right now (connecting or reconnecting)."""


class CallError(FairshareError):
    """The master answered a call with a gRPC error."""

    def __init__(self, method: str, code: grpc.StatusCode, message: str) -> None:
        super().__init__(f"{method} failed with {code.name}: {message}")
        self.method = method
        self.code = code
        self.message = message


class InvalidArgumentError(CallError):
    """INVALID_ARGUMENT: the request is malformed or does not fit (nothing changed)."""


class NotFoundError(CallError):
    """NOT_FOUND: an offer, task or framework the call names is not known (any more)."""


class FailedPreconditionError(CallError):
    """FAILED_PRECONDITION: the call is not allowed in the current state."""


class PermissionDeniedError(CallError):
    """PERMISSION_DENIED: the principal may not do this."""


class UnauthenticatedError(CallError):
    """UNAUTHENTICATED: the master could not authenticate the framework."""


class AlreadyExistsError(CallError):
    """ALREADY_EXISTS: the thing the call creates exists already."""


class UnavailableError(CallError):
    """UNAVAILABLE: the master could not be reached."""


class DeadlineExceededError(CallError):
    """DEADLINE_EXCEEDED: the master did not answer in time."""


_BY_CODE: Final[dict[grpc.StatusCode, type[CallError]]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExistsError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
}


def call_error(method: str, code: grpc.StatusCode, message: str) -> CallError:
    """The typed exception for a call that failed with ``code`` (``CallError`` if unmapped)."""
    return _BY_CODE.get(code, CallError)(method, code, message)
