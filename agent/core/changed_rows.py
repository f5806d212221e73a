"""``ChangedRows``: what of ``AgentState`` changed since the checkpoint last took its changes.

Pure like the rest of ``agent.core``: it holds marks, never the state itself.

Invariants: a mark (a task key, the identity, the epoch) stays until ``take``; ``take`` hands out
each marked task key once, in sorted order, with its rows as the state has them at the time of
the take (never a difference to apply), the identity and the epoch only if marked, then forgets
every mark.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from agent.core.records import TaskKey
from agent.core.snapshot import CheckpointChanges, TaskChange

__all__ = ["ChangedRows"]


class ChangedRows:
    """The checkpoint rows touched since the last ``take``: task keys, the identity, the epoch."""

    __slots__ = ("_epoch", "_identity", "_tasks")

    def __init__(self) -> None:
        self._tasks: set[TaskKey] = set()
        self._identity = False
        self._epoch = False

    def task(self, key: TaskKey) -> None:
        """The rows of task ``key`` (its record, its unacknowledged updates) changed."""
        self._tasks.add(key)

    def tasks(self, keys: Iterable[TaskKey]) -> None:
        """The rows of every task of ``keys`` changed."""
        self._tasks.update(keys)

    def identity(self) -> None:
        """The agent id or the master id changed."""
        self._identity = True

    def epoch(self) -> None:
        """The highest leadership epoch seen grew."""
        self._epoch = True

    def __bool__(self) -> bool:
        return self._identity or self._epoch or bool(self._tasks)

    def take(
        self,
        task_rows: Callable[[TaskKey], TaskChange],
        identity: tuple[str | None, str | None],
        epoch: int,
    ) -> CheckpointChanges:
        """The marked rows as they are now (``task_rows`` of each marked key, ``identity`` and
        ``epoch`` if marked); forgets every mark."""
        marked_identity = identity if self._identity else None
        changes = tuple(task_rows(key) for key in sorted(self._tasks))
        marked_epoch = epoch if self._epoch else None
        self._tasks.clear()
        self._identity = self._epoch = False
        return CheckpointChanges(marked_identity, changes, marked_epoch)
