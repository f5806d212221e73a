"""The rebalancer's decisions: which preemptible tasks to kill so a stuck cluster moves to DRFH.

The fit-aware choice (``master.core.fit``) steers resources as tasks end; long-running tasks
never end, and a framework that arrives after others took everything never gets a turn. Then
only preemption helps (Mesos's revocable resources, YARN's Fair Scheduler preempting below fair
share). ``Rebalancer.check`` looks at the live cluster (``ClusterView``), compares it with the
target, and says which tasks to kill now; the runtime kills them with a grace period and the
allocator hands the freed resources out as usual.

**Target**: ``master.core.target.tasks_target``, the calculator's tasks mode: the whole-task
allocation the core itself makes from a clean start (DRFH with Best-Fit, DRFH §V-B; over the
role tree with the roles' weights and quotas, H-DRF by default) for the declared demands, with
the tasks that cannot move (not preemptible, or not of the framework's declared shape) pinned
where they run and coarse frameworks' holdings left out. Agents are compared by kind
(capacities that are multiples of one another are one kind), so the target says "f runs 10
tasks on agents like s1", not which of several such agents.

**Gap**: ``max_i max(0, T_i - 1 - x_i) / T_i`` over the frameworks with a declared shape (``T_i``
target tasks, ``x_i`` live tasks): the largest fraction of its target a framework misses beyond
one task (tasks-mode DRF guarantees nothing tighter, ``docs/fairness-guarantees.md``); for a
framework whose role is short of its quota guarantee, beyond no task (a guarantee is met whole,
and such a framework is a beneficiary one task below its target).

**A move** gives one *beneficiary* room: ``i`` with a declared shape, at least two tasks below
its target, wanting more, and fitting on no agent now; an agent ``l`` of a kind where ``i`` runs
fewer tasks than the target puts there; the fewest *victims* on ``l`` (preemptible tasks of
other frameworks that run more tasks on ``l``'s kind than the target puts there, richest
framework first) whose end lets one task of ``i`` fit. Before a move is taken it is *replayed*
on the core itself (``_replay``: a ``MasterState`` with the view's tasks less the victims, one
allocation run with the live configuration and the live tie-break between equal keys, each
framework's ``times_chosen``, offers accepted): it is kept only if ``i`` then
runs more tasks on that kind and the distance to the target (``sum |tasks - target|`` per
framework and kind) shrinks, so a victim that would be served again first, or a third framework
taking the room, rules the move out. Beneficiaries go most deprived first; each kept move's
replayed cluster is where the next move is looked for, up to ``max_kills`` victims; the replay
of a move is of every kill kept so far plus its victims, from the live view, and every victim
must still be in excess in the live view after the kills before it.

**Quotas** (YuniKorn's preemption laws as the model): the target serves guarantees
first and within limits (the core's own quota stages), so a role below its guarantee with unmet
demand is a beneficiary and roles above theirs hold the excess victims; and a move is refused
when it would leave a victim's guaranteed role (or a guaranteed ancestor) holding less than its
guarantee of a resource the victims held (``_keeps_guarantees``): reclaim never takes a role
below its own guarantee. Victims are taken richest framework first, as without quotas.

**Never thrash**: hysteresis (act only after the gap exceeded ``threshold`` on ``patience``
consecutive checks; keep acting until it falls to ``release``); a rate bound (at most
``max_kills`` per check, whole moves only; ``cooldown`` checks without kills after a round, for
the grace period and the allocation to happen); and no move back: a task is only ever killed
where its framework runs more than the target puts on that kind, so the rebalancer never takes
a framework away from where the target wants it. Non-preemptible tasks are never killed.

Pure: no clock, no I/O; ``check`` is a deterministic function of the views seen so far (agents,
frameworks and tasks are ordered by id).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction

from fairshare.resources import ResourceVector
from fairshare.roles import is_within
from fairshare.task_states import TaskState

from master.core.config import CoreConfig
from master.core.fairness import make_fairness_policy
from master.core.fit import Direction, direction, exact_share
from master.core.messages import RunningTask, SendOffers, TaskLaunch
from master.core.quota import Quota
from master.core.state import MasterState
from master.core.target import PinnedTask, TargetFramework, tasks_target

__all__ = [
    "ClusterView",
    "FrameworkDemand",
    "LiveTask",
    "RawView",
    "RebalanceConfig",
    "RebalanceDecision",
    "Rebalancer",
    "gap_of",
    "plan_kills",
    "raw_view_of",
    "view_of",
]

EMPTY = ResourceVector()
_REPLAYED = "replayed-"  # task ids of the tasks a replay launches
Placement = dict[str, dict[str, int]]  # framework id -> agent id -> tasks


@dataclass(frozen=True, slots=True)
class LiveTask:
    """A running task and whether its framework declared it preemptible."""

    framework_id: str
    task_id: str
    agent_id: str
    resources: ResourceVector
    preemptible: bool


@dataclass(frozen=True, slots=True)
class FrameworkDemand:
    """A framework's declared task shape (``None``: coarse offers), tasks wanted, weight, and
    its role (the target walks the same role tree as the allocator); ``times_chosen``, the
    allocator's count of units given to it so far (``FrameworkRecord.times_chosen``): the
    allocator breaks ties between equal fairness keys by it, so a replay that did not carry it
    could give freed room to another framework than the live allocator does."""

    id: str
    shape: ResourceVector | None
    wanted: int
    weight: float = 1.0
    role: str = "*"
    times_chosen: int = 0


@dataclass(frozen=True, slots=True)
class ClusterView:
    """What the rebalancer sees: the active agents' capacities, the frameworks, the tasks,
    and the roles' operator weights."""

    agents: tuple[tuple[str, ResourceVector], ...]
    frameworks: tuple[FrameworkDemand, ...]
    tasks: tuple[LiveTask, ...]
    role_weights: tuple[tuple[str, float], ...] = ()
    quotas: tuple[tuple[str, Quota], ...] = ()


