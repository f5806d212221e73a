"""``ClusterSnapshot`` to ``GetStateResponse``: what ``fairshare status --json`` prints.

Invariants: agents, frameworks, tasks and offers keep the snapshot's order (sorted by id);
``reachable`` is true exactly for the agents in the pool (active, or deactivated or drained by
the operator); ``drain_deadline`` is set only for a DRAINING agent with a deadline;
task counts omit states with no task; optional fields (demand, failover deadline, expiry) stay
unset when the snapshot has ``None``; roles keep the snapshot's pre-order of the role tree; the
answer fits one message (``message_fit.fit_state``: trimmed by its rule, saying so in
``trimmed``).
"""

from __future__ import annotations

from fairshare.v1 import common_pb2
from fairshare.v1 import operator_pb2 as pb
from fairshare.wire import task_state_to_pb

from master.runtime.views import (
    POOL_STATES,
    AgentView,
    ClusterSnapshot,
    FrameworkView,
    RoleView,
    TaskView,
)
from master.service.convert import (
    agent_info,
    demand_to_pb,
    framework_info,
    resources_to_pb,
    status_to_pb,
    task_info,
    timestamp,
)
from master.service.message_fit import fit_state
from master.service.streams import offer_to_pb

__all__ = ["state_to_pb", "task_to_pb"]

Agent = pb.GetStateResponse.Agent
Framework = pb.GetStateResponse.Framework


def _agent(view: AgentView) -> pb.GetStateResponse.Agent:
    message = Agent(
        agent_id=view.agent_id,
        agent_info=agent_info(view.spec),
        state=Agent.State.Value(f"STATE_{view.state}"),
        reachable=view.state in POOL_STATES,
        free=resources_to_pb(view.free),
        offered=resources_to_pb(view.offered),
        used=resources_to_pb(view.used),
        registered_at=timestamp(view.registered_at),
        last_heartbeat_at=timestamp(view.last_heard),
        reservations=[
            common_pb2.Reservation(role=role, resources=resources_to_pb(r), dynamic=dynamic)
            for role, r, dynamic in view.reservations
        ],
        reserved_free=resources_to_pb(view.reserved_free),
    )
    if view.drain_deadline is not None and view.state == "DRAINING":
        message.drain_deadline.CopyFrom(timestamp(view.drain_deadline))
    return message


def _framework(view: FrameworkView) -> pb.GetStateResponse.Framework:
    counts = [
        pb.GetStateResponse.TaskCount(state=task_state_to_pb(state), count=count)
        for state, count in view.task_counts
    ]
    message = Framework(
        framework_info=framework_info(view.spec),
        state=Framework.State.Value(f"STATE_{view.state}"),
        weight=view.weight,
        dominant_share=view.dominant_share,
        dominant_resource=view.dominant_resource,
        allocated=resources_to_pb(view.allocated),
        offered=resources_to_pb(view.offered),
        used=resources_to_pb(view.used),
        task_counts=counts,
        registered_at=timestamp(view.registered_at),
        preempted=view.preempted,
        weighted_share=view.weighted_share,
    )
    if view.demand is not None:
        message.demand.CopyFrom(demand_to_pb(view.demand))
    if view.failover_deadline is not None:
        message.failover_deadline.CopyFrom(timestamp(view.failover_deadline))
    return message


def _role(view: RoleView) -> pb.GetStateResponse.Role:
    message = pb.GetStateResponse.Role(
        path=view.path,
        weight=view.weight,
        share=view.share,
        weighted_share=view.weighted_share,
        dominant_resource=view.dominant_resource,
        allocated=resources_to_pb(view.allocated),
        frameworks=view.frameworks,
        subtree_frameworks=view.subtree_frameworks,
        running_tasks=view.running_tasks,
        guarantee=resources_to_pb(view.guarantee),
        below_guarantee=view.below_guarantee,
        reserved=resources_to_pb(view.reserved),
    )
    if view.limit is not None:
        message.limit.CopyFrom(resources_to_pb(view.limit))
    return message


def task_to_pb(view: TaskView) -> common_pb2.Task:
    """One tracked task and its latest status."""
    return common_pb2.Task(
        framework_id=view.framework_id,
        info=task_info(view.launch, view.agent_id),
        status=status_to_pb(view.status),
    )


def state_to_pb(snapshot: ClusterSnapshot, fit: bool = True) -> pb.GetStateResponse:
    """The snapshot as a ``GetStateResponse``; within the message limit when ``fit`` (what
    ``GetState`` answers; the HTTP API, which has no such limit, serves it whole)."""
    tasks = [task_to_pb(view) for view in snapshot.tasks]
    response = pb.GetStateResponse(
        master_id=snapshot.master_id,
        version=snapshot.version,
        started_at=timestamp(snapshot.started_at),
        policy=snapshot.policy,
        placement=snapshot.placement,
        agents=[_agent(view) for view in snapshot.agents],
        frameworks=[_framework(view) for view in snapshot.frameworks],
        tasks=tasks,
        offers=[offer_to_pb(view.offer, view.expires_at) for view in snapshot.offers],
        total=resources_to_pb(snapshot.total),
        used=resources_to_pb(snapshot.used),
        offered=resources_to_pb(snapshot.offered),
        free=resources_to_pb(snapshot.free),
        leader=pb.Leader(
            address=snapshot.leader.address,
            elected_at=timestamp(snapshot.leader.elected_at),
            epoch=snapshot.leader.epoch,
        ),
        roles=[_role(view) for view in snapshot.roles],
        hierarchy=snapshot.hierarchy,
    )
    if fit:
        fit_state(response)
    return response
