"""``FrameworkCalls``: the Scheduler API side of the master runtime (scheduler.proto).

Every method runs synchronously on the runtime's loop, checks everything before it changes
anything (a ``CoreError`` means nothing changed), and calls from a framework whose Subscribe
stream is not open fail with FAILED_PRECONDITION (unknown or removed ids: NOT_FOUND).
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Sequence

from fairshare.logs import log_event

from master.core import AlreadyExists, InvalidArgument, LaunchTasks, NotFound, TaskLaunch
from master.core.checks import check_weight
from master.model import (
    AckCommand,
    DemandSpec,
    ErrorEvent,
    FrameworkEvent,
    FrameworkSpec,
    LaunchCommand,
    StatusUpdate,
    StreamEnd,
    TaskSpec,
    UpdateEvent,
)
from master.registry import UNREACHABLE
from master.runtime_base import (
    UNLIMITED_TASKS,
    RuntimeBase,
    SubscribeResult,
    Unavailable,
    require_id,
)
from master.sessions import Channel, FrameworkLink
from master.taskbook import AckOutcome

__all__ = ["FrameworkCalls"]

log = logging.getLogger("fairshare.master")


class FrameworkCalls(RuntimeBase):
    """Subscribe, Accept, Decline, Revive, Suppress, Kill, Acknowledge, Reconcile, Teardown."""

    def subscribe(
        self, spec: FrameworkSpec, demand: DemandSpec | None, suppressed: bool
    ) -> SubscribeResult:
        """Register or re-register a framework and open its event stream."""
        if self.draining:
            raise Unavailable("the master is shutting down")
        if spec.framework_id:
            link, resubscribed = self._resubscribe(spec), True
        else:
            link, resubscribed = self._register_framework(spec), False
        framework_id = link.framework_id
        now = self.now()
        if demand is not None:
            self._set_demand(link, demand, now)
        if suppressed:
            self.core.handle_suppress(framework_id, now)
        channel = link.attach()
        for status in self.tasks.pending(framework_id):
            channel.put(UpdateEvent(self._for_framework(link, status)))
        self.request_allocation()
        weight = self.core.frameworks[framework_id].weight
        log_event(
            log,
            "framework.subscribed",
            framework_id=framework_id,
            name=spec.name,
            role=link.spec.role,
            resubscribed=resubscribed,
        )
        return SubscribeResult(
            framework_id,
            self.master_id,
            self.config.heartbeat_interval,
            resubscribed,
            weight,
            channel,
        )

    def _register_framework(self, spec: FrameworkSpec) -> FrameworkLink:
        framework_id = f"fw-{uuid.uuid4().hex}"
        role = spec.role or "*"
        weight = 1.0 if spec.weight is None else spec.weight
        check_weight(weight, f"framework {framework_id!r}")
        spec = dataclasses.replace(spec, framework_id=framework_id, role=role)
        registered_at = time.time()
        with self._durably():
            self.registry.put_framework(spec, registered_at)
        gpu_aware = "GPU_RESOURCES" in spec.capabilities
        self.core.handle_add_framework(framework_id, self.now(), spec.name, role, weight, gpu_aware)
        link = FrameworkLink(spec, registered_at)
        self.frameworks[framework_id] = link
        return link

    def _resubscribe(self, spec: FrameworkSpec) -> FrameworkLink:
        link = self._framework(spec.framework_id)
        role = spec.role or "*"
        if spec.name != link.spec.name or role != link.spec.role:
            raise InvalidArgument(
                f"framework {spec.framework_id!r} subscribed as name={link.spec.name!r}"
                f" role={link.spec.role!r}; name and role cannot change on resubscription"
            )
        spec = dataclasses.replace(spec, role=role)
        if spec != link.spec:
            with self._durably():
                self.registry.put_framework(spec, link.registered_at)
        if link.failover_timer is not None:
            link.failover_timer.cancel()
            link.failover_timer = None
        link.failover_deadline = None
        gpu_aware = "GPU_RESOURCES" in spec.capabilities
        if self.core.frameworks[spec.framework_id].gpu_aware != gpu_aware:
            self._dispatch(self.core.handle_set_gpu_aware(spec.framework_id, gpu_aware, self.now()))
        link.spec = spec
        if not self.core.frameworks[spec.framework_id].active:
            self.core.handle_activate_framework(spec.framework_id, self.now())
        return link

    def unsubscribe(self, framework_id: str, channel: Channel[FrameworkEvent]) -> None:
        """The Subscribe stream ``channel`` ended (client gone, or closed by the master)."""
        link = self.frameworks.get(framework_id)
        if self.draining or link is None or link.channel is not channel:
            return
        link.channel = None
        channel.close(StreamEnd())
        timeout = link.spec.failover_timeout
        if timeout <= 0:
            self._failover_expired(framework_id)  # removed now (retried if the registry fails)
            return
        self._dispatch(self.core.handle_deactivate_framework(framework_id, self.now()))
        self._start_failover(link, timeout)
        log_event(log, "framework.disconnected", framework_id=framework_id, failover=timeout)

    def _start_failover(self, link: FrameworkLink, timeout: float) -> None:
        """The framework is away: it is removed unless it resubscribes within ``timeout``."""
        link.failover_deadline = time.time() + timeout
        link.failover_timer = self._event_loop().call_later(
            timeout, self._failover_expired, link.framework_id
        )

    def _failover_expired(self, framework_id: str) -> None:
        link = self.frameworks.get(framework_id)
        if link is not None and link.channel is None and not self.draining:
            try:
                self._remove_framework(link, "its failover timeout expired")
            except Unavailable:  # the registry write failed: try again in a while
                link.failover_timer = self._event_loop().call_later(
                    1.0, self._failover_expired, framework_id
                )

    def _remove_framework(self, link: FrameworkLink, why: str) -> None:
        framework_id = link.framework_id
        with self._durably():
            self.registry.remove_framework(framework_id)
        if link.failover_timer is not None:
            link.failover_timer.cancel()
        self._dispatch(self.core.handle_remove_framework(framework_id, self.now()))
        self.tasks.remove_framework(framework_id)
        link.detach_current(ErrorEvent(f"framework removed: {why}", "CANCELLED"))
        del self.frameworks[framework_id]
        self.removed_frameworks.add(framework_id)
        self.request_allocation()
        log_event(log, "framework.removed", framework_id=framework_id, reason=why)

    def teardown(self, framework_id: str) -> None:
        """Remove the framework for good: kill its tasks, drop its offers, end its stream."""
        self._remove_framework(self._connected(framework_id), "torn down")

    def _set_demand(self, link: FrameworkLink, demand: DemandSpec | None, now: float) -> None:
        if demand is None:
            self.core.handle_update_demand(link.framework_id, None, 0, now)
        else:
            wanted = UNLIMITED_TASKS if demand.max_tasks is None else demand.max_tasks
            self.core.handle_update_demand(link.framework_id, demand.task_resources, wanted, now)
        link.demand = demand

    def update_demand(self, framework_id: str, demand: DemandSpec | None) -> None:
        """Declare, change or clear the framework's demand."""
        self._set_demand(self._connected(framework_id), demand, self.now())
        self.request_allocation()

    def _check_role(self, link: FrameworkLink, role: str) -> None:
        if role and role != link.spec.role:
            raise InvalidArgument(
                f"role {role!r} is not the framework's role {link.spec.role!r}"
                " (frameworks have a single role)"
            )

    def revive(self, framework_id: str, role: str = "") -> None:
        """Clear the framework's filters and resume offers."""
        link = self._connected(framework_id)
        self._check_role(link, role)
        self.core.handle_revive(framework_id, self.now())
        self.request_allocation()

    def suppress(self, framework_id: str, role: str = "") -> None:
        """Stop offers to the framework until it revives."""
        link = self._connected(framework_id)
        self._check_role(link, role)
        self.core.handle_suppress(framework_id, self.now())

    def decline(
        self, framework_id: str, offer_ids: Sequence[str], refuse_seconds: float | None
    ) -> None:
        """Decline offers (ids no longer outstanding are ignored), installing a filter."""
        self._connected(framework_id)
        outstanding = [i for i in dict.fromkeys(offer_ids) if i in self.core.offers]
        if outstanding:
            self.core.handle_decline(framework_id, outstanding, self.now(), refuse_seconds)
            self.counters.offers_declined += len(outstanding)
            self.request_allocation()

    def accept(
        self,
        framework_id: str,
        offer_ids: Sequence[str],
        tasks: Sequence[TaskSpec],
        refuse_seconds: float | None,
    ) -> None:
        """Launch ``tasks`` on the offers' agent; unused offered resources are declined."""
        self._connected(framework_id)
        launches = [
            TaskLaunch(t.task_id, t.name, t.resources, t.duration, t.exit_code, t.agent_id or None)
            for t in tasks
        ]
        try:
            messages = self.core.handle_accept(
                framework_id, offer_ids, launches, self.now(), refuse_seconds
            )
        except AlreadyExists as error:  # scheduler.proto: live task ids are INVALID_ARGUMENT
            raise InvalidArgument(error.message) from None
        self.counters.offers_accepted += len(offer_ids)
        for message in messages:
            if isinstance(message, LaunchTasks):
                self._launch(message, tasks)
        self.request_allocation()

    def _launch(self, message: LaunchTasks, tasks: Sequence[TaskSpec]) -> None:
        agent_id = message.agent_id
        specs = tuple(
            TaskSpec(
                t.task_id,
                t.name or t.task_id,
                agent_id,
                t.resources,
                t.duration,
                t.exit_code,
                t.startup_delay,
                t.fail_on_start,
                t.labels,
            )
            for t in tasks
        )
        for spec in specs:
            self.tasks.launch(message.framework_id, spec)
        self.agents[agent_id].send(LaunchCommand(message.framework_id, specs))
        log_event(
            log,
            "tasks.launched",
            framework_id=message.framework_id,
            agent_id=agent_id,
            tasks=len(specs),
        )

    def kill(self, framework_id: str, task_id: str, agent_id: str = "") -> None:
        """Ask the task's agent to kill it."""
        self._connected(framework_id)
        require_id(task_id, "task_id")
        task = self.core.tasks.get((framework_id, task_id))
        if task is not None and agent_id and agent_id != task.agent_id:
            raise InvalidArgument(
                f"task {task_id!r} runs on agent {task.agent_id!r}, not {agent_id!r}"
            )
        self._dispatch(self.core.handle_kill(framework_id, task_id, self.now()))
        self.tasks.mark_killing(framework_id, task_id)

    def acknowledge(self, framework_id: str, agent_id: str, task_id: str, uuid_: bytes) -> None:
        """Apply an acknowledgement; a pending one goes back to the agent."""
        self._connected(framework_id)
        if not uuid_:
            raise InvalidArgument("uuid is empty: only updates with a uuid are acknowledged")
        require_id(task_id, "task_id")
        entry = self.tasks.get(framework_id, task_id)
        if entry is not None and agent_id and agent_id != entry.spec.agent_id:
            raise InvalidArgument(
                f"task {task_id!r} is on agent {entry.spec.agent_id!r}, not {agent_id!r}"
            )
        outcome = self.tasks.acknowledge(framework_id, task_id, uuid_)
        if outcome is AckOutcome.UNKNOWN:
            raise NotFound(f"task {task_id!r} has no status update with uuid {uuid_.hex()}")
        if outcome is AckOutcome.FORWARD:
            self.counters.acknowledgements += 1
            target = entry.spec.agent_id if entry is not None else agent_id
            agent = self.agents.get(target)
            if agent is not None and not self._drop_ack():
                agent.send(AckCommand(framework_id, task_id, uuid_))

    def reconcile(self, framework_id: str, refs: Sequence[tuple[str, str]]) -> None:
        """Resend the latest state of tasks (all non-terminal ones when ``refs`` is empty)."""
        link = self._connected(framework_id)
        for task_id, _ in refs:
            require_id(task_id, "task_id")
        answers: list[tuple[str, str, str]] = []
        for task_id, agent_id in refs:
            entry = self.tasks.get(framework_id, task_id)
            agent = self.agents.get(agent_id)
            if entry is None and agent is not None and agent.recovering:
                continue  # answered when the agent reregisters (its tasks are adopted)
            if entry is None:
                known = self.registry.agents.get(agent_id)
                unreachable = known is not None and known.state == UNREACHABLE
                answers.append((task_id, agent_id, "UNREACHABLE" if unreachable else "UNKNOWN"))
            else:
                answers.append((task_id, entry.spec.agent_id, entry.state))
        if not refs:
            answers = [
                (e.spec.task_id, e.spec.agent_id, e.state)
                for e in self.tasks.of_framework(framework_id)
                if not e.terminal
            ]
        now = time.time()
        for task_id, agent_id, state in answers:
            status = StatusUpdate(task_id, agent_id, state, "RECONCILIATION", "reconciliation", now)
            link.send(UpdateEvent(self._for_framework(link, status)))
