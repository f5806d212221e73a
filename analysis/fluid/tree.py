"""Fluid allocations over the role tree: Static H-DRF, its naive counterpart, and flat DRF.

``solve_fluid_tree`` is ``fairshare allocate --mode fluid`` when frameworks sit in roles
(``fairshare.roles`` paths, the tree of ``master.core.hierarchy``: a node per role, a role's
own frameworks beside its sub-roles in a virtual child ``role/.`` of weight 1, frameworks as
the leaves). Tasks are divisible; the answer is exact (``Fraction``).

- ``hdrf``: Static H-DRF, Bhattacharya, Culler, Friedman, Ghodsi, Shenker and Stoica,
  "Hierarchical Scheduling for Diverse Datacenter Workloads", ACM SoCC 2013, §4.1: progressive
  filling in infinitesimal steps from nothing, where the shares grow so that the hierarchical
  share guarantee holds: at every node, the children with demand (not blocked) get the
  weighted max-min of their dominant shares; a leaf stops when its demand is met or a resource
  it needs is saturated, a node when all its children have. A node's dominant share is taken as
  H-DRF defines it (§4.4, the definition ``master.core.hierarchy`` computes for the tasks mode):
  a framework's is ``max_r x a_r / pool_r``; an internal node's is the largest component, over
  the resources not saturated, of the sum of its blocked children's vectors and of its other
  children's vectors rescaled to the minimum weighted share ``M`` among them
  (``c_i * M * w_i / s_i``). Without churn the children that grow are at ``M`` (rescaling
  leaves them as they are), so the definitions of §4.1 and §4.4 agree wherever both apply.
- ``naive``: the same progressive filling with the naive share of §4.3 (Mesos's sorter): a
  node's share is the dominant share of everything its subtree holds. From nothing and without
  churn it mostly gives what ``hdrf`` gives; the two differ under churn (``fairshare simulate``).
- ``flat``: no tree: the frameworks share the pool by weighted DRF water-filling
  (``analysis.fluid.solver.solve_fluid``, DRFH on several agents), with a role's weight copied onto
  its frameworks as the core's ``flat`` hierarchy does.

Progressive filling, exactly. At any moment the growth is what the infinitesimal walk of the
tasks mode does: at each node, among the children not blocked, those at the minimum weighted
share ``M`` (the *tied* ones) grow so that their weighted shares stay equal; a tied child whose
subtree can grow without its share rising (its dominant resource is held by a blocked child,
or only saturated resources grow) is *free*, and free children grow first. Within one phase every
quantity is linear in the filling's time, so the phase ends at the first event: a resource
saturates (the leaves needing it are blocked), a leaf reaches ``max_tasks``, a child ahead of
``M`` is caught up, or a node's dominant resource changes. Each event is found exactly.

One pool only (agents that are multiples of one vector are merged, as ``solve_fluid`` does): on
heterogeneous agents a tree's fluid answer would also be a placement problem, and ``hdrf`` and
``naive`` raise ``FluidError``. With every framework in one role the tree is a single group,
whose answer is DRF's water-filling: ``solve_fluid`` then gives it (and DRFH on many agents).

Quotas (``quotas``: role path -> ``master.core.quota.Quota``, guarantee and limit per
resource), with the semantics of Mesos 1.9's quota (Apache Mesos documentation, "Quota":
limits cap what a role is offered plus what it uses; guarantees are served in a first
allocation stage and protected afterwards by *headroom*), which the core's whole-task run
follows (``master.core.allocation``). Static H-DRF (§4.1) has no quotas; what is added, and
why (``analysis.fluid.quota`` states each rule precisely):

1. Limits are a constraint on a subtree's consumption per resource. Progressive filling can
   only stop leaves (tasks are not cut), so when a role's consumption of a limited resource
   reaches the limit, the leaves of its subtree that need that resource stop, exactly as a
   saturated resource stops the leaves that need it (§4.1's "a resource it needs is
   saturated", with the subtree's limit in place of the pool).
2. Two fillings, as Mesos 1.9's two allocation stages. First (``guarantees``) only the leaves
   going toward a guarantee grow (some role of their path guarantees a resource they need),
   by the same progressive filling over the tree; a guaranteed subtree stops growing in a
   guaranteed resource at its guarantee (its leaves needing it stop once every role of their
   path guaranteeing it holds its guarantee) or when its leaves are blocked (pool, limit,
   ``max_tasks``). Then (``all``) the progressive filling goes on from there over every leaf,
   within the limits, and the pool keeps the headroom the unmet guarantees of the top-most
   guaranteed roles need (a leaf outside a role that still misses a resource stops when the
   free pool of it is down to that headroom). The second filling
   starts from the first one's allocation: a guaranteed subtree ahead of its siblings waits
   until they catch up (the event "a child ahead of ``M`` is caught up"), which is what "the
   guarantee first, then fair sharing of the rest" means for H-DRF's max-min. A leaf group's
   vector (a role's frameworks) is then taken as ``master.core.hierarchy`` takes it: what its
   frameworks hold, summed unscaled (§4.4's rescaling applies to the children of the role
   nodes above). From nothing the frameworks of a group that are not blocked are all at its
   minimum, where rescaling changes nothing, so without quotas the answer is the same; from
   the first filling's allocation it keeps the answer the limit of the core's whole tasks
   (checked on random trees, ``tests/unit/analysis/test_fluid_quota.py``).

Without quotas (``None``, or every quota empty) nothing of this runs and the answer is the one
above, unchanged. With quotas the filling runs even with one role, and under ``flat`` over a
single group of every framework (weighted by ``flat_weights``), the quotas still applying to
the frameworks' role paths; the pool must be one (``FluidError`` otherwise).

Invariants: pure; frameworks come back in input order; every result is feasible on the pool,
each framework gets at most ``max_tasks``; bad input raises ``FluidError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from fairshare.roles import DEFAULT_ROLE, RoleError, check_role

from analysis.fluid.quota import ALL, GUARANTEES, FluidQuotas
from analysis.fluid.solver import (
    FluidAgent,
    FluidError,
    FluidFramework,
    FluidResult,
    _check_inputs,
    _pool_total,
    _proportional_groups,
    _result,
    _spread,
    solve_fluid,
)
from master.core.checks import hierarchy_in_force, hierarchy_refusal
from master.core.quota import Quota

__all__ = ["flat_weights", "solve_fluid_tree", "static_tree"]

_OWN_GROUP = "."
_MAX_PHASES = 100_000  # each phase ends at an event; a tree of n leaves needs O(n * resources)
ZERO = Fraction(0)


def flat_weights(
    frameworks: Sequence[FluidFramework], roles: Sequence[str], role_weights: Mapping[str, Fraction]
) -> list[FluidFramework]:
    """The frameworks with their role's weight, if the role has one (the core's ``flat``)."""
    return [
        FluidFramework(fw.name, fw.task, role_weights[role], fw.max_tasks)
        if role in role_weights
        else fw
        for fw, role in zip(frameworks, roles, strict=True)
    ]


def solve_fluid_tree(
    agents: Sequence[FluidAgent],
    frameworks: Sequence[FluidFramework],
    roles: Sequence[str],
    role_weights: Mapping[str, Fraction],
    hierarchy: str,
    quotas: Mapping[str, Quota] | None = None,
) -> FluidResult:
    """The fluid DRF allocation of ``frameworks`` (``roles[i]`` is the role of the i-th) on
    ``agents`` under ``hierarchy`` (the core's names; ``""`` is its default, hdrf), within
    ``quotas`` (module docstring)."""
    _check_inputs(agents, frameworks, "drf")
    refusal = hierarchy_refusal(hierarchy, "drf")  # the core's names and rule
    if refusal is not None:
        raise FluidError(f"hierarchy {refusal}")
    hierarchy = hierarchy_in_force(hierarchy, "drf")
    if len(roles) != len(frameworks):
        raise FluidError(f"roles: {len(roles)} given for {len(frameworks)} frameworks")
    for fw, role in zip(frameworks, roles, strict=True):
        try:
            check_role(role, f"framework {fw.name!r}: role")
        except RoleError as error:
            raise FluidError(str(error)) from None
    for role, weight in role_weights.items():
        if not isinstance(weight, Fraction) or weight <= 0:
            raise FluidError(f"role {role!r}: weight {weight!r} must be a positive Fraction")
    quotas = {role: quota for role, quota in (quotas or {}).items() if not quota.empty}
    if not quotas and hierarchy == "flat":
        return solve_fluid(agents, flat_weights(frameworks, roles, role_weights), "drf")
    if not quotas and len(set(roles)) <= 1:
        return solve_fluid(agents, frameworks, "drf")  # one group: DRF's water-filling
    groups = _proportional_groups(agents)
    if len(groups) > 1:
        what = "with quotas" if quotas else f"over a role tree ({hierarchy})"
        raise FluidError(
            f"fluid mode {what} needs a single pool, got {len(agents)} agents that are not"
            " multiples of one shape; use tasks mode" + ("" if quotas else " (or hierarchy flat)")
        )
    total = _pool_total(agents)
    if hierarchy == "flat":  # one group of every framework, the quotas on their roles
        tasks = static_tree(
            flat_weights(frameworks, roles, role_weights),
            [DEFAULT_ROLE] * len(roles),
            {},
            total,
            "naive",
            quotas,
            quota_roles=roles,
        )
    else:
        tasks = static_tree(frameworks, roles, role_weights, total, hierarchy, quotas)
    placement = {i: {groups[0][0].id: x} for i, x in tasks.items() if x > 0}
    return _result(frameworks, total, tasks, _spread(placement, groups), None)


# -- the tree ------------------------------------------------------------------------------------


@dataclass(eq=False)
class _Node:
    """A role, a role's own group, a framework (``leaf`` set) or the root."""

    path: str
    weight: Fraction
    children: list[_Node] = field(default_factory=list)
    leaf: int | None = None  # framework index
    group: bool = False  # a leaf group: its children are frameworks
    # the snapshot (``_Filling.snapshot``)
    blocked: bool = False
    held: list[Fraction] = field(default_factory=list)  # the share's vector (rescaled: hdrf)
    share: Fraction = ZERO
    level: Fraction = ZERO  # share / weight
    minimum: Fraction = ZERO  # M: the least level of the children not blocked


@dataclass
class _Plan:
    """How a subtree grows per unit of its parameter: leaf task rates, the rate of its share's
    vector, whether its level rises (1 per unit) or not (free), and per growing internal node
    its ``M`` rate, vector rate and share rate (for the events)."""

    rates: dict[int, Fraction]
    vector: list[Fraction]
    rises: bool
    nodes: list[tuple[_Node, Fraction, list[Fraction], Fraction]]

    def scaled(self, factor: Fraction) -> _Plan:
        return _Plan(
            {leaf: rate * factor for leaf, rate in self.rates.items()},
            [value * factor for value in self.vector],
            self.rises,
            [
                (node, dm * factor, [v * factor for v in dv], ds * factor)
                for node, dm, dv, ds in self.nodes
            ],
        )


def _build(
    roles: Sequence[str], weights: Sequence[Fraction], role_weights: Mapping[str, Fraction]
) -> _Node:
    root = _Node("", Fraction(1))
    nodes: dict[str, _Node] = {}

    def role_node(path: str) -> _Node:
        if path in nodes:
            return nodes[path]
        head, slash, _ = path.rpartition("/")
        parent = role_node(head) if slash else root
        node = _Node(path, role_weights.get(path, Fraction(1)))
        parent.children.append(node)
        nodes[path] = node
        return node

    for role in sorted(set(roles)):
        role_node(role)
    owners: dict[str, _Node] = {}
    for role in sorted(set(roles)):
        node = nodes[role]
        if node.children:  # frameworks beside sub-roles: the virtual own group (Mesos's '.')
            group = _Node(f"{role}/{_OWN_GROUP}", Fraction(1))
            node.children.append(group)
            node = group
        node.group = True
        owners[role] = node
    for index, (role, weight) in enumerate(zip(roles, weights, strict=True)):
        owners[role].children.append(_Node(f"{role}#{index}", weight, leaf=index))
    return root


class _Filling:
    """Progressive filling over one pool: tasks per framework, phase by phase."""

    def __init__(
        self,
        frameworks: Sequence[FluidFramework],
        roles: Sequence[str],
        role_weights: Mapping[str, Fraction],
        total: Mapping[str, int],
        hierarchy: str,
        quotas: Mapping[str, Quota] | None = None,
        quota_roles: Sequence[str] | None = None,
    ) -> None:
        self.names = list(total)
        self.hdrf = hierarchy == "hdrf"
        self.root = _build(roles, [fw.weight for fw in frameworks], role_weights)
        self.shapes: list[list[Fraction]] = []
        self.deltas: list[Fraction] = []
        self.caps: list[Fraction | None] = []
        self.tasks = [ZERO] * len(frameworks)
        self.done = [False] * len(frameworks)  # for good: pool, max_tasks
        self.blocked = self.done  # done, or stopped by a quota in this stage
        for index, fw in enumerate(frameworks):
            demand = fw.task.to_millis()
            shape = [Fraction(demand.get(name, 0), total[name]) for name in self.names]
            self.shapes.append(shape)
            self.deltas.append(max(shape))
            self.caps.append(None if fw.max_tasks is None else Fraction(fw.max_tasks))
            # a resource the pool lacks, or a cap of 0: never served
            self.done[index] = not demand.keys() <= total.keys() or fw.max_tasks == 0
        self.used = [ZERO] * len(self.names)
        self.saturated = [False] * len(self.names)
        self.quotas = FluidQuotas(
            quotas or {}, roles if quota_roles is None else quota_roles, self.names, total,
            self.shapes,
        )  # fmt: skip
        self.stage = GUARANTEES if self.quotas.has_guarantees else ALL

    # -- the state as the shares see it --

    def snapshot(self, node: _Node) -> None:
        """Blocked flags, vectors, shares and levels of ``node``'s subtree, bottom up."""
        if node.leaf is not None:
            x = self.tasks[node.leaf]
            node.blocked = self.blocked[node.leaf]
            node.held = [x * a for a in self.shapes[node.leaf]]
            node.share = x * self.deltas[node.leaf]
            node.level = node.share / node.weight
            return
        for child in node.children:
            self.snapshot(child)
        live = [child for child in node.children if not child.blocked]
        node.blocked = not live
        node.minimum = min((child.level for child in live), default=ZERO)
        held = [ZERO] * len(self.names)
        rescales = self.hdrf and not node.group
        for child in node.children:
            if rescales and not child.blocked:
                if child.share > 0:
                    factor = node.minimum * child.weight / child.share
                    held = [h + factor * c for h, c in zip(held, child.held, strict=True)]
            else:
                held = [h + c for h, c in zip(held, child.held, strict=True)]
        node.held = held
        counted = self.counted()
        node.share = max((h for h, s in zip(held, counted, strict=True) if s), default=ZERO)
        node.level = node.share / node.weight

    def counted(self) -> list[bool]:
        """The resources an internal node's share counts: under hdrf the unsaturated ones."""
        if self.hdrf:
            return [not s for s in self.saturated]
        return [True] * len(self.saturated)

    # -- how it grows now --

    def plan(self, node: _Node) -> _Plan:
        """The growth of ``node`` (not blocked) per unit of its level, or, when its share does
        not rise as it grows (free), per unit of its leaves' largest consumption rate."""
        if node.leaf is not None:
            factor = node.weight / self.deltas[node.leaf]
            vector = [a * factor for a in self.shapes[node.leaf]]
            return _Plan({node.leaf: factor}, vector, True, [])
        live = [child for child in node.children if not child.blocked]
        tied = [child for child in live if child.level == node.minimum]
        plans = [self.plan(child) for child in tied]
        free = [plan for plan in plans if not plan.rises]
        chosen = free or plans
        rates: dict[int, Fraction] = {}
        vector = [ZERO] * len(self.names)
        nodes: list[tuple[_Node, Fraction, list[Fraction], Fraction]] = []
        for plan in chosen:
            for leaf, rate in plan.rates.items():
                rates[leaf] = rates.get(leaf, ZERO) + rate
            vector = [v + p for v, p in zip(vector, plan.vector, strict=True)]
            nodes.extend(plan.nodes)
        grows_minimum = not free
        if grows_minimum and self.hdrf and not node.group:  # those ahead of M: rescaled to M
            for child in live:
                if child.level != node.minimum and child.share > 0:
                    factor = child.weight / child.share
                    vector = [v + factor * c for v, c in zip(vector, child.held, strict=True)]
        counted = self.counted()
        top = [
            rate
            for rate, held, counts in zip(vector, node.held, counted, strict=True)
            if counts and held == node.share
        ]
        share_rate = max(top, default=ZERO)
        nodes.append((node, Fraction(1) if grows_minimum else ZERO, vector, share_rate))
        plan = _Plan(rates, vector, share_rate > 0, nodes)
        if plan.rises:
            return plan.scaled(node.weight / share_rate)
        consumption = self.consumption(rates)
        return plan.scaled(1 / max(consumption))

    def consumption(self, rates: Mapping[int, Fraction]) -> list[Fraction]:
        out = [ZERO] * len(self.names)
        for leaf, rate in rates.items():
            out = [o + rate * a for o, a in zip(out, self.shapes[leaf], strict=True)]
        return out

    # -- one phase --

    def step(self) -> bool:
        """Grow to the next event; False when every framework is blocked."""
        if self.quotas.active:
            stops = self.quotas.stopped(self.tasks, self.used, self.stage)
            self.blocked = [done or stop for done, stop in zip(self.done, stops, strict=True)]
        self.snapshot(self.root)
        if self.root.blocked:
            return False
        plan = self.plan(self.root)
        consumption = self.consumption(plan.rates)
        times: list[Fraction] = []
        for used, rate in zip(self.used, consumption, strict=True):
            if rate > 0:
                times.append((1 - used) / rate)
        for leaf, rate in plan.rates.items():
            cap = self.caps[leaf]
            if cap is not None and rate > 0:
                times.append((cap - self.tasks[leaf]) / rate)
        for node, minimum_rate, vector, share_rate in plan.nodes:
            if minimum_rate > 0:
                for child in node.children:
                    if not child.blocked and child.level > node.minimum:
                        times.append((child.level - node.minimum) / minimum_rate)
            counted = self.counted()
            for rate, held, counts in zip(vector, node.held, counted, strict=True):
                if counts and held < node.share and rate > share_rate:
                    times.append((node.share - held) / (rate - share_rate))
        if self.quotas.active:
            times.extend(
                self.quotas.events(self.tasks, self.used, plan.rates, consumption, self.stage)
            )
        positive = [t for t in times if t > 0]
        if not positive:  # pragma: no cover - every growing leaf uses a finite resource
            raise ArithmeticError("Static H-DRF: a phase without an event")
        dt = min(positive)
        for leaf, rate in plan.rates.items():
            self.tasks[leaf] += rate * dt
        self.used = [u + rate * dt for u, rate in zip(self.used, consumption, strict=True)]
        for index, used in enumerate(self.used):
            if used >= 1:
                self.saturated[index] = True
        for leaf, shape in enumerate(self.shapes):
            cap = self.caps[leaf]
            if (cap is not None and self.tasks[leaf] >= cap) or any(
                a > 0 and saturated for a, saturated in zip(shape, self.saturated, strict=True)
            ):
                self.done[leaf] = True
        return True


def static_tree(
    frameworks: Sequence[FluidFramework],
    roles: Sequence[str],
    role_weights: Mapping[str, Fraction],
    total: Mapping[str, int],
    hierarchy: str,
    quotas: Mapping[str, Quota] | None = None,
    quota_roles: Sequence[str] | None = None,
) -> dict[int, Fraction]:
    """Tasks per framework index (those with none left out) of the progressive filling over
    the tree on one pool of ``total`` (milli-units per resource) under ``hdrf`` or ``naive``,
    within ``quotas`` on the frameworks' roles (``quota_roles``, by default ``roles``): the
    guarantees' filling first when some role has a guarantee, then the filling of all."""
    roles = [check_role(role) if role else DEFAULT_ROLE for role in roles]
    filling = _Filling(frameworks, roles, role_weights, total, hierarchy, quotas, quota_roles)
    for _ in range(_MAX_PHASES):
        if filling.step():
            continue
        if filling.stage == ALL:
            return {i: x for i, x in enumerate(filling.tasks) if x > 0}
        filling.stage = ALL
    raise ArithmeticError(f"Static H-DRF: no end after {_MAX_PHASES} phases")  # pragma: no cover
