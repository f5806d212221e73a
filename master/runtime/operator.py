"""``OperatorCalls``: the Operator API side of the master runtime (operator.proto).

Every method runs synchronously on the runtime's loop and checks everything before it changes
anything. Weights, quotas, agent maintenance, agent removal and framework teardown are durable:
the registry is written before the change applies.

Invariants:
- a weight's precedence is: a framework's operator weight, else its role's, else the weight the
  framework subscribed with; every weight obeys the core's one rule (``check_weight``);
- a role's quota obeys the core's rules (``master.core.quota.check_quotas``) and is checked
  against the whole quota table before the registry is written; a limit below what the role's
  subtree holds needs ``force``, which rescinds the subtree's outstanding offers (the
  ``RescindOffer`` messages are delivered) and kills nothing;
- a call naming several agents checks them all before changing any; an agent the operator
  deactivated stays in the pool with its tasks but is offered to nobody (its offers rescinded)
  until reactivated, and reactivating several costs one allocation run that sees them all; a
  drain (``drain_agent``, ``master.runtime.agent_drains``) deactivates too, then kills the
  agent's tasks at its deadline and marks it DRAINED; reactivating ends it;
- only an agent the master no longer hears from (unreachable, in the registry or among the
  departed) can be removed; once removed (GONE) it is no longer listed and never readmitted;
- an operator's teardown or kill acts as the framework's own would (the same core calls), whether
  the framework is connected or within its failover timeout;
- ``snapshot`` is taken in one step of the loop, so it is consistent; ``view`` is what a
  principal may see of it: the whole snapshot, or (ACL ``view_state`` level ``redacted``) the
  caller's own frameworks, tasks and offers, the others' shares and resources without their
  ids or names, agents without ids or addresses (``views.redact``);
- every call is authorized first (``Authority.allow``): ``set_weights`` for the target's role,
  ``update_quota`` for the quota's role, ``maintain_agents`` (drains too),
  ``teardown_frameworks`` and ``kill_tasks`` for the framework's owner (``"SELF"``: one's own
  frameworks), ``view_state`` for the state, the weights and the quotas; ``grant_logs`` by
  the framework's owner, ``view_logs`` or the full ``view_state`` (``master.runtime.log_grants``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from fairshare.resources import ResourceVector
from fairshare.roles import ancestors
from fairshare.task_states import TaskReason, TaskState

from master.core import FailedPrecondition, InvalidArgument, NotFound, TaskStatusChange
from master.core.checks import check_weight, checked_role
from master.core.messages import RescindOffer
from master.core.quota import Quota
from master.registry import GONE
from master.registry.entries import AgentDrain
from master.runtime import reservations
from master.runtime.agent_drains import AgentDrains
from master.runtime.dispatch import Dispatcher
from master.runtime.events import EventKind
from master.runtime.frameworks import FrameworkCalls
from master.runtime.log_grants import LogGrant, LogGrants
from master.runtime.state import RuntimeState, require_id
from master.runtime.views import (
    ClusterSnapshot,
    PoolSummary,
    build_pool_summary,
    build_snapshot,
    redact,
)

__all__ = ["OperatorCalls", "QuotaTable", "QuotaView"]

log = logging.getLogger("fairshare.master")
EMPTY = ResourceVector()


@dataclass(frozen=True, slots=True)
class QuotaView:
    """A role's quota, what its subtree consumes now (offered plus used, and its reservations'
    idle parts) and what is reserved for its subtree."""

    role: str
    quota: Quota
    consumed: ResourceVector
    reserved: ResourceVector = EMPTY


@dataclass(frozen=True, slots=True)
class QuotaTable:
    """Every quota (in the role tree's pre-order), everything guaranteed (the top-level
    guaranteed roles' guarantees), the pool, and whether the guarantees exceed it."""

    quotas: tuple[QuotaView, ...]
    guaranteed: ResourceVector
    total: ResourceVector

    @property
    def overcommitted(self) -> bool:
        return not self.guaranteed.fits_in(self.total)


class OperatorCalls:
    """GetState, SetWeight, GetWeights, SetQuota, GetQuotas, DeactivateAgents, ReactivateAgents,
    TeardownFramework, KillTask, RemoveAgent."""

    def __init__(
        self,
        state: RuntimeState,
        dispatcher: Dispatcher,
        frameworks: FrameworkCalls,
    ) -> None:
        self.state = state
        self.dispatcher = dispatcher
        self.frameworks = frameworks
        self.drains = AgentDrains(state, dispatcher)
        self.log_grants = LogGrants(state)

    def snapshot(self) -> ClusterSnapshot:
        """The whole cluster state, in one step of the loop (for the master's own use)."""
        return build_snapshot(self.state)

    def pool_summary(self) -> PoolSummary:
        """The snapshot's counts, frameworks, roles and pool sums (the metrics' scrape, the
        dashboard's share history)."""
        return build_pool_summary(self.state)

    def view(self, principal: str | None = None) -> ClusterSnapshot:
        """What ``principal`` may see of the cluster (PERMISSION_DENIED: nothing)."""
        rule = self.state.authority.allow("view_state", principal)
        snapshot = build_snapshot(self.state)
        return redact(snapshot, principal) if rule.level == "redacted" else snapshot

    def set_weight(
        self,
        role: str | None,
        framework_id: str | None,
        weight: float,
        clear: bool,
        principal: str | None = None,
    ) -> tuple[str, str, float] | None:
        """Set (or, with ``clear``, remove) the operator weight of a role or of one framework;
        returns the stored (kind, target, weight), None when cleared. Durable before it applies.
        """
        state = self.state
        if framework_id is not None:
            link = state.framework(framework_id)
            kind, target, target_role = "framework", framework_id, link.spec.role
        elif role:
            kind, target, target_role = "role", role, role
        else:
            raise InvalidArgument("set role or framework_id")
        state.authority.allow("set_weights", principal, target_role)
        value = None if clear else check_weight(weight, f"{kind} {target!r}")
        with state.durably():
            state.registry.set_weight(kind, target, value)
        if kind == "framework":
            state.core.handle_set_framework_weight(target, value, state.now())
        else:
            state.core.handle_set_weight(target, value, state.now())
        self.dispatcher.request_allocation()
        state.announce(EventKind.WEIGHT_SET, kind=kind, target=target, weight=value)
        return None if value is None else (kind, target, value)

    def weights(self, principal: str | None = None) -> list[tuple[str, str, float]]:
        """Operator-set weights as (kind, target, weight): roles, then frameworks, sorted (a
        redacted view leaves out the frameworks of others)."""
        state, registry = self.state, self.state.registry
        rule = state.authority.allow("view_state", principal)
        roles = [("role", role, w) for role, w in sorted(registry.role_weights.items())]
        frameworks = sorted(registry.framework_weights.items())
        if rule.level == "redacted":
            mine = principal or ""
            frameworks = [
                (fid, w)
                for fid, w in frameworks
                if fid in state.frameworks and state.frameworks[fid].spec.principal == mine
            ]
        return roles + [("framework", fid, w) for fid, w in frameworks]

    def set_quota(
        self,
        role: str,
        quota: Quota,
        force: bool = False,
        principal: str | None = None,
    ) -> tuple[QuotaView | None, int]:
        """Set the quota of the role path ``role`` (an empty one: clear it); returns the stored
        quota with its consumption (None when cleared) and the number of offers rescinded.
        Durable before it applies; every check comes first (INVALID_ARGUMENT for a table that
        breaks the rules, FAILED_PRECONDITION for a limit below the subtree's use without
        ``force``)."""
        state = self.state
        if not role:
            raise InvalidArgument("role is empty (the default role is '*')")
        role = checked_role(role)
        state.authority.allow("update_quota", principal, role)
        core = state.core
        core.check_set_quota(role, quota.guarantee, quota.limit, force)  # before the write
        with state.durably():
            state.registry.set_quota(role, quota)
        messages = core.handle_set_quota(role, quota.guarantee, quota.limit, state.now(), force)
        self.dispatcher.dispatch(messages)
        self.dispatcher.request_allocation()
        rescinded = sum(1 for m in messages if isinstance(m, RescindOffer))
        state.announce(
            EventKind.QUOTA_SET if not quota.empty else EventKind.QUOTA_CLEARED,
            role=role,
            guarantee=str(quota.guarantee),
            limit="-" if quota.limit is None else str(quota.limit),
            rescinded=rescinded,
        )
        if quota.empty:
            return None, rescinded
        return QuotaView(role, quota, core.subtree_holds(role), core.subtree_reserved(role)), (
            rescinded
        )

    def quotas(self, principal: str | None = None) -> QuotaTable:
        """Every role's quota with its subtree's consumption, and the guarantees against the
        pool (what ``view_state`` allows, as for the weights: roles are no one's own)."""
        state = self.state
        state.authority.allow("view_state", principal)
        core = state.core
        table = core.quotas
        reserved_roles = {r for a in core.reserved_agents for r in core.agents[a].reserved}
        roles = sorted(
            {r for r, q in table.items() if not q.empty} | reserved_roles, key=_tree_order
        )
        guaranteed = EMPTY
        for role in roles:
            above = ancestors(role)[:-1]
            quota = table.get(role)
            if (
                quota
                and quota.guarantee
                and not any(a in table and table[a].guarantee for a in above)
            ):
                guaranteed = guaranteed + quota.guarantee
        views = tuple(
            QuotaView(r, table.get(r, Quota()), core.subtree_holds(r), core.subtree_reserved(r))
            for r in roles
        )
        return QuotaTable(views, guaranteed, core.total)

    def reserve(
        self, agent_id: str, role: str, resources: ResourceVector, principal: str | None = None
    ) -> int:
        """Reserve resources of an agent for a role (``master.runtime.reservations``)."""
        return reservations.reserve(
            self.state, self.dispatcher, agent_id, role, resources, principal
        )

    def unreserve(
        self, agent_id: str, role: str, resources: ResourceVector, principal: str | None = None
    ) -> int:
        """Undo part of a dynamic reservation (``master.runtime.reservations``)."""
        return reservations.unreserve(
            self.state, self.dispatcher, agent_id, role, resources, principal
        )

    def deactivate_agents(self, agent_ids: Sequence[str], principal: str | None = None) -> None:
        """Maintenance: rescind the agents' offers and offer nothing of them; all or none."""
        state = self.state
        state.authority.allow("maintain_agents", principal)
        self._pooled_agents(agent_ids)
        with state.durably():
            state.registry.set_agents_active(list(agent_ids), False)
        now = state.now()
        for agent_id in dict.fromkeys(agent_ids):
            if state.core.agents[agent_id].active:
                self.dispatcher.dispatch(state.core.handle_deactivate_agent(agent_id, now))
                state.announce(EventKind.AGENT_DEACTIVATED, agent_id=agent_id)
        self.dispatcher.request_allocation()  # frameworks that lost offers may be due others

    def drain_agent(
        self, agent_id: str, grace: float | None, principal: str | None = None
    ) -> AgentDrain:
        """Drain an agent (``master.runtime.agent_drains``)."""
        return self.drains.drain(agent_id, grace, principal)

    def reactivate_agents(self, agent_ids: Sequence[str], principal: str | None = None) -> None:
        """Offer the agents again, ending their drains; all or none, and one allocation run
        sees them all."""
        state = self.state
        state.authority.allow("maintain_agents", principal)
        self._pooled_agents(agent_ids)
        with state.durably():
            state.registry.set_agents_active(list(agent_ids), True)
        now = state.now()
        for agent_id in dict.fromkeys(agent_ids):
            if not state.core.agents[agent_id].active:
                state.core.handle_reactivate_agent(agent_id, now)
                state.announce(EventKind.AGENT_REACTIVATED, agent_id=agent_id)
        self.dispatcher.request_allocation()

    def teardown_framework(self, framework_id: str, principal: str | None = None) -> None:
        """Remove the framework for good (connected or not): its tasks killed, offers dropped."""
        link = self.state.framework(framework_id)
        self.state.authority.allow("teardown_frameworks", principal, link.spec.principal)
        self.frameworks.remove(link, "torn down by the operator")

    def kill_task(self, framework_id: str, task_id: str, principal: str | None = None) -> None:
        """Kill one task of a framework (connected or not), as its own Kill would."""
        state = self.state
        link = state.framework(framework_id)
        require_id(task_id, "task_id")
        state.authority.allow("kill_tasks", principal, link.spec.principal)
        entry = state.tasks.get(framework_id, task_id)
        if entry is None:
            raise NotFound(f"framework {framework_id!r} has no task {task_id!r}")
        if entry.terminal:
            raise FailedPrecondition(f"task {task_id!r} already ended ({entry.state.value})")
        self.dispatcher.dispatch(state.core.handle_kill(framework_id, task_id, state.now()))
        state.tasks.mark_killing(framework_id, task_id)
        state.announce(
            EventKind.TASK_KILLED_BY_OPERATOR, framework_id=framework_id, task_id=task_id
        )

    def grant_logs(self, task_id: str, framework_id: str, principal: str | None = None) -> LogGrant:
        """A credential for ``principal`` to read the logs of a task on its agents
        (``master.runtime.log_grants``)."""
        return self.log_grants.grant(task_id, framework_id, principal)

    def remove_agent(self, agent_id: str, principal: str | None = None) -> None:
        """Mark an unreachable agent GONE for good: its tasks GONE, no longer listed."""
        state = self.state
        require_id(agent_id, "agent_id")
        state.authority.allow("maintain_agents", principal)
        link = state.agents.get(agent_id)
        if link is not None:
            what = "still recovering" if link.recovering else "connected"
            raise FailedPrecondition(
                f"agent {agent_id!r} is {what}: only an unreachable agent can be removed"
            )
        known = state.registry.agents.get(agent_id)
        departed = state.departed.get(agent_id)
        if (known is not None and known.state == GONE) or (
            departed is not None and departed.state == "GONE"
        ):
            raise NotFound(f"agent {agent_id!r} was already removed")
        if known is None and departed is None:
            raise NotFound(f"agent {agent_id!r} is not known to this master")
        if known is not None:
            with state.durably():
                state.registry.set_agent_state(agent_id, GONE)
        for entry in state.tasks.on_agent(agent_id):
            if not entry.terminal:
                change = TaskStatusChange(
                    entry.framework_id, entry.task_id, agent_id, TaskState.GONE, "", ""
                )
                self.dispatcher.master_update(
                    change, TaskReason.AGENT_REMOVED, "the operator removed it"
                )
        state.departed.pop(agent_id, None)
        state.announce(EventKind.AGENT_REMOVED, agent_id=agent_id)

    def _pooled_agents(self, agent_ids: Sequence[str]) -> None:
        """Check every id before any change: INVALID_ARGUMENT, or NOT_FOUND if not in the pool."""
        if not agent_ids:
            raise InvalidArgument("agent_ids is empty")
        for agent_id in agent_ids:
            if not agent_id:
                raise InvalidArgument("agent_ids holds an empty id")
            if agent_id not in self.state.core.agents:
                raise NotFound(f"agent {agent_id!r} is not connected to this master")


def _tree_order(role: str) -> tuple[str, ...]:
    """Sort key of the role tree's pre-order (``eng`` < ``eng/dev`` < ``eng-x``)."""
    return tuple(role.split("/"))
