"""``FrameworkCalls``: the Scheduler API side of the master runtime (scheduler.proto).

Every method runs synchronously on the runtime's loop, checks everything before it changes
anything (a ``CoreError`` means nothing changed), and calls from a framework whose Subscribe
stream is not open fail with FAILED_PRECONDITION (unknown or removed ids: NOT_FOUND).

Every call names the caller's ``principal`` (``None``: anonymous, authentication off). A
framework belongs to the principal that registered it (``spec.principal``, durable): calls on
its id by anyone else are PERMISSION_DENIED (``Authority.check_owner``), checked before whether
it is connected, so a stranger learns nothing of its state. Registering needs the ACL's
``register_frameworks`` for the role, a weight within the rule's cap, and room in the
principal's count and registration rate (RESOURCE_EXHAUSTED). Launching a command task as a
named OS user needs the ACL's ``run_tasks`` for that user (``root`` only by a rule naming it).
The task calls (kill, acknowledge, reconcile) check the caller here and run in
``master.runtime.framework_tasks``.

Invariants:
- a framework is registered durably (its registry row is committed before SUBSCRIBED is sent)
  and removed durably (torn down, or its failover timeout expired with no new subscription);
- while disconnected, a framework keeps its tasks for ``failover_timeout``; its offers are
  rescinded and nothing is offered to it; resubscribing with its id in time gets it back;
- an accepted launch is the core's own ``LaunchTasks`` (``Dispatcher.launch``), recorded in the
  task book and sent to the agent unchanged;
- each framework acknowledgement of a pending update goes back to its agent as an
  ``AckCommand``, also from a framework away within its failover timeout (every other call
  needs an open stream); frameworks get a HeartbeatEvent every ``heartbeat_interval``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from master.core import AlreadyExists, InvalidArgument, PermissionDenied, TaskLaunch
from master.core.checks import check_weight
from master.model import (
    Demand,
    ErrorEvent,
    FrameworkEvent,
    FrameworkInfo,
    HeartbeatEvent,
    StreamEnd,
    TaskDetails,
    UpdateEvent,
)
from master.runtime.dispatch import Dispatcher
from master.runtime.events import EventKind
from master.runtime.framework_tasks import apply_acknowledgements, kill_task, reconcile_tasks
from master.runtime.sessions import Channel, FrameworkLink
from master.runtime.state import RuntimeState, Unavailable

__all__ = ["UNLIMITED_TASKS", "FrameworkCalls", "SubscribeResult"]

log = logging.getLogger("fairshare.master")

UNLIMITED_TASKS = 2**62
"""The core's ``wanted`` for a demand without ``max_tasks`` (unlimited)."""


@dataclass(frozen=True, slots=True)
class SubscribeResult:
    """What the Subscribe adapter sends first, and the stream it then drains."""

    framework_id: str
    master_id: str
    heartbeat_interval: float
    resubscribed: bool
    weight: float
    channel: Channel[FrameworkEvent] = field(repr=False)


