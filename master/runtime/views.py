"""``build_snapshot``: the cluster as ``GetState`` and the metrics collector see it, and
``redact``. The snapshot's value types live in ``master.runtime.cluster_snapshot`` and are
re-exported here.

Built in one synchronous step on the runtime's event loop, so it is consistent: every agent's
``free + reserved_free + offered + used == total`` (``free`` is unreserved) and the pool
figures are the sums over the agents in the pool (active, or deactivated or drained by the
operator: their resources stay in the pool). The snapshot is made of immutable values and
shares nothing mutable with the runtime.

Invariants: agents sorted by id (those in the pool, then those that departed: unreachable or
gone, kept for display only), frameworks by id, tasks by (framework id, task id), offers by id;
roles in pre-order of the role tree (``role_order``: a role before the roles below it, siblings
by path), each role that holds a framework and every ancestor of one, exactly the roles of the
core's ``MasterState.role_shares``; a role's ``allocated``, ``subtree_frameworks`` and
``running_tasks`` are the sums over the frameworks of its subtree, and a parent's figures are
at least the sum of its children's. Times are wall clock. ``redact`` keeps every figure
(shares, resources, pool sums, the role tree: paths are not secret, frameworks keep their role)
but no id, name or address that is not the caller's: its own frameworks (owner = the caller's
principal) with their tasks and offers stay whole.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from types import MappingProxyType

from fairshare.resources import ResourceVector
from fairshare.roles import DEFAULT_ROLE, ancestors
from fairshare.task_states import TaskReason, TaskState

from master.core.records import AgentRecord
from master.model import FrameworkInfo, StatusUpdate
from master.registry.entries import AgentDrain
from master.runtime.cluster_snapshot import (
    EMPTY,
    POOL_STATES,
    REDACTED,
    AgentView,
    ClusterSnapshot,
    FrameworkView,
    OfferView,
    PoolSummary,
    RoleView,
    TaskView,
    role_order,
)
from master.runtime.state import RuntimeState

__all__ = [
    "POOL_STATES",
    "REDACTED",
    "AgentView",
    "ClusterSnapshot",
    "FrameworkView",
    "OfferView",
    "PoolSummary",
    "RoleView",
    "TaskView",
    "build_pool_summary",
    "build_snapshot",
    "redact",
    "role_order",
]


def _dominant(allocated: ResourceVector, total: ResourceVector) -> tuple[float, str]:
    best, name = 0.0, ""
    for resource, millis in allocated.millis_items():
        denominator = total.millis(resource)
        share = millis / denominator if denominator else 1.0
        if share > best:
            best, name = share, resource
    return min(best, 1.0), name


def _drain_of(runtime: RuntimeState, agent_id: str) -> AgentDrain | None:
    """The agent's drain, as the registry records it (None: not draining)."""
    entry = runtime.registry.agents.get(agent_id)
    return entry.drain if entry is not None else None


def _pool_state(record: AgentRecord, drain: AgentDrain | None) -> str:
    """The state shown for an agent in the pool: its drain's, else ACTIVE or DEACTIVATED."""
    return drain.state if drain else "ACTIVE" if record.active else "DEACTIVATED"


def _agents(runtime: RuntimeState) -> list[AgentView]:
    core = runtime.core
    views = []
    for agent_id in sorted(runtime.agents):
        link = runtime.agents[agent_id]
        record = core.agents.get(agent_id)
        if record is None and link.recovering:  # after a restart, not reregistered yet
            views.append(
                AgentView(
                    agent_id,
                    link.spec,
                    "RECOVERING",
                    EMPTY,
                    EMPTY,
                    EMPTY,
                    link.registered_at,
                    runtime.wall(link.last_heard),
                )
            )
            continue
        if record is None:  # readmitted, not in the pool yet (never seen outside a call)
            continue
        offered = sum((core.offers[o].resources for o in record.offer_ids), EMPTY)
        used = sum((core.tasks[k].resources for k in record.task_keys), EMPTY)
        drain = _drain_of(runtime, agent_id)
        views.append(
            AgentView(
                agent_id,
                link.spec,
                _pool_state(record, drain),
                record.free,
                offered,
                used,
                link.registered_at,
                runtime.wall(link.last_heard),
                _reservations(record),
                sum(record.reserved_free.values(), EMPTY),
                drain.deadline if drain else None,
            )
        )
    for departed in sorted(runtime.departed.values(), key=lambda d: d.agent_id):
        views.append(
            AgentView(
                departed.agent_id,
                departed.spec,
                departed.state,
                EMPTY,
                EMPTY,
                EMPTY,
                departed.registered_at,
                departed.last_heard,
            )
        )
    return views


