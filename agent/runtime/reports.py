"""``TaskReports``: what the executors report about tasks, turned into status updates.

Invariants: the executors report on the runtime's event loop; each report reaches the state
(``AgentState.handle_task_status``: one that does not move the task forward mints nothing and
is not logged), is checkpointed at once and wakes the update sender.
"""

from __future__ import annotations

import asyncio
import logging
import time

from fairshare.logs import log_event

from agent.core.state import AgentState
from agent.runtime.loop import now
from agent.runtime.persistence import Persistence
from agent.tasks.executors.base import TaskEvent
from agent.wire import reason_name

__all__ = ["TaskReports"]

_LOG = logging.getLogger("fairshare.agent")


class TaskReports:
    """The executors' ``Report`` callback."""

    def __init__(self, state: AgentState, persistence: Persistence, wake: asyncio.Event) -> None:
        self._state = state
        self._persistence = persistence
        self._wake = wake

    def on_task_event(self, event: TaskEvent) -> None:
        """A task's new state, as its executor saw it (stamped now unless it says when)."""
        update = self._state.handle_task_status(
            event.key,
            event.state,
            now(),
            time.time() if event.timestamp is None else event.timestamp,
            reason=event.reason,
            message=event.message,
            exit_code=event.exit_code,
            usage=event.usage,
        )
        self._persistence.persist()
        if update is not None:
            log_event(
                _LOG,
                "task.state.changed",
                framework_id=event.key[0],
                task_id=event.key[1],
                state=event.state.value,
                reason=reason_name(event.reason),
                exit_code=event.exit_code,
            )
        self._wake.set()
