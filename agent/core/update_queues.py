"""``UpdateQueues``: the per-task FIFOs of unacknowledged status updates and their retry times.

Pure like the rest of ``agent.core``: no clock (``now`` is passed in, monotonic seconds) and no
randomness (the jittered backoff is the injected ``retry(attempt) -> seconds``).

Invariants:
- A task has a queue only while it has an unacknowledged update: a queue is never empty.
- Updates of one task leave in the order they were appended; only the head is ever handed out
  (``take_due``), and only ``acknowledge`` with the head's uuid removes it.
- ``take_due`` schedules each head it hands out for ``now + retry(attempts)``; an
  acknowledgement that leaves a next head, and ``all_due_at``, make it due at once with its
  attempts counted from zero.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from agent.core.records import StatusUpdate, TaskKey

__all__ = ["Acknowledged", "DueHead", "UpdateQueues"]


class Acknowledged(enum.Enum):
    """What an acknowledgement did to a task's queue."""

    IGNORED = "no queue, or not the head's uuid"
    NEXT_DUE = "head removed; the next update is due at once"
    EMPTIED = "head removed; the queue is gone"


@dataclass(frozen=True, slots=True)
class DueHead:
    """A head handed out for a (re)send, and how many times it has been handed out."""

    key: TaskKey
    update: StatusUpdate
    attempts: int


@dataclass(slots=True)
class _Queue:
    updates: deque[StatusUpdate] = field(default_factory=deque)
    next_send: float = 0.0
    attempts: int = 0


class UpdateQueues:
    """Unacknowledged updates by task key, each queue with its next send time."""

    def __init__(self, retry: Callable[[int], float]) -> None:
        self._retry = retry
        self._queues: dict[TaskKey, _Queue] = {}

    def __contains__(self, key: object) -> bool:
        return key in self._queues

    def __iter__(self) -> Iterator[TaskKey]:
        return iter(self._queues)

    def __bool__(self) -> bool:
        return bool(self._queues)

    def append(self, update: StatusUpdate, now: float | None = None) -> None:
        """Queue ``update`` behind its task's others; a new queue is due at ``now`` (None: at
        once, as restored queues are)."""
        queue = self._queues.get(update.key)
        if queue is None:
            queue = self._queues[update.key] = _Queue(next_send=0.0 if now is None else now)
        queue.updates.append(update)

    def acknowledge(self, key: TaskKey, uuid: bytes, now: float) -> Acknowledged:
        """Remove the head of ``key``'s queue if ``uuid`` is its uuid."""
        queue = self._queues.get(key)
        if queue is None or queue.updates[0].uuid != uuid:
            return Acknowledged.IGNORED
        queue.updates.popleft()
        if queue.updates:
            queue.next_send = now
            queue.attempts = 0
            return Acknowledged.NEXT_DUE
        del self._queues[key]
        return Acknowledged.EMPTIED

    def all_due_at(self, now: float) -> None:
        """Every head is due at ``now``, its attempts counted afresh (after connecting)."""
        for queue in self._queues.values():
            queue.next_send = now
            queue.attempts = 0

    def take_due(self, now: float, *, force: bool = False) -> list[DueHead]:
        """Heads due at ``now`` (all with ``force``), each rescheduled after its backoff."""
        due: list[DueHead] = []
        for key, queue in self._queues.items():
            if not force and queue.next_send > now:
                continue
            queue.attempts += 1
            queue.next_send = now + self._retry(queue.attempts)
            due.append(DueHead(key, queue.updates[0], queue.attempts))
        return due

    def next_due(self) -> float | None:
        """When the next head is due (None: nothing queued)."""
        if not self._queues:
            return None
        return min(queue.next_send for queue in self._queues.values())

    def pending(self, key: TaskKey) -> list[StatusUpdate]:
        """The task's unacknowledged updates, oldest first."""
        queue = self._queues.get(key)
        return [] if queue is None else list(queue.updates)

    def last(self, key: TaskKey) -> StatusUpdate:
        """The newest update queued for ``key`` (which must have a queue)."""
        return self._queues[key].updates[-1]

    def count(self) -> int:
        """Number of unacknowledged updates over all tasks."""
        return sum(len(queue.updates) for queue in self._queues.values())

    def all_updates(self) -> list[StatusUpdate]:
        """Every queued update, task by task, oldest first within a task."""
        return [update for queue in self._queues.values() for update in queue.updates]

    def clear(self) -> None:
        """Forget every queue."""
        self._queues.clear()
