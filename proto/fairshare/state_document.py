"""The status document: the cluster as JSON, built once, from ``GetStateResponse``.

``fairshare status --json`` prints it and the master's HTTP API serves it (``/api/v1/state``;
the master builds the same ``GetStateResponse`` its ``GetState`` answers and passes it here), so
the two cannot differ: one key, one meaning. docs/http-api.md documents every key::

    {"master_id", "version", "started_at", "policy", "placement",
     "leader": {"address", "elected_at", "epoch"},
     "total", "used", "offered", "free",
     "counts": {"agents", "frameworks", "tasks", "offers"},
     "agents": [{"id", "hostname", "port", "state", "reachable", "attributes",
                 "resources": {"total", "free", "used", "offered"},
                 "reservations": [{"role", "resources", "dynamic"}], "reserved_free",
                 "registered_at", "last_heard",
                 "drain_deadline" (a DRAINING agent's deadline, or null)}],
     "frameworks": [{"id", "name", "role", "state", "weight", "dominant_share",
                     "weighted_share", "dominant_resource", "allocated", "used", "offered",
                     "tasks": {STATE: count}, "demand": {"task", "max_tasks"} | null,
                     "wanted", "running", "preempted", "capabilities": [NAME, ...],
                     "failover_timeout", "registered_at", "failover_deadline"}],
     "offers": [{"id", "framework_id", "agent_id", "resources", "expires_at"}],
     "tasks": [{"framework_id", "task_id", "name", "agent_id", "state", "resources",
                "reason", "message", "updated_at", "exit_code", "source", "healthy",
                "command", "preemptible"}],
     "hierarchy", "roles": [... ``fairshare.role_tree``'s role documents ...],
     "trimmed": [WHAT, ...] (only when the master left something out to fit its message
                 limit, operator.proto's GetStateResponse.trimmed)}

Invariants:
- Pure functions of the message: no I/O, no clock.
- Resources are ``{name: quantity}`` in the resource's unit (cpus, MiB) as
  ``ResourceVector.to_dict`` gives them; states are named without their wire prefix
  (``"RUNNING"``, ``"ACTIVE"``); a reason is its ``TaskReason`` name, ``""`` for none; times
  are wall-clock seconds since the epoch, ``null`` when unset.
- Lists keep the message's order (the master sorts by id; roles in the tree's pre-order).
- ``weighted_share`` is the master's (``dominant_share / weight``), never recomputed here.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import timestamp_pb2

from fairshare.role_tree import roles_to_dicts
from fairshare.task_states import TaskReason
from fairshare.v1 import common_pb2, operator_pb2
from fairshare.wire import reason_from_pb, resources_from_pb, task_state_from_pb

__all__ = [
    "agent_document",
    "framework_document",
    "offer_document",
    "state_document",
    "summary_document",
    "task_document",
]

State = operator_pb2.GetStateResponse


def _resources(message: common_pb2.Resources) -> dict[str, float]:
    return resources_from_pb(message).to_dict()


def _seconds(stamp: timestamp_pb2.Timestamp) -> float | None:
    """Seconds since the epoch, ``None`` for an unset (zero) time."""
    micros = stamp.ToMicroseconds()
    return micros / 1e6 if micros else None


def _enum_name(enum: Any, value: int, prefix: str) -> str:
    return str(enum.Name(value)).removeprefix(prefix)


def agent_document(agent: State.Agent) -> dict[str, Any]:
    """One agent."""
    info = agent.agent_info
    return {
        "id": agent.agent_id,
        "hostname": info.hostname,
        "port": info.port,
        "state": _enum_name(State.Agent.State, agent.state, "STATE_"),
        "reachable": agent.reachable,
        "attributes": {attribute.name: attribute.value for attribute in info.attributes},
        "resources": {
            "total": _resources(info.resources),
            "free": _resources(agent.free),
            "used": _resources(agent.used),
            "offered": _resources(agent.offered),
        },
        "reservations": [
            {"role": r.role, "resources": _resources(r.resources), "dynamic": r.dynamic}
            for r in agent.reservations
        ],
        "reserved_free": _resources(agent.reserved_free),
        "registered_at": _seconds(agent.registered_at),
        "last_heard": _seconds(agent.last_heartbeat_at),
        "drain_deadline": (
            _seconds(agent.drain_deadline) if agent.HasField("drain_deadline") else None
        ),
    }


def framework_document(framework: State.Framework) -> dict[str, Any]:
    """One framework: its shares, allocation, tasks by state and demand."""
    info = framework.framework_info
    demand = None
    if framework.HasField("demand"):
        wanted = framework.demand
        demand = {
            "task": _resources(wanted.task_resources),
            "max_tasks": wanted.max_tasks if wanted.HasField("max_tasks") else None,
        }
    counts = {task_state_from_pb(count.state).value: count.count for count in framework.task_counts}
    capabilities = common_pb2.FrameworkInfo.Capability
    return {
        "id": info.framework_id,
        "name": info.name,
        "role": info.role or "*",
        "state": _enum_name(State.Framework.State, framework.state, "STATE_"),
        "weight": framework.weight,
        "dominant_share": framework.dominant_share,
        "weighted_share": framework.weighted_share,
        "dominant_resource": framework.dominant_resource,
        "allocated": _resources(framework.allocated),
        "used": _resources(framework.used),
        "offered": _resources(framework.offered),
        "tasks": counts,
        "demand": demand,
        "wanted": demand["max_tasks"] if demand is not None else None,
        "running": counts.get("RUNNING", 0),
        "preempted": framework.preempted,
        "capabilities": sorted(
            _enum_name(capabilities, value, "CAPABILITY_")
            for value in info.capabilities
            if value in capabilities.values()
        ),
        "failover_timeout": info.failover_timeout.ToMicroseconds() / 1e6,
        "registered_at": _seconds(framework.registered_at),
        "failover_deadline": (
            _seconds(framework.failover_deadline)
            if framework.HasField("failover_deadline")
            else None
        ),
    }


def task_document(task: common_pb2.Task) -> dict[str, Any]:
    """One task, where it runs and its last status (who reported it and when, its reason,
    message, exit code and health), and whether it is a command task."""
    info, status = task.info, task.status
    reason = reason_from_pb(status.reason)
    return {
        "framework_id": task.framework_id,
        "task_id": info.task_id,
        "name": info.name or info.task_id,
        "agent_id": info.agent_id,
        "state": task_state_from_pb(status.state).value,
        "resources": _resources(info.resources),
        "reason": "" if reason is TaskReason.UNSPECIFIED else reason.value,
        "message": status.message,
        "updated_at": _seconds(status.timestamp),
        "exit_code": status.exit_code if status.HasField("exit_code") else None,
        "source": _enum_name(common_pb2.TaskStatus.Source, status.source, "SOURCE_"),
        "healthy": status.healthy if status.HasField("healthy") else None,
        "command": info.HasField("process"),
        "preemptible": info.preemptible,
    }


def offer_document(offer: common_pb2.Offer) -> dict[str, Any]:
    """One outstanding offer."""
    return {
        "id": offer.offer_id,
        "framework_id": offer.framework_id,
        "agent_id": offer.agent_id,
        "resources": _resources(offer.resources),
        "expires_at": _seconds(offer.expires_at) if offer.HasField("expires_at") else None,
    }


def summary_document(state: State) -> dict[str, Any]:
    """The master, its leader and the pool: everything of ``state_document`` but the lists."""
    document: dict[str, Any] = {
        "master_id": state.master_id,
        "version": state.version,
        "started_at": _seconds(state.started_at),
        "policy": state.policy,
        "placement": state.placement,
        "leader": {
            "address": state.leader.address,
            "elected_at": state.leader.elected_at.ToMicroseconds() / 1e6,
            "epoch": state.leader.epoch,
        },
        "total": _resources(state.total),
        "used": _resources(state.used),
        "offered": _resources(state.offered),
        "free": _resources(state.free),
        "counts": {
            "agents": len(state.agents),
            "frameworks": len(state.frameworks),
            "tasks": len(state.tasks),
            "offers": len(state.offers),
        },
    }
    if state.trimmed:
        document["trimmed"] = list(state.trimmed)
    return document


def state_document(state: State) -> dict[str, Any]:
    """The whole cluster (see the module docstring)."""
    document = summary_document(state)
    document["agents"] = [agent_document(agent) for agent in state.agents]
    document["frameworks"] = [framework_document(framework) for framework in state.frameworks]
    document["offers"] = [offer_document(offer) for offer in state.offers]
    document["tasks"] = [task_document(task) for task in state.tasks]
    document["hierarchy"] = state.hierarchy
    document["roles"] = roles_to_dicts(state.roles)
    return document
