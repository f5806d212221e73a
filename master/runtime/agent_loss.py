"""``AgentLoss``: agents the master stops hearing from, and agents removed for good (DESIGN.md §6).

An agent unheard for ``agent_timeout`` becomes unreachable: its offers are rescinded, its
resources leave the pool, each of its tasks is reported UNREACHABLE (LOST to frameworks without
PARTITION_AWARE, reason AGENT_UNREACHABLE), every framework gets a FailureEvent and the registry
marks it UNREACHABLE; its stream ends with NOT_FOUND so it reregisters. An agent that comes back
while the registry does not know it (or marked it gone) is gone: its unreachable tasks are GONE.

Invariants: the liveness check never touches agents still recovering after a master restart
(``Recovery`` ends their wait); a state the master decides on its own (a timer, not a call) is
written to the registry best effort: a failed write is logged, the runtime goes on.
"""

from __future__ import annotations

import logging

from fairshare.logs import log_event
from fairshare.task_states import TaskState

from master.core import TaskStatusChange
from master.model import FailureEvent, StreamEnd
from master.registry import GONE, UNREACHABLE, RegistryWriteError
from master.runtime.dispatch import Dispatcher
from master.runtime.sessions import AgentLink, DepartedAgent
from master.runtime.state import DEPARTED_MEMORY, RuntimeState

__all__ = ["AgentLoss"]

log = logging.getLogger("fairshare.master")


class AgentLoss:
    """The liveness check, and the bookkeeping of agents that left the pool."""

    def __init__(self, state: RuntimeState, dispatcher: Dispatcher) -> None:
        self.state = state
        self.dispatcher = dispatcher

    def check_liveness(self) -> None:
        """Mark every agent unheard for ``agent_timeout`` unreachable."""
        state = self.state
        deadline = state.now() - state.config.agent_timeout
        late = [a for a in state.agents.values() if a.last_heard < deadline and not a.recovering]
        for link in late:
            self.unreachable(link)
        if late:
            self.dispatcher.request_allocation()

    def unreachable(self, link: AgentLink) -> None:
        """The agent is lost: out of the pool, its tasks UNREACHABLE, frameworks told."""
        state, agent_id = self.state, link.agent_id
        if link.in_pool:
            messages = state.core.handle_remove_agent(
                agent_id, state.now(), TaskState.UNREACHABLE, "agent unreachable"
            )
            for message in messages:
                if isinstance(message, TaskStatusChange):
                    self.dispatcher.master_update(
                        message,
                        "AGENT_UNREACHABLE",
                        f"agent unheard for {state.config.agent_timeout:g}s",
                    )
                else:
                    self.dispatcher.dispatch([message])
        link.end_stream(StreamEnd("NOT_FOUND", "the agent was marked unreachable: reregister"))
        del state.agents[agent_id]
        self.record_state(agent_id, UNREACHABLE)
        self.remember(
            DepartedAgent(
                agent_id, link.spec, "UNREACHABLE", link.registered_at, state.wall(link.last_heard)
            )
        )
        for framework in state.frameworks.values():
            framework.send(FailureEvent(agent_id, "agent unreachable"))
        log_event(log, "agent.unreachable", level=logging.WARNING, agent_id=agent_id)

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
                self.dispatcher.master_update(change, "AGENT_REMOVED", "the agent was removed")
        if departed is not None and departed.state != "GONE":
            self.remember(
                DepartedAgent(
                    agent_id, departed.spec, "GONE", departed.registered_at, departed.last_heard
                )
            )

    def record_state(self, agent_id: str, registry_state: str) -> None:
        """Record a state the master decided on its own (timers): a failed write is logged."""
        registry = self.state.registry
        if agent_id not in registry.agents:
            return
        try:
            registry.set_agent_state(agent_id, registry_state)
        except RegistryWriteError as error:
            log_event(log, "registry.write.failed", logging.ERROR, agent_id=agent_id, error=error)

    def remember(self, departed: DepartedAgent) -> None:
        """Keep the last ``DEPARTED_MEMORY`` departed agents for display."""
        memory = self.state.departed
        memory.pop(departed.agent_id, None)
        memory[departed.agent_id] = departed
        while len(memory) > DEPARTED_MEMORY:
            del memory[next(iter(memory))]
