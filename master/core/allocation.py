"""One allocation run: who is offered what, in fairness order (docs/architecture.md §2).

The run is progressive filling (Ghodsi et al., Algorithm 1; on many agents DRFH §V-B): take the
framework with the lowest fairness key, give it its next unit, update its key, repeat until no
framework can take another unit. A framework's unit depends on what it declared:

- a declared task shape with a wanted count (demand-aware offers, our step beyond Mesos): one
  task's worth of resources, ``fairness.footprint(shape)``, on the agent chosen by the placement
  policy, while the framework has fewer tasks running or offered than it wants. Units placed on
  the same agent in one run become one offer sized to that many tasks (``fair_tasks``), so the
  live cluster converges to the DRF/DRFH allocation even when frameworks accept greedily.
- nothing declared: Mesos-style coarse offers, all free resources of the next agent that the
  framework has not refused, agents taken round-robin from a start that moves between runs.

Fit-aware choice (``master.core.fit``, DRFH's Best-Fit over framework-agent pairs): under
``drf`` with ``best-fit`` placement on heterogeneous agents, when the most deprived framework's
chosen agent is clearly not its kind of agent, a framework within one task of it that fits that
agent's free resources better (eq. 9) is served there first; the most deprived one stays in the
run. On one agent, or agents that are multiples of one vector, this never happens.

Over the role tree (``--hierarchy hdrf`` or ``naive``, ``master.core.hierarchy``), the framework
served at each step is the most deprived of the leaf group the tree's walk reaches
(``master.core.tree_allocation``); each placement updates the shares along that group's path,
and a group whose frameworks are all parked is blocked for the rest of the run. The fit-aware
choice then looks for claimants among the chosen framework's own group (the tree decided whose
turn it is; a sibling within one task of it may take the agent it fits better). With every
framework in one role the tree would always reach that one group, so the flat loop runs.

With quotas (``master.core.quota``) a run has two stages, as Mesos 1.9's allocator: first
only the frameworks of roles below their guarantee are served, each unit counted toward it,
until no such role can take more; then everyone, within the limits of their roles and
ancestors (a unit that would pass a limit is not given; a coarse offer is cut to fit), and
leaving free the headroom that the roles' unmet guarantees need. Without quotas there is one
stage and nothing is checked.

A framework that cannot take a unit (wants nothing more, nothing fits, every agent refused) is
parked for the rest of the run (of the stage). Within a run free resources only shrink, so a
parked framework could not be served later in the same run either; this is what makes the run
terminate and what makes the result Pareto-efficient (no framework below its wanted count has a
task that fits).

Invariants kept: resources move from ``agent.free`` to offers and ``framework.allocated`` together;
the sorter gets back every entry it lent, keyed by the frameworks' new allocations. Within
the run the entries live in a binary heap (the DRF paper's O(log n) per decision, §4.2).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Mapping
from fractions import Fraction
from heapq import heapify, heappop, heappush
from typing import TYPE_CHECKING

from fairshare.resources import ResourceVector

from master.core.fairness import KeyStepper
from master.core.fit import EqNine, Fit, exact_share, first_resource, fits_better
from master.core.messages import Message, SendOffers
from master.core.placement import PlacementQuery
from master.core.quota import QuotaLedger
from master.core.records import AgentList, AgentRecord, FrameworkRecord, Offer
from master.core.sorter import SorterEntry

if TYPE_CHECKING:
    from master.core.hierarchy import TreeRun
    from master.core.state import MasterState

__all__ = ["Run", "run", "stages", "used_of"]

_NOTHING_REFUSED: frozenset[str] = frozenset()
EMPTY = ResourceVector()
_BAND = 1e-9  # relative: float keys this close to the window's bound are compared exactly


class _CoarseCursor:
    """Round-robin over the agents with free resources, for coarse (whole-agent) offers.

    It walks only the agents that had something free when it was first asked (the list's
    ``with_free`` index), from where the previous run stopped, so a run that hands out a few
    agents costs O(those agents) beyond one sort of that index; a run that makes no coarse
    offer (only demand-aware frameworks, or none) never builds the order, so an allocation run
    triggered by each of thousands of registrations does not cost O(cluster) each.
    """

    __slots__ = ("_order", "agents", "allocatable", "pos", "start")

    def __init__(
        self,
        agents: AgentList,
        start: int,
        allocatable: Callable[[ResourceVector], bool] = bool,
    ) -> None:
        self.agents = agents
        self.allocatable = allocatable  # Mesos's minimum allocatable resources (CoreConfig)
        self.start = start
        self.pos = 0  # order[:pos] have nothing free any more (this run)
        self._order: list[int] | None = None

    @property
    def order(self) -> list[int]:
        """The indices of the agents with something free, from ``start`` round the list
        (taken when first read: free resources only shrink within a run)."""
        order = self._order
        if order is None:
            with_free = sorted(self.agents.free_columns.with_free)
            split = bisect_left(with_free, self.start)
            order = self._order = with_free[split:] + with_free[:split]
        return order

    def next_for(self, refused: frozenset[str] | set[str]) -> AgentRecord | None:
        """The next agent with allocatable free resources that the framework has not refused
        (free resources only shrink within a run: an agent whose free part is not allocatable
        stays so)."""
        agents, order, allocatable = self.agents, self.order, self.allocatable
        pos = self.pos
        while pos < len(order) and not allocatable(agents[order[pos]].free):
            pos += 1
        self.pos = pos
        for offset in range(pos, len(order)):
            agent = agents[order[offset]]
            if agent.id not in refused and allocatable(agent.free):
                return agent
        return None

    def next_start(self) -> int:
        """Where the next run starts: right after the agents this run handed out."""
        if self.pos == 0 or not self.agents:
            return self.start
        return (self.order[self.pos - 1] + 1) % len(self.agents)


def _refusals(fw: FrameworkRecord, now: float, gpu_agents: set[str]) -> frozenset[str] | set[str]:
    """Agents not to offer ``fw``: those its unexpired decline filters name, and the agents
    with GPUs unless it is GPU-aware (computed once per framework and run)."""
    refused: frozenset[str] | set[str] = _NOTHING_REFUSED
    if fw.filters:
        refused = {agent_id for agent_id, until in fw.filters.items() if until > now}
    if gpu_agents and not fw.gpu_aware:
        refused = gpu_agents | refused
    return refused


def _record_offer(
    state: MasterState,
    fw: FrameworkRecord,
    agent: AgentRecord,
    resources: ResourceVector,
    fair_tasks: int,
    now: float,
) -> Offer:
    """Register an offer whose resources were already moved out of ``agent.free``."""
    offer = Offer(
        state.new_offer_id(),
        fw.id,
        agent.id,
        agent.hostname,
        resources,
        fair_tasks,
        agent.attributes,
        now,
    )
    offer_id = offer.offer_id
    state.offers[offer_id] = offer
    agent.offer_ids.add(offer_id)
    fw.offer_ids.add(offer_id)
    return offer


class _Demand:
    """A demand-aware framework's state within one run."""

    __slots__ = ("count", "footprint", "misplaced", "placed", "query", "ref", "step")

    def __init__(self, footprint: ResourceVector, query: PlacementQuery) -> None:
        self.footprint = footprint
        self.query = query
        self.misplaced: dict[str, bool] = {}  # agent id -> misplaced there (fit-aware choice)
        self.ref = ""  # eq. 9's reference resource of the footprint, once the choice needs it
        # fairness key after k more footprints, bit for bit; made at the first placement (a
        # framework that places nothing in a run, the common case on a busy cluster, never
        # pays for it)
        self.step: KeyStepper | None = None
        self.placed: dict[str, int] = {}  # agent id -> tasks placed there this run
        self.count = 0  # tasks placed this run, all agents


