"""State and rules of the fake master in ``framework_sdk.testing`` (no I/O, no gRPC server).

The Scheduler API of ``fairshare.v1`` as the real master serves it, offers scripted or simulated
from fake agents: ``tests/integration/test_master_scenarios.py`` runs the same scenarios
through the SDK against this fake and against a real master with an agent; both pass it.

Deliberate differences from the real master (a framework cannot rely on either):
- Not the real allocator: simulated offers go to frameworks in subscription order (no DRF, no
  roles, weights or quotas), sized by their Demand when they declared one.
- The default decline filter is ``default_refuse_seconds`` (0.1 s in ``FakeMaster``, so tests
  do not wait 5 s per declined offer; the real master's is 5 s; the suite passes 5.0).
- Scripted updates (``FakeMaster.send_update``) are sent at once: the script plays the agent.
  Simulated tasks' updates keep an agent's order: a task's next update waits until the
  previous one is acknowledged; KILLING goes only to frameworks with TASK_KILLING_STATE.
- The fake knows a simulated task's latest state at once (a reconciliation may answer a state
  whose update waits for an acknowledgement); command tasks are not executed (what a simulated
  agent does with a task: ``_fake_simulation``).

Invariants:
- Every refused call raises ``Refusal`` before changing anything (as the real master).
- Per fake agent: used (live tasks) + offered (outstanding offers) <= total.
- Status updates are delivered at least once, in each task's order (``_fake_delivery``).
- As the real master: an Accept filters the agent only when the offers held more than the
  tasks need; a disconnection clears the framework's filters; partition states (UNKNOWN, ...)
  of a reconciliation are told as LOST to a framework without ``PARTITION_AWARE``.
- Output leaves only through the two callables given at construction: ``send`` (an event for a
  framework's stream, dropped by the transport if it has none) and ``schedule`` (a timer).
"""

from __future__ import annotations

import uuid as uuid_module
from collections.abc import Callable, Iterable, Mapping

import grpc
from fairshare.resources import ResourceVector
from fairshare.v1 import common_pb2, scheduler_pb2
from fairshare.wire import (
    resources_from_pb,
    task_state_from_pb,
)

from framework_sdk._fake_delivery import (
    Send,
    acknowledged,
    deliver,
    new_status,
    reconciliation,
    resend_unacked,
)
from framework_sdk._fake_rules import (
    FakeAgent,
    FrameworkRecord,
    OfferRecord,
    Refusal,
    TaskRecord,
    accepted_offers,
    check_acknowledgements,
    check_filters,
    check_framework_info,
    check_role_of,
    check_tasks,
    checked_demand,
    in_use,
    sized_offer,
    update_event,
)
from framework_sdk._fake_simulation import Schedule, TaskSimulation

__all__ = ["FakeAgent", "FakeClusterState", "Refusal"]

_TS = common_pb2.TaskState


