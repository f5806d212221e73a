"""Plain value types of the framework SDK: what a framework sends and what offers look like.

Invariants:
- Every type here is an immutable (frozen) dataclass or an enum; none imports gRPC or the wire
  API, so they can be built and compared in tests without a master.
- Resources are always ``ResourceVector`` (exact milli units); durations are float seconds.
- A ``TaskSpec`` is a placeholder task (``duration``, ``exit_code``, ...) or, with ``command``,
  a command task: a real process on the agent (``Command``: the kernel's
  ``fairshare.command.Command``, whose shape rules the master and the agent apply too).
- ``TaskState`` is the kernel's (``fairshare.task_states``, one vocabulary for every process);
  ``TaskReason``, ``UpdateSource`` and ``Capability`` mirror the enums of ``fairshare.v1`` member
  for member (without the ``REASON_`` / ``SOURCE_`` prefixes); ``framework_sdk.wire`` converts
  between them by name.
- ``FrameworkInfo``, ``Demand`` and ``Capability`` are the kernel's (``fairshare.framework_info``:
  one definition for the SDK and the master), re-exported here.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from fairshare.command import Command, ResourceUsage
from fairshare.framework_info import (
    DEFAULT_FAILOVER_TIMEOUT,
    Capability,
    Demand,
    FrameworkInfo,
    check_seconds,
)
from fairshare.resources import ResourceVector
from fairshare.task_states import TaskReason, TaskState

__all__ = [
    "DEFAULT_FAILOVER_TIMEOUT",
    "Capability",
    "Command",
    "Demand",
    "FrameworkInfo",
    "LaunchOperation",
    "MasterInfo",
    "Offer",
    "ResourceUsage",
    "TaskReason",
    "TaskRef",
    "TaskSpec",
    "TaskState",
    "UpdateSource",
]


class UpdateSource(enum.Enum):
    """Which process generated a status update."""

    UNSPECIFIED = "UNSPECIFIED"
    MASTER = "MASTER"
    AGENT = "AGENT"
    SDK = "SDK"
    """Generated locally by the SDK (e.g. a launch on offers that were no longer valid)."""


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """A task to launch: a placeholder task, or with ``command`` a command task.

    Placeholder: ``duration`` (seconds) is how long it runs before exiting with ``exit_code``
    (0: FINISHED, else FAILED); None runs until killed. Command task: the agent runs
    ``command`` (e.g. ``Command(shell="echo hello")`` or ``Command(argv=("ls", "-l"))``) in the
    task's sandbox, limited to ``resources``; exit 0 is FINISHED, anything else FAILED (with the
    exit code and the last lines of stderr); its output is read with ``framework_sdk.logs``.
    The placeholder fields must keep their defaults then. ``agent_id`` empty is filled from the
    offer.

    ``preemptible``: the master may kill the task to move the cluster toward its fair allocation
    (a master started with ``--rebalance``; Mesos's revocable resources): it is then KILLED with
    reason ``PREEMPTED`` after the master's grace period. False (the default): never preempted.
    """

    task_id: str
    resources: ResourceVector
    name: str = ""
    duration: float | None = None
    exit_code: int = 0
    agent_id: str = ""
    startup_delay: float | None = None
    fail_on_start: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)
    command: Command | None = None
    preemptible: bool = False

    def __post_init__(self) -> None:
        if not self.task_id:
            raise ValueError("TaskSpec.task_id must not be empty")
        if not self.resources:
            raise ValueError(f"TaskSpec {self.task_id!r}: resources must not be empty")
        check_seconds(f"TaskSpec {self.task_id!r}: duration", self.duration)
        check_seconds(f"TaskSpec {self.task_id!r}: startup_delay", self.startup_delay)
        placeholder = (self.duration, self.exit_code, self.startup_delay, self.fail_on_start)
        if self.command is not None and placeholder != (None, 0, None, False):
            raise ValueError(
                f"TaskSpec {self.task_id!r}: a command task takes no duration, exit_code,"
                " startup_delay or fail_on_start (those describe placeholder tasks)"
            )


@dataclass(frozen=True, slots=True)
class LaunchOperation:
    """The Launch operation of ``accept_offers``: start these tasks on the accepted offers."""

    tasks: Sequence[TaskSpec]


@dataclass(frozen=True, slots=True)
class TaskRef:
    """A task to reconcile explicitly: its id and, if known, its agent."""

    task_id: str
    agent_id: str = ""


@dataclass(frozen=True, slots=True)
class Offer:
    """Resources of one agent offered to this framework.

    ``fair_tasks`` is how many tasks of the declared Demand shape the master sized the offer
    for (0 for coarse whole-agent offers); ``expires_at`` is when the master rescinds it if
    unused (None: offers do not time out).
    """

    offer_id: str
    agent_id: str
    hostname: str
    resources: ResourceVector
    attributes: Mapping[str, str] = field(default_factory=dict)
    fair_tasks: int = 0
    framework_id: str = ""
    expires_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class MasterInfo:
    """The master a framework is subscribed to: its instance id and the address used."""

    master_id: str
    address: str
