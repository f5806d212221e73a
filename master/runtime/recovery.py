"""``Recovery``: the master's restart from its durable registry (docs/architecture.md §4).

On start the runtime rebuilds what the registry kept: role weights, role quotas (a role's
before those of the roles below it, so that every step obeys the quota rules; nothing is held
yet, so nothing is rescinded), the frameworks that were not removed (registered but
disconnected: each may resubscribe within its failover timeout, and at least within the
reregistration window), the ids of removed frameworks (refused for good), and the agents
admitted before the restart, which are ``recovering``: not in the pool until they
reregister with their tasks (``AgentCalls`` adopts them and calls ``agent_back``). Agents marked
unreachable or gone stay so until they come back.

Invariants:
- while recovering, nothing is offered: the first allocation run after a restart sees every
  agent that came back and the tasks they run, so offers resume in fairness order;
- recovery ends when every recovered agent has reregistered or the reregistration window
  passed, whichever is first (the awaited agents are a set, so each reregistration costs O(1)
  however many agents there are; each tenth of the way is logged, ``master.recovery.progress``,
  and each agent's ``agent.reregistered`` is at DEBUG while the master recovers); then one
  allocation run follows and the missing agents are marked unreachable in batches by the
  liveness check (frameworks get a FailureEvent; their tasks, unknown to this master, are
  answered UNREACHABLE to explicit reconciliation);
- the window is ``reregistration_timeout``, and at least twice the reconnect jitter the agents
  were told plus one second per ``REREGISTRATION_RATE`` agents, so a large fleet that reconnects
  spread out as told always fits in it (10,000 agents: 20 s either way); the heartbeat interval
  is sized for the recovered fleet from the start;
- an agent row whose attributes break today's bounds (``master.core.input_bounds``; a row
  written before they existed) loads without its attributes, with a warning
  (``registry.agent.trimmed``), never stopping the master.
"""

from __future__ import annotations

import dataclasses
import logging

from fairshare.logs import log_event

from master.core.errors import InvalidArgument
from master.core.input_bounds import check_attributes
from master.model import AgentSpec
from master.registry import ADMITTED, GONE, UNREACHABLE
from master.runtime.agent_loss import AgentLoss
from master.runtime.dispatch import Dispatcher
from master.runtime.events import EventKind
from master.runtime.frameworks import FrameworkCalls
from master.runtime.liveness import REREGISTRATION_RATE, reconnect_jitter
from master.runtime.sessions import AgentLink, DepartedAgent, FrameworkLink
from master.runtime.state import RuntimeState

__all__ = ["Recovery"]

log = logging.getLogger("fairshare.master")

PROGRESS_STEPS = 10
"""The recovery's progress is logged this many times (each tenth of the awaited agents)."""


class Recovery:
    """Rebuilding the runtime from the registry, and ending the recovery."""

    def __init__(
        self,
        state: RuntimeState,
        dispatcher: Dispatcher,
        loss: AgentLoss,
        frameworks: FrameworkCalls,
    ) -> None:
        self.state = state
        self.dispatcher = dispatcher
        self.loss = loss
        self.frameworks = frameworks
        self.expected = 0  # the agents the recovery awaited at its start

    def recover(self) -> None:
        """Load the registry into the runtime (call once, on the loop, before serving)."""
        state, registry = self.state, self.state.registry
        now = state.now()
        for role, weight in sorted(registry.role_weights.items()):
            state.core.handle_set_weight(role, weight, now)
        for role, quota in sorted(registry.quotas.items()):  # a role before the roles below it
            state.core.handle_set_quota(role, quota.guarantee, quota.limit, now, force=True)
        known = sum(1 for agent in registry.agents.values() if agent.state == ADMITTED)
        state.liveness.resize(known)
        window = max(
            state.config.reregistration_timeout,
            2 * reconnect_jitter(known) + known / REREGISTRATION_RATE,
        )
        frameworks = 0
        for framework_id, entry in registry.frameworks.items():
            if entry.removed:
                state.removed_frameworks.add(framework_id)
                continue
            spec = entry.spec
            weight = 1.0 if spec.weight is None else spec.weight
            gpu_aware = "GPU_RESOURCES" in spec.capabilities
            state.core.handle_add_framework(
                framework_id, now, spec.name, spec.role, weight, gpu_aware
            )
            state.core.handle_deactivate_framework(framework_id, now)
            framework = FrameworkLink(spec, entry.registered_at)
            state.frameworks[framework_id] = framework
            self.frameworks.start_failover(framework, max(spec.failover_timeout, window))
            frameworks += 1
        for framework_id, weight in sorted(registry.framework_weights.items()):
            if framework_id in state.frameworks:
                state.core.handle_set_framework_weight(framework_id, weight, now)
        for agent_id, agent in registry.agents.items():
            agent_spec = bounded_spec(agent_id, agent.spec)
            if agent.state == ADMITTED:
                link = AgentLink(agent_id, agent_spec, agent.registered_at, now, recovering=True)
                state.agents[agent_id] = link
                state.awaited.add(agent_id)
            elif agent.state != GONE:  # a removed agent stays refused, and is no longer listed
                state.departed[agent_id] = DepartedAgent(
                    agent_id, agent_spec, agent.state, agent.registered_at, agent.registered_at
                )
        waiting = self.expected = len(state.awaited)
        state.announce(
            EventKind.MASTER_RECOVERED,
            cluster_id=registry.cluster_id,
            frameworks=frameworks,
            agents=waiting,
            unreachable=sum(1 for a in registry.agents.values() if a.state == UNREACHABLE),
            gone=sum(1 for a in registry.agents.values() if a.state == GONE),
            window=f"{window:g}",
        )
        if waiting:
            state.recovering = True
            state.loop.call_later(window, self.finish)

    def agent_back(self, agent_id: str) -> None:
        """An agent reregistered: the recovery ends once every recovered agent is back (its
        progress is logged each tenth of the fleet: ``master.recovery.progress``)."""
        state = self.state
        if agent_id not in state.awaited:
            return
        state.awaited.discard(agent_id)
        if not state.recovering:
            return
        back = self.expected - len(state.awaited)
        if back % max(1, self.expected // PROGRESS_STEPS) == 0 and state.awaited:
            log_event(log, "master.recovery.progress", back=back, awaited=self.expected)
        if not state.awaited:
            self.finish()

    def finish(self) -> None:
        """End the recovery: allocation resumes; agents still missing become unreachable (not
        once drained: SIGTERM, or the end of a leadership term, whose registry is gone)."""
        state = self.state
        if not state.recovering or state.draining:
            return
        state.recovering = False
        missing = sorted(state.awaited)
        for agent_id in missing:
            state.liveness.expire(agent_id)
        state.announce(EventKind.MASTER_RECOVERY_DONE, unreachable=len(missing))
        self.dispatcher.request_allocation()
        if missing:
            self.loss.check_liveness()


def bounded_spec(agent_id: str, spec: AgentSpec) -> AgentSpec:
    """``spec`` as the registry kept it, without its attributes if they break today's bounds (a
    row written before the bounds existed): logged, and the agent's next reregistration, checked
    at the source, writes its row afresh."""
    try:
        check_attributes(spec.attributes, "agent_info.attributes")
    except InvalidArgument as error:
        log_event(
            log,
            "registry.agent.trimmed",
            logging.WARNING,
            agent_id=agent_id,
            attributes=len(spec.attributes),
            why=str(error),
        )
        return dataclasses.replace(spec, attributes=())
    return spec