@dataclass(frozen=True, slots=True)
class RebalanceConfig:
    """When and how much the rebalancer acts (see the module docstring)."""

    threshold: Fraction = Fraction(1, 10)
    release: Fraction = Fraction(1, 20)
    patience: int = 3
    max_kills: int = 4
    cooldown: int = 2

    def __post_init__(self) -> None:
        if not 0 <= self.release <= self.threshold < 1:
            raise ValueError("rebalance: need 0 <= release <= threshold < 1")
        if self.patience < 1 or self.max_kills < 1 or self.cooldown < 0:
            raise ValueError("rebalance: need patience >= 1, max_kills >= 1, cooldown >= 0")


@dataclass(frozen=True, slots=True)
class RebalanceDecision:
    """One check's outcome: the tasks to kill now (maybe none) and why."""

    kills: tuple[LiveTask, ...]
    gap: Fraction
    phase: str  # "idle", "waiting", "acting" or "cooling"
    streak: int  # consecutive checks with the gap above the threshold
    target: Placement = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RawView:
    """What ``view_of`` reads of a ``MasterState``, as it lies: cheap to take where the state
    lives (the master's event loop); ``ordered()`` (filtering, sorting, building the view: most
    of the cost) may then run anywhere, since nothing in it refers to the live state."""

    agents: list[tuple[str, ResourceVector]]
    frameworks: list[FrameworkDemand]  # the active ones
    tasks: list[tuple[str, str, str, ResourceVector, bool]]  # framework, task, agent, ..
    role_weights: list[tuple[str, float]] = field(default_factory=list)
    quotas: list[tuple[str, Quota]] = field(default_factory=list)

    def ordered(self) -> ClusterView:
        """The ``ClusterView``: agents, frameworks and tasks by id, tasks of active agents and
        frameworks only."""
        agents = tuple(sorted(self.agents))
        active = {agent_id for agent_id, _ in agents}
        frameworks = tuple(sorted(self.frameworks, key=lambda fw: fw.id))
        known = {fw.id for fw in frameworks}
        tasks = tuple(
            LiveTask(*task)
            for task in sorted(self.tasks, key=lambda t: (t[0], t[1]))
            if task[2] in active and task[0] in known
        )
        return ClusterView(
            agents,
            frameworks,
            tasks,
            tuple(sorted(self.role_weights)),
            tuple(sorted(self.quotas, key=lambda item: item[0])),
        )


