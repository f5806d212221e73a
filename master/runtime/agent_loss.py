"""``AgentLoss``: agents the master stops hearing from, and agents removed for good
(docs/architecture.md §4).

An agent that is late (``Liveness``: unheard for the liveness timeout, or its stream gone for
``agent_timeout``) becomes unreachable: its offers are rescinded, its resources leave the pool,
each of its tasks is reported UNREACHABLE (LOST to frameworks without PARTITION_AWARE, reason
AGENT_UNREACHABLE), every framework gets a FailureEvent and the registry marks it UNREACHABLE;
its stream ends with NOT_FOUND so it reregisters. An agent that comes back while the registry
does not know it (or marked it gone) is gone: its unreachable tasks are GONE.

Invariants:
- one liveness check handles at most ``LIVENESS_BATCH`` late agents (one registry transaction
  for all of them); when more are late the next check runs as soon as the loop has served what
  is ready, so a mass expiry (a partition, a master that could not keep up) is spread over many
  loop steps instead of one stall. Finding the late agents costs O(late), never a scan of all
  agents (``Liveness``);
- the liveness check never touches agents still recovering after a master restart, unless
  ``Recovery`` gave up on them (``Liveness.expire``);
- a state the master decides on its own (a timer, not a call) is written to the registry best
  effort: a failed write is logged, the runtime goes on.
"""

from __future__ import annotations

import logging

from fairshare.logs import log_event
from fairshare.task_states import TaskReason, TaskState

from master.core import TaskStatusChange
from master.model import FailureEvent, StreamEnd
from master.registry import GONE, UNREACHABLE, RegistryWriteError
from master.runtime.dispatch import Dispatcher
from master.runtime.events import EventKind
from master.runtime.sessions import AgentLink, DepartedAgent
from master.runtime.state import DEPARTED_MEMORY, RuntimeState

__all__ = ["LIVENESS_BATCH", "AgentLoss"]

log = logging.getLogger("fairshare.master")

LIVENESS_BATCH = 64
"""Late agents one liveness check marks unreachable at most."""


class AgentLoss:
    """The liveness check, and the bookkeeping of agents that left the pool."""

    def __init__(self, state: RuntimeState, dispatcher: Dispatcher) -> None:
        self.state = state
        self.dispatcher = dispatcher

    def check_liveness(self) -> None:
        """Mark late agents unreachable, at most ``LIVENESS_BATCH`` now, the rest right after."""
        state = self.state
        late = state.liveness.late(state.now(), LIVENESS_BATCH)
        links = []
        for agent_id in late:
            link = state.agents.get(agent_id)
            if link is None:
                state.liveness.forget(agent_id)
            else:
                links.append(link)
        if links:
            self.unreachable(links)
            self.dispatcher.request_allocation()
        if len(late) >= LIVENESS_BATCH and not state.draining:
            state.loop.call_soon(self.check_liveness)

    def unreachable(self, links: list[AgentLink]) -> None:
        """The agents are lost: out of the pool, their tasks UNREACHABLE, frameworks told."""
        for link in links:
            self._lose(link)
        self.record_states([link.agent_id for link in links], UNREACHABLE)

    def _lose(self, link: AgentLink) -> None:
        state, agent_id = self.state, link.agent_id
        if link.in_pool:
            messages = state.core.handle_remove_agent(
                agent_id, state.now(), TaskState.UNREACHABLE, "agent unreachable"
            )
            for message in messages:
                if isinstance(message, TaskStatusChange):
                    self.dispatcher.master_update(
                        message,
                        TaskReason.AGENT_UNREACHABLE,
                        f"agent unheard for {state.liveness.timeout:g}s",
                    )
                else:
                    self.dispatcher.dispatch([message])
        link.end_stream(StreamEnd("NOT_FOUND", "the agent was marked unreachable: reregister"))
        del state.agents[agent_id]
        state.liveness.forget(agent_id)
        state.awaited.discard(agent_id)
        self.remember(
            DepartedAgent(
                agent_id, link.spec, "UNREACHABLE", link.registered_at, state.wall(link.last_heard)
            )
        )
        for framework in state.frameworks.values():
            framework.send(FailureEvent(agent_id, "agent unreachable"))
        state.announce(EventKind.AGENT_UNREACHABLE, logging.WARNING, agent_id=agent_id)

    def mark_gone(self, agent_id: str) -> None:
        """An agent that is not live came back unknown: removed for good (its tasks GONE)."""
        state = self.state
        departed = state.departed.get(agent_id)
        self.record_state(agent_id, GONE)
        for entry in state.tasks.on_agent(agent_id):
            if entry.state is TaskState.UNREACHABLE:
                change = TaskStatusChange(
                    entry.framework_id, entry.task_id, agent_id, TaskState.GONE, "", ""
                )
                self.dispatcher.master_update(
                    change, TaskReason.AGENT_REMOVED, "the agent was removed"
                )
        if departed is not None and departed.state != "GONE":
            self.remember(
                DepartedAgent(
                    agent_id, departed.spec, "GONE", departed.registered_at, departed.last_heard
                )
            )

    def record_state(self, agent_id: str, registry_state: str) -> None:
        """Record a state the master decided on its own (timers): a failed write is logged."""
        self.record_states([agent_id], registry_state)

    def record_states(self, agent_ids: list[str], registry_state: str) -> None:
        """``record_state`` for several agents, in one registry transaction."""
        registry = self.state.registry
        known = [agent_id for agent_id in agent_ids if agent_id in registry.agents]
        if not known:
            return
        try:
            registry.set_agents_state(known, registry_state)
        except RegistryWriteError as error:
            log_event(log, "registry.write.failed", logging.ERROR, agents=len(known), error=error)

    def remember(self, departed: DepartedAgent) -> None:
        """Keep the last ``DEPARTED_MEMORY`` departed agents for display."""
        memory = self.state.departed
        memory.pop(departed.agent_id, None)
        memory[departed.agent_id] = departed
        while len(memory) > DEPARTED_MEMORY:
            del memory[next(iter(memory))]
