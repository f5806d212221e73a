"""Fairness policies: which framework is the most deprived, as a sort key (lower goes first).

Policy apart from mechanism (docs/architecture.md §2, Mesos's sorter):
a ``FairnessPolicy`` only turns
(allocation, pool total, weight, declared task shape) into a number; the ``Sorter`` orders by it and
the allocator acts on it. Policies are picked by name from ``FAIRNESS_POLICIES``.

Invariants:
- ``key`` is a pure function of its arguments and of what the last ``prepare`` call saw; the
  allocator calls ``prepare`` again whenever the pool total, the agents or the declared demands
  change, and re-sorts every framework after it.
- Keys of frameworks holding nothing are 0 (except under ``pf`` before any price is known, where
  they are 0 as well), so a newcomer is served first.
- ``footprint(shape)`` is what one task of ``shape`` is charged; it covers ``shape``.

Policies:
- ``drf``: weighted Dominant Resource Fairness, ``max_r alloc_r / total_r / weight`` (Ghodsi et
  al., §4 and weighted DRF §4.3 with equal per-resource weights). On many agents the pool total is
  the whole cluster, which makes it DRFH's global dominant share (Wang et al., eq. 2-3).
- ``asset``: asset fairness, ``sum_r alloc_r / total_r / weight`` (Ghodsi et al., §5.1), summed
  exactly so equal shares tie exactly.
- ``pf``: proportional fairness by "serving the most deprived job" (Bonald & Roberts §4.1): the key
  is ``phi_i * sum_j a_ij nu_j / w_i`` = ``sum_j (alloc_ij / total_j) nu_j / w_i``, with prices
  ``nu`` from the gradient iteration of eq. 9 over the declared task shapes (``prepare``). With no
  declared shape every price is 1 (asset fairness).
- ``slots``: the slot scheduler baseline the papers beat (Hadoop Fair Scheduler; DRFH §VI Table
  II): the largest agent is cut into ``slots_per_agent`` equal slots, every task is charged whole
  slots, and frameworks are ordered by slots held.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

from fairshare.resources import ResourceVector, canonical_order

from master.core.proportional import pf_prices

__all__ = [
    "FAIRNESS_POLICIES",
    "AssetFairness",
    "DeclaredDemand",
    "DominantResourceFairness",
    "FairnessPolicy",
    "PoolShape",
    "ProportionalFairness",
    "SlotFairness",
    "make_fairness_policy",
]


@dataclass(frozen=True, slots=True)
class DeclaredDemand:
    """A framework's declared task shape, how many tasks it wants in all, and its weight."""

    shape: ResourceVector
    wanted: int
    weight: float


@dataclass(frozen=True, slots=True)
class PoolShape:
    """What a policy may know of the pool: its total and its largest agent (per resource)."""

    total: ResourceVector
    largest_agent: ResourceVector


class FairnessPolicy(Protocol):
    """Strategy turning what a framework holds into a fairness sort key (lower is served first).

    ``depends_on_demands``: the keys depend on every framework's declared demand (``prepare``
    must see them again whenever one changes), as PF's prices do. ``dominant_shares``: the keys
    are weighted global dominant shares, the quantity DRFH equalizes, so DRFH's fit-aware choice
    (``master.core.fit``) and its allocation as a target (``master.core.rebalance``) apply.
    """

    name: str
    depends_on_demands: bool
    dominant_shares: bool

    def prepare(self, pool: PoolShape, demands: Sequence[DeclaredDemand]) -> None:
        """Take note of the pool and of the declared demands of the active frameworks."""

    def key(
        self,
        allocated: ResourceVector,
        total: ResourceVector,
        weight: float,
        shape: ResourceVector | None,
    ) -> float:
        """The framework's sort key."""
        ...

    def footprint(self, shape: ResourceVector) -> ResourceVector:
        """The resources one task of ``shape`` is charged."""
        ...

    def stepper(
        self,
        allocated: ResourceVector,
        footprint: ResourceVector,
        total: ResourceVector,
        weight: float,
        shape: ResourceVector | None,
    ) -> KeyStepper:
        """``k -> key(allocated + k * footprint, …)``, bit for bit, without building vectors."""
        ...


KeyStepper = Callable[[int], float]


def _columns(
    allocated: ResourceVector, footprint: ResourceVector, total: ResourceVector
) -> list[tuple[int, int, int]] | None:
    """``(allocated_r, footprint_r, total_r)`` in canonical order; None if a total is missing."""
    names = sorted(allocated.names() | footprint.names(), key=canonical_order)
    columns = [(allocated.millis(n), footprint.millis(n), total.millis(n)) for n in names]
    if any(not denominator for _, _, denominator in columns):
        return None
    return columns


def _without(vector: ResourceVector, excluded: frozenset[str]) -> ResourceVector:
    """``vector`` less the resources in ``excluded``."""
    millis = vector.millis_view()
    if excluded.isdisjoint(millis):
        return vector
    return ResourceVector.from_millis({n: m for n, m in millis.items() if n not in excluded})


def _infinite(tasks: int) -> float:
    return math.inf


