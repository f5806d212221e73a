"""Task states: their names, which are terminal, and the one rule of how a state may change.

Every process speaks this vocabulary: the master's core and runtime, the agent, the SDK and the
fake master of ``framework_sdk.testing``. Values are the wire enum names without their prefix
(``TaskState.RUNNING.value == "RUNNING"`` is ``TASK_STATE_RUNNING`` on the wire; ``UNKNOWN`` is
the SDK's name for an unspecified state); ``fairshare.wire`` converts by name, so the two cannot
drift apart.

Invariants (the rule ``advance`` applies everywhere a state is recorded):
- a terminal state is final: nothing moves a task out of it;
- KILLING is left only for a terminal state;
- otherwise a state only moves forward, STAGING < STARTING < RUNNING < KILLING < terminal, so a
  late or retried update never moves a task back; the exception is UNREACHABLE (the master lost
  the task's agent): any live task may become UNREACHABLE, and any state the returning agent
  reports replaces it.

Pure: no imports beyond the standard library (the allocation core uses it).
"""

from __future__ import annotations

import enum
from typing import Final

__all__ = [
    "AGENT_REPORTED",
    "NOT_FORWARDED_WITHOUT_AWARENESS",
    "TERMINAL",
    "TaskReason",
    "TaskState",
    "advance",
]


class TaskState(enum.Enum):
    """Lifecycle state of a task (docs/architecture.md §3), named like Mesos's."""

    STAGING = "STAGING"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    KILLING = "KILLING"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    KILLED = "KILLED"
    ERROR = "ERROR"
    LOST = "LOST"
    DROPPED = "DROPPED"
    UNREACHABLE = "UNREACHABLE"
    GONE = "GONE"
    UNKNOWN = "UNKNOWN"

    @property
    def is_terminal(self) -> bool:
        """True for the states a task never leaves; a terminal task holds no resources."""
        return self in TERMINAL


class TaskReason(enum.Enum):
    """Why a task's state changed, named like Mesos's ``TaskStatus.Reason``: the wire's
    ``TaskStatus.Reason`` names without their ``REASON_`` prefix, converted by name
    (``fairshare.wire.reason_to_pb``/``reason_from_pb``); one vocabulary for the master, the
    agent and the SDK."""

    UNSPECIFIED = "UNSPECIFIED"
    AGENT_REMOVED = "AGENT_REMOVED"
    AGENT_UNREACHABLE = "AGENT_UNREACHABLE"
    AGENT_RESTARTED = "AGENT_RESTARTED"
    AGENT_DISCONNECTED = "AGENT_DISCONNECTED"
    AGENT_SHUTDOWN = "AGENT_SHUTDOWN"
    EXECUTOR_TERMINATED = "EXECUTOR_TERMINATED"
    COMMAND_FAILED = "COMMAND_FAILED"
    TASK_INVALID = "TASK_INVALID"
    TASK_KILLED_DURING_LAUNCH = "TASK_KILLED_DURING_LAUNCH"
    FRAMEWORK_REMOVED = "FRAMEWORK_REMOVED"
    RECONCILIATION = "RECONCILIATION"
    INVALID_OFFERS = "INVALID_OFFERS"
    MEMORY_LIMIT = "MEMORY_LIMIT"
    LAUNCH_FAILED = "LAUNCH_FAILED"
    COMMAND_INVALID = "COMMAND_INVALID"
    PREEMPTED = "PREEMPTED"


TERMINAL: Final = frozenset(
    {
        TaskState.FINISHED,
        TaskState.FAILED,
        TaskState.KILLED,
        TaskState.ERROR,
        TaskState.LOST,
        TaskState.DROPPED,
        TaskState.GONE,
    }
)
"""States after which a task holds no resources and never changes again."""

AGENT_REPORTED: Final = frozenset(
    {
        TaskState.STARTING,
        TaskState.RUNNING,
        TaskState.KILLING,
        TaskState.FINISHED,
        TaskState.FAILED,
        TaskState.KILLED,
        TaskState.ERROR,
        TaskState.LOST,
        TaskState.DROPPED,
    }
)
"""States an agent may report; the others (STAGING, UNREACHABLE, GONE, UNKNOWN) are the
master's to decide."""

NOT_FORWARDED_WITHOUT_AWARENESS: Final = frozenset(
    {TaskState.UNREACHABLE, TaskState.GONE, TaskState.DROPPED, TaskState.UNKNOWN}
)
"""States a framework without the PARTITION_AWARE capability is told as LOST (Mesos)."""

_RANK: Final = {
    TaskState.STAGING: 0,
    TaskState.STARTING: 1,
    TaskState.RUNNING: 2,
    TaskState.KILLING: 3,
}
_TERMINAL_RANK: Final = 4


def _rank(state: TaskState) -> int:
    if state in TERMINAL:
        return _TERMINAL_RANK
    return _RANK.get(state, -1)  # UNREACHABLE and UNKNOWN rank below every live state


def advance(current: TaskState, new: TaskState) -> TaskState:
    """The state a task is in after ``new`` is reported while it is ``current``."""
    if current in TERMINAL:
        return current
    if TaskState.UNREACHABLE in (current, new):
        return new
    return new if _rank(new) >= _rank(current) else current
