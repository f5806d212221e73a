"""The checkpoint seam of ``AgentState``: everything it holds, and what changed.

``AgentSnapshot`` is the whole state as plain values (``AgentState.snapshot`` and
``AgentState.restore``; ``agent.durability.checkpoint`` loads one); ``CheckpointChanges`` is
what changed since the last ``take_changes()``, row by row, for a write of only those rows.

Invariants: plain immutable values; a ``TaskChange`` holds a task key's rows as they are now
(``task`` None: the row goes), never a difference to apply.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.core.records import StatusUpdate, TaskKey, TaskView

__all__ = ["AgentSnapshot", "CheckpointChanges", "TaskChange"]


@dataclass(frozen=True, slots=True)
class AgentSnapshot:
    """Everything a checkpoint must keep (``agent.durability`` persists and restores it)."""

    agent_id: str | None
    master_id: str | None
    tasks: tuple[TaskView, ...]
    updates: tuple[StatusUpdate, ...]  # unacknowledged, FIFO order per task
    epoch: int = 0  # the highest leadership epoch seen (agent.proto: Leadership)


@dataclass(frozen=True, slots=True)
class TaskChange:
    """The checkpoint rows of one task key, as they are now."""

    key: TaskKey
    task: TaskView | None  # None: the task is no longer tracked (delete its row)
    updates: tuple[StatusUpdate, ...]  # its unacknowledged updates, oldest first (may be empty)


@dataclass(frozen=True, slots=True)
class CheckpointChanges:
    """What changed since the last ``take_changes()``: the rows a checkpoint must rewrite."""

    identity: tuple[str | None, str | None] | None  # (agent_id, master_id) if it changed
    tasks: tuple[TaskChange, ...]
    epoch: int | None = None  # the highest epoch seen, if it grew

    def __bool__(self) -> bool:
        return self.identity is not None or bool(self.tasks) or self.epoch is not None
