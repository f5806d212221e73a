"""The master's noteworthy events as they happen: ``EventKind``, ``MasterEvent``, ``EventSink``.

The runtime (and the leadership of ``master/ha``) tells an ``EventSink`` what an operator cares
about: agents registered, back, lost, removed, deactivated or reactivated; frameworks
subscribed, disconnected or removed; a task's end (at DEBUG: the dashboard's completed tasks);
a task killed by the operator; weights, quotas and
reservations changed; the master started or recovered; leadership terms started or ended. The
dashboard's event list (``master.web.events.RecentEvents``) is such a sink; the daemon passes it
in ``RuntimeConfig.events``. The runtime imports no sink: ``NO_EVENTS`` (the default) drops
everything.

Invariants:
- Every event is noted where it is logged, with the same name (``EventKind``'s value) and
  fields: ``announce`` does both, so the log line and the event cannot drift apart.
- A sink is called synchronously on the runtime's loop, once per event, in the order the
  events happen; it must not block nor raise.
- An event's fields are JSON scalars (``str``, ``int``, ``float``, ``bool``, None; anything
  else is given as its ``str``); events are noted whatever the log level.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from fairshare.logs import log_event

__all__ = [
    "NO_EVENTS",
    "EventKind",
    "EventSink",
    "MasterEvent",
    "NoEvents",
    "Scalar",
    "announce",
]

Scalar = str | int | float | bool | None


class EventKind(enum.Enum):
    """The noteworthy events; each value is the event's name in the logs and the JSON API."""

    MASTER_STARTED = "master.started"
    MASTER_RECOVERED = "master.recovered"
    MASTER_RECOVERY_DONE = "master.recovery.done"
    AGENT_REGISTERED = "agent.registered"
    AGENT_REREGISTERED = "agent.reregistered"
    AGENT_UNREACHABLE = "agent.unreachable"
    AGENT_REMOVED = "agent.removed"
    AGENT_DEACTIVATED = "agent.deactivated"
    AGENT_REACTIVATED = "agent.reactivated"
    AGENT_DRAINING = "agent.draining"
    AGENT_DRAINED = "agent.drained"
    FRAMEWORK_SUBSCRIBED = "framework.subscribed"
    FRAMEWORK_DISCONNECTED = "framework.disconnected"
    FRAMEWORK_REMOVED = "framework.removed"
    TASK_KILLED_BY_OPERATOR = "task.killed.by.operator"
    TASK_KILLED_BY_DRAIN = "task.killed.by.drain"
    TASK_ENDED = "task.ended"
    WEIGHT_SET = "weight.set"
    QUOTA_SET = "quota.set"
    QUOTA_CLEARED = "quota.cleared"
    RESERVATION_MADE = "reservation.made"
    RESERVATION_UNDONE = "reservation.undone"
    LEADER_TERM_STARTED = "leader.term.started"
    LEADER_TERM_ENDED = "leader.term.ended"


@dataclass(frozen=True, slots=True)
class MasterEvent:
    """One noteworthy event: its kind, log level, wall-clock time and fields."""

    kind: EventKind
    level: int
    time: float
    fields: Mapping[str, Scalar]


class EventSink(Protocol):
    """Where the runtime tells its noteworthy events."""

    def note(self, event: MasterEvent) -> None:
        """Keep (or forward) ``event``; called on the runtime's loop, must not block."""


class NoEvents:
    """The sink that drops every event (the runtime's default)."""

    def note(self, event: MasterEvent) -> None:
        """Drop ``event``."""


NO_EVENTS: Final = NoEvents()


def _scalar(value: object) -> Scalar:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def announce(
    log: logging.Logger,
    sink: EventSink,
    kind: EventKind,
    level: int = logging.INFO,
    /,
    **fields: Any,
) -> None:
    """Log ``kind`` with ``fields`` (``fairshare.logs.log_event``) and note it to ``sink``."""
    log_event(log, kind.value, level, **fields)
    values = {key: _scalar(value) for key, value in fields.items()}
    sink.note(MasterEvent(kind, level, time.time(), values))
