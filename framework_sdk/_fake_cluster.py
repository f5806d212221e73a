"""State and rules of the fake master in ``framework_sdk.testing`` (no I/O, no gRPC server).

Implements the Scheduler API semantics of ``fairshare.v1`` closely enough to test frameworks:
registration and resubscription, offers (scripted, or simulated from fake agents), Accept
validation, Decline/Revive/Suppress filters, Kill, at-least-once status updates with
acknowledgements, Reconcile, Teardown and Demand. The scenario suite
``tests/integration/test_master_scenarios.py`` runs the same scenarios through the SDK against
this fake and against a real master with an agent; both must pass it.

Deliberate differences from the real master (a framework cannot rely on either):
- Not the real allocator: simulated offers go to frameworks in subscription order (no DRF, no
  roles, weights or quotas), sized by their Demand when they declared one.
- The default decline filter is ``default_refuse_seconds`` (0.1 s in ``FakeMaster``, so tests
  do not wait 5 s per declined offer; the real master's is 5 s; the suite passes 5.0).
- Scripted updates (``FakeMaster.send_update``) are sent at once: the script plays the agent.
  Simulated tasks' updates keep an agent's order: a task's next update waits until the
  previous one is acknowledged.
- The fake knows a simulated task's latest state at once (a reconciliation may answer a state
  whose update waits for an acknowledgement); command tasks are not executed.

Invariants:
- Every refused call raises ``Refusal`` before changing anything (as the real master).
- Per fake agent: used (live tasks) + offered (outstanding offers) <= total.
- A status update with a uuid stays in its framework's ``unacked`` until acknowledged and is
  sent again on every resubscription; a simulated task's later updates wait in ``held``
  while one of its updates is unacknowledged.
- As the real master: an Accept filters the agent only when the offers held more than the
  tasks need; a disconnection clears the framework's filters; partition states (UNKNOWN, ...)
  of a reconciliation are told as LOST to a framework without ``PARTITION_AWARE``.
- Output leaves only through the two callables given at construction: ``send`` (an event for a
  framework's stream, dropped by the transport if it has none) and ``schedule`` (a timer).
"""

from __future__ import annotations

import uuid as uuid_module
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

import grpc
from fairshare.resources import ResourceError, ResourceVector
from fairshare.roles import RoleError, check_role
from fairshare.task_states import NOT_FORWARDED_WITHOUT_AWARENESS
from fairshare.v1 import common_pb2, scheduler_pb2
from fairshare.wire import (
    resources_from_pb,
    resources_to_pb,
    seconds_from_duration,
    task_state_from_pb,
)
from google.protobuf import timestamp_pb2

__all__ = ["FakeAgent", "FakeClusterState", "Refusal"]

_TS = common_pb2.TaskState
_PARTITION_AWARE = common_pb2.FrameworkInfo.Capability.CAPABILITY_PARTITION_AWARE
_MAX_REFUSE_SECONDS: Final = 31536000.0

Send = Callable[[str, scheduler_pb2.SubscribeResponse], None]
Schedule = Callable[[float, Callable[[], None]], None]


