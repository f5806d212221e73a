"""``TaskBook``: what the master knows of each task beyond the core's accounting.

The core (``MasterState``) holds live tasks' resources; the task book holds their descriptions,
latest states and the status updates forwarded to frameworks but not yet acknowledged, which is
what reconciliation, ``GetState`` and the acknowledgement protocol (agent.proto) need. Pure: no
I/O, no clock; the runtime calls it on its event loop.

Invariants:
- an entry exists for every task that is non-terminal, or terminal with an update still awaiting
  its framework's acknowledgement; a terminal entry with nothing pending is dropped at once;
- ``state`` changes only by the kernel's rule (``fairshare.task_states.advance``): a terminal
  state is final, KILLING is left only for a terminal state, and late retries of older updates
  never move a task back;
- a uuid is pending at most once per task and, once acknowledged, is remembered (the last
  ``ACKED_MEMORY`` per task) so a duplicate acknowledgement is told apart from an unknown one;
  the acknowledged uuids of the last ``ENDED_MEMORY`` dropped tasks are kept too, so an agent's
  late retry of a task's final update is recognised as acknowledged, not forwarded again;
- ``ended_counts`` counts every tracked task once, when it first reaches a terminal state (by that
  state); it only grows (the metric ``fairshare_tasks_ended_total``);
- ``on_end`` (when set) is called once per tracked task, when it first reaches a terminal state,
  after its entry holds the status that ended it (the runtime announces ``task.ended``: the
  dashboard's list of completed tasks).
"""

from __future__ import annotations

import enum
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from fairshare.resources import ResourceVector
from fairshare.task_states import TaskState, advance

from master.core import TaskLaunch
from master.model import StatusUpdate

__all__ = [
    "ACKED_MEMORY",
    "ENDED_MEMORY",
    "AckOutcome",
    "TaskBook",
    "TaskEntry",
    "UpdateOutcome",
]

ACKED_MEMORY = 16
ENDED_MEMORY = 4096

Key = tuple[str, str]  # (framework_id, task_id)


class AckOutcome(enum.Enum):
    """What an acknowledgement referred to."""

    FORWARD = "forward"  # a pending update: tell its agent
    DUPLICATE = "duplicate"  # acknowledged before: nothing to do
    STALE = "stale"  # the task is no longer known: nothing to do
    UNKNOWN = "unknown"  # the task is known but never had this update


class UpdateOutcome(enum.Enum):
    """What an agent's status update was to the book."""

    NEW = "new"  # pending now (or still): forward it to the framework
    ACKED = "acked"  # acknowledged before: only the agent missed the acknowledgement


@dataclass(eq=False)
class TaskEntry:
    """One tracked task: the core's ``TaskLaunch`` it was launched (or adopted) with, and where."""

    framework_id: str
    agent_id: str
    launch: TaskLaunch
    state: TaskState
    status: StatusUpdate | None = None  # latest status received or generated
    pending: dict[bytes, StatusUpdate] = field(default_factory=dict)
    acked: deque[bytes] = field(default_factory=lambda: deque(maxlen=ACKED_MEMORY))

    @property
    def task_id(self) -> str:
        """The task's id."""
        return self.launch.task_id

    @property
    def terminal(self) -> bool:
        """True when the task reached a terminal state."""
        return self.state.is_terminal