class FrameworkCalls:
    """Subscribe, Accept, Decline, Revive, Suppress, Kill, Acknowledge, Reconcile, Teardown,
    UpdateDemand; failover timers and framework heartbeats."""

    def __init__(self, state: RuntimeState, dispatcher: Dispatcher) -> None:
        self.state = state
        self.dispatcher = dispatcher

    def _mine(
        self, framework_id: str, principal: str | None, connected: bool = True
    ) -> FrameworkLink:
        """The caller's own framework: NOT_FOUND if unknown, PERMISSION_DENIED if another
        principal's, then FAILED_PRECONDITION if ``connected`` and its stream is not open."""
        link = self.state.framework(framework_id)
        self.state.authority.check_owner(
            principal, link.spec.principal, f"framework {framework_id!r}"
        )
        return self.state.connected(framework_id) if connected else link

    # -- subscription -----------------------------------------------------------------------------

    def subscribe(
        self,
        spec: FrameworkInfo,
        demand: Demand | None,
        suppressed: bool,
        principal: str | None = None,
    ) -> SubscribeResult:
        """Register or re-register a framework and open its event stream."""
        state = self.state
        state.refuse_if_draining()
        authority = state.authority
        if authority.authenticated and spec.principal not in ("", principal):
            raise PermissionDenied(
                f"framework_info.principal {spec.principal!r} is not the authenticated principal"
            )
        cap = authority.allow("register_frameworks", principal, spec.role or "*").max_weight
        if spec.framework_id:
            link, resubscribed = self._resubscribe(spec, principal, cap), True
        else:
            link, resubscribed = self._register(spec, principal, cap), False
        framework_id = link.framework_id
        now = state.now()
        if demand is not None:
            self._set_demand(link, demand, now)
        if suppressed:
            state.core.handle_suppress(framework_id, now)
        channel = link.attach()
        for status in state.tasks.pending(framework_id):
            channel.put(UpdateEvent(self.dispatcher.for_framework(link, status)))
        self.dispatcher.request_allocation()
        state.announce(
            EventKind.FRAMEWORK_SUBSCRIBED,
            framework_id=framework_id,
            name=spec.name,
            role=link.spec.role,
            resubscribed=resubscribed,
        )
        return SubscribeResult(
            framework_id,
            state.master_id,
            state.config.heartbeat_interval,
            resubscribed,
            state.core.frameworks[framework_id].weight,
            channel,
        )

    def _register(self, spec: FrameworkInfo, principal: str | None, cap: float) -> FrameworkLink:
        state, authority = self.state, self.state.authority
        framework_id = f"fw-{uuid.uuid4().hex}"
        role = spec.role or "*"
        weight = check_weight(1.0 if spec.weight is None else spec.weight, "framework_info", cap)
        owner = authority.owner_of(principal) if authority.authenticated else spec.principal
        limit = state.config.limits.max_frameworks_per_principal
        authority.admit(principal, "framework", state.registry.frameworks_of[owner], limit)
        spec = dataclasses.replace(spec, framework_id=framework_id, role=role, principal=owner)
        registered_at = time.time()
        with state.durably():
            state.registry.put_framework(spec, registered_at)
        gpu_aware = "GPU_RESOURCES" in spec.capabilities
        state.core.handle_add_framework(
            framework_id, state.now(), spec.name, role, weight, gpu_aware
        )
        link = FrameworkLink(spec, registered_at)
        state.frameworks[framework_id] = link
        return link

    def _resubscribe(self, spec: FrameworkInfo, principal: str | None, cap: float) -> FrameworkLink:
        state = self.state
        link = self._mine(spec.framework_id, principal, connected=False)
        role = spec.role or "*"
        if spec.name != link.spec.name or role != link.spec.role:
            raise InvalidArgument(
                f"framework {spec.framework_id!r} subscribed as name={link.spec.name!r}"
                f" role={link.spec.role!r}; name and role cannot change on resubscription"
            )
        if spec.weight is not None:
            check_weight(spec.weight, "framework_info", cap)
        if state.authority.authenticated:
            spec = dataclasses.replace(spec, principal=link.spec.principal)
        spec = dataclasses.replace(spec, role=role)
        if spec != link.spec:
            with state.durably():
                state.registry.put_framework(spec, link.registered_at)
        if link.failover_timer is not None:
            link.failover_timer.cancel()
            link.failover_timer = None
        link.failover_deadline = None
        now = state.now()
        gpu_aware = "GPU_RESOURCES" in spec.capabilities
        if state.core.frameworks[spec.framework_id].gpu_aware != gpu_aware:
            messages = state.core.handle_set_gpu_aware(spec.framework_id, gpu_aware, now)
            self.dispatcher.dispatch(messages)
        link.spec = spec
        if not state.core.frameworks[spec.framework_id].active:
            state.core.handle_activate_framework(spec.framework_id, now)
        return link

    def unsubscribe(self, framework_id: str, channel: Channel[FrameworkEvent]) -> None:
        """The Subscribe stream ``channel`` ended (client gone, or closed by the master)."""
        state = self.state
        link = state.frameworks.get(framework_id)
        if state.draining or link is None or link.channel is not channel:
            return
        link.channel = None
        channel.close(StreamEnd())
        timeout = link.spec.failover_timeout
        if timeout <= 0:
            self._failover_expired(framework_id)  # removed now (retried if the registry fails)
            return
        self.dispatcher.dispatch(state.core.handle_deactivate_framework(framework_id, state.now()))
        self.start_failover(link, timeout)
        state.announce(
            EventKind.FRAMEWORK_DISCONNECTED, framework_id=framework_id, failover=timeout
        )

    def start_failover(self, link: FrameworkLink, timeout: float) -> None:
        """The framework is away: it is removed unless it resubscribes within ``timeout``."""
        link.failover_deadline = time.time() + timeout
        link.failover_timer = self.state.loop.call_later(
            timeout, self._failover_expired, link.framework_id
        )

    def _failover_expired(self, framework_id: str) -> None:
        state = self.state
        link = state.frameworks.get(framework_id)
        if link is not None and link.channel is None and not state.draining:
            try:
                self.remove(link, "its failover timeout expired")
            except Unavailable:  # the registry write failed: try again in a while
                link.failover_timer = state.loop.call_later(
                    1.0, self._failover_expired, framework_id
                )

    def remove(self, link: FrameworkLink, why: str) -> None:
        """Remove the framework for good, durably: its tasks killed, offers dropped, stream
        ended with an error (a teardown, an expired failover timeout)."""
        state, framework_id = self.state, link.framework_id
        with state.durably():
            state.registry.remove_framework(framework_id)
        if link.failover_timer is not None:
            link.failover_timer.cancel()
        self.dispatcher.dispatch(state.core.handle_remove_framework(framework_id, state.now()))
        state.tasks.remove_framework(framework_id)
        link.detach_current(ErrorEvent(f"framework removed: {why}", "CANCELLED"))
        del state.frameworks[framework_id]
        state.removed_frameworks.add(framework_id)
        self.dispatcher.request_allocation()
        spec = link.spec
        state.announce(
            EventKind.FRAMEWORK_REMOVED,
            framework_id=framework_id,
            reason=why,
            name=spec.name,
            role=spec.role or "*",
        )

    def teardown(self, framework_id: str, principal: str | None = None) -> None:
        """Remove the framework for good: kill its tasks, drop its offers, end its stream."""
        self.remove(self._mine(framework_id, principal), "torn down")

    def heartbeat(self) -> None:
        """Send every connected framework a heartbeat."""
        event = HeartbeatEvent(time.time())
        for link in self.state.frameworks.values():
            link.send(event)

    # -- demand and offers ------------------------------------------------------------------------

    def _set_demand(self, link: FrameworkLink, demand: Demand | None, now: float) -> None:
        core = self.state.core
        if demand is None:
            core.handle_update_demand(link.framework_id, None, 0, now)
        else:
            wanted = UNLIMITED_TASKS if demand.max_tasks is None else demand.max_tasks
            core.handle_update_demand(link.framework_id, demand.task_resources, wanted, now)
        link.demand = demand

    def update_demand(
        self, framework_id: str, demand: Demand | None, principal: str | None = None
    ) -> None:
        """Declare, change or clear the framework's demand."""
        self._set_demand(self._mine(framework_id, principal), demand, self.state.now())
        self.dispatcher.request_allocation()

    def _connected_in_role(
        self, framework_id: str, role: str, principal: str | None
    ) -> FrameworkLink:
        link = self._mine(framework_id, principal)
        if role and role != link.spec.role:
            raise InvalidArgument(
                f"role {role!r} is not the framework's role {link.spec.role!r}"
                " (frameworks have a single role)"
            )
        return link

    def revive(self, framework_id: str, role: str = "", principal: str | None = None) -> None:
        """Clear the framework's filters and resume offers."""
        self._connected_in_role(framework_id, role, principal)
        self.state.core.handle_revive(framework_id, self.state.now())
        self.dispatcher.request_allocation()

    def suppress(self, framework_id: str, role: str = "", principal: str | None = None) -> None:
        """Stop offers to the framework until it revives."""
        self._connected_in_role(framework_id, role, principal)
        self.state.core.handle_suppress(framework_id, self.state.now())

    def decline(
        self,
        framework_id: str,
        offer_ids: Sequence[str],
        refuse_seconds: float | None,
        principal: str | None = None,
    ) -> None:
        """Decline offers (ids no longer outstanding are ignored), installing a filter."""
        state = self.state
        self._mine(framework_id, principal)
        outstanding = [i for i in dict.fromkeys(offer_ids) if i in state.core.offers]
        if outstanding:
            state.core.handle_decline(framework_id, outstanding, state.now(), refuse_seconds)
            state.counters.offers_declined += len(outstanding)
            self.dispatcher.request_allocation()

    def accept(
        self,
        framework_id: str,
        offer_ids: Sequence[str],
        launches: Sequence[TaskLaunch],
        refuse_seconds: float | None,
        principal: str | None = None,
    ) -> None:
        """Launch tasks on the offers' agent; unused offered resources are declined. A command
        task's named user needs the ACL's ``run_tasks`` (checked before anything changes)."""
        state = self.state
        self._mine(framework_id, principal)
        for launch in launches:
            details = launch.details
            if isinstance(details, TaskDetails) and details.command is not None:
                state.authority.allow_task_user(principal, launch.task_id, details.command.user)
        try:
            messages = state.core.handle_accept(
                framework_id, offer_ids, launches, state.now(), refuse_seconds
            )
        except AlreadyExists as error:  # scheduler.proto: live task ids are INVALID_ARGUMENT
            raise InvalidArgument(error.message) from None
        state.counters.offers_accepted += len(offer_ids)
        self.dispatcher.dispatch(messages)
        self.dispatcher.request_allocation()

    # -- tasks (the bodies in ``master.runtime.framework_tasks``) ---------------------------------

    def kill(
        self, framework_id: str, task_id: str, agent_id: str = "", principal: str | None = None
    ) -> None:
        """Ask the task's agent to kill it."""
        self._mine(framework_id, principal)
        kill_task(self.state, self.dispatcher, framework_id, task_id, agent_id)

    def acknowledge(self, framework_id: str, agent_id: str, task_id: str, uuid_: bytes) -> None:
        """Apply one acknowledgement (``acknowledge_many`` of one)."""
        self.acknowledge_many(framework_id, [(agent_id, task_id, uuid_)])

    def acknowledge_many(
        self,
        framework_id: str,
        acks: Sequence[tuple[str, str, bytes]],
        principal: str | None = None,
    ) -> None:
        """Apply acknowledgements ``(agent_id, task_id, uuid)``, all checked before any is
        applied; each of a pending update goes back to its agent. A registered framework whose
        stream just ended may still acknowledge (an acknowledgement that crossed the end of its
        stream counts: the update is not sent again when it resubscribes)."""
        self._mine(framework_id, principal, connected=False)
        apply_acknowledgements(self.state, self.dispatcher, framework_id, acks)

    def reconcile(
        self, framework_id: str, refs: Sequence[tuple[str, str]], principal: str | None = None
    ) -> None:
        """Resend the latest state of tasks (all non-terminal ones when ``refs`` is empty)."""
        link = self._mine(framework_id, principal)
        reconcile_tasks(self.state, self.dispatcher, link, refs)
