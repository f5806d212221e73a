"""The pure allocation core: fairness, placement, offers and tasks as a state machine.

Pure means: stdlib and sortedcontainers only; no grpc, asyncio, prometheus_client, wire types,
clock or global randomness (time and seeds are passed in). An import-linter contract in
pyproject.toml enforces it. Entry point: ``MasterState`` with ``CoreConfig``.
"""

from fairshare.task_states import TaskState

from master.core.errors import (
    AlreadyExists,
    CoreError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
)
from master.core.messages import (
    KillTask,
    LaunchTasks,
    Message,
    RescindOffer,
    RunningTask,
    SendOffers,
    TaskLaunch,
    TaskStatusChange,
)
from master.core.state import CoreConfig, MasterState

__all__ = [
    "AlreadyExists",
    "CoreConfig",
    "CoreError",
    "FailedPrecondition",
    "InvalidArgument",
    "KillTask",
    "LaunchTasks",
    "MasterState",
    "Message",
    "NotFound",
    "PermissionDenied",
    "RescindOffer",
    "RunningTask",
    "SendOffers",
    "TaskLaunch",
    "TaskState",
    "TaskStatusChange",
]