def _reservations(record: AgentRecord) -> tuple[tuple[str, ResourceVector, bool], ...]:
    """An agent's reservations: the static part of each role, then the dynamic part."""
    static = tuple((role, r, False) for role, r in sorted(record.static_reserved.items()))
    dynamic = tuple(
        (role, left, True)
        for role, reserved in sorted(record.reserved.items())
        if (left := reserved - record.static_reserved.get(role, EMPTY))
    )
    return static + dynamic


def _frameworks(runtime: RuntimeState) -> list[FrameworkView]:
    core = runtime.core
    views = []
    for framework_id in sorted(runtime.frameworks):
        link = runtime.frameworks[framework_id]
        record = core.frameworks[framework_id]
        offered = sum((core.offers[o].resources for o in record.offer_ids), EMPTY)
        used = sum((core.tasks[(framework_id, t)].resources for t in record.task_ids), EMPTY)
        counts: dict[TaskState, int] = {}
        for entry in runtime.tasks.of_framework(framework_id):
            counts[entry.state] = counts.get(entry.state, 0) + 1
        if link.channel is None:
            state = "DISCONNECTED"
        else:
            state = "SUPPRESSED" if record.suppressed else "ACTIVE"
        share, resource = _dominant(record.allocated, core.total)
        views.append(
            FrameworkView(
                link.spec,
                state,
                record.weight,
                share,
                resource,
                record.allocated,
                offered,
                used,
                tuple(sorted(counts.items(), key=lambda item: item[0].value)),
                link.demand,
                link.registered_at,
                link.failover_deadline,
                runtime.counters.tasks_preempted.get(framework_id, 0),
            )
        )
    return views


def _tasks(runtime: RuntimeState) -> list[TaskView]:
    views = []
    for entry in sorted(runtime.tasks, key=lambda e: (e.framework_id, e.task_id)):
        last = entry.status
        status = StatusUpdate(
            entry.task_id,
            entry.agent_id,
            entry.state,
            last.reason if last else TaskReason.UNSPECIFIED,
            last.message if last else "",
            last.timestamp if last else 0.0,
            last.uuid if last else b"",
            last.source if last else "MASTER",
            last.healthy if last else None,
            last.exit_code if last else None,
            last.usage if last else None,
        )
        views.append(TaskView(entry.framework_id, entry.agent_id, entry.launch, status))
    return views


def _roles(runtime: RuntimeState, frameworks: list[FrameworkView]) -> list[RoleView]:
    """The core's role tree with the sums over each subtree's frameworks."""
    allocated: dict[str, ResourceVector] = {}
    own: dict[str, int] = {}
    subtree: dict[str, int] = {}
    running: dict[str, int] = {}
    wanting: set[str] = set()
    core = runtime.core
    for view in frameworks:
        role = view.spec.role or DEFAULT_ROLE
        own[role] = own.get(role, 0) + 1
        tasks = dict(view.task_counts).get(TaskState.RUNNING, 0)
        record = core.frameworks.get(view.spec.framework_id)
        wants = record is not None and (
            record.demand is not None and record.live_tasks + record.offered_tasks < record.wanted
        )
        for path in ancestors(role):  # ancestors("*") == ["*"]
            allocated[path] = allocated.get(path, EMPTY) + view.allocated
            subtree[path] = subtree.get(path, 0) + 1
            running[path] = running.get(path, 0) + tasks
            if wants:
                wanting.add(path)
    shares = core.role_shares()
    quotas = core.quotas
    paths = set(shares)
    idle = core.reserved_idle()
    for role in (
        *quotas,
        *idle,
        *(r for a in core.reserved_agents for r in core.agents[a].reserved),
    ):
        paths.update(ancestors(role))  # a role with a quota or a reservation is shown too
    idle_within: dict[str, ResourceVector] = {}
    for role, amount in idle.items():
        for path in ancestors(role):
            idle_within[path] = idle_within.get(path, EMPTY) + amount
    views = []
    for path in sorted(paths, key=role_order):
        share = shares.get(path)
        quota = quotas.get(path)
        views.append(
            RoleView(
                path,
                share.weight if share else core.role_weights.get(path, 1.0),
                share.share if share else 0.0,
                share.weighted_share if share else 0.0,
                share.dominant_resource if share else "",
                allocated.get(path, EMPTY),
                own.get(path, 0),
                subtree.get(path, 0),
                running.get(path, 0),
                quota.guarantee if quota else EMPTY,
                quota.limit if quota else None,
                path in wanting,
                core.reservations_of(path),
                idle_within.get(path, EMPTY),
            )
        )
    return views


