"""``AgentCalls``: the Agent API side of the master runtime (agent.proto).

Every method runs synchronously on the runtime's loop and checks everything before it changes
anything (a ``CoreError`` means nothing changed). An agent is admitted durably (the registry row
is committed before Register answers) and joins the pool when its first Commands stream attaches.
One marked unreachable (``AgentLoss``) is answered NOT_FOUND until it reregisters: then it rejoins
the pool with the tasks it still runs (adopted and reported to their frameworks again; tasks it
lost are LOST). Only agents the registry does not know or marked GONE are refused
(FAILED_PRECONDITION: register afresh). After a master restart the agents of the registry are
``recovering`` until they reregister the same way; each that does calls ``on_rejoined`` (the
daemon wires it to ``Recovery.agent_back``).

Status updates: an agent's update is forwarded to its framework until acknowledged (the agent
retries); updates no framework will acknowledge (framework gone, KILLING to a framework without
the capability) are acknowledged by the master itself so the agent never retries forever.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Callable, Sequence

from fairshare.logs import log_event
from fairshare.resources import ResourceVector
from fairshare.task_states import TaskState

from master.core import (
    FailedPrecondition,
    InvalidArgument,
    KillTask,
    NotFound,
    RunningTask,
    TaskLaunch,
    TaskStatusChange,
)
from master.model import AckCommand, AgentCommand, AgentSpec, StatusUpdate, StreamEnd, UpdateEvent
from master.registry import ADMITTED, GONE, AgentEntry
from master.runtime.agent_loss import AgentLoss
from master.runtime.dispatch import Dispatcher
from master.runtime.sessions import AgentLink, Channel
from master.runtime.state import RuntimeState, require_id
from master.runtime.taskbook import UpdateOutcome

__all__ = ["AgentCalls", "ReportedTask"]

log = logging.getLogger("fairshare.master")

ReportedTask = tuple[str, TaskLaunch, StatusUpdate]
"""A task a reregistering agent reports: (framework id, how it was launched, its status)."""
Reported = dict[tuple[str, str], tuple[TaskLaunch, StatusUpdate]]


class AgentCalls:
    """Register, Reregister, Heartbeat, Commands, UpdateStatus."""

    def __init__(self, state: RuntimeState, dispatcher: Dispatcher, loss: AgentLoss) -> None:
        self.state = state
        self.dispatcher = dispatcher
        self.loss = loss
        self.on_rejoined: Callable[[], None] = lambda: None

    def _live_agent(self, agent_id: str) -> AgentLink:
        require_id(agent_id, "agent_id")
        link = self.state.agents.get(agent_id)
        if link is not None:
            link.last_heard = self.state.now()
            return link
        entry = self.state.registry.agents.get(agent_id)
        if entry is not None and entry.state == GONE:
            raise FailedPrecondition(f"agent {agent_id!r} was removed: register afresh")
        raise NotFound(f"agent {agent_id!r} has no live registration: reregister")

    def register(self, spec: AgentSpec) -> tuple[str, float, str]:
        """Admit a new agent; returns (agent_id, heartbeat interval, master_id)."""
        state = self.state
        state.refuse_if_draining()
        if not spec.resources:
            raise InvalidArgument("agent_info.resources is empty")
        agent_id = f"ag-{uuid.uuid4().hex}"
        registered_at = time.time()
        with state.durably():
            state.registry.admit_agent(AgentEntry(agent_id, spec, registered_at))
        state.agents[agent_id] = AgentLink(agent_id, spec, registered_at, state.now())
        log_event(log, "agent.registered", agent_id=agent_id, resources=str(spec.resources))
        return agent_id, state.config.agent_heartbeat, state.master_id

    def heartbeat(self, agent_id: str) -> str:
        """The agent is alive; returns the master_id."""
        self._live_agent(agent_id)
        return self.state.master_id

    def open_commands(self, agent_id: str) -> Channel[AgentCommand]:
        """Attach the agent's Commands stream; the agent joins the pool the first time."""
        self.state.refuse_if_draining()
        link = self._live_agent(agent_id)
        if link.recovering:
            raise NotFound(f"agent {agent_id!r}: the master restarted, reregister with your tasks")
        channel = link.attach()
        if not link.in_pool:
            spec = link.spec
            self.state.core.handle_add_agent(
                agent_id, spec.resources, self.state.now(), spec.hostname, dict(spec.attributes)
            )
            link.in_pool = True
            log_event(log, "agent.connected", agent_id=agent_id, hostname=spec.hostname)
        self.dispatcher.request_allocation()
        return channel

    def close_commands(self, agent_id: str, channel: Channel[AgentCommand]) -> None:
        """The agent's Commands stream ``channel`` ended."""
        link = self.state.agents.get(agent_id)
        if link is not None:
            link.detach(channel)
        else:
            channel.close(StreamEnd())

    # -- reregistration ---------------------------------------------------------------------------

    def reregister(
        self, agent_id: str, spec: AgentSpec, tasks: Sequence[ReportedTask]
    ) -> tuple[float, str]:
        """Re-admit an agent with its tasks; returns (heartbeat interval, master_id).

        A live agent is reconciled; an agent marked unreachable, or known from the registry
        after a master restart, rejoins the pool with the tasks it reports (adopted: RUNNING
        again). Agents the registry does not know or marked gone must register afresh:
        FAILED_PRECONDITION.
        """
        state = self.state
        state.refuse_if_draining()
        require_id(agent_id, "agent_id")
        if not spec.resources:
            raise InvalidArgument("agent_info.resources is empty")
        reported = {(fid, launch.task_id): (launch, status) for fid, launch, status in tasks}
        link = state.agents.get(agent_id)
        if link is None:
            link = self._readmit(agent_id, spec)
        elif link.in_pool and spec.resources != link.spec.resources:
            log_event(
                log,
                "agent.resources.ignored",
                logging.WARNING,
                agent_id=agent_id,
                registered=str(link.spec.resources),
                reported=str(spec.resources),
            )
        elif spec != link.spec:
            # A restarted agent has a new port (and maybe host name); resources of an agent in
            # the pool cannot change under its tasks and offers (Mesos: reconfiguration policy
            # "equal"), so those keep the registered spec.
            entry = state.registry.agents[agent_id]
            with state.durably():
                state.registry.admit_agent(dataclasses.replace(entry, spec=spec))
            link.spec = spec
        link.last_heard = state.now()
        link.discard_pending()  # launches not delivered are reported DROPPED below
        if link.in_pool:
            self._reconcile_agent(link, {key: status for key, (_, status) in reported.items()})
        else:
            self._rejoin(link, reported)
        log_event(log, "agent.reregistered", agent_id=agent_id, tasks=len(tasks))
        return state.config.agent_heartbeat, state.master_id

    def _readmit(self, agent_id: str, spec: AgentSpec) -> AgentLink:
        """An agent marked unreachable is back: admitted again (not in the pool yet)."""
        state = self.state
        entry = state.registry.agents.get(agent_id)
        if entry is None or entry.state == GONE:
            self.loss.mark_gone(agent_id)
            raise FailedPrecondition(f"agent {agent_id!r} was removed: register afresh")
        with state.durably():
            state.registry.admit_agent(dataclasses.replace(entry, spec=spec, state=ADMITTED))
        link = AgentLink(agent_id, spec, entry.registered_at, state.now())
        state.agents[agent_id] = link
        state.departed.pop(agent_id, None)
        return link

    def _rejoin(self, link: AgentLink, reported: Reported) -> None:
        """Put a returning agent in the pool with the tasks it still runs (DESIGN.md §6).

        Tasks of registered frameworks are adopted and reported to them in their current state;
        tasks of frameworks removed meanwhile (or whose ids went live elsewhere) are killed;
        tasks the master knew on the agent that it no longer reports are LOST. Terminal tasks
        are left to the agent's own status updates.
        """
        state = self.state
        agent_id, spec, now = link.agent_id, link.spec, state.now()
        adopt: list[RunningTask] = []
        kill: list[tuple[str, str]] = []
        for (framework_id, task_id), (launch, status) in sorted(reported.items()):
            if status.state.is_terminal:
                continue
            if framework_id in state.frameworks and (framework_id, task_id) not in state.core.tasks:
                adopt.append(
                    RunningTask(framework_id, task_id, launch.name, launch.resources, status.state)
                )
            else:
                kill.append((framework_id, task_id))
        if not sum((t.resources for t in adopt), ResourceVector()).fits_in(spec.resources):
            kill.extend((t.framework_id, t.task_id) for t in adopt)  # cannot be: trust nothing
            adopt = []
        state.core.handle_add_agent(
            agent_id, spec.resources, now, spec.hostname, dict(spec.attributes), adopt
        )
        link.in_pool = True
        link.recovering = False
        if not state.registry.agents[agent_id].active:
            state.core.handle_deactivate_agent(agent_id, now)
        for running in adopt:
            self._adopted(link, running, reported[(running.framework_id, running.task_id)][0])
        for framework_id, task_id in kill:
            link.send(KillTask(agent_id, framework_id, task_id))
        adopted = {(t.framework_id, t.task_id) for t in adopt}
        for entry in state.tasks.on_agent(agent_id):
            key = (entry.framework_id, entry.task_id)
            if key not in adopted and key not in reported and not entry.terminal:
                change = TaskStatusChange(key[0], key[1], agent_id, TaskState.LOST, "", "")
                self.dispatcher.master_update(
                    change, "AGENT_RESTARTED", "the agent came back without this task"
                )
        self.on_rejoined()
        self.dispatcher.request_allocation()

    def _adopted(self, link: AgentLink, task: RunningTask, launch: TaskLaunch) -> None:
        """Track an adopted task and tell its framework it runs (again)."""
        if task.state is TaskState.KILLING:
            link.send(KillTask(link.agent_id, task.framework_id, task.task_id))
        if self.state.tasks.get(task.framework_id, task.task_id) is None:
            self.state.tasks.launch(task.framework_id, link.agent_id, launch)
        change = TaskStatusChange(
            task.framework_id, task.task_id, link.agent_id, task.state, "", ""
        )
        self.dispatcher.master_update(
            change, "RECONCILIATION", "the agent reregistered with this task"
        )

    def _reconcile_agent(
        self, link: AgentLink, reported: dict[tuple[str, str], StatusUpdate]
    ) -> None:
        """A live agent reregistered: tasks it does not report are DROPPED (never started) or
        LOST; tasks it runs that the master does not want (or is killing) are killed."""
        state, agent_id = self.state, link.agent_id
        now = state.now()
        record = state.core.agents.get(agent_id)
        for key in sorted(record.task_keys) if record is not None else []:
            if key in reported:
                continue
            task = state.core.tasks[key]
            lost = TaskState.DROPPED if task.state is TaskState.STAGING else TaskState.LOST
            reason = "AGENT_DISCONNECTED" if lost is TaskState.DROPPED else "AGENT_RESTARTED"
            state.core.handle_task_status(agent_id, key[0], key[1], lost, now)
            change = TaskStatusChange(key[0], key[1], agent_id, lost, reason, "")
            self.dispatcher.master_update(change, reason, "the agent does not report this task")
        for (framework_id, task_id), status in reported.items():
            live = state.core.tasks.get((framework_id, task_id))
            unwanted = live is None and not status.state.is_terminal
            if unwanted or (live is not None and live.state is TaskState.KILLING):
                link.send(KillTask(agent_id, framework_id, task_id))
        self.dispatcher.request_allocation()

    # -- status updates ---------------------------------------------------------------------------

    def update_status(
        self,
        agent_id: str,
        framework_id: str,
        status: StatusUpdate,
        latest_state: TaskState | None,
    ) -> None:
        """Record an agent's status update and forward it to the framework."""
        state = self.state
        agent = self._live_agent(agent_id)
        require_id(framework_id, "framework_id")
        if status.agent_id and status.agent_id != agent_id:
            raise InvalidArgument(
                f"status.agent_id {status.agent_id!r} is not the caller {agent_id!r}"
            )
        latest = latest_state or status.state
        task = state.core.tasks.get((framework_id, status.task_id))
        if task is not None and task.agent_id != agent_id:
            raise InvalidArgument(
                f"task {status.task_id!r} runs on agent {task.agent_id!r}, not {agent_id!r}"
            )
        if task is not None:
            state.core.handle_task_status(
                agent_id, framework_id, status.task_id, latest, state.now()
            )
            if latest.is_terminal:
                self.dispatcher.request_allocation()
        state.counters.status_updates += 1
        link = state.frameworks.get(framework_id)
        ack = AckCommand(framework_id, status.task_id, status.uuid)
        if link is None:
            agent.send(ack)  # nobody will acknowledge it: do it ourselves
            return
        if status.state is TaskState.KILLING and "TASK_KILLING_STATE" not in link.spec.capabilities:
            state.tasks.record_agent_update(framework_id, status, latest)
            state.tasks.acknowledge(framework_id, status.task_id, status.uuid)
            agent.send(ack)
            return
        known = state.tasks.get(framework_id, status.task_id)
        retried = known is not None and status.uuid in known.pending
        outcome = state.tasks.record_agent_update(framework_id, status, latest)
        if outcome is UpdateOutcome.ACKED:
            agent.send(ack)  # the framework acknowledged it; the agent missed that
            return
        if retried:
            state.counters.status_retried += 1
        else:
            state.counters.status_forwarded += 1
        link.send(UpdateEvent(self.dispatcher.for_framework(link, status)))