def raw_view_of(
    state: MasterState,
    preemptible: Callable[[str, str], bool] | None = None,
    running_only: bool = False,
) -> RawView:
    """The ``RawView`` of a ``MasterState`` (see ``view_of``): one pass over its agents,
    frameworks and tasks, nothing sorted. ``running_only``: a task that is not RUNNING (still
    starting, or being killed) is listed as not preemptible. A task that uses reserved
    resources is listed as not preemptible either: killing it would free them for its own
    role's subtree only (``master.core.reservations``), which the target does not model."""
    records = state.tasks
    if preemptible is not None:
        flags = [preemptible(*key) for key in records]
    else:
        flags = [task.preemptible for task in records.values()]
    if running_only:
        running = TaskState.RUNNING
        tasks = records.values()
        flags = [f and task.state is running for f, task in zip(flags, tasks, strict=True)]
    if state.reserved_agents:  # a task on reserved resources frees them for its role only
        flags = [f and not task.reserved for f, task in zip(flags, records.values(), strict=True)]
    return RawView(
        [(agent.id, agent.total) for agent in state.agent_list],
        [
            FrameworkDemand(fw.id, fw.demand, fw.wanted, fw.weight, fw.role, fw.times_chosen)
            for fw in state.frameworks.values()
            if fw.active
        ],
        [
            (task.framework_id, task.id, task.agent_id, task.resources, flag)
            for task, flag in zip(records.values(), flags, strict=True)
        ],
        list(state.role_weights.items()),
        list(state.quotas.items()),
    )


def view_of(
    state: MasterState, preemptible: Callable[[str, str], bool] | None = None
) -> ClusterView:
    """The view of a ``MasterState``: its active agents, its active frameworks with their
    demands, and the live tasks on active agents; ``preemptible(framework_id, task_id)`` says
    which tasks their frameworks declared preemptible (``None``: each task's own
    ``TaskRecord.preemptible``, what its ``TaskInfo`` said)."""
    return raw_view_of(state, preemptible).ordered()


def _target_inputs(
    view: ClusterView,
) -> tuple[list[tuple[str, ResourceVector]], list[TargetFramework], list[PinnedTask]]:
    """Agents (less coarse frameworks' tasks), declared frameworks and pinned tasks, by id."""
    declared = {fw.id: fw for fw in view.frameworks if fw.shape is not None}
    coarse: dict[str, ResourceVector] = {}
    pinned = []
    for task in sorted(view.tasks, key=lambda t: (t.agent_id, t.framework_id, t.task_id)):
        fw = declared.get(task.framework_id)
        if fw is None:
            coarse[task.agent_id] = coarse.get(task.agent_id, EMPTY) + task.resources
        elif not task.preemptible or task.resources != fw.shape:
            pinned.append(PinnedTask(task.framework_id, task.agent_id, task.resources))
    agents = [
        (agent_id, capacity.saturating_sub(coarse.get(agent_id, EMPTY)))
        for agent_id, capacity in sorted(view.agents)
    ]
    frameworks = [
        TargetFramework(fw.id, fw.shape, fw.wanted, fw.weight, role=fw.role)
        for fw in sorted(declared.values(), key=lambda f: f.id)
        if fw.shape is not None
    ]
    return [(a, c) for a, c in agents if c], frameworks, pinned


def _live_counts(view: ClusterView) -> Counter[str]:
    return Counter(task.framework_id for task in view.tasks)


def gap_of(view: ClusterView, target: Placement) -> Fraction:
    """The largest fraction of its target tasks a framework misses beyond one task (beyond
    none for a framework whose role is short of its guarantee: a guarantee is met whole)."""
    live = _live_counts(view)
    short = _short_of_guarantee(view)
    worst = Fraction(0)
    for framework_id, per_agent in target.items():
        wanted = sum(per_agent.values())
        if wanted:
            tolerance = 0 if framework_id in short else 1
            missed = max(0, wanted - tolerance - live[framework_id])
            worst = max(worst, Fraction(missed, wanted))
    return worst


def _held_by_role(view: ClusterView, gone: Sequence[LiveTask] = ()) -> dict[str, ResourceVector]:
    """What each role's own frameworks' live tasks hold, less the tasks ``gone``."""
    role_of = {fw.id: fw.role for fw in view.frameworks}
    ended = {(task.framework_id, task.task_id) for task in gone}
    held: dict[str, ResourceVector] = {}
    for task in view.tasks:
        if (task.framework_id, task.task_id) not in ended:
            role = role_of.get(task.framework_id, "*")
            held[role] = held.get(role, EMPTY) + task.resources
    return held


