"""The JSON documents of the master's HTTP API (``/api/v1/...``), built from a ``ClusterSnapshot``.

The same snapshot the gRPC ``GetState`` and the metrics read (``OperatorCalls.snapshot``), so
the API shows exactly what ``fairshare status --json`` shows: every key of that document
(``client_commands.status_document``) is here with the same name and value, and a few more that the
dashboard needs (weighted share, wanted tasks, times, task status details). ``docs/http-api.md``
documents every key.

Invariants: pure functions of the snapshot (no I/O, no clock); resources are ``{name: quantity}``
in the resource's unit (cpus, MiB) as ``ResourceVector.to_dict`` gives them; states are plain
names (``"RUNNING"``, ``"ACTIVE"``); times are wall-clock seconds since the epoch, ``null`` when
unknown; ``weighted_share`` is ``dominant_share / weight`` (the DRF sort key); lists keep the
snapshot's order (sorted by id; roles in the tree's pre-order). A role has the keys of
``fairshare.role_tree`` (what ``fairshare status --json`` and ``fairshare roles --json`` print);
``roles_document`` adds per-resource totals over the top-level roles (everything allocated).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fairshare.resources import ResourceVector
from fairshare.roles import parent
from fairshare.task_states import TaskReason, TaskState

from master.model import TaskDetails
from master.runtime.views import (
    POOL_STATES,
    AgentView,
    ClusterSnapshot,
    FrameworkView,
    OfferView,
    RoleView,
    TaskView,
)

__all__ = [
    "MAX_PAGE",
    "agent_document",
    "framework_document",
    "offer_document",
    "page_of_tasks",
    "role_document",
    "roles_document",
    "state_document",
    "summary_document",
    "task_document",
]

MAX_PAGE = 1000
"""The most tasks one ``/api/v1/tasks`` page holds."""


def agent_document(view: AgentView) -> dict[str, Any]:
    """One agent (``agents[i]`` of ``status --json``, plus port and times)."""
    return {
        "id": view.agent_id,
        "hostname": view.spec.hostname,
        "port": view.spec.port,
        "state": view.state,
        "reachable": view.state in POOL_STATES,
        "attributes": dict(view.spec.attributes),
        "resources": {
            "total": view.spec.resources.to_dict(),
            "free": view.free.to_dict(),
            "used": view.used.to_dict(),
            "offered": view.offered.to_dict(),
        },
        "reservations": [
            {"role": role, "resources": resources.to_dict(), "dynamic": dynamic}
            for role, resources, dynamic in view.reservations
        ],
        "reserved_free": view.reserved_free.to_dict(),
        "registered_at": view.registered_at or None,
        "last_heard": view.last_heard or None,
    }


def framework_document(view: FrameworkView) -> dict[str, Any]:
    """One framework (``frameworks[i]`` of ``status --json``, plus weighted share and more)."""
    counts = {state.value: count for state, count in view.task_counts}
    demand = None
    if view.demand is not None:
        demand = {"task": view.demand.task_resources.to_dict(), "max_tasks": view.demand.max_tasks}
    spec = view.spec
    return {
        "id": spec.framework_id,
        "name": spec.name,
        "role": spec.role or "*",
        "state": view.state,
        "weight": view.weight,
        "dominant_share": view.dominant_share,
        "weighted_share": view.weighted_share,
        "dominant_resource": view.dominant_resource,
        "allocated": view.allocated.to_dict(),
        "used": view.used.to_dict(),
        "offered": view.offered.to_dict(),
        "tasks": counts,
        "demand": demand,
        "wanted": demand["max_tasks"] if demand is not None else None,
        "running": counts.get(TaskState.RUNNING.value, 0),
        "preempted": view.preempted,
        "capabilities": sorted(spec.capabilities),
        "failover_timeout": spec.failover_timeout,
        "registered_at": view.registered_at or None,
        "failover_deadline": view.failover_deadline,
    }


def task_document(view: TaskView) -> dict[str, Any]:
    """One task and where it runs (``tasks[i]`` of ``status --json``, plus its last status:
    its state, who reported it and when, with its reason, message, exit code and health, and
    whether it is a command task, whose output ``/api/v1/logs`` reads)."""
    status = view.status
    details = view.launch.details
    return {
        "framework_id": view.framework_id,
        "task_id": view.launch.task_id,
        "name": view.launch.name or view.launch.task_id,
        "agent_id": view.agent_id,
        "state": status.state.value,
        "resources": view.launch.resources.to_dict(),
        "reason": "" if status.reason is TaskReason.UNSPECIFIED else status.reason.value,
        "message": status.message,
        "updated_at": status.timestamp or None,
        "exit_code": status.exit_code,
        "source": status.source,
        "healthy": status.healthy,
        "command": isinstance(details, TaskDetails) and details.command is not None,
        "preemptible": view.launch.preemptible,
    }


def offer_document(view: OfferView) -> dict[str, Any]:
    """One outstanding offer."""
    offer = view.offer
    return {
        "id": offer.offer_id,
        "framework_id": offer.framework_id,
        "agent_id": offer.agent_id,
        "resources": offer.resources.to_dict(),
        "expires_at": view.expires_at,
    }


def role_document(view: RoleView) -> dict[str, Any]:
    """One role of the tree (``roles[i]`` of ``status --json``, the same keys and values)."""
    return {
        "role": view.path,
        "parent": parent(view.path),
        "depth": view.path.count("/"),
        "weight": view.weight,
        "share": view.share,
        "weighted_share": view.weighted_share,
        "dominant_resource": view.dominant_resource,
        "allocated": view.allocated.to_dict(),
        "frameworks": view.frameworks,
        "subtree_frameworks": view.subtree_frameworks,
        "running_tasks": view.running_tasks,
        "guarantee": view.guarantee.to_dict(),
        "limit": None if view.limit is None else view.limit.to_dict(),
        "below_guarantee": view.below_guarantee,
    }


def roles_document(snapshot: ClusterSnapshot) -> dict[str, Any]:
    """``/api/v1/roles``: the hierarchy, the role tree and its totals (over top-level roles)."""
    top = [view for view in snapshot.roles if parent(view.path) is None]
    allocated = sum((view.allocated for view in top), ResourceVector())
    return {
        "hierarchy": snapshot.hierarchy,
        "total": snapshot.total.to_dict(),
        "roles": [role_document(view) for view in snapshot.roles],
        "totals": {
            "roles": len(snapshot.roles),
            "frameworks": sum(view.subtree_frameworks for view in top),
            "running_tasks": sum(view.running_tasks for view in top),
            "allocated": allocated.to_dict(),
        },
    }


def summary_document(snapshot: ClusterSnapshot) -> dict[str, Any]:
    """The master and the pool: everything of ``state_document`` but the lists."""
    return {
        "master_id": snapshot.master_id,
        "version": snapshot.version,
        "started_at": snapshot.started_at,
        "policy": snapshot.policy,
        "placement": snapshot.placement,
        "total": snapshot.total.to_dict(),
        "used": snapshot.used.to_dict(),
        "offered": snapshot.offered.to_dict(),
        "free": snapshot.free.to_dict(),
        "counts": {
            "agents": len(snapshot.agents),
            "frameworks": len(snapshot.frameworks),
            "tasks": len(snapshot.tasks),
            "offers": len(snapshot.offers),
        },
    }


def state_document(snapshot: ClusterSnapshot) -> dict[str, Any]:
    """The whole cluster: ``fairshare status --json``'s document, with the extra keys."""
    document = summary_document(snapshot)
    document["agents"] = [agent_document(view) for view in snapshot.agents]
    document["frameworks"] = [framework_document(view) for view in snapshot.frameworks]
    document["offers"] = [offer_document(view) for view in snapshot.offers]
    document["tasks"] = [task_document(view) for view in snapshot.tasks]
    document["hierarchy"] = snapshot.hierarchy
    document["roles"] = [role_document(view) for view in snapshot.roles]
    return document


def page_of_tasks(
    tasks: Sequence[TaskView],
    offset: int,
    limit: int,
    framework_id: str | None = None,
    state: str | None = None,
    agent_id: str | None = None,
) -> dict[str, Any]:
    """Tasks ``offset .. offset+limit`` of those matching the filters, and how many match."""
    matching = [
        view
        for view in tasks
        if (framework_id is None or view.framework_id == framework_id)
        and (state is None or view.status.state.value == state)
        and (agent_id is None or view.agent_id == agent_id)
    ]
    page = matching[offset : offset + limit]
    return {
        "offset": offset,
        "limit": limit,
        "total": len(matching),
        "tasks": [task_document(view) for view in page],
    }
