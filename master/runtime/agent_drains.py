"""``AgentDrains``: the operator's drains of agents (``OperatorService.DrainAgent``; Mesos's
DRAIN_AGENT, Nomad's node drain with a deadline), carried out on the runtime's loop.

- ``drain(agent_id, grace, principal)``: authorized by the ACL's ``maintain_agents``; the
  agent must be connected (in the pool); the drain (DRAINING, its start and its absolute
  deadline, wall clock) is written to the registry first, then the agent is deactivated in the
  core (its offers rescinded: nothing of it is offered any more) and looked at once
  (``step``): an agent running nothing is DRAINED at once. Draining a draining agent sets its
  new deadline (counted from now); draining a drained one changes nothing;
- ``check()`` (the runtime's timer, every ``CHECK_PERIOD``) looks at every draining agent in
  the pool: what ``master.core.drain.drain_step`` decides is carried out: the tasks it names
  are killed as an operator's ``KillTask`` would (KILLING, the agent told), and a drained agent
  is recorded DRAINED (registry first). A drain outlives a master restart or a failover: the
  next runtime reads it from the registry, deactivates the agent when it reregisters and goes
  on with the same deadline;
- ``ReactivateAgents`` ends a drain (``Registry.set_agents_active``), whatever its state.

Invariants: every check comes before any change (a refused call changes nothing); the registry
is written before memory changes and before the call answers; a task is killed at most once
per drain step (KILLING tasks are left alone); only agents in the pool are stepped (an
unreachable or recovering agent waits until it is back).
"""

from __future__ import annotations

import logging
from typing import Final

from fairshare.logs import log_event

from master.core import CoreError, NotFound
from master.core.drain import DRAINED, DRAINING, check_grace, deadline_at, drain_step
from master.registry import GONE
from master.registry.entries import AgentDrain
from master.runtime.dispatch import Dispatcher
from master.runtime.events import EventKind
from master.runtime.state import RuntimeState, require_id

__all__ = ["CHECK_PERIOD", "AgentDrains"]

log = logging.getLogger("fairshare.master")

CHECK_PERIOD: Final = 0.5
"""Seconds between two looks at the draining agents (the deadline's and DRAINED's lateness)."""


class AgentDrains:
    """Starts drains and carries them out."""

    def __init__(self, state: RuntimeState, dispatcher: Dispatcher) -> None:
        self.state = state
        self.dispatcher = dispatcher

    def drain(self, agent_id: str, grace: float | None, principal: str | None) -> AgentDrain:
        """Drain ``agent_id``: its tasks may run ``grace`` seconds more (None: to their end).
        Returns the drain as recorded (DRAINED already when nothing ran)."""
        state = self.state
        require_id(agent_id, "agent_id")
        state.authority.allow("maintain_agents", principal)
        grace = check_grace(grace)
        self._require_pooled(agent_id)
        entry = state.registry.agents[agent_id]
        if entry.drain is not None and entry.drain.state == DRAINED:
            return entry.drain
        now = state.wall(state.now())
        started = entry.drain.started_at if entry.drain is not None else now
        drain = AgentDrain(DRAINING, started, deadline_at(now, grace))
        with state.durably():
            state.registry.set_agent_drain(agent_id, drain)
        if state.core.agents[agent_id].active:
            self.dispatcher.dispatch(state.core.handle_deactivate_agent(agent_id, state.now()))
        state.announce(EventKind.AGENT_DRAINING, agent_id=agent_id, deadline=drain.deadline)
        self.dispatcher.request_allocation()  # frameworks that lost offers may be due others
        self.step(agent_id)
        final = state.registry.agents[agent_id].drain
        return final if final is not None else drain

    def _require_pooled(self, agent_id: str) -> None:
        """NOT_FOUND unless ``agent_id`` is connected and in the pool."""
        state = self.state
        if agent_id in state.core.agents and agent_id in state.registry.agents:
            return
        known = state.registry.agents.get(agent_id)
        departed = state.departed.get(agent_id)
        if (known is not None and known.state == GONE) or (
            departed is not None and departed.state == GONE
        ):
            raise NotFound(f"agent {agent_id!r} was removed: a removed agent cannot be drained")
        raise NotFound(f"agent {agent_id!r} is not connected to this master")

    def check(self) -> None:
        """Step every draining agent in the pool (the timer): the registry's index of draining
        agents, so a tick costs nothing while no agent drains, whatever the cluster's size."""
        state = self.state
        for agent_id in sorted(state.registry.draining):
            if agent_id in state.core.agents:
                self.step(agent_id)

    def step(self, agent_id: str) -> None:
        """Carry out what the drain of ``agent_id`` decides now (``drain_step``)."""
        state = self.state
        drain = state.registry.agents[agent_id].drain
        if drain is None or drain.state != DRAINING:
            return
        core = state.core
        tasks = [(key, core.tasks[key].state) for key in core.agents[agent_id].task_keys]
        decided = drain_step(drain.deadline, tasks, state.wall(state.now()))
        for framework_id, task_id in decided.kill:
            try:
                self.dispatcher.dispatch(core.handle_kill(framework_id, task_id, state.now()))
            except CoreError as error:  # its framework is gone: the agent reports it anyway
                log_event(
                    log,
                    "drain.kill.failed",
                    logging.WARNING,
                    framework_id=framework_id,
                    task_id=task_id,
                    error=error,
                )
                continue
            state.tasks.mark_killing(framework_id, task_id)
            state.announce(
                EventKind.TASK_KILLED_BY_DRAIN,
                agent_id=agent_id,
                framework_id=framework_id,
                task_id=task_id,
            )
        if decided.drained:
            with state.durably():
                state.registry.set_agent_drain(agent_id, AgentDrain(DRAINED, drain.started_at))
            state.announce(EventKind.AGENT_DRAINED, agent_id=agent_id)
