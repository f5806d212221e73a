"""``CompletedHistory``: the tasks that ended and the frameworks that were removed, for the
dashboard (Mesos's ``completed_tasks`` and ``completed_frameworks``), and ``EventFanout``.

An ``EventSink`` (``master.runtime.events``): the runtime announces ``task.ended`` once per
tracked task when it first reaches a terminal state, and ``framework.removed`` when a framework
is torn down or its failover timeout expires; this keeps both, in the leading master's memory
only (a new leader starts with empty lists: they are a convenience for the operator, not a
record). ``/api/v1/completed`` serves them (``master.web.routes``), to principals with the full
view only, as the events (they name frameworks and agents).

Invariants: at most ``max_tasks`` tasks and ``max_frameworks`` frameworks are kept, oldest
dropped first, so the memory is bounded whatever the cluster does; lists are served newest
first; each entry holds the event's fields (JSON scalars) and its time; notes arrive on the
runtime's loop, synchronously, and never raise.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

from master.runtime.events import EventKind, EventSink, MasterEvent

__all__ = ["MAX_COMPLETED_FRAMEWORKS", "MAX_COMPLETED_TASKS", "CompletedHistory", "EventFanout"]

MAX_COMPLETED_TASKS = 1000
"""Ended tasks kept (all frameworks together)."""
MAX_COMPLETED_FRAMEWORKS = 100
"""Removed frameworks kept."""


class CompletedHistory:
    """The last ended tasks and removed frameworks the runtime announced (an ``EventSink``)."""

    def __init__(
        self, max_tasks: int = MAX_COMPLETED_TASKS, max_frameworks: int = MAX_COMPLETED_FRAMEWORKS
    ) -> None:
        self.max_tasks = max_tasks
        self.max_frameworks = max_frameworks
        self._tasks: deque[dict[str, Any]] = deque(maxlen=max_tasks)
        self._frameworks: deque[dict[str, Any]] = deque(maxlen=max_frameworks)

    def note(self, event: MasterEvent) -> None:
        """Keep ``event`` if it is a task's end or a framework's removal."""
        if event.kind is EventKind.TASK_ENDED:
            self._tasks.append({**event.fields, "ended_at": event.time})
        elif event.kind is EventKind.FRAMEWORK_REMOVED:
            self._frameworks.append({**event.fields, "removed_at": event.time})

    def document(self) -> dict[str, Any]:
        """``/api/v1/completed``: the kept tasks and frameworks, newest first, and the caps."""
        return {
            "max_tasks": self.max_tasks,
            "max_frameworks": self.max_frameworks,
            "tasks": list(reversed(self._tasks)),
            "frameworks": list(reversed(self._frameworks)),
        }


class EventFanout:
    """An ``EventSink`` telling each of ``sinks`` every event, in order."""

    def __init__(self, sinks: Sequence[EventSink]) -> None:
        self.sinks = tuple(sinks)

    def note(self, event: MasterEvent) -> None:
        """Tell every sink."""
        for sink in self.sinks:
            sink.note(event)