class Run:
    """The bookkeeping of one run: what each framework got, what can no longer be placed.

    Demand-aware frameworks' ``allocated`` is settled once, in ``finish``; during the run their
    keys come from ``KeyStepper``s, which compute exactly what ``key`` would. Agents' ``free``
    is kept current at every step, since placement reads it.
    """

    def __init__(self, state: MasterState, now: float) -> None:
        self.state = state
        self.now = now
        config = state.config
        self.coarse = _CoarseCursor(
            state.agent_list,
            state.coarse_start,
            config.allocatable if config.min_allocatable else bool,
        )
        self.demands: dict[str, _Demand] = {}
        self.made: dict[str, list[Offer]] = {}
        # Footprints no agent could hold (nobody refused): free resources only shrink within a
        # run, so any footprint covering one of these cannot be placed either.
        self.unplaceable: list[ResourceVector] = []
        self.refusals: dict[str, frozenset[str] | set[str]] = {}
        contested = (
            config.fit_window > 0
            and state.fairness.dominant_shares
            and state.placement.scores_fit
            and state.kind_fits.refresh(state.agent_list, state.largest_agent)
        )
        self.fit_window = config.fit_window if contested else 0
        self.eq9 = EqNine(state.total) if contested else None
        self.tree: TreeRun | None = None  # the role tree's run (hdrf, naive); None when flat
        self.quota: QuotaLedger | None = None  # the roles' quotas, when any is set
        self.guarantees_only = False  # the first stage: roles below their guarantee only

    def refused_by(self, fw: FrameworkRecord) -> frozenset[str] | set[str]:
        """The agents not to offer ``fw`` in this run (computed once per framework)."""
        gpu_agents = self.state.gpu_agents
        if fw.filters or (gpu_agents and not fw.gpu_aware):
            refused = self.refusals.get(fw.id)
            if refused is None:
                refused = self.refusals[fw.id] = _refusals(fw, self.now, gpu_agents)
            return refused
        return _NOTHING_REFUSED

    def serve(self, fw: FrameworkRecord, heap: list[SorterEntry]) -> float | None:
        """Serve ``fw`` one unit (its next task, or the next agent whole); its new key, or
        ``None`` when it can take nothing more in this run (it is parked). ``heap``: the
        frameworks the fit-aware choice may look among (the run's, or the leaf group's)."""
        state = self.state
        if fw.filters or (state.gpu_agents and not fw.gpu_aware):
            refused = self.refused_by(fw)
        else:
            refused = _NOTHING_REFUSED
        shape = fw.demand
        if shape is not None:
            return self.serve_demand(fw, shape, refused, heap)
        if not self.serve_coarse(fw, refused):
            return None
        return state.fairness.key(fw.allocated, state.total, fw.weight, shape)

    def _quota_cut(self, role: str, offered: ResourceVector) -> ResourceVector:
        """A coarse offer cut to the limits (Mesos 1.9: offers are cut to fit), in the
        guarantees stage to what ``role``'s unmet guarantees miss, and after it to what the
        headroom of unmet guarantees leaves."""
        quota = self.quota
        assert quota is not None
        resources = quota.cut(role, offered)
        if self.guarantees_only:
            return quota.cut_to_guarantee(role, resources)
        return quota.cut_headroom(role, resources)

    def serve_coarse(self, fw: FrameworkRecord, refused: frozenset[str] | set[str]) -> bool:
        """Offer the next agent's free resources whole; False when no agent is left."""
        agent = self.coarse.next_for(refused)
        if agent is None:
            return False
        resources = agent.free
        if self.quota is None:
            agent.free = EMPTY
        else:  # the offer may be cut: the agent keeps the rest for the next framework
            resources = self._quota_cut(fw.role, resources)
            if not self.state.config.allocatable(resources):
                return False
            self.quota.record(fw.role, resources)
            agent.free = agent.free - resources
        fw.allocated = fw.allocated + resources
        offer = _record_offer(self.state, fw, agent, resources, 0, self.now)
        self.made.setdefault(fw.id, []).append(offer)
        if self.tree is not None:
            self.tree.served(self.tree.group_of[fw.id], resources)
        return True

    def _demand_of(self, fw: FrameworkRecord, shape: ResourceVector) -> _Demand:
        state = self.state
        footprint = state.fairness.footprint(shape)
        demand = _Demand(footprint, state.placement.prepare(footprint, state.total))
        self.demands[fw.id] = demand
        return demand

    def serve_demand(
        self,
        fw: FrameworkRecord,
        shape: ResourceVector,
        refused: frozenset[str] | set[str],
        heap: list[SorterEntry],
    ) -> float | None:
        """Place one task's footprint and return the new key; None if it wants no more or
        nothing fits. Where the fit-aware choice applies, frameworks of the window that claim
        the chosen agent are served first (``_claim``), each one task, pushed back on ``heap``."""
        if fw.live_tasks + fw.offered_tasks >= fw.wanted:
            return None
        demand = self.demands.get(fw.id) or self._demand_of(fw, shape)
        footprint = demand.footprint
        if self.quota is not None and not self._quota_allows(fw.role, footprint):
            return None
        for hopeless in self.unplaceable:
            if hopeless.fits_in(footprint):
                return None
        chosen = self.state.placement.choose(demand.query, self.state.agent_list, refused)
        if chosen is not None and self.fit_window:
            chosen = self._after_claims(fw, demand, chosen, refused, heap)
        if chosen is None:
            if not refused:
                self.unplaceable.append(footprint)
            return None
        # ``_place`` inlined: this is the allocator's hot path
        chosen.free = chosen.free - footprint
        fw.offered_tasks += 1
        placed = demand.placed
        placed[chosen.id] = placed.get(chosen.id, 0) + 1
        demand.count += 1
        if self.tree is not None:
            self.tree.served(self.tree.group_of[fw.id], footprint)
        if self.quota is not None:
            self.quota.record(fw.role, footprint)
        step = demand.step or self._stepper(fw, demand)
        return step(demand.count)

    def _after_claims(
        self,
        fw: FrameworkRecord,
        demand: _Demand,
        chosen: AgentRecord,
        refused: frozenset[str] | set[str],
        heap: list[SorterEntry],
    ) -> AgentRecord | None:
        """While ``fw`` is misplaced on its chosen agent and a framework of the window claims
        it (``_claim`` serves that one), choose again; the agent ``fw`` gets, or ``None``."""
        while self._misplaced(demand, chosen) and self._claim(fw, demand, chosen, heap):
            again = self.state.placement.choose(demand.query, self.state.agent_list, refused)
            if again is None:
                return None
            chosen = again
        return chosen

    def _place(self, fw: FrameworkRecord, demand: _Demand, chosen: AgentRecord) -> float:
        """Put one footprint of ``fw`` on ``chosen``; its key after that."""
        chosen.free = chosen.free - demand.footprint
        fw.offered_tasks += 1
        placed = demand.placed
        placed[chosen.id] = placed.get(chosen.id, 0) + 1
        demand.count += 1
        if self.tree is not None:
            self.tree.served(self.tree.group_of[fw.id], demand.footprint)
        if self.quota is not None:
            self.quota.record(fw.role, demand.footprint)
        step = demand.step or self._stepper(fw, demand)
        return step(demand.count)

    def _stepper(self, fw: FrameworkRecord, demand: _Demand) -> KeyStepper:
        """``fw``'s key after k more footprints (made once per run; ``fw.allocated`` is
        unchanged during the run, settled in ``finish``)."""
        step = demand.step
        if step is None:
            state = self.state
            step = demand.step = state.fairness.stepper(
                fw.allocated, demand.footprint, state.total, fw.weight, fw.demand
            )
        return step

    def _misplaced(self, demand: _Demand, agent: AgentRecord) -> bool:
        known = demand.misplaced.get(agent.id)
        if known is None:
            known = self.state.kind_fits.misplaced(demand.footprint, agent.total)
            demand.misplaced[agent.id] = known
        return known

    def _claim(
        self, fw: FrameworkRecord, demand: _Demand, agent: AgentRecord, heap: list[SorterEntry]
    ) -> bool:
        """Serve one task on ``agent`` to the window framework that fits it best, if one fits it
        strictly better than ``fw`` (see ``master.core.fit``); True when one was served.

        The window is ``share <= fw's share after one more task``, exactly: the float keys
        decide where they are clearly apart (their rounding is ~1e-16 relative, the margin
        1e-9), ``exact_share`` decides in the band between."""
        float_bound = self._stepper(fw, demand)(demand.count + 1)
        low, high = float_bound * (1.0 - _BAND), float_bound * (1.0 + _BAND)
        exact: list[Fraction | None] = []  # fw's exact bound, once a candidate needs it
        eq9 = self.eq9
        assert eq9 is not None, "claims are looked for only where the fit-aware choice applies"
        ref = self._ref(demand)
        room = agent.free.millis_view()
        own_fit: Fit | None = None
        best: tuple[Fit, SorterEntry, FrameworkRecord, _Demand] | None = None
        popped: list[SorterEntry] = []
        while heap and len(popped) < self.fit_window and heap[0][0] <= high:
            entry = heappop(heap)
            popped.append(entry)
            other = self.state.frameworks[entry[2]]
            other_demand = self._claimant(other, agent, ref)
            if other_demand is None:
                continue
            if entry[0] > low and not self._within(fw, demand, other, other_demand, exact):
                continue
            fit = eq9.fit(other_demand.footprint.millis_view(), ref, room)
            if own_fit is None:
                own_fit = eq9.fit(demand.footprint.millis_view(), ref, room)
            if fits_better(fit, own_fit) and (best is None or fits_better(fit, best[0])):
                best = (fit, entry, other, other_demand)
        for entry in popped:
            if best is None or entry is not best[1]:
                heappush(heap, entry)
        if best is None:
            return False
        _, _, winner, winner_demand = best
        key = self._place(winner, winner_demand, agent)
        winner.times_chosen += 1
        heappush(heap, (key, winner.times_chosen, winner.id))
        return True

    def _ref(self, demand: _Demand) -> str:
        if not demand.ref:
            demand.ref = first_resource(demand.footprint)
        return demand.ref

    def _within(
        self,
        fw: FrameworkRecord,
        demand: _Demand,
        other: FrameworkRecord,
        other_demand: _Demand,
        exact: list[Fraction | None],
    ) -> bool:
        """Exactly: is ``other``'s share at most ``fw``'s after one more task?"""
        total = self.state.total
        if not exact:
            count = demand.count + 1
            exact.append(exact_share(fw.allocated, demand.footprint, count, total, fw.weight))
        bound = exact[0]
        footprint, count = other_demand.footprint, other_demand.count
        share = exact_share(other.allocated, footprint, count, total, other.weight)
        return bound is not None and share is not None and share <= bound

    def _claimant(self, fw: FrameworkRecord, agent: AgentRecord, ref: str) -> _Demand | None:
        """``fw``'s run state if it may claim ``agent``: a declared shape with the reference
        ``ref`` that fits there, more tasks wanted, and ``agent`` not refused."""
        shape = fw.demand
        if shape is None or fw.live_tasks + fw.offered_tasks >= fw.wanted:
            return None
        demand = self.demands.get(fw.id) or self._demand_of(fw, shape)
        footprint = demand.footprint
        if self._ref(demand) != ref or not footprint.fits_in(agent.free):
            return None
        if agent.id in self.refused_by(fw):
            return None
        if self.quota is not None and not self._quota_allows(fw.role, footprint):
            return None
        return demand

    def _quota_allows(self, role: str, unit: ResourceVector) -> bool:
        """May ``role`` get ``unit`` now? Within the limits of it and its ancestors; in the
        guarantees stage only while it is below its guarantee; after it, only if the pool keeps
        the headroom other roles' unmet guarantees need (``master.core.quota``)."""
        quota = self.quota
        assert quota is not None
        if not quota.admits(role, unit):
            return False
        if self.guarantees_only:
            return quota.meets_guarantee(role, unit)
        return quota.leaves_headroom(role, unit)

    def finish(self) -> list[Message]:
        """Turn placements into offers (one per framework and agent) and batch the messages."""
        state = self.state
        state.coarse_start = self.coarse.next_start()
        for framework_id, demand in self.demands.items():
            if not demand.placed:
                continue
            fw = state.frameworks[framework_id]
            offers = self.made.setdefault(framework_id, [])
            footprint = demand.footprint
            for agent_id, count in demand.placed.items():
                agent = state.agents[agent_id]
                resources = footprint * count
                fw.allocated = fw.allocated + resources
                offers.append(_record_offer(state, fw, agent, resources, count, self.now))
        return [SendOffers(fid, tuple(offers)) for fid, offers in self.made.items()]


