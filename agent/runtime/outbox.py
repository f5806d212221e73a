"""``Outbox``: what the agent sends on an established session: status updates and heartbeats.

Two loops share the session's stream. The update sender sends every due head of a task's FIFO
(``AgentState.take_due``), ``MAX_UPDATES_PER_MESSAGE`` per ``updates`` message, whenever it is
woken (a report, a command) or the next head is due (re-sent with jittered backoff until
acknowledged). The heartbeat loop sends a heartbeat whenever nothing else was sent for the
heartbeat interval the master set.

Invariants: the state's changes are checkpointed before any update is sent (a failed write ends
the session: ``Outcome.STOP``); a message for a stream that is over is not queued (``send`` says
False; its updates are due at once on the next session, and the reader reports how the stream
ended); waits use ``asyncio.timeout``, never ``wait_for`` (``agent.runtime.loop``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Final

from fairshare.logs import log_event
from fairshare.v1 import agent_pb2

from agent.core.decisions import Outgoing
from agent.core.state import AgentState
from agent.runtime.config import MasterSettings
from agent.runtime.loop import now
from agent.runtime.persistence import Persistence
from agent.runtime.stream import MasterStream, Outcome
from agent.wire import heartbeat_message, updates_message

__all__ = ["MAX_UPDATES_PER_MESSAGE", "Outbox"]

_LOG = logging.getLogger("fairshare.agent")
MAX_UPDATES_PER_MESSAGE: Final = 1000


class Outbox:
    """Status updates and heartbeats to the master."""

    def __init__(
        self,
        state: AgentState,
        persistence: Persistence,
        settings: MasterSettings,
        wake: asyncio.Event,
    ) -> None:
        self._state = state
        self._persistence = persistence
        self._settings = settings
        self._wake = wake
        self.last_sent = 0.0  # loop time of the last message to the master
        self.heartbeats_total = 0
        self.heartbeat_failures_total = 0

    def send(self, stream: MasterStream, message: agent_pb2.ConnectRequest) -> bool:
        """Queue one message for the stream; False if the stream is over (the reader then
        reports how it ended)."""
        if not stream.send(message):
            return False
        self.last_sent = now()
        return True

    async def heartbeats(self, stream: MasterStream) -> Outcome:
        """A heartbeat whenever nothing was sent for the heartbeat interval."""
        while True:
            interval = self._settings.heartbeat_interval
            idle = now() - self.last_sent
            if idle < interval:
                await asyncio.sleep(interval - idle)
                continue
            if self.send(stream, heartbeat_message(self._state.used)):
                self.heartbeats_total += 1
            else:
                self.heartbeat_failures_total += 1
                await asyncio.sleep(interval)

    async def send_updates(self, stream: MasterStream) -> Outcome:
        """Send the due updates whenever woken or when the next one is due."""
        while True:
            self._wake.clear()
            if not self._persistence.persist():
                return Outcome.STOP
            due = self._state.take_due(now())
            if due:
                self.send_batch(stream, due)
            next_due = self._state.next_due()
            timeout = None if next_due is None else max(0.0, next_due - now())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()

    def send_batch(self, stream: MasterStream, due: Sequence[Outgoing]) -> bool:
        """Send due updates, ``MAX_UPDATES_PER_MESSAGE`` per message; False if the stream
        is over (their retries are due at once on the next session)."""
        agent_id = self._state.agent_id or ""
        for outgoing in due:
            if outgoing.attempt > 1:
                update = outgoing.update
                log_event(
                    _LOG,
                    "status_update.retried",
                    task_id=update.task_id,
                    state=update.state.value,
                    attempt=outgoing.attempt,
                    uuid=update.uuid.hex(),
                )
        for start in range(0, len(due), MAX_UPDATES_PER_MESSAGE):
            chunk = due[start : start + MAX_UPDATES_PER_MESSAGE]
            message = updates_message(agent_id, [(o.update, o.latest_state) for o in chunk])
            if not self.send(stream, message):
                return False
        return True
