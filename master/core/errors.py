"""Errors the allocation core raises for bad requests.

Invariant: a ``handle_*`` call that raises one of these has changed no state. Each class names
the gRPC status code the service layer maps it to, so the adapters stay thin.
"""

from __future__ import annotations

__all__ = [
    "AlreadyExists",
    "CoreError",
    "FailedPrecondition",
    "InvalidArgument",
    "NotFound",
    "PermissionDenied",
    "ResourceExhausted",
]


class CoreError(Exception):
    """A request the core refused; ``code`` is the gRPC status code name."""

    code = "UNKNOWN"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(CoreError):
    """The request is malformed or asks for something impossible."""

    code = "INVALID_ARGUMENT"


class NotFound(CoreError):
    """A named framework, agent, offer, task or update does not exist (any more)."""

    code = "NOT_FOUND"


class AlreadyExists(CoreError):
    """The request would create something that exists already."""

    code = "ALREADY_EXISTS"


class FailedPrecondition(CoreError):
    """The request is well formed but the current state does not allow it."""

    code = "FAILED_PRECONDITION"


class PermissionDenied(CoreError):
    """The caller asks to act on something it does not own."""

    code = "PERMISSION_DENIED"


class ResourceExhausted(CoreError):
    """The caller is over one of its limits (a count, a rate): nothing changed, retry later."""

    code = "RESOURCE_EXHAUSTED"
