"""Typed events a framework receives, in the order the master sent them.

Invariants:
- Every event is a frozen dataclass; ``Event`` is their union, so ``match`` statements over it
  can be checked for exhaustiveness by mypy.
- ``Subscribed`` is always the first event of a connection; after a connection is lost the
  SDK emits ``Disconnected`` (every outstanding offer is then void) and, once it resubscribed,
  another ``Subscribed`` with ``resubscribed`` set when the master kept the framework.
- ``ErrorEvent`` is final: the master ended the subscription for good (or refused it) and no
  event follows.
- A ``StatusUpdate`` with a non-empty ``uuid`` must be acknowledged (the SDK does it implicitly
  unless explicit acknowledgements were requested); updates without one need none. One with a
  uuid is delivered once per client: copies the master re-sends are dropped by the SDK.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import grpc

from framework_sdk.types import Offer, ResourceUsage, TaskReason, TaskState, UpdateSource

__all__ = [
    "AgentLost",
    "Disconnected",
    "ErrorEvent",
    "Event",
    "Heartbeat",
    "OfferRescinded",
    "OffersReceived",
    "StatusUpdate",
    "Subscribed",
]


@dataclass(frozen=True, slots=True)
class Subscribed:
    """The subscription succeeded (first event of every connection)."""

    framework_id: str
    master_id: str
    heartbeat_interval: float
    """Seconds between the master's heartbeats; 0 when the master sends none."""
    resubscribed: bool
    """True if the master matched the framework id to a framework it knew (tasks were kept)."""
    weight: float
    address: str
    """The master address this connection uses."""


@dataclass(frozen=True, slots=True)
class OffersReceived:
    """New offers; each is for a single agent."""

    offers: Sequence[Offer]


@dataclass(frozen=True, slots=True)
class OfferRescinded:
    """An outstanding offer was withdrawn; using it now drops the launch."""

    offer_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class StatusUpdate:
    """A task's state changed (or an answer to reconciliation)."""

    task_id: str
    agent_id: str
    state: TaskState
    reason: TaskReason = TaskReason.UNSPECIFIED
    message: str = ""
    uuid: bytes = b""
    source: UpdateSource = UpdateSource.UNSPECIFIED
    timestamp: datetime | None = None
    healthy: bool | None = None
    exit_code: int | None = None
    usage: ResourceUsage | None = None
    """A command task's CPU time and peak memory, on its terminal update (None otherwise)."""

    @property
    def needs_acknowledgement(self) -> bool:
        """True when the update carries a uuid and must be acknowledged."""
        return bool(self.uuid)


@dataclass(frozen=True, slots=True)
class AgentLost:
    """An agent was lost; its tasks get their own ``StatusUpdate`` events."""

    agent_id: str
    message: str


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Periodic liveness signal from the master."""

    time: datetime | None


@dataclass(frozen=True, slots=True)
class Disconnected:
    """The connection to the master was lost; the SDK is reconnecting (offers are void)."""

    reason: str


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    """Fatal: the master ended or refused the subscription; no event follows."""

    message: str
    code: grpc.StatusCode


Event = (
    Subscribed
    | OffersReceived
    | OfferRescinded
    | StatusUpdate
    | AgentLost
    | Heartbeat
    | Disconnected
    | ErrorEvent
)
"""Any event of the SDK."""
