"""The task calls of the Scheduler API, on the runtime's loop: kill, acknowledge and reconcile
(``FrameworkCalls`` in ``master.runtime.frameworks`` checks the caller owns the framework, and
whether its stream must be open, then calls these).

Invariants: every function checks all its input before it changes anything (a ``CoreError``
means nothing changed); acknowledgements are checked all before any is applied, and each that
clears a pending update goes back to the task's agent as an ``AckCommand`` (unless the
dispatcher's fault injection drops it), counted once; a kill names the task's own agent or
none; reconciliation answers with the task book's state, UNREACHABLE for a task of an agent
marked unreachable, UNKNOWN for a task the master does not know, and nothing yet for a task of
a recovering agent (answered when it reregisters).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from fairshare.task_states import TaskReason, TaskState

from master.core import InvalidArgument, NotFound
from master.model import AckCommand, StatusUpdate, UpdateEvent
from master.registry import UNREACHABLE
from master.runtime.dispatch import Dispatcher
from master.runtime.sessions import FrameworkLink
from master.runtime.state import RuntimeState, require_id
from master.runtime.taskbook import AckOutcome

__all__ = ["apply_acknowledgements", "kill_task", "reconcile_tasks"]


def kill_task(
    state: RuntimeState, dispatcher: Dispatcher, framework_id: str, task_id: str, agent_id: str
) -> None:
    """Ask the task's agent to kill it (``agent_id``, when given, must be the task's agent)."""
    require_id(task_id, "task_id")
    task = state.core.tasks.get((framework_id, task_id))
    if task is not None and agent_id and agent_id != task.agent_id:
        raise InvalidArgument(f"task {task_id!r} runs on agent {task.agent_id!r}, not {agent_id!r}")
    dispatcher.dispatch(state.core.handle_kill(framework_id, task_id, state.now()))
    state.tasks.mark_killing(framework_id, task_id)


def apply_acknowledgements(
    state: RuntimeState,
    dispatcher: Dispatcher,
    framework_id: str,
    acks: Sequence[tuple[str, str, bytes]],
) -> None:
    """Apply acknowledgements ``(agent_id, task_id, uuid)``, all checked before any is applied;
    each of a pending update goes back to its agent."""
    if not acks:
        raise InvalidArgument("no acknowledgements")
    for agent_id, task_id, uuid_ in acks:
        if not uuid_:
            raise InvalidArgument("uuid is empty: only updates with a uuid are acknowledged")
        require_id(task_id, "task_id")
        entry = state.tasks.get(framework_id, task_id)
        if entry is not None and agent_id and agent_id != entry.agent_id:
            raise InvalidArgument(
                f"task {task_id!r} is on agent {entry.agent_id!r}, not {agent_id!r}"
            )
        if state.tasks.ack_outcome(framework_id, task_id, uuid_) is AckOutcome.UNKNOWN:
            raise NotFound(f"task {task_id!r} has no status update with uuid {uuid_.hex()}")
    for agent_id, task_id, uuid_ in acks:
        entry = state.tasks.get(framework_id, task_id)
        target = entry.agent_id if entry is not None else agent_id
        if state.tasks.acknowledge(framework_id, task_id, uuid_) is not AckOutcome.FORWARD:
            continue
        state.counters.acknowledgements += 1
        agent = state.agents.get(target)
        if agent is not None and not dispatcher.drop_ack():
            agent.send(AckCommand(framework_id, task_id, uuid_))


def reconcile_tasks(
    state: RuntimeState,
    dispatcher: Dispatcher,
    link: FrameworkLink,
    refs: Sequence[tuple[str, str]],
) -> None:
    """Resend the latest state of tasks (all non-terminal ones when ``refs`` is empty)."""
    for task_id, _ in refs:
        require_id(task_id, "task_id")
    answers: list[tuple[str, str, TaskState]] = []
    for task_id, agent_id in refs:
        entry = state.tasks.get(link.framework_id, task_id)
        agent = state.agents.get(agent_id)
        if entry is None and agent is not None and agent.recovering:
            continue  # answered when the agent reregisters (its tasks are adopted)
        if entry is None:
            known = state.registry.agents.get(agent_id)
            unreachable = known is not None and known.state == UNREACHABLE
            lost = TaskState.UNREACHABLE if unreachable else TaskState.UNKNOWN
            answers.append((task_id, agent_id, lost))
        else:
            answers.append((task_id, entry.agent_id, entry.state))
    if not refs:
        answers = [
            (e.task_id, e.agent_id, e.state)
            for e in state.tasks.of_framework(link.framework_id)
            if not e.terminal
        ]
    now = time.time()
    for task_id, agent_id, task_state in answers:
        status = StatusUpdate(
            task_id, agent_id, task_state, TaskReason.RECONCILIATION, "reconciliation", now
        )
        link.send(UpdateEvent(dispatcher.for_framework(link, status)))