class Refusal(Exception):
    """A refused call: the gRPC code and message the fake master answers with."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class FakeAgent:
    """A simulated agent whose resources the fake master offers."""

    agent_id: str
    resources: ResourceVector
    hostname: str = "localhost"
    attributes: Mapping[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class _Framework:
    framework_id: str
    info: common_pb2.FrameworkInfo
    demand: common_pb2.Demand | None = None
    suppressed: bool = False
    connected: bool = False
    removed: bool = False
    unacked: dict[bytes, common_pb2.TaskStatus] = field(default_factory=dict)
    held: dict[str, list[common_pb2.TaskStatus]] = field(default_factory=dict)  # task_id -> FIFO
    acked: set[bytes] = field(default_factory=set)
    filters: dict[str, float] = field(default_factory=dict)  # agent_id -> expiry (clock)


@dataclass(slots=True)
class _Task:
    framework_id: str
    info: common_pb2.TaskInfo
    resources: ResourceVector
    status: common_pb2.TaskStatus


@dataclass(slots=True)
class _Offer:
    offer: common_pb2.Offer
    resources: ResourceVector


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
        self.task_time_scale = task_time_scale
        self.frameworks: dict[str, _Framework] = {}
        self.offers: dict[str, _Offer] = {}
        self.tasks: dict[tuple[str, str], _Task] = {}
        self._next_offer = 0

    # -- registration -----------------------------------------------------------------------

    def subscribe(self, request: scheduler_pb2.SubscribeRequest) -> tuple[_Framework, bool]:
        """Register or resubscribe; the framework and whether it was known."""
        info = request.framework_info
        if not info.name:
            raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "framework_info.name is empty")
        if info.HasField("weight") and not info.weight > 0:
            raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "framework_info.weight must be > 0")
        try:
            check_role(info.role, "framework_info.role")  # the master's rule
        except RoleError as error:
            raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, str(error)) from None
        demand = self._checked_demand(request.demand) if request.HasField("demand") else None
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
            framework = _Framework(framework_id=f"fw-{uuid_module.uuid4().hex[:12]}", info=info)
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
        framework = self.frameworks[framework_id]
        for status in framework.unacked.values():
            self._send(framework_id, _update_event(status))
        self.allocate()

    def disconnect(self, framework_id: str) -> None:
        """The framework's stream ended: its offers are rescinded, it is kept for failover."""
        framework = self.frameworks.get(framework_id)
        if framework is not None:
            framework.connected = False
            framework.filters.clear()  # as the real master (Mesos's deactivateFramework)
        for offer_id in [o for o, r in self.offers.items() if r.offer.framework_id == framework_id]:
            del self.offers[offer_id]

    def _caller(self, framework_id: str) -> _Framework:
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
        offer = common_pb2.Offer(
            offer_id=f"of-fake-{self._next_offer}",
            framework_id=framework_id,
            agent_id=agent_id,
            hostname=hostname,
            resources=resources_to_pb(resources),
            attributes=[
                common_pb2.Attribute(name=k, value=v) for k, v in (attributes or {}).items()
            ],
            fair_tasks=fair_tasks,
        )
        self.offers[offer.offer_id] = _Offer(offer=offer, resources=resources)
        return offer

    def rescind(self, offer_id: str, reason: str) -> None:
        """Withdraw an outstanding offer and tell its framework."""
        record = self.offers.pop(offer_id, None)
        if record is not None:
            event = scheduler_pb2.RescindEvent(offer_id=offer_id, reason=reason)
            self._send(record.offer.framework_id, scheduler_pb2.SubscribeResponse(rescind=event))

    def _used(self, agent_id: str) -> ResourceVector:
        total = ResourceVector()
        for task in self.tasks.values():
            if task.status.agent_id == agent_id:
                total = total + task.resources
        return total

    def _offered(self, agent_id: str) -> ResourceVector:
        total = ResourceVector()
        for record in self.offers.values():
            if record.offer.agent_id == agent_id:
                total = total + record.resources
        return total

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
                    self._used(agent.agent_id) + self._offered(agent.agent_id)
                )
                sized, fair_tasks = self._size(framework, free)
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

    def _size(self, framework: _Framework, free: ResourceVector) -> tuple[ResourceVector, int]:
        if framework.demand is None:
            return free, 0
        shape = resources_from_pb(framework.demand.task_resources)
        fits = shape.times_fits_in(free)
        if framework.demand.HasField("max_tasks"):
            live = sum(1 for t in self.tasks.values() if t.framework_id == framework.framework_id)
            in_offers = sum(
                r.offer.fair_tasks
                for r in self.offers.values()
                if r.offer.framework_id == framework.framework_id
            )
            fits = min(fits, framework.demand.max_tasks - live - in_offers)
        return (shape * fits, fits) if fits > 0 else (ResourceVector(), 0)

    def _filter(self, framework: _Framework, agent_id: str, filters: common_pb2.Filters) -> None:
        seconds = (
            filters.refuse_seconds
            if filters.HasField("refuse_seconds")
            else self.default_refuse_seconds
        )
        if seconds > 0:
            framework.filters[agent_id] = self._clock() + seconds

    # -- calls ------------------------------------------------------------------------------

    def accept(self, request: scheduler_pb2.AcceptRequest) -> list[common_pb2.TaskInfo]:
        """Validate and apply an Accept; the launched tasks."""
        framework = self._caller(request.framework_id)
        records = self._accepted_offers(request)
        agent_id = records[0].offer.agent_id
        _check_filters(request.filters)
        infos = [info for op in request.operations for info in op.launch.task_infos]
        needed = self._check_tasks(framework, infos, agent_id)
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

    def _accepted_offers(self, request: scheduler_pb2.AcceptRequest) -> list[_Offer]:
        if not request.offer_ids:
            raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "offer_ids is empty")
        if len(set(request.offer_ids)) != len(request.offer_ids):
            raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "offer_ids has duplicates")
        records = []
        for offer_id in request.offer_ids:
            record = self.offers.get(offer_id)
            if record is None or record.offer.framework_id != request.framework_id:
                raise Refusal(grpc.StatusCode.NOT_FOUND, f"offer {offer_id} is not outstanding")
            records.append(record)
        if len({r.offer.agent_id for r in records}) > 1:
            raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "offers are on different agents")
        return records

    def _check_tasks(
        self, framework: _Framework, infos: list[common_pb2.TaskInfo], agent_id: str
    ) -> ResourceVector:
        needed = ResourceVector()
        seen: set[str] = set()
        for info in infos:
            key = (framework.framework_id, info.task_id)
            if not info.task_id or info.task_id in seen or key in self.tasks:
                raise Refusal(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"task id {info.task_id!r} is empty, duplicate or already live",
                )
            seen.add(info.task_id)
            if info.agent_id and info.agent_id != agent_id:
                raise Refusal(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"task {info.task_id}: agent_id {info.agent_id} is not the offers' agent",
                )
            try:
                resources = resources_from_pb(info.resources)
            except ResourceError as error:
                raise Refusal(
                    grpc.StatusCode.INVALID_ARGUMENT, f"task {info.task_id}: {error}"
                ) from None
            if not resources:
                raise Refusal(
                    grpc.StatusCode.INVALID_ARGUMENT, f"task {info.task_id}: no resources"
                )
            needed = needed + resources
        return needed

    def _launch(
        self, framework: _Framework, info: common_pb2.TaskInfo, agent_id: str
    ) -> common_pb2.TaskInfo:
        launched = common_pb2.TaskInfo()
        launched.CopyFrom(info)
        launched.agent_id = agent_id
        status = common_pb2.TaskStatus(
            task_id=info.task_id, agent_id=agent_id, state=_TS.TASK_STATE_STAGING
        )
        task = _Task(framework.framework_id, launched, resources_from_pb(info.resources), status)
        self.tasks[(framework.framework_id, info.task_id)] = task
        if self.simulate_tasks:
            self._schedule(0.0, lambda: self._run_task(task))
        return launched

    def _run_task(self, task: _Task) -> None:
        command = task.info.command
        if command.fail_on_start:
            reason = common_pb2.TaskStatus.REASON_EXECUTOR_TERMINATED
            self.update(
                task.framework_id,
                task.info.task_id,
                _TS.TASK_STATE_FAILED,
                reason=reason,
                fifo=True,
            )
            return
        for state in (_TS.TASK_STATE_STARTING, _TS.TASK_STATE_RUNNING):
            self.update(task.framework_id, task.info.task_id, state, fifo=True)
        if command.HasField("duration"):
            delay = seconds_from_duration(command.duration) * self.task_time_scale
            self._schedule(delay, lambda: self._finish_task(task))

    def _finish_task(self, task: _Task) -> None:
        key = (task.framework_id, task.info.task_id)
        if self.tasks.get(key) is not task:
            return  # killed or replaced meanwhile
        code = task.info.command.exit_code
        state = _TS.TASK_STATE_FINISHED if code == 0 else _TS.TASK_STATE_FAILED
        reason = 0 if code == 0 else common_pb2.TaskStatus.REASON_COMMAND_FAILED
        self.update(
            task.framework_id, task.info.task_id, state, reason=reason, exit_code=code, fifo=True
        )

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
        status = common_pb2.TaskStatus(
            task_id=task_id,
            agent_id=agent_id or (task.status.agent_id if task is not None else ""),
            state=state,
            reason=reason,  # type: ignore[arg-type]
            message=message,
            uuid=uuid_module.uuid4().bytes if with_uuid else b"",
            source=common_pb2.TaskStatus.SOURCE_AGENT
            if with_uuid
            else common_pb2.TaskStatus.SOURCE_MASTER,
            timestamp=_now_stamp(),
        )
        if exit_code is not None:
            status.exit_code = exit_code
        if task is not None:
            task.status = status
            if task_state_from_pb(state).is_terminal:
                del self.tasks[(framework_id, task_id)]
        framework = self.frameworks.get(framework_id)
        if framework is not None and with_uuid and fifo and self._waiting(framework, task_id):
            framework.held.setdefault(task_id, []).append(status)
        else:
            if framework is not None and with_uuid:
                framework.unacked[status.uuid] = status
            self._send(framework_id, _update_event(status))
        if task_state_from_pb(state).is_terminal:
            self.allocate()
        return status

    def decline(self, request: scheduler_pb2.DeclineRequest) -> None:
        """Decline offers (unknown ids are ignored) and filter their agents."""
        framework = self._caller(request.framework_id)
        _check_filters(request.filters)
        for offer_id in request.offer_ids:
            record = self.offers.get(offer_id)
            if record is not None and record.offer.framework_id == framework.framework_id:
                del self.offers[offer_id]
                self._filter(framework, record.offer.agent_id, request.filters)

    def revive(self, request: scheduler_pb2.ReviveRequest) -> None:
        """Clear filters and resume offers."""
        framework = self._caller(request.framework_id)
        _check_role(framework, request.role)
        framework.filters.clear()
        framework.suppressed = False
        self.allocate()

    def suppress(self, request: scheduler_pb2.SuppressRequest) -> None:
        """Stop offers until revive."""
        framework = self._caller(request.framework_id)
        _check_role(framework, request.role)
        framework.suppressed = True

    def kill(self, request: scheduler_pb2.KillRequest) -> None:
        """Kill a live task (simulated: KILLED at once)."""
        framework = self._caller(request.framework_id)
        task = self.tasks.get((framework.framework_id, request.task_id))
        if task is None:
            raise Refusal(grpc.StatusCode.NOT_FOUND, f"task {request.task_id!r} is not known")
        if request.agent_id and request.agent_id != task.status.agent_id:
            raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "agent_id is not the task's agent")
        if self.simulate_tasks:
            self.update(framework.framework_id, request.task_id, _TS.TASK_STATE_KILLED)

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
        if not request.acknowledgements:
            raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "no acknowledgements")
        for ack in request.acknowledgements:
            if not ack.uuid:
                raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "uuid is empty")
            if not ack.task_id:
                raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "task_id is empty")
            task = self.tasks.get((framework.framework_id, ack.task_id))
            if task is None:
                continue  # stale: the task ended or was never launched here
            if ack.agent_id and ack.agent_id != task.status.agent_id:
                raise Refusal(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"task {ack.task_id!r} is on agent {task.status.agent_id!r}",
                )
            if ack.uuid not in framework.unacked and ack.uuid not in framework.acked:
                raise Refusal(
                    grpc.StatusCode.NOT_FOUND,
                    f"task {ack.task_id!r} has no status update with uuid {ack.uuid.hex()}",
                )
        for ack in request.acknowledgements:
            if framework.unacked.pop(ack.uuid, None) is not None:
                framework.acked.add(ack.uuid)
                self._release_next(framework, ack.task_id)

    @staticmethod
    def _waiting(framework: _Framework, task_id: str) -> bool:
        """Whether an update of ``task_id`` is sent and not yet acknowledged, or held."""
        return bool(framework.held.get(task_id)) or any(
            status.task_id == task_id for status in framework.unacked.values()
        )

    def _release_next(self, framework: _Framework, task_id: str) -> None:
        """Send the next held update of ``task_id`` once none of it is unacknowledged."""
        queue = framework.held.get(task_id)
        if not queue or any(s.task_id == task_id for s in framework.unacked.values()):
            return
        status = queue.pop(0)
        if not queue:
            del framework.held[task_id]
        framework.unacked[status.uuid] = status
        self._send(framework.framework_id, _update_event(status))

    def reconcile(self, request: scheduler_pb2.ReconcileRequest) -> None:
        """Send the latest status of the named tasks (or all live ones) without uuid."""
        framework = self._caller(request.framework_id)
        fid = framework.framework_id
        if any(not ref.task_id for ref in request.tasks):
            raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "task_id is empty")
        refs = [(ref.task_id, ref.agent_id) for ref in request.tasks] or [
            (task_id, "") for (owner, task_id) in self.tasks if owner == fid
        ]
        aware = _PARTITION_AWARE in framework.info.capabilities
        for task_id, agent_id in refs:
            task = self.tasks.get((fid, task_id))
            state = task.status.state if task is not None else _TS.TASK_STATE_UNKNOWN
            if not aware and task_state_from_pb(state) in NOT_FORWARDED_WITHOUT_AWARENESS:
                state = _TS.TASK_STATE_LOST  # as the real master tells a framework not aware
            status = common_pb2.TaskStatus(
                task_id=task_id,
                agent_id=task.status.agent_id if task is not None else agent_id,
                state=state,
                reason=common_pb2.TaskStatus.REASON_RECONCILIATION,
                message="reconciliation",
                source=common_pb2.TaskStatus.SOURCE_MASTER,
                timestamp=_now_stamp(),
            )
            self._send(fid, _update_event(status))

    def update_demand(self, request: scheduler_pb2.UpdateDemandRequest) -> None:
        """Record the framework's demand (unset clears it)."""
        framework = self._caller(request.framework_id)
        has_demand = request.HasField("demand")
        framework.demand = self._checked_demand(request.demand) if has_demand else None
        self.allocate()

    def teardown(self, request: scheduler_pb2.TeardownRequest) -> None:
        """Remove the framework for good with its tasks and offers."""
        framework = self._caller(request.framework_id)
        framework.removed = True
        self.disconnect(framework.framework_id)
        for key in [k for k in self.tasks if k[0] == framework.framework_id]:
            del self.tasks[key]
        self.allocate()

    def _checked_demand(self, demand: common_pb2.Demand) -> common_pb2.Demand:
        try:
            shape = resources_from_pb(demand.task_resources)
        except ResourceError as error:
            raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, f"demand: {error}") from None
        if not shape:
            raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "demand.task_resources is empty")
        if demand.HasField("max_tasks") and demand.max_tasks < 0:
            raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "demand.max_tasks is negative")
        copied = common_pb2.Demand()
        copied.CopyFrom(demand)
        return copied


def _check_filters(filters: common_pb2.Filters) -> None:
    if (
        filters.HasField("refuse_seconds")
        and not 0 <= filters.refuse_seconds <= _MAX_REFUSE_SECONDS
    ):
        raise Refusal(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"filters.refuse_seconds {filters.refuse_seconds} is not in [0, 31536000]",
        )


def _check_role(framework: _Framework, role: str) -> None:
    if role and role != framework.info.role:
        raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, f"role {role!r} is not the framework's")


def _now_stamp() -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.GetCurrentTime()
    return stamp


def _update_event(status: common_pb2.TaskStatus) -> scheduler_pb2.SubscribeResponse:
    return scheduler_pb2.SubscribeResponse(update=scheduler_pb2.UpdateEvent(status=status))
