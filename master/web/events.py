"""``RecentEvents``: the master's last noteworthy events, for the dashboard's event list.

An ``EventSink`` (``master.runtime.events``): the daemon passes it to the runtime in
``RuntimeConfig.events``, and the runtime notes each event an operator cares about where it
logs it (agents registered, back, lost, removed, deactivated, reactivated; frameworks
subscribed, disconnected, removed; a task killed by the operator; weights, quotas and
reservations changed; the master started or recovered; leadership terms). ``/api/v1/events``
serves them (``master.web.routes``).

Invariants: at most ``capacity`` events are kept, oldest dropped first; each has a sequence
number that only grows, so a client asks for ``since`` the last one it saw; every event noted is
kept, whatever the log level, but ``task.ended`` (one per task: the dashboard's completed tasks,
``master.web.completed``, list them; here they would push every other event out); its fields
are JSON scalars already (``MasterEvent``). Events
arrive on the runtime's loop (``note`` is called synchronously) and are read there too.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from master.runtime.events import EventKind, MasterEvent

__all__ = ["RecentEvents"]


class RecentEvents:
    """The last ``capacity`` noteworthy events the runtime noted (an ``EventSink``)."""

    def __init__(self, capacity: int = 200) -> None:
        self._events: deque[dict[str, Any]] = deque(maxlen=capacity)
        self._sequence = 0

    def note(self, event: MasterEvent) -> None:
        """Keep ``event`` as the JSON object ``/api/v1/events`` serves."""
        if event.kind is EventKind.TASK_ENDED:
            return
        self._sequence += 1
        self._events.append(
            {
                "seq": self._sequence,
                "time": event.time,
                "level": logging.getLevelName(event.level),
                "event": event.kind.value,
                "fields": dict(event.fields),
            }
        )

    def since(self, sequence: int = 0) -> list[dict[str, Any]]:
        """The kept events with a sequence number above ``sequence``, oldest first."""
        return [event for event in self._events if event["seq"] > sequence]
