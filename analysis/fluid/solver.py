"""Fluid (divisible-task) allocations: the papers' ideal solutions, for ``fairshare allocate``.

In fluid mode tasks are real numbers (DRF paper §4-5, Bonald & Roberts §2.1, DRFH §III-A), and
``solve_fluid`` returns the allocation each policy defines:

- ``drf`` on one agent: weighted DRF (Ghodsi et al. §4, weighted §4.3 with one weight per
  framework) by water-filling (Bonald & Roberts §2.3): every unfrozen framework grows at rate
  ``w_i / max_j a_ij`` so that ``dominant share / weight`` rises as one level; the level stops at
  the first resource to saturate or the first cap (``max_tasks``) reached; the frameworks at
  their cap and every framework needing a saturated resource freeze; the rest go on (DRF §4.1
  last paragraph). Computed with exact ``Fraction`` events, not by simulation.
- ``drf`` on several agents: DRFH (Wang, Li, Liang §IV-A): lexicographic max-min of global
  dominant share (``max_r alloc_r / pool_r``) over weight. Each round solves LP (7), weighted and
  finite-task as in §V-A: maximise ``t`` s.t. ``sum_i x_il d_ir <= c_lr`` on every agent,
  ``total_i = t w_i / delta_i`` for active frameworks, ``total_i == frozen level`` for frozen ones
  and ``total_i <= max_tasks``. The frameworks that cannot exceed ``t`` while every other keeps
  its level then freeze at ``t``: those at their cap, those whose row of LP (7) has a negative
  dual value, and the rest are decided by LPs maximising a common increment ``e`` of the
  undecided (``e > 0``: all can grow; ``e = 0``: its duals name at least one blocked framework).
  Every round freezes at least one framework (if all could grow, the average of their solutions
  would beat ``t``), so there are at most ``n`` rounds. The per-agent placement is that of the
  last round. Exact (``Fraction``, ``analysis.fluid.linear_program``).
- Agents whose capacities are multiples of one vector are merged first (with divisible tasks
  they hold exactly the allocations of their sum) and their tasks are spread back in proportion
  to capacity; so a cluster of few server types stays small, and agents that are all scaled
  copies of one shape are a single pool (water-filling, and ``pf`` works). The exact LP costs
  grow quickly with the number of distinct agents times frameworks (a second or so for 20 x 10).
- ``asset``: the same water-filling / LP rounds on the aggregate share ``sum_j a_ij`` per task
  (DRF §5.1) instead of the dominant share.
- ``pf`` and ``ceei``: proportional fairness (Bonald & Roberts §2.4, eq. 2), maximise
  ``sum_i w_i log tasks_i``; CEEI with equal incomes and utility linear in tasks is the Nash
  bargaining solution, i.e. the same optimum (DRF §5.2; unequal weights are unequal incomes).
  Solved in floating point by ``pf_prices``; a cap ``max_tasks = m`` is a private extra resource
  of that framework with per-task share ``1/m`` (its price is eliminated in closed form inside
  ``pf_prices``, so it costs nothing extra). ``prices`` reports ``nu_j`` per pool resource (the
  multiplier of ``sum_i tasks_i a_ij <= 1``, capacities normalised to 1). Only a single pool is
  supported: on heterogeneous agents PF is a different problem (no separable dual, a per-agent
  placement to optimise) that this module does not solve, and ``solve_fluid`` raises
  ``FluidError``.
- ``slots`` is a task-mode baseline only and raises ``FluidError``.

Invariants:
- ``drf`` and ``asset`` results are exact (``exact=True``, every number a ``Fraction``) and
  feasible on every agent; ``pf``/``ceei`` results are floats (``exact=False``).
- A framework gets at most ``max_tasks`` tasks; ``max_tasks=0`` gets none.
- A framework whose task needs a resource that no agent has (or no single agent has all of) gets
  0 tasks; this is not an error, as in a live cluster it would just never be offered a fit.
- ``allocated`` is in resource units (``tasks * task``), ``dominant_share`` is
  ``max_r allocated_r / pool_r`` (not divided by the weight), ``utilization[r]`` is
  ``sum allocated_r / pool_r`` over the pool's resources, ``per_agent`` maps agent id to tasks and
  lists only agents where the framework has a positive number of tasks.
- Frameworks come back in input order. Bad input raises ``FluidError`` naming the framework,
  agent or field. Pure: no I/O, randomness or clock.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from fairshare.resources import MILLI, ResourceVector, canonical_order

from analysis.fluid.linear_program import LPResult, LPStatus, solve_lp
from master.core.fairness import FAIRNESS_POLICIES
from master.core.proportional import pf_allocation, pf_prices

__all__ = [
    "FLUID_ONLY_POLICIES",
    "FLUID_POLICIES",
    "FluidAgent",
    "FluidError",
    "FluidFramework",
    "FluidResult",
    "FluidShare",
    "fluid_weight",
    "solve_fluid",
]

FLUID_ONLY_POLICIES: tuple[str, ...] = ("ceei",)
"""Policies of fluid mode alone, not in the core's table: ``ceei`` (CEEI, the Nash bargaining
solution, DRF paper §5.2), pf's optimum with weights as incomes."""
_SOLVED = frozenset({"drf", "asset", "pf", *FLUID_ONLY_POLICIES})  # what solve_fluid computes
FLUID_POLICIES: tuple[str, ...] = (
    *(name for name in FAIRNESS_POLICIES if name in _SOLVED),
    *FLUID_ONLY_POLICIES,
)
"""Policies ``solve_fluid`` accepts: the core's (``FAIRNESS_POLICIES``, in its order) that have a
divisible-task answer, then the fluid-only ones."""


