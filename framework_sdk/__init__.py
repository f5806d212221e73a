"""The public fairshare client API (DESIGN.md §4a).

``__all__`` is the public surface. Only pure modules are imported eagerly, so that
``master.core`` may use ``ResourceVector`` without pulling in gRPC; the gRPC-backed names
(``Framework``, ``SchedulerDriver``, the events and errors, ...) are imported on first access
(PEP 562 module ``__getattr__``). ``framework_sdk.testing`` (the fake master) and
``framework_sdk.cli`` are imported explicitly by those who need them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Final

from framework_sdk.options import Backoff, ClientOptions
from framework_sdk.resources import MILLI, ResourceError, ResourceVector
from framework_sdk.types import (
    DEFAULT_FAILOVER_TIMEOUT,
    Capability,
    Demand,
    FrameworkInfo,
    LaunchOperation,
    MasterInfo,
    Offer,
    TaskReason,
    TaskRef,
    TaskSpec,
    TaskState,
    UpdateSource,
)

if TYPE_CHECKING:
    from framework_sdk.client import SchedulerClient
    from framework_sdk.errors import (
        AlreadyExistsError,
        CallError,
        DeadlineExceededError,
        FailedPreconditionError,
        FairshareError,
        InvalidArgumentError,
        NotConnectedError,
        NotFoundError,
        PermissionDeniedError,
        UnauthenticatedError,
        UnavailableError,
    )
    from framework_sdk.events import (
        AgentLost,
        Disconnected,
        ErrorEvent,
        Event,
        Heartbeat,
        OfferRescinded,
        OffersReceived,
        StatusUpdate,
        Subscribed,
    )
    from framework_sdk.framework import Framework
    from framework_sdk.scheduler import DriverStatus, Scheduler, SchedulerDriver

_LAZY: Final[dict[str, str]] = {
    "SchedulerClient": "framework_sdk.client",
    **dict.fromkeys(
        [
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
        ],
        "framework_sdk.errors",
    ),
    **dict.fromkeys(
        [
            "AgentLost",
            "Disconnected",
            "ErrorEvent",
            "Event",
            "Heartbeat",
            "OfferRescinded",
            "OffersReceived",
            "StatusUpdate",
            "Subscribed",
        ],
        "framework_sdk.events",
    ),
    "Framework": "framework_sdk.framework",
    **dict.fromkeys(["DriverStatus", "Scheduler", "SchedulerDriver"], "framework_sdk.scheduler"),
}

__all__ = [
    "DEFAULT_FAILOVER_TIMEOUT",
    "MILLI",
    "AgentLost",
    "AlreadyExistsError",
    "Backoff",
    "CallError",
    "Capability",
    "ClientOptions",
    "DeadlineExceededError",
    "Demand",
    "Disconnected",
    "DriverStatus",
    "ErrorEvent",
    "Event",
    "FailedPreconditionError",
    "FairshareError",
    "Framework",
    "FrameworkInfo",
    "Heartbeat",
    "InvalidArgumentError",
    "LaunchOperation",
    "MasterInfo",
    "NotConnectedError",
    "NotFoundError",
    "Offer",
    "OfferRescinded",
    "OffersReceived",
    "PermissionDeniedError",
    "ResourceError",
    "ResourceVector",
    "Scheduler",
    "SchedulerClient",
    "SchedulerDriver",
    "StatusUpdate",
    "Subscribed",
    "TaskReason",
    "TaskRef",
    "TaskSpec",
    "TaskState",
    "UnauthenticatedError",
    "UnavailableError",
    "UpdateSource",
]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'framework_sdk' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