class FakeClusterState:
    """Frameworks, offers, tasks and fake agents of the fake master."""

    def __init__(
        self,
        send: Send,
        schedule: Schedule,
        clock: Callable[[], float],
        *,
        agents: Iterable[FakeAgent] = (),
        default_refuse_seconds: float = 5.0,
        simulate_tasks: bool = False,
        task_time_scale: float = 1.0,
    ) -> None:
        self._send = send
        self._schedule = schedule
        self._clock = clock
        self.agents = {agent.agent_id: agent for agent in agents}
        self.default_refuse_seconds = default_refuse_seconds
        self.simulate_tasks = simulate_tasks
        self.simulation = TaskSimulation(self.update, schedule, self._is_live, task_time_scale)
        self.frameworks: dict[str, FrameworkRecord] = {}
        self.offers: dict[str, OfferRecord] = {}
        self.tasks: dict[tuple[str, str], TaskRecord] = {}
        self._next_offer = 0

    # -- registration -----------------------------------------------------------------------

    def subscribe(self, request: scheduler_pb2.SubscribeRequest) -> tuple[FrameworkRecord, bool]:
        """Register or resubscribe; the framework and whether it was known."""
        info = request.framework_info
        check_framework_info(info)
        demand = checked_demand(request.demand) if request.HasField("demand") else None
        if info.framework_id:
            framework = self.frameworks.get(info.framework_id)
            if framework is None or framework.removed:
                raise Refusal(
                    grpc.StatusCode.NOT_FOUND, f"framework {info.framework_id} is not known"
                )
            if (framework.info.name, framework.info.role) != (info.name, info.role):
                raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "name or role changed")
            resubscribed = True
        else:
            framework = FrameworkRecord(
                framework_id=f"fw-{uuid_module.uuid4().hex[:12]}", info=info
            )
            self.frameworks[framework.framework_id] = framework
            resubscribed = False
        framework.info = common_pb2.FrameworkInfo()
        framework.info.CopyFrom(info)  # never mutate the request (tests inspect it)
        framework.info.framework_id = framework.framework_id
        if demand is not None:
            framework.demand = demand
        framework.suppressed = request.suppressed
        framework.connected = True
        return framework, resubscribed

    def after_subscribed(self, framework_id: str) -> None:
        """Resend the framework's unacknowledged updates (its new stream is open)."""
        resend_unacked(self.frameworks[framework_id], self._send)
        self.allocate()

    def disconnect(self, framework_id: str) -> None:
        """The framework's stream ended: its offers are rescinded, it is kept for failover."""
        framework = self.frameworks.get(framework_id)
        if framework is not None:
            framework.connected = False
            framework.filters.clear()  # as the real master (Mesos's deactivateFramework)
        for offer_id in [o for o, r in self.offers.items() if r.offer.framework_id == framework_id]:
            del self.offers[offer_id]

    def _is_live(self, task: TaskRecord) -> bool:
        return self.tasks.get((task.framework_id, task.info.task_id)) is task

    def _caller(self, framework_id: str) -> FrameworkRecord:
        framework = self.frameworks.get(framework_id)
        if framework is None or framework.removed:
            raise Refusal(grpc.StatusCode.NOT_FOUND, f"framework {framework_id!r} is not known")
        if not framework.connected:
            raise Refusal(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"framework {framework_id} has no open Subscribe stream",
            )
        return framework

    # -- offers -----------------------------------------------------------------------------

    def add_offer(
        self,
        framework_id: str,
        agent_id: str,
        resources: ResourceVector,
        *,
        hostname: str = "localhost",
        attributes: Mapping[str, str] | None = None,
        fair_tasks: int = 0,
    ) -> common_pb2.Offer:
        """Record an outstanding offer (the caller sends it)."""
        self._next_offer += 1
        offer_id = f"of-fake-{self._next_offer}"
        record = OfferRecord.of(offer_id, framework_id, agent_id, resources, hostname, attributes)
        record.offer.fair_tasks = fair_tasks
        self.offers[offer_id] = record
        return record.offer

    def rescind(self, offer_id: str, reason: str) -> None:
        """Withdraw an outstanding offer and tell its framework."""
        record = self.offers.pop(offer_id, None)
        if record is not None:
            event = scheduler_pb2.RescindEvent(offer_id=offer_id, reason=reason)
            self._send(record.offer.framework_id, scheduler_pb2.SubscribeResponse(rescind=event))

    def allocate(self) -> None:
        """Offer the fake agents' free resources to connected, unsuppressed frameworks."""
        now = self._clock()
        for framework in list(self.frameworks.values()):
            if not framework.connected or framework.suppressed or framework.removed:
                continue
            offers = []
            for agent in self.agents.values():
                if framework.filters.get(agent.agent_id, 0.0) > now:
                    continue
                free = agent.resources.saturating_sub(
                    in_use(agent.agent_id, self.tasks, self.offers)
                )
                sized, fair_tasks = sized_offer(framework, free, self.tasks, self.offers)
                if sized:
                    offers.append(
                        self.add_offer(
                            framework.framework_id,
                            agent.agent_id,
                            sized,
                            hostname=agent.hostname,
                            attributes=agent.attributes,
                            fair_tasks=fair_tasks,
                        )
                    )
            if offers:
                event = scheduler_pb2.OffersEvent(offers=offers)
                self._send(framework.framework_id, scheduler_pb2.SubscribeResponse(offers=event))

    def _filter(
        self, framework: FrameworkRecord, agent_id: str, filters: common_pb2.Filters
    ) -> None:
        default = self.default_refuse_seconds
        seconds = filters.refuse_seconds if filters.HasField("refuse_seconds") else default
        if seconds > 0:
            framework.filters[agent_id] = self._clock() + seconds

    # -- calls ------------------------------------------------------------------------------

    def accept(self, request: scheduler_pb2.AcceptRequest) -> list[common_pb2.TaskInfo]:
        """Validate and apply an Accept; the launched tasks."""
        framework = self._caller(request.framework_id)
        records = accepted_offers(request, self.offers)
        agent_id = records[0].offer.agent_id
        check_filters(request.filters)
        infos = [info for op in request.operations for info in op.launch.task_infos]
        needed = check_tasks(framework.framework_id, infos, agent_id, self.tasks)
        pooled = ResourceVector()
        for record in records:
            pooled = pooled + record.resources
        if not needed.fits_in(pooled):
            raise Refusal(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"tasks need {needed}, more than the offers hold ({pooled})",
            )
        for offer_id in request.offer_ids:
            del self.offers[offer_id]
        if needed != pooled:  # as the real master: only what is left over is filtered
            self._filter(framework, agent_id, request.filters)
        launched = []
        for info in infos:
            launched.append(self._launch(framework, info, agent_id))
        return launched

    def _launch(
        self, framework: FrameworkRecord, info: common_pb2.TaskInfo, agent_id: str
    ) -> common_pb2.TaskInfo:
        launched = common_pb2.TaskInfo()
        launched.CopyFrom(info)
        launched.agent_id = agent_id
        status = common_pb2.TaskStatus(
            task_id=info.task_id, agent_id=agent_id, state=_TS.TASK_STATE_STAGING
        )
        task = TaskRecord(
            framework.framework_id, launched, resources_from_pb(info.resources), status
        )
        self.tasks[(framework.framework_id, info.task_id)] = task
        if self.simulate_tasks:
            self.simulation.start(task)
        return launched

    def update(
        self,
        framework_id: str,
        task_id: str,
        state: common_pb2.TaskState.ValueType,
        *,
        agent_id: str = "",
        reason: int = 0,
        message: str = "",
        with_uuid: bool = True,
        exit_code: int | None = None,
        fifo: bool = False,
    ) -> common_pb2.TaskStatus:
        """Change a task's state (known or not) and send the update to its framework.

        ``fifo`` (the simulated agent's updates): as a real agent, an update with a uuid waits
        until the task's earlier ones are acknowledged; scripted updates are sent at once."""
        task = self.tasks.get((framework_id, task_id))
        agent_id = agent_id or (task.status.agent_id if task is not None else "")
        status = new_status(task_id, agent_id, state, reason, message, with_uuid, exit_code)
        if task is not None:
            task.status = status
            if task_state_from_pb(state).is_terminal:
                del self.tasks[(framework_id, task_id)]
        deliver(self.frameworks.get(framework_id), framework_id, status, self._send, fifo=fifo)
        if task_state_from_pb(state).is_terminal:
            self.allocate()
        return status

    def decline(self, request: scheduler_pb2.DeclineRequest) -> None:
        """Decline offers (unknown ids are ignored) and filter their agents."""
        framework = self._caller(request.framework_id)
        check_filters(request.filters)
        for offer_id in request.offer_ids:
            record = self.offers.get(offer_id)
            if record is not None and record.offer.framework_id == framework.framework_id:
                del self.offers[offer_id]
                self._filter(framework, record.offer.agent_id, request.filters)

    def revive(self, request: scheduler_pb2.ReviveRequest) -> None:
        """Clear filters and resume offers."""
        framework = self._caller(request.framework_id)
        check_role_of(framework, request.role)
        framework.filters.clear()
        framework.suppressed = False
        self.allocate()

    def suppress(self, request: scheduler_pb2.SuppressRequest) -> None:
        """Stop offers until revive."""
        framework = self._caller(request.framework_id)
        check_role_of(framework, request.role)
        framework.suppressed = True

    def kill(self, request: scheduler_pb2.KillRequest) -> None:
        """Kill a live task (simulated: KILLING if the framework has the capability, KILLED)."""
        framework = self._caller(request.framework_id)
        task = self.tasks.get((framework.framework_id, request.task_id))
        if task is None:
            raise Refusal(grpc.StatusCode.NOT_FOUND, f"task {request.task_id!r} is not known")
        if request.agent_id and request.agent_id != task.status.agent_id:
            raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "agent_id is not the task's agent")
        if self.simulate_tasks:
            self.simulation.kill(framework, task)

    def acknowledge(self, request: scheduler_pb2.AcknowledgeRequest) -> None:
        """Forget acknowledged updates; the call is checked as a whole before any is applied.
        As the real master: of a live task, a uuid it never had is NOT_FOUND and another agent
        INVALID_ARGUMENT; of a task no longer live, any uuid is fine (stale); duplicates are
        fine. A framework away may still acknowledge."""
        framework = self.frameworks.get(request.framework_id)
        if framework is None or framework.removed:
            raise Refusal(
                grpc.StatusCode.NOT_FOUND, f"framework {request.framework_id!r} is not known"
            )
        check_acknowledgements(framework, request, self.tasks)
        acknowledged(framework, request.acknowledgements, self._send)

    def reconcile(self, request: scheduler_pb2.ReconcileRequest) -> None:
        """Send the latest status of the named tasks (or all live ones) without uuid."""
        framework = self._caller(request.framework_id)
        fid = framework.framework_id
        if any(not ref.task_id for ref in request.tasks):
            raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "task_id is empty")
        refs = [(ref.task_id, ref.agent_id) for ref in request.tasks] or [
            (task_id, "") for (owner, task_id) in self.tasks if owner == fid
        ]
        for task_id, agent_id in refs:
            task = self.tasks.get((fid, task_id))
            known = task.status if task is not None else None
            self._send(fid, update_event(reconciliation(framework, task_id, agent_id, known)))

    def update_demand(self, request: scheduler_pb2.UpdateDemandRequest) -> None:
        """Record the framework's demand (unset clears it)."""
        framework = self._caller(request.framework_id)
        has_demand = request.HasField("demand")
        framework.demand = checked_demand(request.demand) if has_demand else None
        self.allocate()

    def teardown(self, request: scheduler_pb2.TeardownRequest) -> None:
        """Remove the framework for good with its tasks and offers."""
        framework = self._caller(request.framework_id)
        framework.removed = True
        self.disconnect(framework.framework_id)
        for key in [k for k in self.tasks if k[0] == framework.framework_id]:
            del self.tasks[key]
        self.allocate()