class FluidError(ValueError):
    """Bad fluid-mode input; the message names the offending framework, agent or field."""


@dataclass(frozen=True)
class FluidFramework:
    """A framework with infinitely divisible tasks of one shape (weight > 0, cap >= 0)."""

    name: str
    task: ResourceVector
    weight: Fraction = Fraction(1)
    max_tasks: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise FluidError(f"framework name {self.name!r} must be a non-empty string")
        if not isinstance(self.task, ResourceVector):
            raise FluidError(f"framework {self.name!r}: task must be a ResourceVector")
        if not self.task:
            raise FluidError(f"framework {self.name!r}: task is empty (it must need a resource)")
        object.__setattr__(self, "weight", fluid_weight(self.weight, f"framework {self.name!r}"))
        cap = self.max_tasks
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 0):
            raise FluidError(
                f"framework {self.name!r}: max_tasks {cap!r} must be a non-negative integer"
            )


def fluid_weight(weight: object, what: str) -> Fraction:
    """A weight of fluid mode, exactly: any finite positive number (divisible tasks need no
    bound; whole tasks take the core's, ``check_weight``); ``FluidError`` names ``what``."""
    if isinstance(weight, bool) or not isinstance(weight, (int, float, Fraction)):
        raise FluidError(f"{what}: weight {weight!r} is not a number")
    if isinstance(weight, float):
        if not math.isfinite(weight):
            raise FluidError(f"{what}: weight {weight!r} is not finite")
        value = Fraction(repr(weight))  # 0.1 -> 1/10, not the binary expansion
    else:
        value = Fraction(weight)
    if value <= 0:
        raise FluidError(f"{what}: weight {weight!r} must be positive")
    return value


@dataclass(frozen=True)
class FluidAgent:
    """An agent (server) and its capacity."""

    id: str
    resources: ResourceVector

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise FluidError(f"agent id {self.id!r} must be a non-empty string")
        if not isinstance(self.resources, ResourceVector):
            raise FluidError(f"agent {self.id!r}: resources must be a ResourceVector")


@dataclass(frozen=True)
class FluidShare:
    """One framework's fluid allocation (see the module invariants for the units)."""

    name: str
    tasks: Fraction | float
    dominant_share: Fraction | float
    allocated: dict[str, Fraction | float]
    per_agent: dict[str, Fraction | float]


@dataclass(frozen=True)
class FluidResult:
    """The allocation of every framework; ``prices`` are the PF multipliers (``pf``/``ceei``)."""

    frameworks: list[FluidShare]
    utilization: dict[str, Fraction | float]
    exact: bool
    prices: dict[str, float] | None


@dataclass(frozen=True)
class _Job:
    """A framework that can get tasks: ``per_task`` is its share metric of one task."""

    index: int
    demand: dict[str, int]  # milli-units per task
    weight: Fraction
    cap: int | None
    per_task: Fraction

    def tasks_at(self, level: Fraction) -> Fraction:
        """Tasks at which ``metric / weight`` equals ``level``."""
        return level * self.weight / self.per_task

    def cap_level(self) -> Fraction | None:
        return None if self.cap is None else self.cap * self.per_task / self.weight


