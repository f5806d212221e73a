"""The fit-aware choice of an allocation run: DRFH's Best-Fit over framework-agent pairs.

Progressive filling serves the most deprived framework ``m`` on its best-fit agent ``l_m``
(Best-Fit DRFH, Wang, Li & Liang §V-B, heuristic H(i,l) of eq. 9). Which resources are free
when depends on the order in which agents and frameworks arrived, and on heterogeneous agents
that order can be rebuilt for ever: in DRFH's Fig. 1 started server by server, whenever user 1's
task on the CPU server ends user 1 is the most deprived and that server its only fit, so the
per-server DRF of Fig. 2 (6 and 6 tasks) comes back every time instead of DRFH's 10 and 10.

The fit-aware choice lets a framework whose share is within one task of ``m`` take ``l_m``
when it fits there better, so freed resources go to the framework they fit and ``m`` gets its
better-fitting server next. For one decision (``master.core.allocation``, ``Run._claim``):

1. **misplaced**: ``m`` is misplaced on ``l_m`` when an active agent whose capacity holds ``m``'s
   task fits ``m`` clearly better by eq. 9 evaluated on capacities (``c_l``, not the available
   ``c̄_l``, normalized to the largest agent as DRFH Table I normalizes its servers):
   ``H_cap(m, l_m) - H_home > KIND_TOLERANCE (H_home + |m|)`` with ``H_home`` the
   least ``H_cap`` over the agents and ``|m|`` the task's own norm (``clearly_worse``).
   Capacities say what kind of server an agent is; what is free now says nothing about that;
   agents whose resource ratios are within 25% of each other are one kind. Only when ``m`` is
   misplaced is the decision contested.
2. **window**: the frameworks ``j`` with a declared shape, still in the run, whose exact
   weighted dominant share is at most ``m``'s after one more task,
   ``s_j / w_j <= (s_m + d_m) / w_m`` in exact terms, at most ``window`` of them in sorter order.
3. **claim**: such a ``j`` claims ``l_m`` when its task fits ``l_m``'s free resources, it has not
   refused ``l_m``, its eq. 9 reference resource (its first demanded one) is ``m``'s, and it fits
   ``l_m``'s available resources strictly better, ``H(j, l_m) < H(m, l_m)``. The claimant with
   the least H (then the first in sorter order) is served one task on ``l_m``; ``m`` stays in the
   run and is served next unless another claim wins, or is parked when nothing fits it any more.

Where it applies: policy ``drf`` with ``best-fit`` placement, ``CoreConfig.fit_window > 0``, and
heterogeneous active agents (``KindFits.refresh``: at least two capacities that are not
multiples of one another). On one agent, or on agents whose capacities are all multiples of one
vector, nobody is ever misplaced, so the run makes exactly the decisions of plain progressive
filling and every single-pool guarantee of ``tests/property/test_drf_properties.py`` stands as
it was. What remains on heterogeneous agents, with proofs and counterexamples:
``docs/fairness-guarantees.md``.

Exactness: eq. 9 is compared in integers. With ``ref`` the task's reference resource,
``L = lcm_j T_j`` over the pool's resources and ``W_j = L / T_j``,
``H(i, l) = (T_ref / L) * N / D`` where ``N = sum_j W_j |t_j f_ref - f_j t_ref|`` and
``D = t_ref f_ref`` (``t`` the task, ``f`` the agent's free or total milli quantities); the
factor ``T_ref / L`` is common to tasks with the same reference, so ``(N, D)`` pairs are
compared by cross-multiplication. Window membership is exact: the float sorter keys decide
where they are clearly apart from the bound (a 1e-9 relative margin, far above their rounding),
``exact_share`` (``Fraction``s of milli integers) decides within it. Deterministic: no clock,
no randomness; ties go to sorter order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction

from fairshare.resources import ResourceVector, canonical_order

from master.core.records import AgentList

__all__ = [
    "KIND_TOLERANCE",
    "Direction",
    "EqNine",
    "Fit",
    "KindFits",
    "capacity_fit",
    "clearly_worse",
    "direction",
    "exact_share",
    "first_resource",
    "fits_better",
    "task_norm",
]

KIND_TOLERANCE = Fraction(1, 4)
"""Capacities whose resource ratios are within this factor of each other are one kind for every
task (``clearly_worse``)."""

Fit = tuple[int, int]
"""H(i, l) up to a factor common to one reference resource, as ``(N, D)``: ``H ∝ N / D``."""


def fits_better(a: Fit, b: Fit) -> bool:
    """True when fit ``a`` is strictly smaller (better) than ``b``."""
    return a[0] * b[1] < b[0] * a[1]


def first_resource(shape: ResourceVector) -> str:
    """Eq. 9's index 1: the task's first demanded resource in canonical order."""
    return min(shape.names(), key=canonical_order)


class EqNine:
    """Eq. 9 of DRFH against one pool total, in integers (see the module docstring)."""

    __slots__ = ("weights",)

    def __init__(self, total: ResourceVector) -> None:
        names = sorted(total.names(), key=canonical_order)
        scale = math.lcm(*(total.millis(name) for name in names)) if names else 1
        self.weights = [(name, scale // total.millis(name)) for name in names]

    def fit(self, task: Mapping[str, int], ref: str, room: Mapping[str, int]) -> Fit:
        """``(N, D)`` of H for a task (milli quantities, reference ``ref``) on ``room`` (an
        agent's free or total milli quantities, holding at least the task's ``ref``)."""
        t_ref = task[ref]
        f_ref = room.get(ref, 0)
        total = 0
        for name, weight in self.weights:
            diff = task.get(name, 0) * f_ref - room.get(name, 0) * t_ref
            total += weight * (diff if diff >= 0 else -diff)
        return total, t_ref * f_ref


def exact_share(
    allocated: ResourceVector,
    footprint: ResourceVector,
    count: int,
    total: ResourceVector,
    weight: float,
) -> Fraction | None:
    """``max_r (allocated_r + count * footprint_r) / total_r / weight`` exactly (the weighted
    dominant share DRF's key rounds); ``None`` when the pool lacks one of the resources."""
    held, needs = allocated.millis_view(), footprint.millis_view()
    best_num, best_den = 0, 1
    for name in held.keys() | needs.keys():
        denominator = total.millis(name)
        if not denominator:
            return None
        numerator = held.get(name, 0) + count * needs.get(name, 0)
        if numerator * best_den > best_num * denominator:
            best_num, best_den = numerator, denominator
    return Fraction(best_num, best_den) / Fraction(weight)


Direction = tuple[tuple[str, Fraction], ...]


def direction(capacity: ResourceVector) -> Direction:
    """The capacity up to a positive factor: its resources relative to its first one."""
    items = list(capacity.millis_items())
    first = items[0][1]
    return tuple((name, Fraction(millis, first)) for name, millis in items)


def capacity_fit(
    shape: ResourceVector, capacity: ResourceVector, scale: ResourceVector
) -> Fraction:
    """Eq. 9 of a task against an agent's capacity, ``sum_j (N_ref / N_j) |t_j / t_ref - c_j /
    c_ref|`` over the resources of either, each normalized by ``scale`` (the largest agent's
    quantity ``N_j``, as DRFH Table I normalizes its servers to the maximum one)."""
    ref = first_resource(shape)
    t_ref, c_ref, n_ref = shape.millis(ref), capacity.millis(ref), scale.millis(ref)
    total = Fraction(0)
    for name in shape.names() | capacity.names():
        if name != ref:
            gap = Fraction(shape.millis(name), t_ref) - Fraction(capacity.millis(name), c_ref)
            total += Fraction(n_ref, scale.millis(name)) * abs(gap)
    return total


def task_norm(shape: ResourceVector, scale: ResourceVector) -> Fraction:
    """The task's own size in ``capacity_fit``'s terms: ``sum_j (N_ref / N_j) t_j / t_ref``
    (the reference resource counts 1)."""
    ref = first_resource(shape)
    t_ref, n_ref = shape.millis(ref), scale.millis(ref)
    return sum(
        (Fraction(n_ref * m, scale.millis(name) * t_ref) for name, m in shape.millis_items()),
        Fraction(0),
    )


def clearly_worse(fit: Fraction, home: Fraction, norm: Fraction) -> bool:
    """True when a capacity fit ``fit`` is worse than the best one, ``home``, by more than
    ``KIND_TOLERANCE * (home + norm)``.

    Why this margin: write ``rho_j = c_j / c_ref`` for a capacity's ratios (scaled as in
    ``capacity_fit``). By the triangle inequality term by term, two capacities ``a`` and ``h``
    have ``|fit_a - fit_h| <= sum_j W_j |rho_aj - rho_hj|``, and ``fit_h + norm >=
    sum_j W_j rho_hj`` (``|q - rho| + q >= rho``). So when every ratio of ``a`` is within a
    factor ``1 +- KIND_TOLERANCE`` of ``h``'s, ``a`` is never clearly worse: agents that differ
    by a few per cent (hosts reporting slightly different memory) are one kind for every task.
    """
    return fit - home > KIND_TOLERANCE * (home + norm)


class KindFits:
    """Which agent capacities ("kinds") fit a task shape best, kept across runs.

    ``refresh`` takes note of the active agents' kinds (``AgentList.kinds``) and of the largest
    agent (the normalization of ``capacity_fit``): a new kind updates the known best kinds, a
    kind that leaves drops the shapes it was best for, a new largest agent drops everything.
    Invariants: ``home(shape)`` is the least ``capacity_fit`` of ``shape`` over the kinds that
    hold it; ``misplaced(shape, capacity)`` is ``clearly_worse(capacity_fit(shape, capacity),
    home(shape), task_norm(shape))``; ``heterogeneous`` is false exactly when all kinds are
    multiples of one vector, and then nothing is ever misplaced (eq. 9 on capacities only sees
    their directions).
    """

    __slots__ = ("_agents", "_directions", "_homes", "_kinds", "_misplaced", "_scale", "_version")

    def __init__(self) -> None:
        self._agents: AgentList | None = None
        self._scale = ResourceVector()
        self._version = -1
        self._kinds: set[ResourceVector] = set()
        self._directions: dict[Direction, int] = {}
        self._homes: dict[ResourceVector, tuple[Fraction, ResourceVector] | None] = {}
        self._misplaced: dict[tuple[ResourceVector, ResourceVector], bool] = {}

    @property
    def heterogeneous(self) -> bool:
        """True when the active agents' capacities are not all multiples of one vector."""
        return len(self._directions) > 1

    def refresh(self, agents: AgentList, largest: ResourceVector) -> bool:
        """Take note of the active agents and the largest one; ``heterogeneous`` after it."""
        if agents is not self._agents or largest != self._scale:
            self._agents, self._scale, self._version = agents, largest, -1
            self._kinds, self._directions, self._homes = set(), {}, {}
        if agents.kinds_version != self._version:
            self._version = agents.kinds_version
            current = agents.kinds.keys()
            for kind in [k for k in self._kinds if k not in current]:
                self._forget(kind)
            for kind in [k for k in current if k not in self._kinds]:
                self._learn(kind)
            self._misplaced = {}
        return self.heterogeneous

    def _learn(self, kind: ResourceVector) -> None:
        self._kinds.add(kind)
        way = direction(kind)
        self._directions[way] = self._directions.get(way, 0) + 1
        for shape, home in self._homes.items():
            if shape.fits_in(kind):
                fit = capacity_fit(shape, kind, self._scale)
                if home is None or fit < home[0]:
                    self._homes[shape] = (fit, kind)

    def _forget(self, kind: ResourceVector) -> None:
        self._kinds.discard(kind)
        way = direction(kind)
        count = self._directions[way] - 1
        if count:
            self._directions[way] = count
        else:
            del self._directions[way]
        for shape in [s for s, home in self._homes.items() if home is not None and home[1] == kind]:
            del self._homes[shape]

    def home(self, shape: ResourceVector) -> Fraction | None:
        """The least ``capacity_fit`` of ``shape`` over the kinds holding it (None: none)."""
        if shape not in self._homes:
            best: tuple[Fraction, ResourceVector] | None = None
            for kind in self._kinds:
                if shape.fits_in(kind):
                    fit = capacity_fit(shape, kind, self._scale)
                    if (
                        best is None
                        or fit < best[0]
                        or (fit == best[0] and str(kind) < str(best[1]))
                    ):
                        best = (fit, kind)
            self._homes[shape] = best
        home = self._homes[shape]
        return None if home is None else home[0]

    def misplaced(self, shape: ResourceVector, capacity: ResourceVector) -> bool:
        """True when ``capacity`` fits ``shape`` clearly worse than its best kind does
        (``clearly_worse``): it is not the kind of agent ``shape`` suits."""
        key = (shape, capacity)
        known = self._misplaced.get(key)
        if known is None:
            home = self.home(shape)
            known = home is not None and clearly_worse(
                capacity_fit(shape, capacity, self._scale), home, task_norm(shape, self._scale)
            )
            self._misplaced[key] = known
        return known
