"""The public fairshare client API (docs/architecture.md §7).

``__all__`` is the public surface; ``ResourceVector`` and ``TaskState`` are the kernel's
(``fairshare.resources``, ``fairshare.task_states``), re-exported so frameworks need one import.
``stream_logs`` reads a command task's output from its agent (``framework_sdk.logs``).
``framework_sdk.testing`` (the fake master) is imported explicitly by those who need it; the
``fairshare`` commands built on the SDK (``run``, ``logs``) live in ``client_commands``.
"""

from __future__ import annotations

from fairshare.resources import MILLI, ResourceError, ResourceVector
from fairshare.transport import ClientSecurity, read_token

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
from framework_sdk.logs import stream_logs
from framework_sdk.options import Backoff, ClientOptions
from framework_sdk.scheduler import DriverStatus, Scheduler, SchedulerDriver
from framework_sdk.types import (
    DEFAULT_FAILOVER_TIMEOUT,
    Capability,
    Command,
    Demand,
    FrameworkInfo,
    LaunchOperation,
    MasterInfo,
    Offer,
    ResourceUsage,
    TaskReason,
    TaskRef,
    TaskSpec,
    TaskState,
    UpdateSource,
)

__all__ = [
    "DEFAULT_FAILOVER_TIMEOUT",
    "MILLI",
    "AgentLost",
    "AlreadyExistsError",
    "Backoff",
    "CallError",
    "Capability",
    "ClientOptions",
    "ClientSecurity",
    "Command",
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
    "ResourceUsage",
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
    "read_token",
    "stream_logs",
]