Placement = dict[int, dict[str, Fraction]]  # job index -> agent id -> tasks


def solve_fluid(
    agents: Sequence[FluidAgent], frameworks: Sequence[FluidFramework], policy: str
) -> FluidResult:
    """The fluid allocation of ``frameworks`` on ``agents`` under ``policy`` (module docstring)."""
    _check_inputs(agents, frameworks, policy)
    total = _pool_total(agents)
    groups = _proportional_groups(agents)
    merged = [group for group, _ in groups]
    jobs = _jobs(merged, frameworks, total, "asset" if policy == "asset" else "drf")
    if policy in ("pf", "ceei"):
        if len(groups) > 1:
            raise FluidError(
                f"pf fluid mode needs a single pool (resources), got {len(agents)} agents"
            )
        float_tasks, prices = _proportional(jobs, total)
        pf_placement = {i: {merged[0].id: x} for i, x in float_tasks.items() if x > 0}
        return _result(frameworks, total, float_tasks, _spread(pf_placement, groups), prices)
    if len(groups) > 1:
        placement = _drfh_rounds(jobs, merged)
    else:
        tasks = _water_fill(jobs, total)
        placement = {i: {merged[0].id: x} for i, x in tasks.items() if x > 0}
    exact_tasks = {i: sum(p.values(), Fraction(0)) for i, p in placement.items()}
    return _result(frameworks, total, exact_tasks, _spread(placement, groups), None)