def _subtree(held: dict[str, ResourceVector], owner: str) -> ResourceVector:
    """What ``owner`` and the roles below it hold."""
    return sum((r for role, r in held.items() if is_within(role, owner)), EMPTY)


def _short_of_guarantee(view: ClusterView) -> frozenset[str]:
    """Frameworks with a declared shape whose role, or a guaranteed role above it, holds less
    than its guarantee of a resource their tasks use."""
    if not any(quota.guarantee for _, quota in view.quotas):
        return frozenset()
    held = _held_by_role(view)
    short: set[str] = set()
    for owner, quota in view.quotas:
        subtree = _subtree(held, owner)
        missing = {n for n, m in quota.guarantee.millis_items() if subtree.millis(n) < m}
        for fw in view.frameworks:
            if fw.shape is not None and is_within(fw.role, owner) and missing & fw.shape.names():
                short.add(fw.id)
    return frozenset(short)


def _replay(
    view: ClusterView, gone: frozenset[tuple[str, str]], config: CoreConfig, generation: int
) -> ClusterView:
    """The view after the tasks ``gone`` (framework id, task id) ended and one allocation run
    of the core: frameworks with a declared shape accept their offers whole (the new tasks,
    named after ``generation``, are listed as not preemptible: they do not run yet, so nothing
    kills them in this check), coarse offers are declined. This is the very allocator deciding
    who gets the freed resources."""
    state = MasterState(replace(config, validate=False))
    for role, role_weight in view.role_weights:
        state.handle_set_weight(role, role_weight, 0.0)
    state.quotas = dict(view.quotas)
    for fw in view.frameworks:
        state.handle_add_framework(fw.id, 0.0, role=fw.role, weight=fw.weight)
        # the live allocator's tie-break between equal keys: fewer units chosen so far first
        state.frameworks[fw.id].times_chosen = fw.times_chosen
        state.sorter.update(fw.id)
        if fw.shape is not None:
            state.handle_update_demand(fw.id, fw.shape, fw.wanted, 0.0)
    flags = {(task.framework_id, task.task_id): task.preemptible for task in view.tasks}
    running: dict[str, list[RunningTask]] = {agent_id: [] for agent_id, _ in view.agents}
    for task in view.tasks:
        if (task.framework_id, task.task_id) not in gone:
            running[task.agent_id].append(
                RunningTask(task.framework_id, task.task_id, "", task.resources, TaskState.RUNNING)
            )
    for agent_id, capacity in view.agents:
        state.handle_add_agent(agent_id, capacity, 0.0, running=running[agent_id])
    for message in state.handle_allocate(0.0):
        if not isinstance(message, SendOffers):
            continue
        record = state.frameworks[message.framework_id]
        for offer in message.offers:
            if record.demand is None:
                state.handle_decline(record.id, [offer.offer_id], 0.0, refuse_seconds=0.0)
                continue
            launches = [
                TaskLaunch(f"{_REPLAYED}{generation}-{offer.offer_id}-{n}", "", record.demand)
                for n in range(offer.fair_tasks)
            ]
            state.handle_accept(record.id, [offer.offer_id], launches, 0.0)
    return view_of(state, lambda framework_id, task_id: flags.get((framework_id, task_id), False))


