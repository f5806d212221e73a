"""``OperatorCalls``: the Operator API side of the master runtime (operator.proto).

Every method runs synchronously on the runtime's loop and checks everything before it changes
anything. Weights and agent maintenance are durable: the registry is written before the change
applies.

Invariants:
- a weight's precedence is: a framework's operator weight, else its role's, else the weight the
  framework subscribed with; every weight obeys the core's one rule (``check_weight``);
- a call naming several agents checks them all before changing any; an agent the operator
  deactivated stays in the pool with its tasks but is offered to nobody (its offers rescinded)
  until reactivated, and reactivating several costs one allocation run that sees them all;
- ``snapshot`` is taken in one step of the loop, so it is consistent.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from fairshare.logs import log_event

from master.core import InvalidArgument, NotFound
from master.core.checks import check_weight
from master.runtime.dispatch import Dispatcher
from master.runtime.state import RuntimeState
from master.runtime.views import ClusterSnapshot, build_snapshot

__all__ = ["OperatorCalls"]

log = logging.getLogger("fairshare.master")


class OperatorCalls:
    """GetState, SetWeight, GetWeights, DeactivateAgents, ReactivateAgents."""

    def __init__(self, state: RuntimeState, dispatcher: Dispatcher) -> None:
        self.state = state
        self.dispatcher = dispatcher

    def snapshot(self) -> ClusterSnapshot:
        """The whole cluster state, in one step of the loop."""
        return build_snapshot(self.state)

    def set_weight(
        self, role: str | None, framework_id: str | None, weight: float, clear: bool
    ) -> tuple[str, str, float] | None:
        """Set (or, with ``clear``, remove) the operator weight of a role or of one framework;
        returns the stored (kind, target, weight), None when cleared. Durable before it applies.
        """
        state = self.state
        if framework_id is not None:
            state.framework(framework_id)
            kind, target = "framework", framework_id
        elif role:
            kind, target = "role", role
        else:
            raise InvalidArgument("set role or framework_id")
        value = None if clear else check_weight(weight, f"{kind} {target!r}")
        with state.durably():
            state.registry.set_weight(kind, target, value)
        if kind == "framework":
            state.core.handle_set_framework_weight(target, value, state.now())
        else:
            state.core.handle_set_weight(target, value, state.now())
        self.dispatcher.request_allocation()
        log_event(log, "weight.set", kind=kind, target=target, weight=value)
        return None if value is None else (kind, target, value)

    def weights(self) -> list[tuple[str, str, float]]:
        """Operator-set weights as (kind, target, weight): roles, then frameworks, sorted."""
        registry = self.state.registry
        roles = [("role", role, w) for role, w in sorted(registry.role_weights.items())]
        frameworks = sorted(registry.framework_weights.items())
        return roles + [("framework", fid, w) for fid, w in frameworks]

    def deactivate_agents(self, agent_ids: Sequence[str]) -> None:
        """Maintenance: rescind the agents' offers and offer nothing of them; all or none."""
        state = self.state
        self._pooled_agents(agent_ids)
        with state.durably():
            state.registry.set_agents_active(list(agent_ids), False)
        now = state.now()
        for agent_id in dict.fromkeys(agent_ids):
            if state.core.agents[agent_id].active:
                self.dispatcher.dispatch(state.core.handle_deactivate_agent(agent_id, now))
                log_event(log, "agent.deactivated", agent_id=agent_id)
        self.dispatcher.request_allocation()  # frameworks that lost offers may be due others

    def reactivate_agents(self, agent_ids: Sequence[str]) -> None:
        """Offer the agents again; all or none, and one allocation run sees them all."""
        state = self.state
        self._pooled_agents(agent_ids)
        with state.durably():
            state.registry.set_agents_active(list(agent_ids), True)
        now = state.now()
        for agent_id in dict.fromkeys(agent_ids):
            if not state.core.agents[agent_id].active:
                state.core.handle_reactivate_agent(agent_id, now)
                log_event(log, "agent.reactivated", agent_id=agent_id)
        self.dispatcher.request_allocation()

    def _pooled_agents(self, agent_ids: Sequence[str]) -> None:
        """Check every id before any change: INVALID_ARGUMENT, or NOT_FOUND if not in the pool."""
        if not agent_ids:
            raise InvalidArgument("agent_ids is empty")
        for agent_id in agent_ids:
            if not agent_id:
                raise InvalidArgument("agent_ids holds an empty id")
            if agent_id not in self.state.core.agents:
                raise NotFound(f"agent {agent_id!r} is not connected to this master")
