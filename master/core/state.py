"""``MasterState``: the pure allocation core as a state machine (docs/architecture.md §2).

One owner of state (dask's ``WorkerState``): the master's runtime calls ``handle_*(…, now)`` on
its event loop; each call changes the state and returns the ``Message`` values the runtime must
deliver. The core does no I/O, reads no clock (``now`` is passed in, in seconds) and uses no
global randomness (seeds come in through ``CoreConfig``).

Invariants (checked by ``validate`` after every call when ``CoreConfig.validate`` is on):
- per agent ``free + offered + used == total``; per framework ``allocated == offered + used``;
  no quantity is ever negative;
- offers count as allocated until accepted (they become tasks), declined or rescinded;
- every outstanding offer and live task belongs to a live framework and a live agent;
- the allocator's ``agent_list`` holds exactly the active agents; an agent the operator
  deactivated has no offers but keeps its tasks and its part of the pool total;
- the sorter holds exactly the active, unsuppressed frameworks, keyed by their current shares;
- a call that raises ``CoreError`` has changed nothing (all checks happen before any change).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from fairshare.resources import ResourceVector
from fairshare.task_states import TaskState, advance

from master.core import allocation, invariants, reserved_allocation, tree_allocation
from master.core.checks import (
    check_launches,
    check_refuse,
    check_running,
    check_weight,
    checked_role,
)
from master.core.checks import checked as _checked
from master.core.config import CoreConfig
from master.core.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
)
from master.core.fairness import (
    DeclaredDemand,
    FairnessPolicy,
    PoolShape,
    make_fairness_policy,
)
from master.core.fit import KindFits
from master.core.hierarchy import RoleShare, node_shares
from master.core.messages import (
    KillTask,
    LaunchTasks,
    Message,
    RescindOffer,
    RunningTask,
    TaskLaunch,
    TaskStatusChange,
)
from master.core.operator_handlers import OperatorHandlers
from master.core.placement import PlacementPolicy, make_placement_policy
from master.core.quota import Quota
from master.core.records import (
    AgentList,
    AgentRecord,
    FrameworkRecord,
    Offer,
    TaskRecord,
)
from master.core.reservation_handlers import ReservationHandlers
from master.core.reservations import (
    add_part,
    check_reservations,
    checked_reservation_role,
    reserved_of,
    serving_roles,
    split_tasks,
)
from master.core.sorter import Sorter

__all__ = ["CoreConfig", "MasterState"]  # CoreConfig lives in master.core.config

EMPTY = ResourceVector()
GPUS = "gpus"


class MasterState(ReservationHandlers, OperatorHandlers):
    """Agents, frameworks, offers and tasks, and the allocator that decides who gets what."""

    def __init__(self, config: CoreConfig | None = None) -> None:
        self.config = config or CoreConfig()
        self.fairness: FairnessPolicy = make_fairness_policy(
            self.config.policy,
            self.config.slots_per_agent,
            self.config.fair_sharing_excluded_resources,
        )
        self.hierarchy = self.config.effective_hierarchy  # master.core.hierarchy
        self.placement: PlacementPolicy = make_placement_policy(
            self.config.placement, self.config.sample_size, self.config.seed
        )
        self.agents: dict[str, AgentRecord] = {}
        self.agent_list = AgentList()
        self.kind_fits = KindFits()  # the fit-aware choice's eq. 9 on agent capacities
        self.frameworks: dict[str, FrameworkRecord] = {}
        self.offers: dict[str, Offer] = {}
        self.tasks: dict[tuple[str, str], TaskRecord] = {}
        self.role_weights: dict[str, float] = {}
        self.quotas: dict[str, Quota] = {}  # role path -> guarantee and limit
        self.gpu_agents: set[str] = set()  # agents with "gpus": offered to GPU-aware frameworks
        self.reserved_agents: set[str] = set()  # agents with a reservation
        self.total = EMPTY
        # The largest agent per resource, and how many agents hold that maximum: a removal only
        # rescans the agents when it takes away the last holder of a maximum.
        self._largest: dict[str, int] = {}
        self._largest_holders: dict[str, int] = {}
        self.sorter = Sorter(self._key_of)
        self.coarse_start = 0
        self._policy_stale = True
        self._next_offer = 0

    # -- fairness keys ----------------------------------------------------------------------------

    def _key_of(self, framework_id: str) -> tuple[float, int]:
        if self._policy_stale:
            self._prepare_policy()
        fw = self.frameworks[framework_id]
        return self.fairness.key(fw.allocated, self.total, fw.weight, fw.demand), fw.times_chosen

    def _prepare_policy(self) -> None:
        demands = [
            DeclaredDemand(fw.demand, fw.wanted, fw.weight)
            for fw in self.frameworks.values()
            if fw.demand is not None and fw.active and not fw.suppressed and fw.wanted > 0
        ]
        self._policy_stale = False
        self.fairness.prepare(PoolShape(self.total, self.largest_agent), demands)
        self.sorter.invalidate()

    def _pool_grew(self, agent: AgentRecord) -> None:
        if agent.total.millis(GPUS):
            self.gpu_agents.add(agent.id)
        self.total = self.total + agent.total
        self._count_largest(agent)
        self._policy_stale = True
        self.sorter.invalidate()

    def _count_largest(self, agent: AgentRecord) -> None:
        largest, holders = self._largest, self._largest_holders
        for name, millis in agent.total.millis_items():
            current = largest.get(name, 0)
            if millis > current:
                largest[name] = millis
                holders[name] = 1
            elif millis == current:
                holders[name] += 1

    def _pool_shrank(self, agent: AgentRecord) -> None:
        self.gpu_agents.discard(agent.id)
        self.total = self.total - agent.total
        last_holder = False
        for name, millis in agent.total.millis_items():
            if millis == self._largest.get(name):
                self._largest_holders[name] -= 1
                last_holder = last_holder or not self._largest_holders[name]
        if last_holder:
            self._largest, self._largest_holders = {}, {}
            for other in self.agents.values():
                self._count_largest(other)
        self._policy_stale = True
        self.sorter.invalidate()

    @property
    def largest_agent(self) -> ResourceVector:
        """The largest agent, resource by resource (the slots policy's "maximum server")."""
        return ResourceVector.from_millis(self._largest)

    def _shapes_changed(self) -> None:
        if self.fairness.depends_on_demands:
            self._policy_stale = True
            self.sorter.invalidate()

    def share(self, framework_id: str) -> float:
        """The framework's fairness key under the configured policy (its dominant share for drf)."""
        return self._key_of(framework_id)[0]

    def role_shares(self) -> dict[str, RoleShare]:
        """Every role of the tree (each role path that holds a framework, and its ancestors)
        with its weight and its share as the hierarchy computes it now (``flat``: what each
        role holds); see ``master.core.hierarchy.node_shares``."""
        if self._policy_stale:
            self._prepare_policy()
        candidates = [
            fw_id
            for fw_id in self.sorter.ordered()
            if (fw := self.frameworks[fw_id]).demand is None
            or fw.live_tasks + fw.offered_tasks < fw.wanted
        ]
        idle = self.reserved_idle()
        return node_shares(
            self.frameworks,
            candidates,
            self.role_weights,
            self.total,
            allocation.used_of(self, idle),
            self.config.fair_sharing_excluded_resources,
            self.hierarchy,
            idle,
        )

    def dominant_share(self, framework_id: str) -> float:
        """``max_r allocated_r / total_r`` whatever the policy (DRF §4; DRFH global share)."""
        return self.frameworks[framework_id].allocated.dominant_share(self.total)

    def ordered_frameworks(self) -> list[str]:
        """Active, unsuppressed framework ids, most deprived first."""
        if self._policy_stale:
            self._prepare_policy()
        if self.hierarchy == "flat":
            return list(self.sorter.ordered())
        return tree_allocation.tree_of(self).order()

    def validate(self) -> None:
        """Check every invariant; raises ``AssertionError`` naming the first one broken."""
        invariants.check(self)

    # -- lookups that raise precise errors --------------------------------------------------------

    def _framework(self, framework_id: str) -> FrameworkRecord:
        fw = self.frameworks.get(framework_id)
        if fw is None:
            raise NotFound(f"framework {framework_id!r} is not registered")
        return fw

    def _agent(self, agent_id: str) -> AgentRecord:
        agent = self.agents.get(agent_id)
        if agent is None:
            raise NotFound(f"agent {agent_id!r} is not registered")
        return agent

    def _owned_offers(self, fw: FrameworkRecord, offer_ids: Sequence[str]) -> list[Offer]:
        if not offer_ids:
            raise InvalidArgument("offer_ids is empty")
        if len(set(offer_ids)) != len(offer_ids):
            raise InvalidArgument("offer_ids names the same offer twice")
        offers = []
        for offer_id in offer_ids:
            offer = self.offers.get(offer_id)
            if offer is None:
                raise NotFound(f"offer {offer_id!r} is unknown, expired, rescinded or already used")
            if offer.framework_id != fw.id:
                raise PermissionDenied(f"offer {offer_id!r} was made to another framework")
            offers.append(offer)
        return offers

    # -- offers and tasks as mechanism ------------------------------------------------------------

    def new_offer_id(self) -> str:
        """A fresh offer id (the prefix keeps ids unique across master restarts)."""
        self._next_offer += 1
        return f"{self.config.offer_id_prefix}-{self._next_offer}"

    def _drop_offer(self, offer: Offer) -> None:
        """Forget an offer; its resources go back to its agent and leave its framework."""
        del self.offers[offer.offer_id]
        agent = self.agents[offer.agent_id]
        fw = self.frameworks[offer.framework_id]
        agent.offer_ids.discard(offer.offer_id)
        if offer.reserved:
            self._unreserve_parts(agent, offer.reserved)
            agent.free = agent.free + (offer.resources - reserved_of(offer.reserved))
        else:
            agent.free = agent.free + offer.resources
        fw.offer_ids.discard(offer.offer_id)
        fw.allocated = fw.allocated - offer.resources
        fw.offered_tasks -= offer.fair_tasks

    def _end_task(self, task: TaskRecord, state: TaskState, now: float) -> None:
        """Make a task terminal: its resources return to its agent and leave its framework."""
        task.state = state
        task.updated_at = now
        del self.tasks[(task.framework_id, task.id)]
        agent = self.agents.get(task.agent_id)
        if agent is not None:
            agent.task_keys.discard((task.framework_id, task.id))
            if task.reserved:
                self._unreserve_parts(agent, task.reserved)
                agent.free = agent.free + (task.resources - reserved_of(task.reserved))
            else:
                agent.free = agent.free + task.resources
        fw = self.frameworks.get(task.framework_id)
        if fw is not None:
            fw.task_ids.discard(task.id)
            fw.allocated = fw.allocated - task.resources
            fw.live_tasks -= 1

    @staticmethod
    def _unreserve_parts(agent: AgentRecord, parts: Iterable[tuple[str, ResourceVector]]) -> None:
        """Give the reserved parts of an ended offer or task back to their reservations."""
        for role, resources in parts:
            agent.reserved_free[role] = agent.reserved_free[role] + resources

    def _take_parts(self, agent: AgentRecord, parts: Iterable[tuple[str, ResourceVector]]) -> None:
        for role, resources in parts:
            agent.reserved_free[role] = agent.reserved_free[role] - resources

    def _reposition(self, framework_ids: Iterable[str]) -> None:
        for framework_id in set(framework_ids):
            self.sorter.update(framework_id)

    # -- agents -----------------------------------------------------------------------------------

    @_checked
    def handle_add_agent(
        self,
        agent_id: str,
        resources: ResourceVector,
        now: float,
        hostname: str = "",
        attributes: Mapping[str, str] | None = None,
        running: Sequence[RunningTask] = (),
        reserved: Mapping[str, ResourceVector] | None = None,
        dynamic: Mapping[str, ResourceVector] | None = None,
    ) -> list[Message]:
        """Admit an agent with ``resources``; its resources join the pool.

        ``running`` are tasks the agent already runs (it rejoins after being unreachable or
        after a master restart): they are adopted, holding their resources, as accepted tasks,
        each taking first from the reservations that may serve its framework's role.
        ``reserved``: the agent's static reservations (role -> resources); ``dynamic``: the
        operator's reservations on it that the registry kept (``master.core.reservations``).
        """
        if not agent_id:
            raise InvalidArgument("agent_id is empty")
        if agent_id in self.agents:
            raise AlreadyExists(f"agent {agent_id!r} is registered already")
        if not resources:
            raise InvalidArgument(f"agent {agent_id!r}: resources are empty")
        used = check_running(self.tasks, self.frameworks, agent_id, running, resources)
        reservations: dict[str, ResourceVector] = {}
        for source, what in ((reserved, "reservation"), (dynamic, "dynamic reservation")):
            for role, amount in (source or {}).items():
                role = checked_reservation_role(role, f"agent {agent_id!r}: {what} role")
                if not amount:
                    raise InvalidArgument(f"agent {agent_id!r}: {what} of {role!r} is empty")
                add_part(reservations, role, amount)
        check_reservations(agent_id, resources, reservations)
        reserved_free = dict(reservations)
        splits = []
        for task in running:
            role = self.frameworks[task.framework_id].role
            serving = {r: reserved_free[r] for r in serving_roles(reservations, role)}
            parts = split_tasks(serving, [task.resources])[0]
            for part_role, amount in parts:
                reserved_free[part_role] = reserved_free[part_role] - amount
            splits.append(parts)
        unreserved = resources - sum(reservations.values(), EMPTY)
        unreserved_used = used - sum(map(reserved_of, splits), EMPTY)
        if not unreserved_used.fits_in(unreserved):
            raise InvalidArgument(
                f"agent {agent_id!r}: its running tasks use {unreserved_used} outside the"
                f" reservations that may serve them, more than the {unreserved} not reserved"
            )
        agent = AgentRecord(
            id=agent_id,
            hostname=hostname or agent_id,
            total=resources,
            free=unreserved - unreserved_used,
            attributes=tuple(sorted((attributes or {}).items())),
            registered_at=now,
        )
        if reservations:
            agent.reserved = reservations
            agent.static_reserved = {
                checked_role(role): amount for role, amount in (reserved or {}).items() if amount
            }
            agent.reserved_free = reserved_free
            self.reserved_agents.add(agent_id)
        self.agents[agent_id] = agent
        self.agent_list.append(agent)
        for task, parts in zip(running, splits, strict=True):
            fw = self.frameworks[task.framework_id]
            record = TaskRecord(
                task.task_id,
                fw.id,
                agent_id,
                task.name,
                task.resources,
                task.state,
                now,
                task.preemptible,
                parts,
            )
            self.tasks[(fw.id, task.task_id)] = record
            agent.task_keys.add((fw.id, task.task_id))
            fw.task_ids.add(task.task_id)
            fw.live_tasks += 1
            fw.allocated = fw.allocated + task.resources
        self._pool_grew(agent)
        self._reposition(task.framework_id for task in running)
        return []

    @_checked
    def handle_remove_agent(
        self,
        agent_id: str,
        now: float,
        state: TaskState = TaskState.LOST,
        reason: str = "agent removed",
    ) -> list[Message]:
        """Remove an agent: rescind its offers, end its tasks with ``state``, shrink the pool."""
        agent = self._agent(agent_id)
        touched: list[str] = []
        messages = self._rescind_offers_on(agent, reason, touched)
        for key in sorted(agent.task_keys):
            task = self.tasks[key]
            self._end_task(task, state, now)
            touched.append(task.framework_id)
            messages.append(
                TaskStatusChange(task.framework_id, task.id, agent_id, state, reason, reason)
            )
        del self.agents[agent_id]
        self.reserved_agents.discard(agent_id)
        if agent.active:
            self.agent_list.discard(agent)
        for fw in self.frameworks.values():
            fw.filters.pop(agent_id, None)
        self._pool_shrank(agent)
        self._reposition(touched)
        return messages

    def _rescind_offers_on(
        self, agent: AgentRecord, reason: str, touched: list[str]
    ) -> list[Message]:
        """Drop every offer on ``agent``; their frameworks are added to ``touched``."""
        messages: list[Message] = []
        for offer_id in sorted(agent.offer_ids):
            offer = self.offers[offer_id]
            self._drop_offer(offer)
            touched.append(offer.framework_id)
            messages.append(RescindOffer(offer.framework_id, offer_id, reason))
        return messages

    # -- frameworks -------------------------------------------------------------------------------

    @_checked
    def handle_add_framework(
        self,
        framework_id: str,
        now: float,
        name: str = "",
        role: str = "*",
        weight: float = 1.0,
        gpu_aware: bool = True,
    ) -> list[Message]:
        """Register a framework; it joins the sorter with nothing allocated.

        Agents with "gpus" are offered only to ``gpu_aware`` frameworks: the master passes
        Mesos's GPU_RESOURCES capability, so GPU machines stay free for the work that needs
        them; the calculator and the simulator leave it on (no filtering)."""
        if not framework_id:
            raise InvalidArgument("framework_id is empty")
        if framework_id in self.frameworks:
            raise AlreadyExists(f"framework {framework_id!r} is registered already")
        role = checked_role(role, f"framework {framework_id!r}: role")
        requested = check_weight(weight, f"framework {framework_id!r}")
        fw = FrameworkRecord(
            id=framework_id,
            name=name or framework_id,
            role=role,
            weight=self._role_weight_on(role, requested),
            requested_weight=requested,
            gpu_aware=gpu_aware,
            registered_at=now,
        )
        self.frameworks[framework_id] = fw
        self.sorter.add(framework_id)
        return []

    @_checked
    def handle_remove_framework(self, framework_id: str, now: float) -> list[Message]:
        """Teardown: drop its offers, kill its tasks (resources return at once), forget it."""
        fw = self._framework(framework_id)
        messages: list[Message] = []
        for offer_id in sorted(fw.offer_ids):
            self._drop_offer(self.offers[offer_id])
        for task_id in sorted(fw.task_ids):
            task = self.tasks[(framework_id, task_id)]
            messages.append(KillTask(task.agent_id, framework_id, task_id))
            self._end_task(task, TaskState.KILLED, now)
        self.sorter.discard(framework_id)
        del self.frameworks[framework_id]
        self._shapes_changed()
        return messages

    @_checked
    def handle_set_gpu_aware(self, framework_id: str, gpu_aware: bool, now: float) -> list[Message]:
        """The framework resubscribed with or without GPU_RESOURCES; losing it rescinds its
        offers of agents with GPUs."""
        fw = self._framework(framework_id)
        fw.gpu_aware = gpu_aware
        messages: list[Message] = []
        if not gpu_aware:
            for offer_id in sorted(fw.offer_ids):
                offer = self.offers[offer_id]
                if offer.agent_id in self.gpu_agents:
                    self._drop_offer(offer)
                    messages.append(RescindOffer(fw.id, offer_id, "GPU_RESOURCES capability lost"))
            self._reposition([fw.id])
        return messages

    @_checked
    def handle_deactivate_framework(self, framework_id: str, now: float) -> list[Message]:
        """The framework disconnected: rescind its offers, forget its decline filters (as
        Mesos's allocator does) and stop offering to it."""
        fw = self._framework(framework_id)
        messages: list[Message] = []
        for offer_id in sorted(fw.offer_ids):
            self._drop_offer(self.offers[offer_id])
            messages.append(RescindOffer(framework_id, offer_id, "framework disconnected"))
        fw.active = False
        fw.filters.clear()  # Mesos's allocator clears them too (deactivateFramework)
        self.sorter.discard(framework_id)
        self._shapes_changed()
        return messages

    @_checked
    def handle_activate_framework(self, framework_id: str, now: float) -> list[Message]:
        """The framework (re)connected: offer to it again unless it is suppressed."""
        fw = self._framework(framework_id)
        fw.active = True
        if not fw.suppressed:
            self.sorter.add(framework_id)
        self._shapes_changed()
        return []

    @_checked
    def handle_update_demand(
        self,
        framework_id: str,
        shape: ResourceVector | None,
        wanted: int,
        now: float,
    ) -> list[Message]:
        """Declare the task shape and how many tasks the framework wants (``None``: coarse)."""
        fw = self._framework(framework_id)
        if shape is not None and not shape:
            raise InvalidArgument("demand: task shape is empty; send no shape to clear the demand")
        if isinstance(wanted, bool) or not isinstance(wanted, int) or wanted < 0:
            raise InvalidArgument(f"demand: wanted must be a whole number >= 0, got {wanted!r}")
        fw.demand = shape
        fw.wanted = wanted if shape is not None else 0
        self._shapes_changed()
        return []

    @_checked
    def handle_suppress(self, framework_id: str, now: float) -> list[Message]:
        """Stop offering to the framework until it revives."""
        fw = self._framework(framework_id)
        fw.suppressed = True
        self.sorter.discard(framework_id)
        self._shapes_changed()
        return []

    @_checked
    def handle_revive(self, framework_id: str, now: float) -> list[Message]:
        """Clear the framework's decline filters and offer to it again."""
        fw = self._framework(framework_id)
        fw.filters.clear()
        fw.suppressed = False
        if fw.active:
            self.sorter.add(framework_id)
        self._shapes_changed()
        return []

    # -- offers -----------------------------------------------------------------------------------

    def _refuse(self, fw: FrameworkRecord, agent_id: str, seconds: float, now: float) -> None:
        if seconds > 0:
            until = now + seconds
            if fw.filters.get(agent_id, -math.inf) < until:
                fw.filters[agent_id] = until

    @_checked
    def handle_decline(
        self,
        framework_id: str,
        offer_ids: Sequence[str],
        now: float,
        refuse_seconds: float | None = None,
    ) -> list[Message]:
        """Return offers; their agents are not offered to the framework for ``refuse_seconds``."""
        fw = self._framework(framework_id)
        seconds = check_refuse(refuse_seconds, self.config.default_refuse_seconds)
        for offer in self._owned_offers(fw, offer_ids):
            self._drop_offer(offer)
            self._refuse(fw, offer.agent_id, seconds, now)
        self.sorter.update(framework_id)
        return []

    @_checked
    def handle_accept(
        self,
        framework_id: str,
        offer_ids: Sequence[str],
        launches: Sequence[TaskLaunch],
        now: float,
        refuse_seconds: float | None = None,
    ) -> list[Message]:
        """Launch tasks on the resources of offers (all on one agent); decline what is left."""
        fw = self._framework(framework_id)
        if not fw.active:
            raise FailedPrecondition(f"framework {framework_id!r} is not connected")
        seconds = check_refuse(refuse_seconds, self.config.default_refuse_seconds)
        offers = self._owned_offers(fw, offer_ids)
        agent_ids = {offer.agent_id for offer in offers}
        if len(agent_ids) != 1:
            raise InvalidArgument(f"offers span several agents: {sorted(agent_ids)}")
        agent_id = agent_ids.pop()
        held = sum((offer.resources for offer in offers), EMPTY)
        needed = check_launches(self.tasks, fw.id, agent_id, launches, held)
        held_reserved: dict[str, ResourceVector] = {}
        for offer in offers:
            for role, amount in offer.reserved:
                add_part(held_reserved, role, amount)
            self._drop_offer(offer)
        agent = self.agents[agent_id]
        if held_reserved:
            ordered = {r: held_reserved[r] for r in serving_roles(held_reserved, fw.role)}
            splits = split_tasks(ordered, [launch.resources for launch in launches])
            taken = sum(map(reserved_of, splits), EMPTY)
            for parts in splits:
                self._take_parts(agent, parts)
            agent.free = agent.free - (needed - taken)
        else:
            splits = [()] * len(launches)
            agent.free = agent.free - needed
        fw.allocated = fw.allocated + needed
        for launch, parts in zip(launches, splits, strict=True):
            task = TaskRecord(
                launch.task_id,
                fw.id,
                agent_id,
                launch.name,
                launch.resources,
                TaskState.STAGING,
                now,
                launch.preemptible,
                parts,
            )
            self.tasks[(fw.id, task.id)] = task
            agent.task_keys.add((fw.id, task.id))
            fw.task_ids.add(task.id)
            fw.live_tasks += 1
        if held != needed:
            self._refuse(fw, agent_id, seconds, now)
        self.sorter.update(framework_id)
        if not launches:
            return []
        return [LaunchTasks(agent_id, fw.id, tuple(launches))]

    # -- tasks ------------------------------------------------------------------------------------

    @_checked
    def handle_kill(self, framework_id: str, task_id: str, now: float) -> list[Message]:
        """Ask the task's agent to kill it; resources return when the agent reports it ended."""
        self._framework(framework_id)
        task = self.tasks.get((framework_id, task_id))
        if task is None:
            raise NotFound(f"task {task_id!r} of framework {framework_id!r} is not running")
        if task.state is not TaskState.KILLING:
            task.state = TaskState.KILLING
            task.updated_at = now
        return [KillTask(task.agent_id, framework_id, task_id)]

    @_checked
    def handle_task_status(
        self, agent_id: str, framework_id: str, task_id: str, state: TaskState, now: float
    ) -> list[Message]:
        """An agent reports a task state; a terminal state frees the task's resources."""
        task = self.tasks.get((framework_id, task_id))
        if task is None:
            raise NotFound(f"task {task_id!r} of framework {framework_id!r} is not live")
        if task.agent_id != agent_id:
            raise PermissionDenied(
                f"task {task_id!r} runs on agent {task.agent_id!r}, not {agent_id!r}"
            )
        if state.is_terminal:
            self._end_task(task, state, now)
            if framework_id in self.frameworks:
                self.sorter.update(framework_id)
        else:
            task.state = advance(task.state, state)
            task.updated_at = now
        return []

    # -- time -------------------------------------------------------------------------------------

    @_checked
    def handle_tick(self, now: float) -> list[Message]:
        """Rescind offers older than ``offer_timeout`` and forget expired decline filters."""
        messages: list[Message] = []
        timeout = self.config.offer_timeout
        if timeout is not None:
            expired = [o for o in self.offers.values() if o.created_at + timeout <= now]
            for offer in expired:
                self._drop_offer(offer)
                messages.append(RescindOffer(offer.framework_id, offer.offer_id, "offer timed out"))
            self._reposition(o.framework_id for o in expired)
        for fw in self.frameworks.values():
            for agent_id in [a for a, until in fw.filters.items() if until <= now]:
                del fw.filters[agent_id]
        return messages

    @_checked
    def handle_allocate(self, now: float) -> list[Message]:
        """One allocation run: offers in fairness order (progressive filling with demands)."""
        if self._policy_stale:
            self._prepare_policy()
        reserved = reserved_allocation.run(self, now) if self.reserved_agents else []
        if self.hierarchy != "flat" and tree_allocation.roles_in_use(self) > 1:
            messages = tree_allocation.run(self, now)
        else:
            messages = allocation.run(self, now)
        return reserved_allocation.merged(reserved, messages) if reserved else messages
