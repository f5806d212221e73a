"""What a test scripts the fake master with and reads back from it (``framework_sdk.testing``):
``OfferSpec`` (an offer to send) and ``LaunchedTask`` (a task a framework launched).

Invariants: immutable values; ``LaunchedTask`` holds the SDK's own types, with the wire
``TaskInfo`` as received beside them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fairshare.resources import ResourceVector
from fairshare.v1 import common_pb2
from fairshare.wire import resources_from_pb, seconds_from_duration

__all__ = ["LaunchedTask", "OfferSpec"]


@dataclass(frozen=True, slots=True)
class OfferSpec:
    """An offer for ``FakeMaster.send_offers``."""

    agent_id: str
    resources: ResourceVector | str
    hostname: str = "localhost"
    attributes: Mapping[str, str] = field(default_factory=dict)
    fair_tasks: int = 0


@dataclass(frozen=True, slots=True)
class LaunchedTask:
    """A task a framework launched on the fake master (``FakeMaster.launched_tasks``), in the
    SDK's own types; ``info`` is the wire ``TaskInfo`` as received, for anything else."""

    task_id: str
    name: str
    agent_id: str
    resources: ResourceVector
    duration: float | None
    labels: Mapping[str, str]
    info: common_pb2.TaskInfo = field(repr=False, compare=False)
    preemptible: bool = False

    @classmethod
    def from_pb(cls, info: common_pb2.TaskInfo) -> LaunchedTask:
        """The typed view of a received ``TaskInfo``."""
        duration = None
        if info.HasField("command") and info.command.HasField("duration"):
            duration = seconds_from_duration(info.command.duration)
        return cls(
            info.task_id,
            info.name,
            info.agent_id,
            resources_from_pb(info.resources),
            duration,
            dict(info.labels),
            info,
            info.preemptible,
        )
