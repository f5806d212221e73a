"""The reservation stage of an allocation run: each agent's reserved resources offered to the
frameworks of the reservation's role and of the roles below it, before the ordinary run.

For every active agent with a reservation (deepest role first), the frameworks that may use it
(active, unsuppressed, in the role's subtree, not refusing the agent, GPU-aware on a GPU agent)
are served in DRF order within the reservation, one unit at a time as in progressive filling
(Ghodsi et al., NSDI 2011, Algorithm 1): a framework with a declared task shape gets one task's
footprint while it wants more and one fits; a framework without one (Mesos-style) gets the
whole reservation's free part. Then the ordinary run (``master.core.allocation``, or the role
tree's) shares the unreserved resources, its keys counting what this stage offered.

Limits (Mesos 1.9): a reservation counts in its role's consumption whole, so offering it to a
framework of the role itself changes no consumption; offering it to a framework of a role
below moves it into that sub-role's consumption, so a limit of a role strictly between the
reservation's role and the framework's (both ends included on the framework's side) is
checked, and the unit is not given when it would pass it.

Invariants: every offer made here holds only reserved resources of roles that contain its
framework's role (``Offer.reserved`` names them all); a framework gets at most one offer per
agent from this stage; what is offered leaves ``agent.reserved_free`` and joins the
framework's ``allocated`` together; the sorter's keys are current when the stage returns.
"""

from __future__ import annotations

from heapq import heapify, heappop, heappush
from typing import TYPE_CHECKING

from fairshare.resources import ResourceVector
from fairshare.roles import is_within

from master.core.messages import Message, SendOffers
from master.core.records import AgentRecord, FrameworkRecord, Offer
from master.core.reservations import add_part

if TYPE_CHECKING:
    from master.core.state import MasterState

__all__ = ["merged", "run"]

EMPTY = ResourceVector()


class _Limits:
    """The limits of roles strictly below a reservation's role, on a framework's chain, with
    what their subtrees hold (computed once per role and run, kept current as units go)."""

    def __init__(self, state: MasterState) -> None:
        self.state = state
        self.limited = {
            role: quota.limit for role, quota in state.quotas.items() if quota.limit is not None
        }
        self.held: dict[str, ResourceVector] = {}

    def _between(self, reserved_role: str, role: str) -> list[str]:
        return [
            limited
            for limited in self.limited
            if limited != reserved_role
            and is_within(limited, reserved_role)
            and is_within(role, limited)
        ]

    def admits(self, reserved_role: str, role: str, unit: ResourceVector) -> bool:
        for limited in self._between(reserved_role, role):
            held = self.held.get(limited)
            if held is None:
                held = self.held[limited] = self.state.subtree_holds(limited)
            limit = self.limited[limited]
            assert limit is not None
            for name, millis in unit.millis_items():
                cap = limit.millis(name) if name in limit else None
                if cap is not None and held.millis(name) + millis > cap:
                    return False
        return True

    def record(self, reserved_role: str, role: str, unit: ResourceVector) -> None:
        for limited in self._between(reserved_role, role):
            if limited in self.held:
                self.held[limited] = self.held[limited] + unit


def _refuses(fw: FrameworkRecord, agent: AgentRecord, state: MasterState, now: float) -> bool:
    if fw.filters.get(agent.id, 0.0) > now:
        return True
    return agent.id in state.gpu_agents and not fw.gpu_aware


def _serve_reservation(
    state: MasterState,
    agent: AgentRecord,
    role: str,
    candidates: list[FrameworkRecord],
    limits: _Limits | None,
    got: dict[str, tuple[dict[str, ResourceVector], int]],
    now: float,
) -> None:
    """Progressive filling of ``agent``'s free reservation of ``role`` among ``candidates``
    (the frameworks of the role's subtree)."""
    pool = agent.reserved_free[role]
    fairness, total = state.fairness, state.total
    heap = [
        (fairness.key(fw.allocated, total, fw.weight, fw.demand), fw.times_chosen, fw.id)
        for fw in candidates
        if not _refuses(fw, agent, state, now)
    ]
    heapify(heap)
    frameworks = state.frameworks
    while heap and pool:
        _, _, framework_id = heappop(heap)
        fw = frameworks[framework_id]
        if fw.demand is None:
            unit = pool
            tasks = 0
            if not state.config.allocatable(unit):
                continue
        else:
            if fw.live_tasks + fw.offered_tasks >= fw.wanted:
                continue
            unit = fairness.footprint(fw.demand)
            if not unit.fits_in(pool):
                continue
            tasks = 1
        if limits is not None and not limits.admits(role, fw.role, unit):
            continue
        if limits is not None:
            limits.record(role, fw.role, unit)
        pool = pool - unit
        fw.allocated = fw.allocated + unit
        fw.offered_tasks += tasks
        fw.times_chosen += 1
        parts, count = got.get(fw.id, ({}, 0))
        add_part(parts, role, unit)
        got[fw.id] = (parts, count + tasks)
        if tasks:
            key = fairness.key(fw.allocated, total, fw.weight, fw.demand)
            heappush(heap, (key, fw.times_chosen, fw.id))
    agent.reserved_free[role] = pool


def run(state: MasterState, now: float) -> list[Message]:
    """Offer every active agent's free reservations to their roles' frameworks; the offers
    made, one message per framework (``handle_allocate`` merges them with the ordinary run's)."""
    candidates = [state.frameworks[fid] for fid in state.sorter.ordered()]
    if not candidates:
        return []
    limits = _Limits(state) if any(q.limit is not None for q in state.quotas.values()) else None
    made: dict[str, list[Offer]] = {}
    subtree: dict[str, list[FrameworkRecord]] = {}  # per reserved role, once per run
    for agent_id in sorted(state.reserved_agents):
        agent = state.agents[agent_id]
        if not agent.active:
            continue
        got: dict[str, tuple[dict[str, ResourceVector], int]] = {}
        for role in sorted(agent.reserved_free, key=lambda r: (-r.count("/"), r)):
            if not agent.reserved_free[role]:
                continue
            within = subtree.get(role)
            if within is None:
                within = subtree[role] = [fw for fw in candidates if is_within(fw.role, role)]
            if within:
                _serve_reservation(state, agent, role, within, limits, got, now)
        for framework_id, (parts, tasks) in got.items():
            resources = sum(parts.values(), EMPTY)
            offer = Offer(
                state.new_offer_id(),
                framework_id,
                agent.id,
                agent.hostname,
                resources,
                tasks,
                agent.attributes,
                now,
                tuple(sorted(parts.items())),
            )
            state.offers[offer.offer_id] = offer
            agent.offer_ids.add(offer.offer_id)
            state.frameworks[framework_id].offer_ids.add(offer.offer_id)
            made.setdefault(framework_id, []).append(offer)
    for framework_id in made:
        state.sorter.update(framework_id)
    return [SendOffers(fid, tuple(offers)) for fid, offers in made.items()]


def merged(first: list[Message], then: list[Message]) -> list[Message]:
    """The offers of both stages, one ``SendOffers`` per framework (reserved offers first)."""
    offers: dict[str, list[Offer]] = {}
    others: list[Message] = []
    for message in (*first, *then):
        if isinstance(message, SendOffers):
            offers.setdefault(message.framework_id, []).extend(message.offers)
        else:
            others.append(message)
    return others + [SendOffers(fid, tuple(batch)) for fid, batch in offers.items()]