def _rebuilding_stepper(
    policy: FairnessPolicy,
    allocated: ResourceVector,
    footprint: ResourceVector,
    total: ResourceVector,
    weight: float,
    shape: ResourceVector | None,
) -> KeyStepper:
    """A stepper that builds ``allocated + k * footprint`` and asks ``policy.key``."""
    return lambda tasks: policy.key(allocated + footprint * tasks, total, weight, shape)


class DominantResourceFairness:
    """Weighted DRF (Ghodsi et al. §4, §4.3); DRFH's global dominant share on many agents."""

    name = "drf"
    depends_on_demands = False
    dominant_shares = True

    def prepare(self, pool: PoolShape, demands: Sequence[DeclaredDemand]) -> None:
        """DRF needs nothing beyond the pool total passed to ``key``."""

    def __init__(self, excluded: frozenset[str] = frozenset()) -> None:
        self.excluded = excluded  # resources no share counts (fair-sharing exclusions)

    def key(
        self,
        allocated: ResourceVector,
        total: ResourceVector,
        weight: float,
        shape: ResourceVector | None,
    ) -> float:
        """``max_r alloc_r / total_r`` over the resources that count, divided by the weight."""
        if self.excluded:
            allocated = _without(allocated, self.excluded)
        share = allocated.dominant_share(total)
        return share if weight == 1.0 else share / weight

    def footprint(self, shape: ResourceVector) -> ResourceVector:
        """A task is charged exactly its shape."""
        return shape

    def stepper(
        self,
        allocated: ResourceVector,
        footprint: ResourceVector,
        total: ResourceVector,
        weight: float,
        shape: ResourceVector | None,
    ) -> KeyStepper:
        """``max_r (a_r + k f_r) / T_r / w``: the same divisions ``key`` makes (the order of
        the resources does not matter to a maximum, so they are not sorted)."""
        held, needs, totals = allocated.millis_view(), footprint.millis_view(), total.millis_view()
        columns = []
        for name in held.keys() | needs.keys():
            if name in self.excluded:
                continue
            denominator = totals.get(name, 0)
            if not denominator:
                return _infinite
            columns.append((held.get(name, 0), needs.get(name, 0), denominator))
        if len(columns) == 2:
            (a0, f0, t0), (a1, f1, t1) = columns

            def dominant_pair(tasks: int) -> float:
                first, second = (a0 + tasks * f0) / t0, (a1 + tasks * f1) / t1
                share = first if first >= second else second
                return share if weight == 1.0 else share / weight

            return dominant_pair

        def dominant(tasks: int) -> float:
            share = max([(a + tasks * f) / t for a, f, t in columns], default=0.0)
            return share if weight == 1.0 else share / weight

        return dominant


class AssetFairness:
    """Asset fairness (Ghodsi et al. §5.1): max-min of the sum of shares."""

    name = "asset"
    depends_on_demands = False
    dominant_shares = False

    def prepare(self, pool: PoolShape, demands: Sequence[DeclaredDemand]) -> None:
        """Asset fairness needs nothing beyond the pool total passed to ``key``."""

    def key(
        self,
        allocated: ResourceVector,
        total: ResourceVector,
        weight: float,
        shape: ResourceVector | None,
    ) -> float:
        """``sum_r alloc_r / total_r`` summed exactly (one rounding), divided by the weight."""
        aggregate = Fraction(0)
        for name, millis in allocated.millis_items():
            denominator = total.millis(name)
            if not denominator:
                return float("inf")
            aggregate += Fraction(millis, denominator)
        return float(aggregate) / weight

    def footprint(self, shape: ResourceVector) -> ResourceVector:
        """A task is charged exactly its shape."""
        return shape

    def stepper(
        self,
        allocated: ResourceVector,
        footprint: ResourceVector,
        total: ResourceVector,
        weight: float,
        shape: ResourceVector | None,
    ) -> KeyStepper:
        """``key`` of ``allocated + k * footprint`` (exact sums; asset is not on a hot path)."""
        return _rebuilding_stepper(self, allocated, footprint, total, weight, shape)


