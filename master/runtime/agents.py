"""``AgentCalls``: the Agent API side of the master runtime (agent.proto: one stream per session).

Every method runs synchronously on the runtime's loop and checks everything before it changes
anything (a ``CoreError`` means nothing changed). A session starts with ``register`` or
``reregister``, which admit the agent and attach its stream (``AgentSession``); the stream's
messages then come in as ``heard`` and ``update_statuses``, each naming the session's channel
(a stream a newer one replaced is ABORTED), and ``disconnect`` says the stream ended.

An agent is admitted durably (the registry row is committed before ``registered`` is sent) and
joins the pool at once. One marked unreachable (``AgentLoss``) has no live registration: its
stream ends NOT_FOUND and it reregisters; then it rejoins the pool with the tasks it still runs
(adopted and reported to their frameworks again; tasks it lost are LOST). Only agents the
registry does not know or marked GONE are refused (FAILED_PRECONDITION: register afresh). After a
master restart the agents of the registry are ``recovering`` until they reregister the same way;
each that does calls ``on_rejoined`` with its id (wired to ``Recovery.agent_back``).

Node restriction (the Kubernetes node authorizer's rule): an agent belongs to the principal that
registered it (``AgentEntry.principal``, durable); only that principal may reregister it (a
second stream claiming a live agent's id from anyone else is PERMISSION_DENIED and the live
session is untouched), and a session's messages act only on that agent: its updates must be
about tasks on it (another agent's task: INVALID_ARGUMENT), and an update that would make a
task the master does not know live is not forwarded: the task is killed on the agent instead.
Registering needs the ACL's ``register_agents`` and room in the principal's count and rate.

Liveness: every session start and every message marks the agent heard (``Liveness``); a
registration that grows the cluster past what the heartbeat interval was sized for tells every
connected agent the longer interval (``AgentSettings``).

Status updates: an agent's update is forwarded to its framework until acknowledged (the agent
retries); updates no framework will acknowledge (framework gone, KILLING to a framework without
the capability) are acknowledged by the master itself so the agent never retries forever.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from fairshare.log_access import agent_key
from fairshare.logs import LogLimiter, log_event
from fairshare.task_states import TaskState

from master.core import (
    FailedPrecondition,
    InvalidArgument,
    KillTask,
    NotFound,
    TaskLaunch,
)
from master.model import (
    AckCommand,
    AgentCommand,
    AgentSettings,
    AgentSpec,
    StatusUpdate,
    StreamEnd,
    UpdateEvent,
)
from master.registry import ADMITTED, GONE, AgentEntry
from master.runtime.agent_loss import AgentLoss
from master.runtime.agent_rejoin import reconcile_live_agent, rejoin_pool
from master.runtime.dispatch import Dispatcher
from master.runtime.events import EventKind
from master.runtime.liveness import reconnect_jitter
from master.runtime.sessions import AgentLink, Channel
from master.runtime.state import Aborted, RuntimeState, require_id
from master.runtime.taskbook import UpdateOutcome

__all__ = ["AgentCalls", "AgentSession", "ReportedTask", "ReportedUpdate"]

log = logging.getLogger("fairshare.master")
_UNKNOWN_TASKS = LogLimiter()  # one agent sending many such updates logs a few lines a second

ReportedTask = tuple[str, TaskLaunch, StatusUpdate]
"""A task a reregistering agent reports: (framework id, how it was launched, its status)."""
ReportedUpdate = tuple[str, StatusUpdate, TaskState | None]
"""A status update an agent sends: (framework id, the update, the task's latest state)."""


@dataclass(frozen=True, slots=True)
class AgentSession:
    """What the stream's adapter sends first (``registered``), and the channel it then drains."""

    agent_id: str
    master_id: str
    heartbeat_interval: float
    reconnect_jitter: float
    channel: Channel[AgentCommand] = field(repr=False)
    epoch: int = 0  # of the leadership term (agent.proto: on every commands message too)
    log_key: bytes = field(default=b"", repr=False)  # its key for log credentials


class AgentCalls:
    """register, reregister, heard, update_statuses, disconnect."""

    def __init__(self, state: RuntimeState, dispatcher: Dispatcher, loss: AgentLoss) -> None:
        self.state = state
        self.dispatcher = dispatcher
        self.loss = loss
        self.on_rejoined: Callable[[str], None] = lambda agent_id: None

    def _session_link(self, agent_id: str, channel: Channel[AgentCommand]) -> AgentLink:
        """The agent's link if ``channel`` is its open stream (the agent was heard)."""
        link = self.state.agents.get(agent_id)
        if link is None or link.recovering:
            entry = self.state.registry.agents.get(agent_id)
            if entry is not None and entry.state == GONE:
                raise FailedPrecondition(f"agent {agent_id!r} was removed: register afresh")
            raise NotFound(f"agent {agent_id!r} has no live registration: reregister")
        if link.channel is not channel:
            raise Aborted(f"a newer stream of agent {agent_id!r} replaced this one")
        now = self.state.now()
        link.last_heard = now
        self.state.liveness.heard(agent_id, now)
        return link

    def register(self, spec: AgentSpec, principal: str | None = None) -> AgentSession:
        """Admit a new agent, put it in the pool and open its stream."""
        state, authority = self.state, self.state.authority
        state.refuse_if_draining()
        if not spec.resources:
            raise InvalidArgument("agent_info.resources is empty")
        authority.allow("register_agents", principal)
        owner = authority.owner_of(principal)
        registry = state.registry
        authority.check_agent_size(
            spec.resources, owner, registry.resources_of.get(owner), registry.resource_names
        )
        limit = state.config.limits.max_agents_per_principal
        authority.admit(principal, "agent", state.registry.agents_of[owner], limit)
        agent_id = f"ag-{uuid.uuid4().hex}"
        registered_at = time.time()
        entry = AgentEntry(agent_id, spec, registered_at, principal=owner)
        with state.durably():
            state.registry.admit_agent(entry)
        link = AgentLink(agent_id, spec, registered_at, state.now())
        state.agents[agent_id] = link
        state.core.handle_add_agent(
            agent_id,
            spec.resources,
            state.now(),
            spec.hostname,
            dict(spec.attributes),
            reserved=dict(spec.reservations),
        )
        link.in_pool = True
        state.announce(EventKind.AGENT_REGISTERED, agent_id=agent_id, resources=str(spec.resources))
        self.dispatcher.request_allocation()
        return self._open_session(link)

    def _open_session(self, link: AgentLink) -> AgentSession:
        """Attach a new stream to the agent (a stream still open is replaced)."""
        state = self.state
        now = state.now()
        if state.liveness.resize(len(state.agents)):
            self._tell_settings()  # the others; this one is told in ``registered``
        channel = link.attach()
        link.last_heard = now
        state.liveness.heard(link.agent_id, now)
        return AgentSession(
            link.agent_id,
            state.master_id,
            state.liveness.interval,
            reconnect_jitter(len(state.agents)),
            channel,
            state.leader.epoch,
            agent_key(state.log_secret, link.agent_id),
        )

    def _tell_settings(self) -> None:
        """The heartbeat interval grew: tell every connected agent."""
        state = self.state
        settings = AgentSettings(state.liveness.interval, reconnect_jitter(len(state.agents)))
        for link in state.agents.values():
            if link.channel is not None:
                link.channel.put(settings)
        log_event(
            log,
            "agents.heartbeat.interval",
            agents=len(state.agents),
            interval=f"{settings.heartbeat_interval:g}",
        )

    def heard(self, agent_id: str, channel: Channel[AgentCommand]) -> None:
        """The agent's stream ``channel`` carried a heartbeat."""
        self._session_link(agent_id, channel)

    def disconnect(
        self, agent_id: str, channel: Channel[AgentCommand], end: StreamEnd | None = None
    ) -> None:
        """The agent's stream ``channel`` ended (``end``: with which status, default OK)."""
        link = self.state.agents.get(agent_id)
        if link is not None and link.detach(channel, end):
            self.state.liveness.stream_closed(agent_id, self.state.now())
            code = "-" if end is None else end.code
            log_event(log, "agent.disconnected", agent_id=agent_id, code=code)
        channel.close(end or StreamEnd())

    # -- reregistration ---------------------------------------------------------------------------

    def reregister(
        self,
        agent_id: str,
        spec: AgentSpec,
        tasks: Sequence[ReportedTask],
        principal: str | None = None,
    ) -> AgentSession:
        """Re-admit an agent with its tasks and open its stream (a stream still open ends).

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
        self._check_owner(agent_id, principal)
        self._check_size(agent_id, spec)
        reported = {(fid, launch.task_id): (launch, status) for fid, launch, status in tasks}
        # While the master recovers, the whole fleet comes back at once: one line per agent
        # would cost a third of the core's time then, so ``Recovery`` logs the progress and
        # each agent's line is at DEBUG (the event is noted either way).
        level = logging.DEBUG if state.recovering else logging.INFO
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
            statuses = {key: status for key, (_, status) in reported.items()}
            reconcile_live_agent(state, self.dispatcher, link, statuses)
        else:
            rejoin_pool(state, self.dispatcher, link, reported)
            self.on_rejoined(agent_id)
            self.dispatcher.request_allocation()
        state.announce(EventKind.AGENT_REREGISTERED, level, agent_id=agent_id, tasks=len(tasks))
        return self._open_session(link)

    def _check_size(self, agent_id: str, spec: AgentSpec) -> None:
        """The caps of a reregistering agent: its principal's other agents are what the
        registry sums for the principal, less this agent's registered resources."""
        registry = self.state.registry
        entry = registry.agents.get(agent_id)
        owner = entry.principal if entry is not None else ""
        others = Counter(registry.resources_of.get(owner, {}))
        if entry is not None and entry.state != "GONE":
            others.subtract(entry.spec.resources.millis_view())
        self.state.authority.check_agent_size(
            spec.resources, owner, others, registry.resource_names
        )

    def _check_owner(self, agent_id: str, principal: str | None) -> None:
        """Only the principal that registered an agent may reregister it (and only while the
        ACL lets it register agents); an entry of unknown or removed agents is left to the
        caller's FAILED_PRECONDITION."""
        authority = self.state.authority
        entry = self.state.registry.agents.get(agent_id)
        if entry is None or entry.state == GONE:
            return
        authority.allow("register_agents", principal)
        authority.check_owner(principal, entry.principal, f"agent {agent_id!r}")

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

    # -- status updates ---------------------------------------------------------------------------

    def update_statuses(
        self, agent_id: str, channel: Channel[AgentCommand], updates: Sequence[ReportedUpdate]
    ) -> None:
        """Record a batch of the agent's status updates and forward each to its framework;
        every update is checked before any is applied."""
        agent = self._session_link(agent_id, channel)
        tasks, book = self.state.core.tasks, self.state.tasks
        for framework_id, status, _ in updates:
            require_id(framework_id, "framework_id")
            if status.agent_id and status.agent_id != agent_id:
                raise InvalidArgument(
                    f"status.agent_id {status.agent_id!r} is not the caller {agent_id!r}"
                )
            task = tasks.get((framework_id, status.task_id))
            entry = book.get(framework_id, status.task_id)
            where = task.agent_id if task is not None else entry.agent_id if entry else agent_id
            if where != agent_id:
                raise InvalidArgument(
                    f"task {status.task_id!r} runs on agent {where!r}, not {agent_id!r}"
                )
        for framework_id, status, latest in updates:
            self._update(agent, framework_id, status, latest or status.state)

    def _update(
        self, agent: AgentLink, framework_id: str, status: StatusUpdate, latest: TaskState
    ) -> None:
        """Record one (checked) update and forward it, or acknowledge it if nobody will."""
        state, agent_id = self.state, agent.agent_id
        task = state.core.tasks.get((framework_id, status.task_id))
        if task is not None:
            state.core.handle_task_status(
                agent_id, framework_id, status.task_id, latest, state.now()
            )
            if latest.is_terminal:
                self.dispatcher.request_allocation()
        elif not latest.is_terminal and state.tasks.get(framework_id, status.task_id) is None:
            # A live task the master never launched here (or forgot): not the framework's news.
            agent.send(AckCommand(framework_id, status.task_id, status.uuid))
            agent.send(KillTask(agent_id, framework_id, status.task_id))
            held = _UNKNOWN_TASKS.allow(agent_id)
            if held is not None:
                log_event(
                    log,
                    "agent.update.unknown_task",
                    logging.WARNING,
                    agent_id=agent_id,
                    framework_id=framework_id,
                    task_id=status.task_id,
                    suppressed=held,
                )
            return
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
