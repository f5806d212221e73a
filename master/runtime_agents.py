"""``AgentCalls``: the Agent API side of the master runtime (agent.proto) and agent liveness.

Every method runs synchronously on the runtime's loop. An agent is admitted durably (the
registry row is committed before Register answers) and joins the pool when its first Commands
stream attaches. One unheard for ``agent_timeout`` leaves it (offers rescinded, tasks reported
UNREACHABLE, frameworks told by a FailureEvent, the registry marks it UNREACHABLE) and is answered
NOT_FOUND until it reregisters: then it rejoins the pool with the tasks it still runs (adopted and
reported to their frameworks again; tasks it lost are LOST). Only agents the registry does not know
or marked GONE are refused (FAILED_PRECONDITION: register afresh). After a master restart the
agents of the registry are ``recovering`` until they reregister the same way.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Sequence

from fairshare.logs import log_event
from fairshare.resources import ResourceVector

from master.core import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    RunningTask,
    TaskState,
    TaskStatusChange,
)
from master.model import (
    AckCommand,
    AgentCommand,
    AgentSpec,
    FailureEvent,
    KillCommand,
    StatusUpdate,
    StreamEnd,
    TaskSpec,
    UpdateEvent,
)
from master.registry import ADMITTED, GONE, UNREACHABLE, AgentEntry, RegistryWriteError
from master.runtime_base import DEPARTED_MEMORY, RuntimeBase, Unavailable, require_id
from master.sessions import AgentLink, Channel
from master.taskbook import TERMINAL, UpdateOutcome
from master.views import DepartedAgent

__all__ = ["AgentCalls"]

log = logging.getLogger("fairshare.master")


class AgentCalls(RuntimeBase):
    """Register, Reregister, Heartbeat, Commands, UpdateStatus, and the liveness check."""

    # -- agents -----------------------------------------------------------------------------------

    def _live_agent(self, agent_id: str) -> AgentLink:
        require_id(agent_id, "agent_id")
        link = self.agents.get(agent_id)
        if link is not None:
            link.last_heard = self.now()
            return link
        entry = self.registry.agents.get(agent_id)
        if entry is not None and entry.state == GONE:
            raise FailedPrecondition(f"agent {agent_id!r} was removed: register afresh")
        raise NotFound(f"agent {agent_id!r} has no live registration: reregister")

    def register(self, spec: AgentSpec) -> tuple[str, float, str]:
        """Admit a new agent; returns (agent_id, heartbeat interval, master_id)."""
        if self.draining:
            raise Unavailable("the master is shutting down")
        if not spec.resources:
            raise InvalidArgument("agent_info.resources is empty")
        agent_id = f"ag-{uuid.uuid4().hex}"
        registered_at = time.time()
        with self._durably():
            self.registry.admit_agent(AgentEntry(agent_id, spec, registered_at))
        self.agents[agent_id] = AgentLink(agent_id, spec, registered_at, self.now())
        log_event(log, "agent.registered", agent_id=agent_id, resources=str(spec.resources))
        return agent_id, self.config.agent_heartbeat, self.master_id

    def heartbeat(self, agent_id: str) -> str:
        """The agent is alive; returns the master_id."""
        self._live_agent(agent_id)
        return self.master_id

    def open_commands(self, agent_id: str) -> Channel[AgentCommand]:
        """Attach the agent's Commands stream; the agent joins the pool the first time."""
        if self.draining:
            raise Unavailable("the master is shutting down")
        link = self._live_agent(agent_id)
        if link.recovering:
            raise NotFound(f"agent {agent_id!r}: the master restarted, reregister with your tasks")
        channel = link.attach()
        if not link.in_pool:
            spec = link.spec
            self.core.handle_add_agent(
                agent_id, spec.resources, self.now(), spec.hostname, dict(spec.attributes)
            )
            link.in_pool = True
            log_event(log, "agent.connected", agent_id=agent_id, hostname=spec.hostname)
        self.request_allocation()
        return channel

    def close_commands(self, agent_id: str, channel: Channel[AgentCommand]) -> None:
        """The agent's Commands stream ``channel`` ended."""
        link = self.agents.get(agent_id)
        if link is not None:
            link.detach(channel)
        else:
            channel.close(StreamEnd())

    def reregister(
        self,
        agent_id: str,
        spec: AgentSpec,
        tasks: Sequence[tuple[str, TaskSpec, StatusUpdate]],
        framework_ids: Sequence[str],
    ) -> tuple[float, str]:
        """Re-admit an agent with its tasks; returns (heartbeat interval, master_id).

        A live agent is reconciled; an agent marked unreachable, or known from the registry
        after a master restart, rejoins the pool with the tasks it reports (adopted: RUNNING
        again). Agents the registry does not know or marked gone must register afresh:
        FAILED_PRECONDITION.
        """
        if self.draining:
            raise Unavailable("the master is shutting down")
        require_id(agent_id, "agent_id")
        if not spec.resources:
            raise InvalidArgument("agent_info.resources is empty")
        reported = {(fid, task.task_id): (task, status) for fid, task, status in tasks}
        link = self.agents.get(agent_id)
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
            entry = self.registry.agents[agent_id]
            with self._durably():
                self.registry.admit_agent(dataclasses.replace(entry, spec=spec))
            link.spec = spec
        link.last_heard = self.now()
        link.discard_pending()  # launches not delivered are reported DROPPED below
        if link.in_pool:
            self._reconcile_agent(link, {key: status for key, (_, status) in reported.items()})
        else:
            self._rejoin(link, reported)
        log_event(log, "agent.reregistered", agent_id=agent_id, tasks=len(tasks))
        return self.config.agent_heartbeat, self.master_id

    def _readmit(self, agent_id: str, spec: AgentSpec) -> AgentLink:
        """An agent marked unreachable is back: admitted again (not in the pool yet)."""
        entry = self.registry.agents.get(agent_id)
        if entry is None or entry.state == GONE:
            self._mark_gone(agent_id)
            raise FailedPrecondition(f"agent {agent_id!r} was removed: register afresh")
        with self._durably():
            self.registry.admit_agent(dataclasses.replace(entry, spec=spec, state=ADMITTED))
        link = AgentLink(agent_id, spec, entry.registered_at, self.now())
        self.agents[agent_id] = link
        self.departed.pop(agent_id, None)
        return link

    def _rejoin(
        self, link: AgentLink, reported: dict[tuple[str, str], tuple[TaskSpec, StatusUpdate]]
    ) -> None:
        """Put a returning agent in the pool with the tasks it still runs (DESIGN.md §6).

        Tasks of registered frameworks are adopted and reported to them in their current state;
        tasks of frameworks removed meanwhile (or whose ids went live elsewhere) are killed;
        tasks the master knew on the agent that it no longer reports are LOST. Terminal tasks
        are left to the agent's own status updates.
        """
        agent_id, spec, now = link.agent_id, link.spec, self.now()
        adopt: list[RunningTask] = []
        kill: list[tuple[str, str]] = []
        for (framework_id, task_id), (task, status) in sorted(reported.items()):
            if status.state in TERMINAL:
                continue
            if framework_id in self.frameworks and (framework_id, task_id) not in self.core.tasks:
                state = TaskState(status.state)
                adopt.append(RunningTask(framework_id, task_id, task.name, task.resources, state))
            else:
                kill.append((framework_id, task_id))
        if not sum((t.resources for t in adopt), ResourceVector()).fits_in(spec.resources):
            kill.extend((t.framework_id, t.task_id) for t in adopt)  # cannot be: trust nothing
            adopt = []
        self.core.handle_add_agent(
            agent_id, spec.resources, now, spec.hostname, dict(spec.attributes), adopt
        )
        link.in_pool = True
        link.recovering = False
        entry = self.registry.agents[agent_id]
        if not entry.active:
            self.core.handle_deactivate_agent(agent_id, now)
        for running in adopt:
            self._adopted(link, running, reported[(running.framework_id, running.task_id)][0])
        for framework_id, task_id in kill:
            link.send(KillCommand(framework_id, task_id))
        adopted = {(t.framework_id, t.task_id) for t in adopt}
        for book_entry in self.tasks.on_agent(agent_id):
            key = (book_entry.framework_id, book_entry.spec.task_id)
            if key not in adopted and key not in reported and not book_entry.terminal:
                change = TaskStatusChange(key[0], key[1], agent_id, TaskState.LOST, "", "")
                self._master_update(
                    change, "AGENT_RESTARTED", "the agent came back without this task"
                )
        self._recovery_progress()
        self.request_allocation()

    def _adopted(self, link: AgentLink, task: RunningTask, spec: TaskSpec) -> None:
        """Track an adopted task and tell its framework it runs (again)."""
        if task.state is TaskState.KILLING:
            link.send(KillCommand(task.framework_id, task.task_id))
        if self.tasks.get(task.framework_id, task.task_id) is None:
            self.tasks.launch(task.framework_id, dataclasses.replace(spec, agent_id=link.agent_id))
        change = TaskStatusChange(
            task.framework_id, task.task_id, link.agent_id, task.state, "", ""
        )
        self._master_update(change, "RECONCILIATION", "the agent reregistered with this task")

    def _recovery_progress(self) -> None:
        """An agent came back: the restart recovery (``master.runtime_recovery``) may end."""

    def _reconcile_agent(
        self, link: AgentLink, reported: dict[tuple[str, str], StatusUpdate]
    ) -> None:
        agent_id = link.agent_id
        now = self.now()
        record = self.core.agents.get(agent_id)
        for key in sorted(record.task_keys) if record is not None else []:
            if key in reported:
                continue
            task = self.core.tasks[key]
            state = TaskState.DROPPED if task.state is TaskState.STAGING else TaskState.LOST
            reason = "AGENT_DISCONNECTED" if state is TaskState.DROPPED else "AGENT_RESTARTED"
            self.core.handle_task_status(agent_id, key[0], key[1], state, now)
            change = TaskStatusChange(key[0], key[1], agent_id, state, reason, "")
            self._master_update(change, reason, "the agent does not report this task")
        for (framework_id, task_id), status in reported.items():
            live = self.core.tasks.get((framework_id, task_id))
            unwanted = live is None and status.state not in TERMINAL
            if unwanted or (live is not None and live.state is TaskState.KILLING):
                link.send(KillCommand(framework_id, task_id))
        self.request_allocation()

    def update_status(
        self, agent_id: str, framework_id: str, status: StatusUpdate, latest_state: str
    ) -> None:
        """Record an agent's status update and forward it to the framework."""
        agent = self._live_agent(agent_id)
        require_id(framework_id, "framework_id")
        if status.agent_id and status.agent_id != agent_id:
            raise InvalidArgument(
                f"status.agent_id {status.agent_id!r} is not the caller {agent_id!r}"
            )
        latest = latest_state or status.state
        key = (framework_id, status.task_id)
        task = self.core.tasks.get(key)
        if task is not None and task.agent_id != agent_id:
            raise InvalidArgument(
                f"task {status.task_id!r} runs on agent {task.agent_id!r}, not {agent_id!r}"
            )
        if task is not None:
            self.core.handle_task_status(
                agent_id, framework_id, status.task_id, TaskState(latest), self.now()
            )
            if latest in TERMINAL:
                self.request_allocation()
        self.counters.status_updates += 1
        link = self.frameworks.get(framework_id)
        ack = AckCommand(framework_id, status.task_id, status.uuid)
        if link is None:
            agent.send(ack)  # nobody will acknowledge it: do it ourselves
            return
        if status.state == "KILLING" and "TASK_KILLING_STATE" not in link.spec.capabilities:
            self.tasks.record_agent_update(framework_id, status, latest)
            self.tasks.acknowledge(framework_id, status.task_id, status.uuid)
            agent.send(ack)
            return
        known = self.tasks.get(framework_id, status.task_id)
        retried = known is not None and status.uuid in known.pending
        outcome = self.tasks.record_agent_update(framework_id, status, latest)
        if outcome is UpdateOutcome.ACKED:
            agent.send(ack)  # the framework acknowledged it; the agent missed that
            return
        if retried:
            self.counters.status_retried += 1
        else:
            self.counters.status_forwarded += 1
        link.send(UpdateEvent(self._for_framework(link, status)))

    # -- liveness ---------------------------------------------------------------------------------

    def _check_liveness(self) -> None:
        deadline = self.now() - self.config.agent_timeout
        late = [a for a in self.agents.values() if a.last_heard < deadline and not a.recovering]
        for link in late:
            self._agent_unreachable(link)
        if late:
            self.request_allocation()

    def _agent_unreachable(self, link: AgentLink) -> None:
        agent_id = link.agent_id
        now = self.now()
        if link.in_pool:
            messages = self.core.handle_remove_agent(
                agent_id, now, TaskState.UNREACHABLE, "agent unreachable"
            )
            for message in messages:
                if isinstance(message, TaskStatusChange):
                    self._master_update(
                        message,
                        "AGENT_UNREACHABLE",
                        f"agent unheard for {self.config.agent_timeout:g}s",
                    )
                else:
                    self._dispatch([message])
        link.end_stream(StreamEnd("NOT_FOUND", "the agent was marked unreachable: reregister"))
        del self.agents[agent_id]
        self._registry_state(agent_id, UNREACHABLE)
        self._remember(
            DepartedAgent(
                agent_id, link.spec, "UNREACHABLE", link.registered_at, self.wall(link.last_heard)
            )
        )
        for framework in self.frameworks.values():
            framework.send(FailureEvent(agent_id, "agent unreachable"))
        log_event(log, "agent.unreachable", level=logging.WARNING, agent_id=agent_id)

    def _mark_gone(self, agent_id: str) -> None:
        """An agent that is not live came back: it is removed for good (its tasks GONE)."""
        departed = self.departed.get(agent_id)
        self._registry_state(agent_id, GONE)
        for entry in self.tasks.on_agent(agent_id):
            if entry.state == "UNREACHABLE":
                change = TaskStatusChange(
                    entry.framework_id, entry.spec.task_id, agent_id, TaskState.GONE, "", ""
                )
                self._master_update(change, "AGENT_REMOVED", "the agent was removed")
        if departed is not None and departed.state != "GONE":
            self._remember(
                DepartedAgent(
                    agent_id, departed.spec, "GONE", departed.registered_at, departed.last_heard
                )
            )

    def _registry_state(self, agent_id: str, state: str) -> None:
        """Record a state the master decided on its own (timers): a failed write is logged."""
        if agent_id not in self.registry.agents:
            return
        try:
            self.registry.set_agent_state(agent_id, state)
        except RegistryWriteError as error:
            log_event(log, "registry.write.failed", logging.ERROR, agent_id=agent_id, error=error)

    def _remember(self, departed: DepartedAgent) -> None:
        self.departed.pop(departed.agent_id, None)
        self.departed[departed.agent_id] = departed
        while len(self.departed) > DEPARTED_MEMORY:
            del self.departed[next(iter(self.departed))]
