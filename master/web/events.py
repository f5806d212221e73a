"""``RecentEvents``: the master's last noteworthy events, for the dashboard's event list.

A ``logging.Handler`` on the master's logger keeps the records of the events an operator cares
about (``NOTEWORTHY``: agents registered, lost, back, removed; frameworks subscribed,
disconnected, removed; maintenance and weights) in a bounded ring, so the runtime needs no second
record of what it already logs once (``fairshare.logs.log_event``).

Invariants: at most ``capacity`` events are kept, oldest dropped first; each has a sequence
number that only grows, so a client asks for ``since`` the last one it saw; events are recorded
only at the log level the master runs with (INFO by default: all of them); fields are copied as
JSON scalars (others as ``str``). Records arrive on the runtime's loop (the runtime logs
synchronously), and are read there too.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any, Final

__all__ = ["NOTEWORTHY", "RecentEvents"]

NOTEWORTHY: Final = frozenset(
    {
        "master.started",
        "master.recovered",
        "master.recovery.done",
        "agent.registered",
        "agent.reregistered",
        "agent.unreachable",
        "agent.removed",
        "agent.deactivated",
        "agent.reactivated",
        "framework.subscribed",
        "framework.disconnected",
        "framework.removed",
        "task.killed.by.operator",
        "weight.set",
    }
)
_FIELDS = "fairshare_fields"


def _scalar(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


class RecentEvents(logging.Handler):
    """The last ``capacity`` noteworthy events of the loggers it is attached to."""

    def __init__(self, capacity: int = 200) -> None:
        super().__init__(logging.INFO)
        self._events: deque[dict[str, Any]] = deque(maxlen=capacity)
        self._sequence = 0

    def emit(self, record: logging.LogRecord) -> None:
        event = record.msg if isinstance(record.msg, str) else ""
        if event not in NOTEWORTHY:
            return
        self._sequence += 1
        fields = getattr(record, _FIELDS, {})
        self._events.append(
            {
                "seq": self._sequence,
                "time": record.created,
                "level": record.levelname,
                "event": event,
                "fields": {key: _scalar(value) for key, value in fields.items()},
            }
        )

    def since(self, sequence: int = 0) -> list[dict[str, Any]]:
        """The kept events with a sequence number above ``sequence``, oldest first."""
        return [event for event in self._events if event["seq"] > sequence]