class ProportionalFairness:
    """PF, "serve the most deprived job" (Bonald & Roberts §4.1) with eq. 9 prices."""

    name = "pf"
    depends_on_demands = True  # the prices of eq. 9 come from the declared demands
    dominant_shares = False

    def __init__(self) -> None:
        self.prices: dict[str, float] = {}

    def prepare(self, pool: PoolShape, demands: Sequence[DeclaredDemand]) -> None:
        """Recompute the prices ``nu`` of the pool's resources (eq. 9) from the demands.

        Rows are the per-task shares ``a_ij = shape_j / total_j``; weights make it weighted PF
        (``w_i / phi_i = sum_j a_ij nu_j``) and a framework's wanted count caps ``phi_i``
        (finite demand, as in the fluid solver), so a framework that wants little does not
        price the others out. A capped framework below its cap then has a key under the
        others' and is served first, which is what PF does when a cap binds.
        """
        names = sorted(pool.total.names())
        usable = [d for d in demands if d.shape and d.shape.names() <= pool.total.names()]
        if not names or not usable:
            self.prices = dict.fromkeys(names, 1.0)
            return
        rows = [[d.shape.millis(n) / pool.total.millis(n) for n in names] for d in usable]
        prices = pf_prices(
            rows,
            weights=[d.weight for d in usable],
            caps=[float(d.wanted) for d in usable],
        )
        self.prices = dict(zip(names, prices, strict=True))

    def key(
        self,
        allocated: ResourceVector,
        total: ResourceVector,
        weight: float,
        shape: ResourceVector | None,
    ) -> float:
        """``sum_j (alloc_j / total_j) * nu_j / w`` (= ``phi_i sum_j a_ij nu_j / w_i``)."""
        prices = self.prices
        value = 0.0
        for name, millis in allocated.millis_items():
            denominator = total.millis(name)
            if not denominator:
                return float("inf")
            value += millis / denominator * prices.get(name, 1.0)
        return value / weight

    def footprint(self, shape: ResourceVector) -> ResourceVector:
        """A task is charged exactly its shape."""
        return shape

    def stepper(
        self,
        allocated: ResourceVector,
        footprint: ResourceVector,
        total: ResourceVector,
        weight: float,
        shape: ResourceVector | None,
    ) -> KeyStepper:
        """``key`` of ``allocated + k * footprint`` (same terms, same order)."""
        columns = _columns(allocated, footprint, total)
        if columns is None:
            return _infinite
        names = sorted(allocated.names() | footprint.names(), key=canonical_order)
        prices = [self.prices.get(name, 1.0) for name in names]
        priced = [(a, f, t, p) for (a, f, t), p in zip(columns, prices, strict=True)]

        def price_weighted(tasks: int) -> float:
            value = 0.0
            for a, f, t, price in priced:
                millis = a + tasks * f
                if millis:
                    value += millis / t * price
            return value / weight

        return price_weighted


class SlotFairness:
    """Slot scheduler baseline: the largest agent holds ``slots_per_agent`` equal slots."""

    name = "slots"
    depends_on_demands = False
    dominant_shares = False

    def __init__(self, slots_per_agent: int = 14) -> None:
        if slots_per_agent < 1:
            raise ValueError(f"slots_per_agent must be at least 1, got {slots_per_agent}")
        self.slots_per_agent = slots_per_agent
        self.slot = ResourceVector()

    def prepare(self, pool: PoolShape, demands: Sequence[DeclaredDemand]) -> None:
        """One slot is the largest agent divided by ``slots_per_agent`` (DRFH Table II)."""
        self.slot = ResourceVector.from_millis(
            {n: m // self.slots_per_agent for n, m in pool.largest_agent.millis_items()}
        )

    def key(
        self,
        allocated: ResourceVector,
        total: ResourceVector,
        weight: float,
        shape: ResourceVector | None,
    ) -> float:
        """Slots held (the largest per-resource count of slot sizes), divided by the weight."""
        held = 0.0
        for name, millis in allocated.millis_items():
            size = self.slot.millis(name)
            if size:
                held = max(held, millis / size)
        return held / weight

    def footprint(self, shape: ResourceVector) -> ResourceVector:
        """Whole slots covering ``shape`` (at least one); resources slots lack are kept as is."""
        count = 1
        extra = {}
        for name, millis in shape.millis_items():
            size = self.slot.millis(name)
            if size:
                count = max(count, -(-millis // size))
            else:
                extra[name] = millis
        return self.slot * count + ResourceVector.from_millis(extra)

    def stepper(
        self,
        allocated: ResourceVector,
        footprint: ResourceVector,
        total: ResourceVector,
        weight: float,
        shape: ResourceVector | None,
    ) -> KeyStepper:
        """``key`` of ``allocated + k * footprint``."""
        return _rebuilding_stepper(self, allocated, footprint, total, weight, shape)


FAIRNESS_POLICIES: dict[str, Callable[[int], FairnessPolicy]] = {
    "drf": lambda slots_per_agent: DominantResourceFairness(),  # exclusions: make_fairness_policy
    "asset": lambda slots_per_agent: AssetFairness(),
    "pf": lambda slots_per_agent: ProportionalFairness(),
    "slots": SlotFairness,
}
"""Policy name -> factory taking the slots per agent (only the slot baseline uses it)."""


def make_fairness_policy(
    name: str, slots_per_agent: int = 14, excluded: frozenset[str] = frozenset()
) -> FairnessPolicy:
    """A fresh policy called ``name`` (``drf``, ``asset``, ``pf`` or ``slots``); ``excluded``
    resources count in no share (``drf`` only, as Mesos's DRF sorter)."""
    try:
        factory = FAIRNESS_POLICIES[name]
    except KeyError:
        known = ", ".join(sorted(FAIRNESS_POLICIES))
        raise ValueError(f"unknown fairness policy {name!r}; choose one of {known}") from None
    if excluded:
        if name != "drf":
            raise ValueError(f"only drf leaves resources out of shares, not {name!r}")
        return DominantResourceFairness(excluded)
    return factory(slots_per_agent)