def _proportional_groups(
    agents: Sequence[FluidAgent],
) -> list[tuple[FluidAgent, list[tuple[str, Fraction]]]]:
    """Agents whose capacities are multiples of one vector, merged (empty agents dropped).

    With divisible tasks such agents hold exactly the allocations of their sum (split any of it
    in proportion to capacity), so the rounds run on far fewer agents; each merged agent keeps
    the id of its first member and lists ``(member id, fraction of the group's capacity)``.
    """
    groups: dict[tuple[tuple[str, int], ...], list[FluidAgent]] = {}
    for agent in agents:
        millis = agent.resources.to_millis()
        if millis:
            divisor = math.gcd(*millis.values())
            key = tuple(sorted((name, m // divisor) for name, m in millis.items()))
            groups.setdefault(key, []).append(agent)
    out = []
    for key, members in groups.items():
        capacity = sum((m.resources for m in members), ResourceVector())
        name = key[0][0]
        shares = [
            (m.id, Fraction(m.resources.millis(name), capacity.millis(name))) for m in members
        ]
        out.append((FluidAgent(members[0].id, capacity), shares))
    return out


def _spread(
    placement: Mapping[int, Mapping[str, Fraction | float]],
    groups: Sequence[tuple[FluidAgent, list[tuple[str, Fraction]]]],
) -> dict[int, dict[str, Fraction | float]]:
    """Per-agent tasks: a merged agent's tasks split over its members by capacity."""
    members = {group.id: shares for group, shares in groups}
    out: dict[int, dict[str, Fraction | float]] = {}
    for index, per_group in placement.items():
        spread: dict[str, Fraction | float] = {}
        for group_id, tasks in per_group.items():
            for agent_id, fraction in members[group_id]:
                spread[agent_id] = (
                    tasks * fraction if isinstance(tasks, Fraction) else (tasks * float(fraction))
                )
        out[index] = spread
    return out


def _check_inputs(
    agents: Sequence[FluidAgent], frameworks: Sequence[FluidFramework], policy: str
) -> None:
    if policy in FAIRNESS_POLICIES and policy not in FLUID_POLICIES:
        raise FluidError(
            f"policy {policy!r} is a task-mode baseline only; fluid mode supports "
            + ", ".join(FLUID_POLICIES)
        )
    if policy not in FLUID_POLICIES:
        raise FluidError(
            f"policy {policy!r} is unknown; fluid mode supports " + ", ".join(FLUID_POLICIES)
        )
    if not agents:
        raise FluidError("agents: none given (give one pool of resources or some agents)")
    seen: set[str] = set()
    for agent in agents:
        if not isinstance(agent, FluidAgent):
            raise FluidError(f"agents: {agent!r} is not a FluidAgent")
        if agent.id in seen:
            raise FluidError(f"agent {agent.id!r} is given twice")
        seen.add(agent.id)
    names: set[str] = set()
    for framework in frameworks:
        if not isinstance(framework, FluidFramework):
            raise FluidError(f"frameworks: {framework!r} is not a FluidFramework")
        if framework.name in names:
            raise FluidError(f"framework {framework.name!r} is given twice")
        names.add(framework.name)


def _pool_total(agents: Sequence[FluidAgent]) -> dict[str, int]:
    total: dict[str, int] = {}
    for agent in agents:
        for name, millis in agent.resources.millis_items():
            total[name] = total.get(name, 0) + millis
    return {name: total[name] for name in sorted(total, key=canonical_order)}


def _jobs(
    agents: Sequence[FluidAgent],
    frameworks: Sequence[FluidFramework],
    total: dict[str, int],
    metric: str,
) -> list[_Job]:
    """The frameworks that can get tasks: cap not 0, and some agent has all their resources."""
    jobs = []
    for index, framework in enumerate(frameworks):
        demand = framework.task.to_millis()
        if framework.max_tasks == 0:
            continue
        if not any(demand.keys() <= agent.resources.names() for agent in agents):
            continue
        shares = [Fraction(m, total[name]) for name, m in demand.items()]
        per_task = max(shares) if metric == "drf" else sum(shares, Fraction(0))
        jobs.append(_Job(index, demand, framework.weight, framework.max_tasks, per_task))
    return jobs


# -- one pool: water-filling ---------------------------------------------------------------------


def _water_fill(jobs: Sequence[_Job], total: dict[str, int]) -> dict[int, Fraction]:
    """Weighted max-min of ``metric / weight`` on one pool (B&R §2.3), exact event by event."""
    rate: dict[str, Fraction] = dict.fromkeys(total, Fraction(0))
    used: dict[str, Fraction] = dict.fromkeys(total, Fraction(0))
    needing: dict[str, list[_Job]] = {name: [] for name in total}
    for job in jobs:
        for name, millis in job.demand.items():
            rate[name] += Fraction(millis, total[name]) * job.weight / job.per_task
            needing[name].append(job)
    by_cap = sorted((j for j in jobs if j.cap is not None), key=lambda j: j.cap_level() or 0)
    active = {job.index for job in jobs}
    tasks: dict[int, Fraction] = {}

    def freeze(job: _Job, level: Fraction) -> None:
        x = job.tasks_at(level)
        tasks[job.index] = x
        active.discard(job.index)
        for name, millis in job.demand.items():
            used[name] += x * Fraction(millis, total[name])
            rate[name] -= Fraction(millis, total[name]) * job.weight / job.per_task

    while active:
        by_cap = [job for job in by_cap if job.index in active]
        events = {name: (1 - used[name]) / rate[name] for name in total if rate[name] > 0}
        level = min(events.values(), default=None)
        cap_level = by_cap[0].cap_level() if by_cap else None
        if level is None or (cap_level is not None and cap_level < level):
            level = cap_level
        assert level is not None  # every active job needs a resource with a positive rate
        for job in by_cap:
            if job.cap_level() == level:
                freeze(job, level)
        for name in [n for n, at in events.items() if at == level]:
            for job in needing[name]:
                if job.index in active:
                    freeze(job, level)
    return tasks


# -- several agents: DRFH linear-program rounds --------------------------------------------------


class _Program:
    """The variables ``x_il`` (tasks of job ``i`` on agent ``l``) and the capacity rows."""

    def __init__(self, jobs: Sequence[_Job], agents: Sequence[FluidAgent]) -> None:
        self.pairs = [
            (job, agent)
            for job in jobs
            for agent in agents
            if job.demand.keys() <= agent.resources.names()
        ]
        self.width = len(self.pairs)
        self.capacity: list[tuple[list[Fraction | int], str, Fraction | int]] = []
        for agent in agents:
            for name, millis in agent.resources.millis_items():
                row: list[Fraction | int] = [
                    job.demand.get(name, 0) if other is agent else 0 for job, other in self.pairs
                ]
                if any(row):
                    self.capacity.append((row, "<=", millis))

    def total_row(self, job: _Job, extra: int = 0) -> list[Fraction | int]:
        """Coefficients of ``sum_l x_il`` over the variables (plus ``extra`` zero columns)."""
        row: list[Fraction | int] = [1 if other is job else 0 for other, _ in self.pairs]
        return row + [0] * extra

    def rows(self, extra: int) -> list[tuple[list[Fraction | int], str, Fraction | int]]:
        return [(row + [0] * extra, sense, rhs) for row, sense, rhs in self.capacity]

    def totals(self, result: LPResult) -> dict[int, Fraction]:
        assert result.x is not None
        out: dict[int, Fraction] = {}
        for (job, _), value in zip(self.pairs, result.x, strict=False):
            out[job.index] = out.get(job.index, Fraction(0)) + value
        return out

    def placement(self, result: LPResult) -> Placement:
        assert result.x is not None
        out: Placement = {}
        for (job, agent), value in zip(self.pairs, result.x, strict=False):
            if value > 0:
                out.setdefault(job.index, {})[agent.id] = value
        return out


def _optimal(result: LPResult, what: str) -> LPResult:
    if result.status is not LPStatus.OPTIMAL:  # pragma: no cover - feasible and bounded by build
        raise ArithmeticError(f"DRFH {what} linear program is {result.status.value}")
    return result


def _max_level(
    program: _Program, active: Sequence[_Job], frozen: dict[int, Fraction], jobs: Sequence[_Job]
) -> tuple[Fraction, LPResult, set[int]]:
    """LP (7): the highest common ``metric / weight`` level ``t`` of the active jobs.

    Also returns the active jobs certainly blocked at ``t``: those whose row
    ``total_i - t w_i / delta_i == 0`` has a negative dual value, since then giving job ``i``
    more (raising that right-hand side) would lower the optimal ``t`` (concavity).
    """
    rows = program.rows(1)
    for job in jobs:
        if job.index in frozen:
            rows.append((program.total_row(job, 1), "==", frozen[job.index]))
    level_rows: dict[int, int] = {}
    for job in active:
        coefficients = program.total_row(job, 1)
        coefficients[-1] = -job.weight / job.per_task
        level_rows[job.index] = len(rows)
        rows.append((coefficients, "==", 0))
        if job.cap is not None:
            rows.append((program.total_row(job, 1), "<=", job.cap))
    result = _optimal(solve_lp([0] * program.width + [1], rows), "level")
    assert result.x is not None and result.duals is not None
    duals = result.duals
    blocked = {index for index, row in level_rows.items() if duals[row] < 0}
    return result.x[-1], result, blocked


def _blocked(
    program: _Program,
    undecided: Sequence[_Job],
    frozen: dict[int, Fraction],
    level: Fraction,
    jobs: Sequence[_Job],
) -> set[int]:
    """The ``undecided`` jobs that cannot exceed ``level`` while every other job keeps its own.

    Maximise ``e`` with ``total_i >= (t + e) w_i / delta_i`` for the undecided jobs. If ``e > 0``
    they all can grow. Otherwise the dual of that LP puts weight on some job's row (its ``e``
    column must be priced), and a negative dual means asking more for that job makes the LP
    infeasible: that job is blocked. Remove the blocked ones and ask again.
    """
    undecided = list(undecided)
    blocked: set[int] = set()
    while undecided:
        rows = program.rows(1)
        for job in jobs:
            if job.index in frozen or job.index in blocked:
                target = frozen.get(job.index, job.tasks_at(level))
                rows.append((program.total_row(job, 1), "==", target))
        growth_rows = []
        for job in undecided:
            coefficients = program.total_row(job, 1)
            coefficients[-1] = -job.weight / job.per_task
            growth_rows.append(len(rows))
            rows.append((coefficients, ">=", job.tasks_at(level)))
            if job.cap is not None:
                rows.append((program.total_row(job, 1), "<=", job.cap))
        result = _optimal(solve_lp([0] * program.width + [1], rows), "growth")
        assert result.x is not None and result.duals is not None
        if result.x[-1] > 0:
            return blocked
        duals = result.duals
        newly = {job.index for job, k in zip(undecided, growth_rows, strict=True) if duals[k] < 0}
        assert newly, "an LP with optimum 0 prices some undecided job"
        blocked |= newly
        undecided = [job for job in undecided if job.index not in newly]
    return blocked


def _drfh_rounds(jobs: Sequence[_Job], agents: Sequence[FluidAgent]) -> Placement:
    """Lexicographic weighted max-min of the global share metric (DRFH §IV-A, §V-A).

    Per round: LP (7) gives the level ``t`` and, by its duals, jobs certainly blocked; the jobs
    at their cap are blocked too; ``_blocked`` decides the rest. Blocked jobs freeze at ``t``.
    """
    program = _Program(jobs, agents)
    active = list(jobs)
    frozen: dict[int, Fraction] = {}
    placement: Placement = {}
    while active:
        level, result, stuck = _max_level(program, active, frozen, jobs)
        placement = program.placement(result)
        stuck |= {job.index for job in active if job.cap_level() == level}
        at_level = {
            **frozen,
            **{i: job.tasks_at(level) for job in active if (i := job.index) in stuck},
        }
        undecided = [job for job in active if job.index not in stuck]
        stuck |= _blocked(program, undecided, at_level, level, jobs)
        for job in active:
            if job.index in stuck:
                frozen[job.index] = job.tasks_at(level)
        active = [job for job in active if job.index not in stuck]
    return placement


# -- proportional fairness -----------------------------------------------------------------------


def _proportional(
    jobs: Sequence[_Job], total: dict[str, int]
) -> tuple[dict[int, float], dict[str, float]]:
    """PF on one pool (B&R eq. 2): tasks per job and the price of every pool resource."""
    names = list(total)
    if not jobs:
        return {}, dict.fromkeys(names, 0.0)
    rows = [[job.demand.get(name, 0) / total[name] for name in names] for job in jobs]
    weights = [float(job.weight) for job in jobs]
    caps: list[float | None] = [None if job.cap is None else float(job.cap) for job in jobs]
    prices = pf_prices(rows, weights=weights, caps=caps, tolerance=1e-15)
    phi = pf_allocation(rows, prices, weights=weights, caps=caps)
    # Rounding can leave a resource over-full by ~1e-16: scale down by that much at most.
    loads = [
        math.fsum(x * row[j] for x, row in zip(phi, rows, strict=True)) for j in range(len(names))
    ]
    fullest = max(loads)
    if fullest > 1.0:
        phi = [x / fullest for x in phi]
    return (
        {job.index: x for job, x in zip(jobs, phi, strict=True)},
        dict(zip(names, prices, strict=True)),
    )


# -- result ----------------------------------------------------------------------------------------


def _scale(tasks: Fraction | float, numerator: int, denominator: int) -> Fraction | float:
    """``tasks * numerator / denominator``, exact when ``tasks`` is a ``Fraction``."""
    if isinstance(tasks, Fraction):
        return tasks * Fraction(numerator, denominator)
    return tasks * numerator / denominator


def _share(
    framework: FluidFramework,
    total: dict[str, int],
    tasks: Fraction | float,
    per_agent: Mapping[str, Fraction | float],
) -> FluidShare:
    allocated: dict[str, Fraction | float] = {}
    dominant: Fraction | float = tasks * 0
    for name, millis in framework.task.millis_items():
        allocated[name] = _scale(tasks, millis, MILLI)
        if name in total:
            dominant = max(dominant, _scale(tasks, millis, total[name]))
    return FluidShare(framework.name, tasks, dominant, allocated, dict(per_agent))


def _result(
    frameworks: Sequence[FluidFramework],
    total: dict[str, int],
    tasks: Mapping[int, Fraction | float],
    placement: Mapping[int, Mapping[str, Fraction | float]],
    prices: dict[str, float] | None,
) -> FluidResult:
    exact = prices is None
    zero: Fraction | float = Fraction(0) if exact else 0.0
    counts = [tasks.get(i, zero) for i in range(len(frameworks))]
    shares = [
        _share(framework, total, count, placement.get(i, {}))
        for i, (framework, count) in enumerate(zip(frameworks, counts, strict=True))
    ]
    utilization: dict[str, Fraction | float] = {}
    for name, capacity in total.items():
        terms = [
            _scale(count, framework.task.millis(name), capacity)
            for framework, count in zip(frameworks, counts, strict=True)
        ]
        if exact:
            utilization[name] = sum((Fraction(t) for t in terms), Fraction(0))
        else:
            utilization[name] = math.fsum(float(t) for t in terms)
    return FluidResult(shares, utilization, exact, prices)