class TaskBook:
    """Tracked tasks, indexed by framework and by agent."""

    def __init__(self) -> None:
        self._entries: dict[Key, TaskEntry] = {}
        self._by_framework: dict[str, set[str]] = {}
        self._by_agent: dict[str, set[Key]] = {}
        self._ended: OrderedDict[Key, deque[bytes]] = OrderedDict()  # acked uuids of dropped
        self.ended_counts: dict[TaskState, int] = {}  # tasks that reached each terminal state
        self.on_end: Callable[[TaskEntry], None] | None = None  # told of each task's end, once

    def _advance(self, entry: TaskEntry, state: TaskState) -> bool:
        """Move ``entry`` on by the kernel's rule, counting it once when it ends; True then."""
        was_terminal = entry.terminal
        entry.state = advance(entry.state, state)
        if entry.terminal and not was_terminal:
            self.ended_counts[entry.state] = self.ended_counts.get(entry.state, 0) + 1
            return True
        return False

    def _tell_end(self, entry: TaskEntry) -> None:
        if self.on_end is not None:
            self.on_end(entry)

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[TaskEntry]:
        return iter(self._entries.values())

    def get(self, framework_id: str, task_id: str) -> TaskEntry | None:
        """The entry of a task, if tracked."""
        return self._entries.get((framework_id, task_id))

    def launch(self, framework_id: str, agent_id: str, launch: TaskLaunch) -> TaskEntry:
        """Track a task just launched on ``agent_id`` (STAGING); replaces a terminal entry of the
        same id."""
        self._drop((framework_id, launch.task_id))
        self._ended.pop((framework_id, launch.task_id), None)
        entry = TaskEntry(framework_id, agent_id, launch, TaskState.STAGING)
        self._add(entry)
        return entry

    def set_state(self, framework_id: str, task_id: str, status: StatusUpdate) -> None:
        """Record a state the master decided (kill, loss, drop); drops finished entries."""
        entry = self._entries.get((framework_id, task_id))
        if entry is None:
            return
        ended = self._advance(entry, status.state)
        entry.status = status
        if ended:
            self._tell_end(entry)
        self._drop_if_done(entry)

    def mark_killing(self, framework_id: str, task_id: str) -> None:
        """A kill was sent: the task is KILLING until its agent reports a terminal state."""
        entry = self._entries.get((framework_id, task_id))
        if entry is not None:
            self._advance(entry, TaskState.KILLING)  # not terminal: never ends it

    def record_agent_update(
        self, framework_id: str, status: StatusUpdate, latest_state: TaskState
    ) -> UpdateOutcome:
        """Record an agent's update (with uuid); tracks tasks the book had forgotten, too."""
        key = (framework_id, status.task_id)
        entry = self._entries.get(key)
        acked_before = self._ended.get(key)
        if entry is None and acked_before is not None and status.uuid in acked_before:
            return UpdateOutcome.ACKED  # a late retry of an ended task's acknowledged update
        if entry is None:
            launch = TaskLaunch(status.task_id, status.task_id, ResourceVector())
            entry = TaskEntry(framework_id, status.agent_id, launch, latest_state)
            self._add(entry)
        if status.uuid in entry.acked:
            if self._advance(entry, latest_state):
                self._tell_end(entry)
            self._drop_if_done(entry)
            return UpdateOutcome.ACKED
        ends = self._advance(entry, latest_state)
        entry.status = status
        entry.pending[status.uuid] = status
        if ends:
            self._tell_end(entry)
        return UpdateOutcome.NEW

    def ack_outcome(self, framework_id: str, task_id: str, uuid: bytes) -> AckOutcome:
        """What ``acknowledge`` would answer, changing nothing."""
        entry = self._entries.get((framework_id, task_id))
        if entry is None:
            ended = self._ended.get((framework_id, task_id))
            return AckOutcome.DUPLICATE if ended and uuid in ended else AckOutcome.STALE
        if uuid in entry.pending:
            return AckOutcome.FORWARD
        return AckOutcome.DUPLICATE if uuid in entry.acked else AckOutcome.UNKNOWN

    def acknowledge(self, framework_id: str, task_id: str, uuid: bytes) -> AckOutcome:
        """Apply a framework's acknowledgement."""
        entry = self._entries.get((framework_id, task_id))
        if entry is None:
            ended = self._ended.get((framework_id, task_id))
            return AckOutcome.DUPLICATE if ended and uuid in ended else AckOutcome.STALE
        if entry.pending.pop(uuid, None) is not None:
            entry.acked.append(uuid)
            self._drop_if_done(entry)
            return AckOutcome.FORWARD
        if uuid in entry.acked:
            return AckOutcome.DUPLICATE
        return AckOutcome.UNKNOWN

    def pending(self, framework_id: str) -> list[StatusUpdate]:
        """Forwarded updates of the framework still awaiting acknowledgement."""
        out: list[StatusUpdate] = []
        for task_id in sorted(self._by_framework.get(framework_id, ())):
            out.extend(self._entries[(framework_id, task_id)].pending.values())
        return out

    def of_framework(self, framework_id: str) -> list[TaskEntry]:
        """Every tracked task of the framework, by task id."""
        ids = sorted(self._by_framework.get(framework_id, ()))
        return [self._entries[(framework_id, task_id)] for task_id in ids]

    def on_agent(self, agent_id: str) -> list[TaskEntry]:
        """Every tracked task placed on the agent."""
        return [self._entries[key] for key in sorted(self._by_agent.get(agent_id, ()))]

    def remove_framework(self, framework_id: str) -> None:
        """Forget every task of the framework."""
        for task_id in list(self._by_framework.get(framework_id, ())):
            self._drop((framework_id, task_id))

    def forget(self, framework_id: str, task_id: str) -> None:
        """Forget one task."""
        self._drop((framework_id, task_id))

    def _add(self, entry: TaskEntry) -> None:
        key = (entry.framework_id, entry.task_id)
        self._entries[key] = entry
        self._by_framework.setdefault(entry.framework_id, set()).add(entry.task_id)
        self._by_agent.setdefault(entry.agent_id, set()).add(key)

    def _drop_if_done(self, entry: TaskEntry) -> None:
        if entry.terminal and not entry.pending:
            key = (entry.framework_id, entry.task_id)
            self._drop(key)
            if entry.acked:
                self._ended[key] = entry.acked
                while len(self._ended) > ENDED_MEMORY:
                    self._ended.popitem(last=False)

    def _drop(self, key: Key) -> None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        ids = self._by_framework[entry.framework_id]
        ids.discard(key[1])
        if not ids:
            del self._by_framework[entry.framework_id]
        keys = self._by_agent[entry.agent_id]
        keys.discard(key)
        if not keys:
            del self._by_agent[entry.agent_id]