class _Standing:
    """How a view stands against the target: tasks per framework and agent kind."""

    def __init__(self, view: ClusterView, target: Placement) -> None:
        self.view = view
        self.capacity = dict(view.agents)
        self.kind = {agent_id: direction(c) for agent_id, c in view.agents}
        self.total = sum(self.capacity.values(), EMPTY)
        self.frameworks = {fw.id: fw for fw in view.frameworks}
        self.free = dict(self.capacity)
        self.held: dict[str, ResourceVector] = dict.fromkeys(self.frameworks, EMPTY)
        self.count: Counter[str] = Counter()
        self.on_kind: Counter[tuple[str, Direction]] = Counter()
        self.preemptible: dict[str, list[LiveTask]] = {agent_id: [] for agent_id in self.kind}
        for task in sorted(view.tasks, key=lambda t: t.task_id):
            self.free[task.agent_id] = self.free[task.agent_id] - task.resources
            self.held[task.framework_id] = self.held[task.framework_id] + task.resources
            self.count[task.framework_id] += 1
            self.on_kind[(task.framework_id, self.kind[task.agent_id])] += 1
            if task.preemptible and self.frameworks[task.framework_id].shape is not None:
                self.preemptible[task.agent_id].append(task)
        self.target: Counter[tuple[str, Direction]] = Counter()
        for framework_id, per_agent in target.items():
            for agent_id, tasks in per_agent.items():
                self.target[(framework_id, self.kind[agent_id])] += tasks
        self.target_tasks = {fid: sum(per.values()) for fid, per in target.items()}
        self.short = _short_of_guarantee(view)  # frameworks of roles short of a guarantee

    def distance(self) -> int:
        """``sum_{j, kind} |tasks of j on the kind - the target's|`` (declared frameworks)."""
        keys = set(self.target) | {k for k in self.on_kind if k[0] in self.target_tasks}
        return sum(abs(self.on_kind[k] - self.target[k]) for k in keys)

    def key(self, framework_id: str) -> Fraction:
        """Exact weighted dominant share of what the framework holds."""
        fw = self.frameworks[framework_id]
        share = exact_share(self.held[framework_id], EMPTY, 0, self.total, fw.weight)
        return share if share is not None else Fraction(10**9)

    def excess(self, framework_id: str, kind: Direction) -> int:
        return self.on_kind[(framework_id, kind)] - self.target[(framework_id, kind)]

    def beneficiaries(self) -> list[FrameworkDemand]:
        """Frameworks two or more tasks below target (one, in a role short of its guarantee)
        that want more and fit nowhere, most deprived first."""
        out = []
        for fw in self.frameworks.values():
            shape = fw.shape
            if shape is None or self.count[fw.id] >= fw.wanted:
                continue
            slack = 1 if fw.id in self.short else 2
            if self.count[fw.id] > self.target_tasks.get(fw.id, 0) - slack:
                continue
            if not any(shape.fits_in(free) for free in self.free.values()):
                out.append(fw)
        return sorted(out, key=lambda fw: (self.key(fw.id), fw.id))

    def victims(self, fw: FrameworkDemand, agent_id: str) -> list[LiveTask] | None:
        """The fewest preemptible tasks on ``agent_id``, of frameworks running more there than
        the target puts on its kind (richest framework first), whose end lets one task of
        ``fw`` fit; ``None`` when there is no such set."""
        assert fw.shape is not None
        kind = self.kind[agent_id]
        order = sorted(
            (t for t in self.preemptible[agent_id] if t.framework_id != fw.id),
            key=lambda t: (-self.key(t.framework_id), t.framework_id, t.task_id),
        )
        chosen: list[LiveTask] = []
        removed: Counter[str] = Counter()
        room = self.free[agent_id]
        for task in order:
            if fw.shape.fits_in(room):
                break
            if self.excess(task.framework_id, kind) - removed[task.framework_id] <= 0:
                continue
            chosen.append(task)
            removed[task.framework_id] += 1
            room = room + task.resources
        return chosen if chosen and fw.shape.fits_in(room) else None

    def moves(self) -> Iterator[tuple[FrameworkDemand, str, list[LiveTask]]]:
        """Candidate moves: beneficiaries most deprived first; for each, the agents of kinds
        where the target puts more of it, fewest victims first (then agent id)."""
        for fw in self.beneficiaries():
            options = []
            for agent_id in sorted(self.kind):
                if self.excess(fw.id, self.kind[agent_id]) < 0:
                    victims = self.victims(fw, agent_id)
                    if victims is not None:
                        options.append((len(victims), agent_id, victims))
            for _, agent_id, victims in sorted(options, key=lambda o: (o[0], o[1])):
                yield fw, agent_id, victims


def _keeps_guarantees(view: ClusterView, victims: list[LiveTask]) -> bool:
    """After ``victims`` end, does every guaranteed role (``Quota.guarantee``) whose subtree
    loses one still hold its guarantee of each resource they held? (The law: reclaim never
    takes a victim's role below its own guarantee.)"""
    before = _held_by_role(view)
    after = _held_by_role(view, victims)
    for owner, quota in view.quotas:
        if not quota.guarantee:
            continue
        held, kept = _subtree(before, owner), _subtree(after, owner)
        for name, millis in quota.guarantee.millis_items():
            if kept.millis(name) < held.millis(name) and kept.millis(name) < millis:
                return False
    return True


