"""Hypothesis strategies and exact helpers for the allocator property tests.

Instances are small and exact: every quantity is a whole number of milli-units (``ResourceVector``
stores milli-units as integers), each resource has its own unit ("scale") so that cpus-like,
memory-like and odd milli quantities all occur, and a pool holds at most ~80 tasks of any shape,
so one allocation run stays cheap. Every ratio the properties compare is computed with
``fractions.Fraction`` from the milli integers, never with floats.

The core is driven exactly as ``fairshare allocate --mode tasks`` drives it: agents, then
frameworks (ids ``f0``, ``f1``, ... so ties break in list order), a declared shape and a wanted
count per framework, then one ``handle_allocate`` call. The offers' ``fair_tasks`` are the
framework's tasks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from fairshare.resources import ResourceVector
from hypothesis import strategies as st

from analysis.fluid.solver import FluidAgent, FluidFramework, solve_fluid
from master.core import CoreConfig, MasterState, SendOffers, TaskLaunch

RESOURCE_NAMES = ("cpus", "mem", "disk", "gpus")
SCALES = (1, 3, 250, 1000, 65_536)  # milli-units per "unit" of a resource (65_536: 64 MiB)
UNLIMITED = 10**9  # "wants everything": far more tasks than any generated pool holds
POOL = "pool"


@dataclass(frozen=True)
class Fw:
    """One framework of an instance: declared task shape, wanted count, weight."""

    id: str
    shape: ResourceVector
    wanted: int = UNLIMITED
    weight: int = 1


@dataclass(frozen=True)
class Instance:
    """Agents (one named ``pool`` for a single pool) and frameworks."""

    agents: tuple[tuple[str, ResourceVector], ...]
    frameworks: tuple[Fw, ...]

    @property
    def total(self) -> ResourceVector:
        return sum((r for _, r in self.agents), ResourceVector())

    @property
    def n(self) -> int:
        return len(self.frameworks)


@dataclass
class Outcome:
    """The result of one allocation run."""

    state: MasterState
    tasks: dict[str, int]  # framework id -> fair_tasks offered
    per_agent: dict[str, dict[str, int]] = field(default_factory=dict)

    def allocation(self, fw: Fw) -> ResourceVector:
        return fw.shape * self.tasks[fw.id]


# -- exact arithmetic --------------------------------------------------------------------------


def task_share(shape: ResourceVector, total: ResourceVector) -> Fraction:
    """The exact dominant share of one task: ``max_r shape_r / total_r``."""
    return max(Fraction(m, total.millis(name)) for name, m in shape.millis_items())


def dominant_share(alloc: ResourceVector, total: ResourceVector) -> Fraction:
    """The exact dominant share of an allocation (0 for nothing)."""
    return max(
        (Fraction(m, total.millis(name)) for name, m in alloc.millis_items()), default=Fraction(0)
    )


def fits_times(shape: ResourceVector, inside: Mapping[str, Fraction | int]) -> Fraction | int:
    """How many tasks of ``shape`` fit in ``inside`` (milli quantities, possibly Fractions):
    ``min_r inside_r / shape_r`` -- a Fraction, not floored."""
    return min(Fraction(inside.get(name, 0)) / m for name, m in shape.millis_items())


def whole_fits(shape: ResourceVector, inside: ResourceVector) -> int:
    """``floor(min_r inside_r / shape_r)``: whole tasks of ``shape`` inside ``inside``."""
    return min(inside.millis(name) // m for name, m in shape.millis_items())


# -- strategies --------------------------------------------------------------------------------


@st.composite
def shapes(draw: st.DrawFn, names: Sequence[str], scales: Mapping[str, int]) -> ResourceVector:
    """A task shape: 1..12 units of each resource of a random non-empty subset of ``names``."""
    mask = draw(st.integers(1, (1 << len(names)) - 1))
    return ResourceVector.from_millis(
        {
            name: draw(st.integers(1, 12)) * scales[name]
            for bit, name in enumerate(names)
            if mask >> bit & 1
        }
    )


@st.composite
def resource_setup(
    draw: st.DrawFn, min_resources: int = 1, max_resources: int = 4
) -> tuple[list[str], dict[str, int]]:
    """Resource names and one scale (milli-units per unit) for each."""
    count = draw(st.integers(min_resources, max_resources))
    names = draw(st.permutations(RESOURCE_NAMES))[:count]
    scales = {name: draw(st.sampled_from(SCALES)) for name in names}
    return list(names), scales


def pool_for(
    draw: st.DrawFn,
    shape_list: Sequence[ResourceVector],
    names: Sequence[str],
    scales: Mapping[str, int],
) -> ResourceVector:
    """A pool holding at least 2 (and about 4..80) tasks of every shape on every resource."""
    millis = {}
    for name in names:
        biggest = max((s.millis(name) for s in shape_list), default=0) // scales[name]
        units = draw(st.integers(max(2 * biggest, 4), max(4 * biggest, 80)))
        millis[name] = units * scales[name] + draw(st.integers(0, scales[name] - 1))
    return ResourceVector.from_millis(millis)


@st.composite
def pool_instances(
    draw: st.DrawFn,
    min_frameworks: int = 2,
    max_frameworks: int = 5,
    min_resources: int = 1,
    max_resources: int = 4,
    finite_wanted: bool = False,
    weighted: bool = False,
) -> Instance:
    """A single pool (one agent) and 2-5 frameworks with declared shapes."""
    names, scales = draw(resource_setup(min_resources, max_resources))
    n = draw(st.integers(min_frameworks, max_frameworks))
    shape_list = [draw(shapes(names, scales)) for _ in range(n)]
    total = pool_for(draw, shape_list, names, scales)
    frameworks = []
    for index, shape in enumerate(shape_list):
        wanted = UNLIMITED
        if finite_wanted and draw(st.booleans()):
            wanted = draw(st.integers(0, 30))
        weight = draw(st.integers(1, 4)) if weighted else 1
        frameworks.append(Fw(f"f{index}", shape, wanted, weight))
    return Instance(((POOL, total),), tuple(frameworks))


@st.composite
def cluster_instances(
    draw: st.DrawFn, min_agents: int = 2, max_agents: int = 6, finite_wanted: bool = True
) -> Instance:
    """Heterogeneous agents (each with a random subset of the resources) and 2-5 frameworks."""
    names, scales = draw(resource_setup(1, 4))
    n = draw(st.integers(2, 5))
    shape_list = [draw(shapes(names, scales)) for _ in range(n)]
    agents = []
    for index in range(draw(st.integers(min_agents, max_agents))):
        mask = draw(st.integers(1, (1 << len(names)) - 1))
        millis = {}
        for name in [name for bit, name in enumerate(names) if mask >> bit & 1]:
            biggest = max(s.millis(name) for s in shape_list) // scales[name]
            units = draw(st.integers(1, max(3 * biggest, 24)))
            millis[name] = units * scales[name] + draw(st.integers(0, scales[name] - 1))
        agents.append((f"a{index}", ResourceVector.from_millis(millis)))
    frameworks = []
    for index, shape in enumerate(shape_list):
        wanted = draw(st.integers(0, 30)) if finite_wanted and draw(st.booleans()) else UNLIMITED
        frameworks.append(Fw(f"f{index}", shape, wanted))
    return Instance(tuple(agents), tuple(frameworks))


# -- running the core --------------------------------------------------------------------------


def allocate(
    instance: Instance, placement: str = "best-fit", seed: int = 0, policy: str = "drf"
) -> Outcome:
    """One allocation run of the real core (validate on) over ``instance``."""
    state = MasterState(
        CoreConfig(
            validate=True,
            policy=policy,
            placement=placement,
            seed=seed,
            sample_size=max(16, len(instance.agents)),
        )
    )
    for agent_id, resources in instance.agents:
        state.handle_add_agent(agent_id, resources, 0.0)
    for fw in instance.frameworks:
        state.handle_add_framework(fw.id, 0.0, weight=float(fw.weight))
        state.handle_update_demand(fw.id, fw.shape, fw.wanted, 0.0)
    outcome = Outcome(state, {fw.id: 0 for fw in instance.frameworks})
    for message in state.handle_allocate(0.0):
        assert isinstance(message, SendOffers)
        per_agent = outcome.per_agent.setdefault(message.framework_id, {})
        for offer in message.offers:
            fw = next(f for f in instance.frameworks if f.id == message.framework_id)
            assert offer.resources == fw.shape * offer.fair_tasks, "offer not sized to its tasks"
            outcome.tasks[message.framework_id] += offer.fair_tasks
            per_agent[offer.agent_id] = per_agent.get(offer.agent_id, 0) + offer.fair_tasks
    return outcome


def solve_fluid_drf(instance: Instance) -> dict[str, Fraction]:
    """Fluid (divisible-task) DRF tasks per framework id, exact."""
    agents = [FluidAgent(agent_id, resources) for agent_id, resources in instance.agents]
    frameworks = [
        FluidFramework(
            fw.id, fw.shape, Fraction(fw.weight), None if fw.wanted >= UNLIMITED else fw.wanted
        )
        for fw in instance.frameworks
    ]
    result = solve_fluid(agents, frameworks, "drf")
    assert result.exact
    return {share.name: Fraction(share.tasks) for share in result.frameworks}


@st.composite
def lies(draw: st.DrawFn, instance: Instance, liar: int = 0) -> ResourceVector:
    """Another shape the framework ``liar`` could declare: each pool resource kept, scaled up or
    down, dropped or set to any amount up to the pool's (but at least 1/160 of it); sometimes a
    resource the pool lacks is added (such a shape never fits, so the liar gets nothing)."""
    truth = instance.frameworks[liar].shape
    total = instance.total
    millis: dict[str, int] = {}
    for name in sorted(total.names()):
        smallest = -(-total.millis(name) // 160)  # at most 160 declared tasks: runs stay cheap
        base = truth.millis(name)
        how = draw(st.sampled_from(("keep", "scale", "drop", "set")))
        if how == "keep":
            value = base
        elif how == "scale":
            value = (base or draw(st.integers(1, 1000))) * draw(st.integers(1, 8))
            value = max(value // draw(st.integers(1, 8)), smallest)
        elif how == "drop":
            value = 0
        else:
            value = draw(st.integers(smallest, total.millis(name)))
        if value:
            millis[name] = value
    missing = [name for name in RESOURCE_NAMES if name not in total]
    if missing and draw(st.integers(0, 9)) == 0:
        millis[draw(st.sampled_from(missing))] = draw(st.integers(1, 5000))
    if not millis:
        millis = truth.to_millis()
    return ResourceVector.from_millis(millis)


# -- staged runs: agents arriving in two groups --------------------------------------------------


@dataclass
class StagedOutcome:
    """Two allocation runs: the first with the agents ``instance.agents[:split]``, whose offers
    the frameworks accept whole (the tasks keep running), the second after the rest joined."""

    state: MasterState
    before: dict[str, int]  # framework id -> tasks running before the second run
    per_agent: dict[str, dict[str, int]]  # framework id -> agent id -> tasks after it

    def tasks(self, framework_id: str) -> int:
        return sum(self.per_agent[framework_id].values())


@st.composite
def staged_instances(draw: st.DrawFn, weighted: bool = False) -> tuple[Instance, int]:
    """A heterogeneous cluster (``cluster_instances``) and how many agents come first."""
    inst = draw(cluster_instances())
    if weighted:
        frameworks = tuple(
            Fw(fw.id, fw.shape, fw.wanted, draw(st.integers(1, 4))) for fw in inst.frameworks
        )
        inst = Instance(inst.agents, frameworks)
    return inst, draw(st.integers(1, len(inst.agents)))


def allocate_staged(instance: Instance, split: int, fit_window: int = 8) -> StagedOutcome:
    """Frameworks first, then ``split`` agents, one run (offers accepted), the other agents,
    a second run (offers kept): the core with validate on, best-fit over every agent."""
    state = MasterState(
        CoreConfig(validate=True, sample_size=max(16, len(instance.agents)), fit_window=fit_window)
    )
    shapes = {fw.id: fw.shape for fw in instance.frameworks}
    for fw in instance.frameworks:
        state.handle_add_framework(fw.id, 0.0, weight=float(fw.weight))
        state.handle_update_demand(fw.id, fw.shape, fw.wanted, 0.0)
    per_agent: dict[str, dict[str, int]] = {fw.id: {} for fw in instance.frameworks}
    launched = 0
    for stage, agents in enumerate((instance.agents[:split], instance.agents[split:])):
        for agent_id, resources in agents:
            state.handle_add_agent(agent_id, resources, float(stage))
        if stage == 1:
            before = {fid: sum(counts.values()) for fid, counts in per_agent.items()}
        for message in state.handle_allocate(float(stage)):
            assert isinstance(message, SendOffers)
            counts = per_agent[message.framework_id]
            for offer in message.offers:
                shape = shapes[message.framework_id]
                assert offer.resources == shape * offer.fair_tasks
                counts[offer.agent_id] = counts.get(offer.agent_id, 0) + offer.fair_tasks
                if stage == 0:
                    launches = []
                    for _ in range(offer.fair_tasks):
                        launched += 1
                        launches.append(TaskLaunch(f"t{launched}", "task", shape))
                    state.handle_accept(message.framework_id, [offer.offer_id], launches, 0.0)
    return StagedOutcome(state, before, per_agent)


@st.composite
def two_kind_instances(draw: st.DrawFn, weighted: bool = False) -> tuple[Instance, int]:
    """DRFH Fig. 1 generalized: agents of a CPU-rich and a memory-rich kind, in random order,
    and frameworks with CPU-heavy or memory-heavy tasks (some balanced), so that the agents that
    join first are often the wrong kind for whoever is most deprived."""
    rich, poor = draw(st.integers(6, 16)), draw(st.integers(1, 3))
    kinds = [
        ResourceVector({"cpus": rich, "mem": poor * 1024}),
        ResourceVector({"cpus": poor, "mem": rich * 1024}),
    ]
    agents = tuple(
        (f"a{index}", kinds[draw(st.integers(0, 1))]) for index in range(draw(st.integers(2, 5)))
    )
    frameworks = []
    for index in range(draw(st.integers(2, 4))):
        big, small = draw(st.integers(2, 10)), draw(st.integers(1, 2))
        cpus, mem = draw(st.sampled_from([(big, small), (small, big), (big, big)]))
        shape = ResourceVector.from_millis({"cpus": cpus * 100, "mem": mem * 102_400})
        wanted = draw(st.sampled_from([UNLIMITED, UNLIMITED, 5, 20]))
        weight = draw(st.integers(1, 3)) if weighted else 1
        frameworks.append(Fw(f"f{index}", shape, wanted, weight))
    return Instance(agents, tuple(frameworks)), draw(st.integers(1, len(agents)))