def build_snapshot(runtime: RuntimeState) -> ClusterSnapshot:
    """Take the snapshot (call on the runtime's loop, between two awaits)."""
    core = runtime.core
    agents = _agents(runtime)
    active = [a for a in agents if a.state in POOL_STATES]
    timeout = runtime.config.core.offer_timeout
    offers = [
        OfferView(o, None if timeout is None else runtime.wall(o.created_at + timeout))
        for _, o in sorted(core.offers.items())
    ]
    used = sum((a.used for a in active), EMPTY)
    offered = sum((a.offered for a in active), EMPTY)
    frameworks = _frameworks(runtime)
    return ClusterSnapshot(
        runtime.master_id,
        runtime.config.version,
        runtime.started_at,
        runtime.config.core.policy,
        runtime.config.core.placement,
        tuple(agents),
        tuple(frameworks),
        tuple(_tasks(runtime)),
        tuple(offers),
        core.total,
        used,
        offered,
        sum((a.free for a in active), EMPTY),
        runtime.leader,
        tuple(_roles(runtime, frameworks)),
        core.hierarchy,
    )


def build_pool_summary(runtime: RuntimeState) -> PoolSummary:
    """What the metrics report (``PoolSummary``; call on the runtime's loop): the snapshot's
    counts, frameworks, roles and pool sums, without a view of any agent, task or offer.

    One pass over the agents counts their states and sums the reserved free parts (rarely
    any); ``offered`` and ``used`` are sums over the core's offers and tasks (each is on an
    agent of the pool) and ``free`` follows from every pool agent's ``free + reserved_free +
    offered + used == total``. About 20 times cheaper than ``build_snapshot``."""
    core = runtime.core
    states: Counter[str] = Counter()
    reserved_free = EMPTY
    for agent_id, link in runtime.agents.items():
        record = core.agents.get(agent_id)
        if record is None:
            if link.recovering:
                states["RECOVERING"] += 1
            continue
        states[_pool_state(record, _drain_of(runtime, agent_id))] += 1
        if record.reserved_free:
            reserved_free = sum(record.reserved_free.values(), reserved_free)
    states.update(d.state for d in runtime.departed.values() if d.state != "GONE")
    offered = sum((offer.resources for offer in core.offers.values()), EMPTY)
    used = sum((task.resources for task in core.tasks.values()), EMPTY)
    frameworks = _frameworks(runtime)
    return PoolSummary(
        runtime.config.version,
        MappingProxyType(dict(states)),
        MappingProxyType(dict(Counter(entry.state for entry in runtime.tasks))),
        len(core.offers),
        tuple(frameworks),
        tuple(_roles(runtime, frameworks)),
        core.total,
        core.total - offered - used - reserved_free,
        offered,
        used,
    )


def redact(snapshot: ClusterSnapshot, principal: str | None) -> ClusterSnapshot:
    """``snapshot`` as a principal with a redacted view sees it (module docstring)."""
    mine = principal or ""
    own = {v.spec.framework_id for v in snapshot.frameworks if v.spec.principal == mine}
    frameworks = tuple(
        view
        if view.spec.framework_id in own
        else dataclasses.replace(
            view,
            spec=FrameworkInfo(
                framework_id="", name=REDACTED, role=view.spec.role, weight=view.spec.weight
            ),
            demand=None,
            failover_deadline=None,
        )
        for view in snapshot.frameworks
    )
    agents = tuple(
        dataclasses.replace(
            view, agent_id="", spec=dataclasses.replace(view.spec, hostname=REDACTED, port=0)
        )
        for view in snapshot.agents
    )
    return dataclasses.replace(
        snapshot,
        agents=agents,
        frameworks=frameworks,
        tasks=tuple(t for t in snapshot.tasks if t.framework_id in own),
        offers=tuple(o for o in snapshot.offers if o.offer.framework_id in own),
    )