def plan_kills(
    view: ClusterView,
    target: Placement,
    budget: int,
    config: CoreConfig,
    tries: int = 24,
    tries_each: int = 3,
) -> list[LiveTask]:
    """Whole moves that the allocator confirms, while their victims fit in ``budget``.

    A candidate move is replayed (``_replay``) and kept only if the beneficiary then runs more
    tasks on that agent's kind and the distance to the target shrinks. The replay of a move is
    always of every kill kept so far plus its victims, from the live view, with one allocation
    run: what will really happen, since all of a check's kills end together and then the
    allocator runs once. Every victim is checked against the live view too: its framework runs
    more tasks on the victim's kind than the target puts there, counting the kills kept before
    it (a later move never takes a task that the live cluster needs where it is). At most
    ``tries`` replays per call and ``tries_each`` per beneficiary between kept moves, so that one
    beneficiary whose moves all fail does not starve the others."""
    generation = 0
    live = _Standing(_replay(view, frozenset(), config, generation), target)
    standing = live
    kills: list[LiveTask] = []
    killed: Counter[tuple[str, Direction]] = Counter()  # live tasks taken per framework and kind
    while tries > 0:
        tried: Counter[str] = Counter()
        for fw, agent_id, victims in standing.moves():
            if len(kills) + len(victims) > budget or tried[fw.id] >= tries_each:
                continue
            taken = killed.copy()
            for task in victims:
                taken[(task.framework_id, live.kind[task.agent_id])] += 1
            if any(live.excess(fid, kind) - count < 0 for (fid, kind), count in taken.items()):
                continue
            if view.quotas and not _keeps_guarantees(view, [*kills, *victims]):
                continue
            if tries <= 0:
                return kills
            tries -= 1
            tried[fw.id] += 1
            generation += 1
            gone = frozenset((task.framework_id, task.task_id) for task in [*kills, *victims])
            after = _Standing(_replay(view, gone, config, generation), target)
            kind = standing.kind[agent_id]
            gained = after.on_kind[(fw.id, kind)] > standing.on_kind[(fw.id, kind)]
            if gained and after.distance() < standing.distance():
                kills.extend(victims)
                killed = taken
                standing = after
                break
        else:
            return kills
    return kills


class Rebalancer:
    """Checks the live cluster against the target and decides kills, with hysteresis."""

    def __init__(
        self, config: RebalanceConfig | None = None, core: CoreConfig | None = None
    ) -> None:
        self.config = config or RebalanceConfig()
        self.core = core or CoreConfig()
        if not make_fairness_policy(self.core.policy).dominant_shares:
            raise ValueError(
                "rebalance: the target is DRFH's; it needs a policy that equalizes dominant"
                f" shares (drf), not {self.core.policy!r}"
            )
        self.streak = 0
        self.acting = False
        self.cooling = 0
        self._cached: tuple[object, Placement] | None = None
        self._fruitless: ClusterView | None = None  # the last view a plan found nothing in

    def target(self, view: ClusterView) -> Placement:
        """The calculator's tasks-mode allocation for the view (cached while inputs stay)."""
        agents, frameworks, pinned = _target_inputs(view)
        key = (tuple(agents), tuple(frameworks), tuple(pinned), view.role_weights, view.quotas)
        if self._cached is None or self._cached[0] != key:
            target = tasks_target(
                agents, frameworks, self.core, pinned, dict(view.role_weights), dict(view.quotas)
            )
            self._cached = (key, target)
        return self._cached[1]

    def check(self, view: ClusterView) -> RebalanceDecision:
        """One periodic check: the gap, the phase, and the tasks to kill now."""
        config = self.config
        target = self.target(view)
        gap = gap_of(view, target)
        self.streak = self.streak + 1 if gap > config.threshold else 0
        kills: list[LiveTask] = []
        if self.cooling:
            self.cooling -= 1
            phase = "cooling"
        elif self.acting and gap <= config.release:
            self.acting = False
            phase = "idle"
        elif self.acting or self.streak >= config.patience:
            self.acting = True
            phase = "acting"
            if view != self._fruitless:  # a plan is a function of the view: same view, same plan
                kills = plan_kills(view, target, config.max_kills, self.core)
                self._fruitless = None if kills else view
        else:
            phase = "waiting" if self.streak else "idle"
        if kills:
            self.cooling = config.cooldown
        return RebalanceDecision(tuple(kills), gap, phase, self.streak, target)
