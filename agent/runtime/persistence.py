"""``Persistence``: the runtime's writes of the state's changes to the checkpoint.

With a ``CheckpointStore`` the state was restored from it at construction; ``recover`` resumes,
restarts, reattaches or reports its tasks when ``run()`` starts (``agent.durability.recovery``)
and checkpoints the outcome.

Invariants: every state change is written (only the changed rows, one transaction) before it
can be externalized: before a launch starts in the executor, before a registered id is used,
before the reregister that reports the tasks, before any update is sent. A failed write is
fatal: ``fatal`` says why, the stop event is set and nothing is written after it (the agent
stops without draining: what it would report could not be recovered). Without a store the
changes are taken and dropped.
"""

from __future__ import annotations

import asyncio
import logging
import time

from fairshare.logs import log_event

from agent.core.state import AgentState
from agent.durability.checkpoint import CheckpointError, CheckpointStore
from agent.durability.recovery import recover
from agent.runtime.loop import now
from agent.tasks.executors.router import TaskExecutors

__all__ = ["Persistence"]

_LOG = logging.getLogger("fairshare.agent")


class Persistence:
    """The state's changes, written to the checkpoint store (if any) as they happen."""

    def __init__(
        self, state: AgentState, store: CheckpointStore | None, stop: asyncio.Event
    ) -> None:
        self._state = state
        self._store = store
        self._stop = stop
        self.fatal: str | None = None  # why a write failed (the agent stops)

    def persist(self) -> bool:
        """Write the state's changes to the checkpoint; False once a write has failed."""
        if self.fatal is not None:
            return False
        changes = self._state.take_changes()
        if self._store is None or not changes:
            return True
        try:
            self._store.write(changes)
        except CheckpointError as error:
            self.fatal = str(error)
            log_event(_LOG, "checkpoint.write.failed", logging.ERROR, error=self.fatal)
            self._stop.set()
            return False
        return True

    def recover(self, executor: TaskExecutors) -> None:
        """Resume, restart or report the checkpointed tasks, then checkpoint the outcome."""
        if self._state.agent_id is not None or self._state.tasks():
            recover(self._state, executor, time.time(), now())
            self.persist()
