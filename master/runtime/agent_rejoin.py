"""A returning agent's tasks, reconciled with what the master knows: ``rejoin_pool`` puts an
agent back in the pool (marked unreachable, or known from the registry after a master restart)
with the tasks it still runs; ``reconcile_live_agent`` handles a live agent's reregistration.
Both are steps of ``AgentCalls.reregister`` (``master.runtime.agents``), on the runtime's loop.

Invariants: a reported task is adopted only if its framework is registered and its id is not
live elsewhere, and only if all adopted tasks fit the agent (else none is: trust nothing);
every other non-terminal reported task is killed on the agent; a task the master knew on the
agent that the agent no longer reports is LOST (DROPPED if it was never started on a live
agent), and each change reaches its framework through the ``Dispatcher``; terminal reported
tasks are left to the agent's own status updates. Reservations that no longer fit are left out
with a warning (dynamic ones first; the registry keeps them for a later return).
"""

from __future__ import annotations

import logging

from fairshare.logs import log_event
from fairshare.resources import ResourceVector
from fairshare.task_states import TaskReason, TaskState

from master.core import InvalidArgument, KillTask, RunningTask, TaskLaunch, TaskStatusChange
from master.model import StatusUpdate
from master.runtime.dispatch import Dispatcher
from master.runtime.sessions import AgentLink
from master.runtime.state import RuntimeState

__all__ = ["Reported", "reconcile_live_agent", "rejoin_pool"]

log = logging.getLogger("fairshare.master")

Reported = dict[tuple[str, str], tuple[TaskLaunch, StatusUpdate]]
"""The tasks a reregistering agent reports, by (framework id, task id): launch and status."""


def rejoin_pool(
    state: RuntimeState, dispatcher: Dispatcher, link: AgentLink, reported: Reported
) -> None:
    """Put a returning agent in the pool with the tasks it still runs (docs/architecture.md §4).

    Tasks of registered frameworks are adopted and reported to them in their current state;
    tasks of frameworks removed meanwhile (or whose ids went live elsewhere) are killed;
    tasks the master knew on the agent that it no longer reports are LOST. Terminal tasks
    are left to the agent's own status updates. The caller then says the agent is back
    (``AgentCalls.on_rejoined``) and asks for an allocation.
    """
    agent_id, spec, now = link.agent_id, link.spec, state.now()
    adopt: list[RunningTask] = []
    kill: list[tuple[str, str]] = []
    for (framework_id, task_id), (launch, status) in sorted(reported.items()):
        if status.state.is_terminal:
            continue
        if framework_id in state.frameworks and (framework_id, task_id) not in state.core.tasks:
            adopt.append(
                RunningTask(
                    framework_id,
                    task_id,
                    launch.name,
                    launch.resources,
                    status.state,
                    launch.preemptible,
                )
            )
        else:
            kill.append((framework_id, task_id))
    if not sum((t.resources for t in adopt), ResourceVector()).fits_in(spec.resources):
        kill.extend((t.framework_id, t.task_id) for t in adopt)  # cannot be: trust nothing
        adopt = []
    _add_with_reservations(state, link, adopt)
    link.in_pool = True
    link.recovering = False
    if not state.registry.agents[agent_id].active:
        state.core.handle_deactivate_agent(agent_id, now)
    for running in adopt:
        _adopt(
            state, dispatcher, link, running, reported[(running.framework_id, running.task_id)][0]
        )
    for framework_id, task_id in kill:
        link.send(KillTask(agent_id, framework_id, task_id))
    adopted = {(t.framework_id, t.task_id) for t in adopt}
    for entry in state.tasks.on_agent(agent_id):
        key = (entry.framework_id, entry.task_id)
        if key not in adopted and key not in reported and not entry.terminal:
            change = TaskStatusChange(key[0], key[1], agent_id, TaskState.LOST, "", "")
            dispatcher.master_update(
                change, TaskReason.AGENT_RESTARTED, "the agent came back without this task"
            )


def _add_with_reservations(state: RuntimeState, link: AgentLink, adopt: list[RunningTask]) -> None:
    """Put a returning agent in the core with its static reservations and the dynamic ones
    the registry kept for it. When they no longer fit (the agent came back smaller, or its
    tasks use what a reservation would take), the dynamic ones, then the static ones, are
    left out with a warning (the registry keeps the dynamic ones for a later return)."""
    agent_id, spec, now = link.agent_id, link.spec, state.now()
    static = dict(spec.reservations)
    dynamic = state.registry.reservations.get(agent_id, {})
    attempts = [(static, dynamic), (static, {}), ({}, {})]
    for reserved, kept in attempts:
        try:
            state.core.handle_add_agent(
                agent_id,
                spec.resources,
                now,
                spec.hostname,
                dict(spec.attributes),
                adopt,
                reserved=reserved,
                dynamic=kept,
            )
        except InvalidArgument as error:
            if not (reserved or kept):
                raise
            log_event(
                log,
                "agent.reservations_dropped",
                logging.WARNING,
                agent_id=agent_id,
                dynamic=len(kept),
                static=len(reserved),
                why=str(error),
            )
            continue
        return


def _adopt(
    state: RuntimeState,
    dispatcher: Dispatcher,
    link: AgentLink,
    task: RunningTask,
    launch: TaskLaunch,
) -> None:
    """Track an adopted task and tell its framework it runs (again)."""
    if task.state is TaskState.KILLING:
        link.send(KillTask(link.agent_id, task.framework_id, task.task_id))
    if state.tasks.get(task.framework_id, task.task_id) is None:
        state.tasks.launch(task.framework_id, link.agent_id, launch)
    change = TaskStatusChange(task.framework_id, task.task_id, link.agent_id, task.state, "", "")
    dispatcher.master_update(
        change, TaskReason.RECONCILIATION, "the agent reregistered with this task"
    )


def reconcile_live_agent(
    state: RuntimeState,
    dispatcher: Dispatcher,
    link: AgentLink,
    reported: dict[tuple[str, str], StatusUpdate],
) -> None:
    """A live agent reregistered: tasks it does not report are DROPPED (never started) or
    LOST; tasks it runs that the master does not want (or is killing) are killed."""
    agent_id = link.agent_id
    now = state.now()
    record = state.core.agents.get(agent_id)
    for key in sorted(record.task_keys) if record is not None else []:
        if key in reported:
            continue
        task = state.core.tasks[key]
        lost = TaskState.DROPPED if task.state is TaskState.STAGING else TaskState.LOST
        reason = (
            TaskReason.AGENT_DISCONNECTED
            if lost is TaskState.DROPPED
            else TaskReason.AGENT_RESTARTED
        )
        state.core.handle_task_status(agent_id, key[0], key[1], lost, now)
        change = TaskStatusChange(key[0], key[1], agent_id, lost, reason.value, "")
        dispatcher.master_update(change, reason, "the agent does not report this task")
    for (framework_id, task_id), status in reported.items():
        live = state.core.tasks.get((framework_id, task_id))
        unwanted = live is None and not status.state.is_terminal
        if unwanted or (live is not None and live.state is TaskState.KILLING):
            link.send(KillTask(agent_id, framework_id, task_id))
    dispatcher.request_allocation()