def run(state: MasterState, now: float) -> list[Message]:
    """Run progressive filling once and return the offers made, one message per framework.

    With quotas set, in two stages as Mesos 1.9 does: first only the roles below their
    guarantee (each up to it), then everyone within the limits, keeping the headroom the
    unmet guarantees need (``master.core.quota``)."""
    heap = state.sorter.take_entries()  # sorted, hence already a binary heap
    frameworks = state.frameworks
    state.placement.begin_run()
    this_run = Run(state, now)
    serve = this_run.serve
    for stage in stages(this_run):
        parked: list[SorterEntry] = []
        while heap:
            entry = heappop(heap)
            fw = frameworks[entry[2]]
            key = serve(fw, heap)
            if key is None:
                parked.append(entry)
                continue
            fw.times_chosen += 1
            heappush(heap, (key, fw.times_chosen, fw.id))
        if stage == "guarantees":
            this_run.guarantees_only = False
            heapify(parked)
            heap = parked
    messages = this_run.finish()
    state.sorter.restore_entries(parked)
    return messages


def stages(
    this_run: Run,
    used: dict[str, int] | None = None,
    idle: Mapping[str, ResourceVector] | None = None,
) -> list[str]:
    """The run's stages: ``guarantees`` first when a role misses part of its guarantee (its
    frameworks only, up to it), then ``all``; sets up the run's quota ledger. ``used`` and
    ``idle`` (the reservations' idle parts), when the run computed them already."""
    state = this_run.state
    if not state.quotas:
        return ["all"]
    if idle is None:
        idle = state.reserved_idle()
    held = dict(idle)  # a reservation counts whole
    for fw in state.frameworks.values():
        if fw.allocated:
            held[fw.role] = held.get(fw.role, EMPTY) + fw.allocated
    if used is None:
        used = used_of(state, idle)
    free = {name: millis - used.get(name, 0) for name, millis in state.total.millis_items()}
    ledger = this_run.quota = QuotaLedger(state.quotas, held, free)
    if not ledger.holding_back:
        return ["all"]
    this_run.guarantees_only = True
    return ["guarantees", "all"]


def used_of(state: MasterState, idle: Mapping[str, ResourceVector] | None = None) -> dict[str, int]:
    """What the pool has that no active agent has free: held by frameworks (offered or used),
    free on a deactivated agent (never offered, so it does not keep a resource unsaturated), or
    reserved and idle (held by its role: ``master.core.reservations``; ``idle`` when the
    caller has it already)."""
    used: dict[str, int] = {}
    for fw in state.frameworks.values():
        for name, millis in fw.allocated.millis_items():
            used[name] = used.get(name, 0) + millis
    for reserved in (state.reserved_idle() if idle is None else idle).values():
        for name, millis in reserved.millis_items():
            used[name] = used.get(name, 0) + millis
    if len(state.agent_list) != len(state.agents):
        for agent in state.agents.values():
            if not agent.active:
                for name, millis in agent.free.millis_items():
                    used[name] = used.get(name, 0) + millis
    return used
