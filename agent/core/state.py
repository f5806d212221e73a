"""``AgentState``: the agent's pure state machine (registration, tasks, unacknowledged updates).

One owner of state: the runtime calls the ``on_*`` and ``handle_*`` methods on its event loop and
performs the I/O they ask for. The state does no I/O, uses no asyncio and reads no clock: ``now``
(monotonic seconds, for retry scheduling) and ``wall`` (epoch seconds, stamped on updates) are
passed in; uuids and jitter come from injected sources, so tests are deterministic. It knows
no wire type: a launch brings ``TaskSpec`` values (``agent.wire`` decodes the master's
``TaskInfo``), its answers are the plain values of ``agent.core.decisions``.

Invariants:
- A task is keyed by ``(framework_id, task_id)``. Its record lives until it is terminal and every
  update about it is acknowledged; a launch of a key that is still live is ignored (idempotent).
- A task's ``TaskSpec`` is kept as given, its ``agent_id`` filled in with the agent's; one of
  another agent, or whose description has a problem (``TaskSpec.launch`` is a ``TaskProblem``),
  is answered with TASK_STATE_ERROR and the problem's reason.
- ``used == sum of resources of non-terminal tasks`` (STAGING counts) and ``used <= total``:
  a launch that does not fit the free resources is answered with TASK_STATE_ERROR.
- A task's state only moves forward (STAGING < STARTING < RUNNING < KILLING < terminal): a
  report that would not advance it is ignored, so no state is ever reported twice.
- Updates of one task form a FIFO (``agent.core.update_queues``). Only its head is handed out
  by ``take_due`` (first at once, then again after a jittered exponential backoff) and only
  while connected. An acknowledgement removes the head only if its uuid is the head's:
  duplicate and unknown uuids are ignored, so an update is never dropped unacknowledged and
  acknowledgements are never applied twice.
- After (re)connecting every head is due at once (the contract's "immediately after
  reregistering").
- A task's ``running_since`` is the ``wall`` time of its RUNNING report (None before), so a
  placeholder's deadline (``running_since + duration``) survives an agent restart.

Checkpoint seam (``agent.core.snapshot``): every change marks what it touched (a task key, the
identity: agent id and master id, or the epoch; ``agent.core.changed_rows``);
``take_changes()`` hands out the rows to rewrite since the last call and forgets them, so the
runtime writes only what changed (``agent.durability.checkpoint``). ``snapshot()`` returns
everything as plain values and ``AgentState.restore`` rebuilds a state from it, equal in tasks,
updates, ``used`` and identity; a restored state starts disconnected with nothing dirty.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from fairshare.command import ResourceUsage
from fairshare.resources import ResourceVector
from fairshare.task_states import TERMINAL, TaskState, advance

from agent.core.changed_rows import ChangedRows
from agent.core.decisions import (
    KillDecision,
    LaunchResult,
    Outgoing,
    RegisterCall,
    ReregisterCall,
)
from agent.core.records import (
    AgentSpec,
    LaunchSpec,
    StatusUpdate,
    TaskKey,
    TaskProblem,
    TaskReason,
    TaskSpec,
    TaskView,
)
from agent.core.snapshot import AgentSnapshot, CheckpointChanges, TaskChange
from agent.core.tracked_task import TrackedTask, check_launch
from agent.core.update_queues import Acknowledged, UpdateQueues

__all__ = ["AgentState"]


class AgentState:
    """Registration, tasks and the per-task FIFO of unacknowledged status updates."""

    def __init__(
        self, spec: AgentSpec, *, retry: Callable[[int], float], new_uuid: Callable[[], bytes]
    ) -> None:
        self.spec = spec
        self.agent_id: str | None = None
        self.master_id: str | None = None
        self.epoch = 0  # the highest leadership epoch of a master seen (checkpointed)
        self.connected = False
        self._new_uuid = new_uuid
        self._tasks: dict[TaskKey, TrackedTask] = {}
        self._queues = UpdateQueues(retry)
        self._used = ResourceVector()
        self._changed = ChangedRows()  # what take_changes() hands out next
        # Counters for metrics (monotonic over the life of the state).
        self.updates_minted_total = 0
        self.updates_sent_total = 0
        self.update_retries_total = 0
        self.acks_applied_total = 0
        self.acks_ignored_total = 0
        self.terminal_total: Counter[str] = Counter()

    # -- registration ---------------------------------------------------------------------------

    def registration(self) -> RegisterCall | ReregisterCall:
        """Register when the agent has no id, else reregister with everything it tracks."""
        if self.agent_id is None:
            return RegisterCall(self.spec)
        return ReregisterCall(
            self.agent_id, self.spec, tuple(self.tasks()), tuple(self.framework_ids())
        )

    def admits(self, epoch: int) -> bool:
        """A master of leadership ``epoch`` may command this agent (not an older leader's)."""
        return epoch >= self.epoch

    def saw_epoch(self, epoch: int) -> None:
        """A master of ``epoch`` was admitted: older leaders are refused from now on."""
        if epoch > self.epoch:
            self.epoch = epoch
            self._changed.epoch()

    def on_registered(self, agent_id: str, master_id: str) -> None:
        """The master registered the agent: remember the master-minted id."""
        self.agent_id = agent_id
        self.master_id = master_id
        self._changed.identity()

    def on_reregistered(self, master_id: str) -> None:
        """The master reregistered the agent (``master_id`` may be new: the master restarted)."""
        if master_id != self.master_id:
            self.master_id = master_id
            self._changed.identity()

    def on_connected(self, now: float) -> None:
        """The stream is established: every pending update is due at once."""
        self.connected = True
        self._queues.all_due_at(now)

    def on_disconnected(self) -> None:
        """The session ended; nothing is sent until ``on_connected``."""
        self.connected = False

    def on_removed(self) -> list[TaskKey]:
        """The master removed the agent for good (FAILED_PRECONDITION): forget everything.

        Returns the live tasks the executor must stop (silently: the master already reported
        them GONE). The next ``registration()`` is a fresh register.
        """
        live = [key for key, task in self._tasks.items() if task.state not in TERMINAL]
        self._changed.tasks(self._tasks)
        self._changed.tasks(self._queues)
        self._changed.identity()
        self._tasks.clear()
        self._queues.clear()
        self._used = ResourceVector()
        self.agent_id = None
        self.master_id = None
        self.connected = False
        return live

    # -- commands -------------------------------------------------------------------------------

    def handle_launch(
        self, framework_id: str, tasks: Sequence[TaskSpec], now: float, wall: float
    ) -> LaunchResult:
        """Admit the tasks that fit (STAGING), answer the invalid ones with TASK_STATE_ERROR."""
        if not framework_id:
            return LaunchResult(ignored=("launch without framework_id",))
        accepted: list[tuple[TaskKey, LaunchSpec]] = []
        rejected: list[tuple[TaskKey, str]] = []
        ignored: list[str] = []
        for given in tasks:
            key = (framework_id, given.task_id)
            if not given.task_id:
                ignored.append(f"task without task_id in a launch of framework {framework_id}")
                continue
            existing = self._tasks.get(key)
            if existing is not None and existing.state not in TERMINAL:
                ignored.append(f"task {given.task_id} of {framework_id} is already live")
                continue
            task, launch = check_launch(given, self.agent_id, self.free)
            if isinstance(launch, TaskProblem):
                staging = TaskState.STAGING
                self._tasks[key] = TrackedTask(framework_id, task, ResourceVector(), staging)
                self._advance(key, TaskState.ERROR, now, wall, launch.reason, launch.message, None)
                rejected.append((key, launch.message))
                continue
            self._tasks[key] = TrackedTask(framework_id, task, task.resources, TaskState.STAGING)
            self._changed.task(key)
            self._used = self._used + task.resources
            accepted.append((key, launch))
        return LaunchResult(tuple(accepted), tuple(rejected), tuple(ignored))

    def handle_kill(self, framework_id: str, task_id: str, now: float, wall: float) -> KillDecision:
        """KILLING for a live task, DROPPED for an unknown one, nothing for a terminal one."""
        key = (framework_id, task_id)
        task = self._tasks.get(key)
        if task is None:
            message = "the agent does not know this task"
            dropped = TaskState.DROPPED
            self._mint(key, dropped, now, wall, TaskReason.UNSPECIFIED, message, None)
            return KillDecision.UNKNOWN
        if task.state in TERMINAL:
            return KillDecision.ALREADY_TERMINAL
        if task.state != TaskState.KILLING:
            killing = TaskState.KILLING
            self._advance(key, killing, now, wall, TaskReason.UNSPECIFIED, "kill requested", None)
        return KillDecision.KILL

    def handle_task_status(
        self,
        key: TaskKey,
        state: TaskState,
        now: float,
        wall: float,
        *,
        reason: TaskReason = TaskReason.UNSPECIFIED,
        message: str = "",
        exit_code: int | None = None,
        usage: ResourceUsage | None = None,
    ) -> StatusUpdate | None:
        """The executor reports a state; returns the minted update, None if it was ignored."""
        task = self._tasks.get(key)
        if task is None or state is task.state or advance(task.state, state) is task.state:
            return None  # not a step forward (fairshare.task_states)
        return self._advance(key, state, now, wall, reason, message, exit_code, usage)

    def handle_ack(self, framework_id: str, task_id: str, uuid: bytes, now: float) -> bool:
        """Drop the task's head update if ``uuid`` is its uuid; the next one is due at once."""
        key = (framework_id, task_id)
        outcome = self._queues.acknowledge(key, uuid, now)
        if outcome is Acknowledged.IGNORED:
            self.acks_ignored_total += 1
            return False
        self._changed.task(key)
        self.acks_applied_total += 1
        if outcome is Acknowledged.NEXT_DUE:
            return True
        task = self._tasks.get(key)
        if task is not None and task.state in TERMINAL:
            del self._tasks[key]
        return True

    # -- status updates ------------------------------------------------------------------------

    def _advance(
        self,
        key: TaskKey,
        state: TaskState,
        now: float,
        wall: float,
        reason: TaskReason,
        message: str,
        exit_code: int | None,
        usage: ResourceUsage | None = None,
    ) -> StatusUpdate:
        task = self._tasks[key]
        if state in TERMINAL and task.state not in TERMINAL:
            self._used = self._used.saturating_sub(task.resources)
            self.terminal_total[state.value] += 1
        task.state = state
        if state == TaskState.RUNNING:
            task.running_since = wall
        update = self._mint(key, state, now, wall, reason, message, exit_code, usage)
        task.latest = update
        return update

    def _mint(
        self,
        key: TaskKey,
        state: TaskState,
        now: float,
        wall: float,
        reason: TaskReason,
        message: str,
        exit_code: int | None,
        usage: ResourceUsage | None = None,
    ) -> StatusUpdate:
        uuid = self._new_uuid()
        update = StatusUpdate(key[0], key[1], state, uuid, wall, reason, message, exit_code, usage)
        self._queues.append(update, now)
        self._changed.task(key)
        self.updates_minted_total += 1
        return update

    def take_due(self, now: float, *, force: bool = False) -> list[Outgoing]:
        """Heads of the task FIFOs due for a (re)send at ``now`` (all heads with ``force``).

        Each returned head is scheduled for its next retry after a jittered backoff; nothing is
        due while disconnected.
        """
        if not self.connected:
            return []
        due: list[Outgoing] = []
        for head in self._queues.take_due(now, force=force):
            if head.attempts > 1:
                self.update_retries_total += 1
            self.updates_sent_total += 1
            due.append(Outgoing(head.update, self._latest_state(head.key), head.attempts))
        return due

    def next_due(self) -> float | None:
        """When the next head is due (None: nothing pending or disconnected)."""
        if not self.connected:
            return None
        return self._queues.next_due()

    def _latest_state(self, key: TaskKey) -> TaskState:
        task = self._tasks.get(key)
        return task.state if task is not None else self._queues.last(key).state

    # -- views ---------------------------------------------------------------------------------

    def task(self, key: TaskKey) -> TaskView | None:
        """The tracked task, or None."""
        task = self._tasks.get(key)
        return None if task is None else task.view()

    def tasks(self) -> list[TaskView]:
        """Every tracked task: live ones and terminal ones with unacknowledged updates."""
        return [task.view() for task in self._tasks.values()]

    def framework_ids(self) -> list[str]:
        """Frameworks the agent holds state for (tasks or unacknowledged updates), sorted."""
        return sorted({key[0] for key in self._tasks} | {key[0] for key in self._queues})

    def pending(self, key: TaskKey) -> list[StatusUpdate]:
        """The task's unacknowledged updates, oldest first."""
        return self._queues.pending(key)

    @property
    def used(self) -> ResourceVector:
        """Resources of the non-terminal tasks."""
        return self._used

    @property
    def free(self) -> ResourceVector:
        """Total minus used."""
        return self.spec.resources.saturating_sub(self._used)

    def pending_updates(self) -> int:
        """Number of unacknowledged updates over all tasks."""
        return self._queues.count()

    def task_counts(self) -> dict[str, int]:
        """Tracked tasks by state name (``RUNNING``, ...)."""
        return dict(Counter(task.state.value for task in self._tasks.values()))

    # -- checkpoint ----------------------------------------------------------------------------

    def snapshot(self) -> AgentSnapshot:
        """Tasks and unacknowledged updates as plain values (the checkpoint seam)."""
        updates = tuple(self._queues.all_updates())
        return AgentSnapshot(
            self.agent_id, self.master_id, tuple(self.tasks()), updates, self.epoch
        )

    def take_changes(self) -> CheckpointChanges:
        """The rows changed since the last call (each key once, as it is now); forgets them."""
        return self._changed.take(
            lambda key: TaskChange(key, self.task(key), tuple(self.pending(key))),
            (self.agent_id, self.master_id),
            self.epoch,
        )

    def has_changes(self) -> bool:
        """True if something changed since the last ``take_changes()``."""
        return bool(self._changed)

    @classmethod
    def restore(
        cls,
        spec: AgentSpec,
        snapshot: AgentSnapshot,
        *,
        retry: Callable[[int], float],
        new_uuid: Callable[[], bytes],
    ) -> AgentState:
        """A state holding ``snapshot``'s identity, tasks and updates (disconnected, clean).

        Terminal tasks without unacknowledged updates are not kept (they would have been
        forgotten at their last acknowledgement); ``used`` is recomputed from the live tasks.
        """
        state = cls(spec, retry=retry, new_uuid=new_uuid)
        state.agent_id = snapshot.agent_id
        state.master_id = snapshot.master_id
        state.epoch = snapshot.epoch
        for update in snapshot.updates:
            state._queues.append(update)
        for view in snapshot.tasks:
            terminal = view.state in TERMINAL
            if terminal and view.key not in state._queues:
                state._changed.task(view.key)  # drop its stale row at the next write
                continue
            state._tasks[view.key] = TrackedTask.from_view(view)
            if not terminal:
                state._used = state._used + view.resources
        return state
