"""Quotas in the fluid allocation over the role tree (``analysis.fluid.tree``): which leaves
they stop, and when the next of their events comes.

The quotas are ``master.core.quota``'s (a guarantee and a limit per role path, per resource),
read with the semantics of Mesos 1.9's quota (the Apache Mesos documentation, "Quota":
guarantees and limits; its hierarchical allocator's two allocation stages and quota
*headroom*), which the core's whole-task run follows; here for divisible tasks on one pool,
exactly. A role's *consumption* is what the leaves (frameworks) of its subtree hold, ``x_i a_i``
summed, in fractions of the pool. A leaf *needs* resource ``r`` when its task shape has some of
it; the *chain* of a leaf is the roles with a quota containing its role (itself and its
ancestors).

- Limits (both stages): when a role's consumption of a resource its limit names reaches the
  limit, every leaf of its subtree that needs that resource stops (its share cannot grow
  without that resource growing: tasks are not cut). Mesos 1.9: a limit caps what the role is
  offered plus what it uses; the core refuses a unit that would cross it.
- Stage ``guarantees``: only leaves going toward a guarantee grow: a leaf grows when some role
  of its chain guarantees a resource it needs. Each guaranteed resource ``r`` the leaf needs is
  filled up to the guarantee: the leaf stops as soon as every role of its chain that
  guarantees ``r`` holds its guarantee of ``r`` (a sub-role's guarantee is served beyond its
  parent's met guarantee, as the core serves a unit toward the guarantee of the role or of an
  ancestor). Resources no guarantee of the chain names ride along (Mesos 1.9's first stage
  allocates them with the guaranteed ones). Mesos 1.9 cuts the first stage's offers to the
  unmet guarantee per resource, so a task whose shape has met one of its guaranteed resources
  no longer fits such an offer: a leaf stops at the *first* of its guaranteed resources met.
  (The core, serving whole tasks, serves a unit while it holds *some* resource still below a
  guarantee, so with a guarantee on several resources a task may pass one to meet another;
  with one guaranteed resource per role, or shapes in proportion to the guarantee, both stop
  at the same point, and the core's whole tasks converge to this filling.)
- Stage ``all``: every leaf grows, within the limits, and the pool keeps the *headroom* the
  unmet guarantees need: per resource ``r``, ``slack_r = free_r - sum over the top-most
  guaranteed roles G of max(0, g_G,r - c_G,r)`` never goes below 0. When it is 0, a leaf needing
  ``r`` stops unless the top-most guaranteed role containing it still misses some of ``r``
  (its growth then meets its own guarantee as it takes the free pool: the slack stays 0), as
  the core's ``QuotaLedger.leaves_headroom``. As in Mesos 1.9 the headroom is kept whether or
  not the guaranteed role has demand (a guaranteed role with no framework keeps its guarantee
  free).

Every quantity only grows within a stage (consumption) or only shrinks (slack, unmet
guarantees), so a stopped leaf stays stopped until the stage ends; every event (a consumption
reaching a limit or a guarantee, a slack reaching 0) is linear in the filling's time and found
exactly.

Invariants: pure; with no quota the filling sees no stop and no event (``active`` is False);
resources the pool does not have are ignored (no leaf can need them, and a guarantee of one is
never met).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from fairshare.roles import is_within

from master.core.quota import Quota

__all__ = ["ALL", "GUARANTEES", "FluidQuotas"]

GUARANTEES = "guarantees"
ALL = "all"
ZERO = Fraction(0)


@dataclass
class _Owner:
    """A role with a quota: its subtree's leaves, guarantee and limit per resource index (in
    fractions of the pool), and whether it is a top-most guaranteed role (its unmet guarantee
    is headroom)."""

    path: str
    leaves: list[int]
    guarantee: dict[int, Fraction]
    limit: dict[int, Fraction]
    top: bool = False


class FluidQuotas:
    """The quotas of one fluid filling (module docstring)."""

    def __init__(
        self,
        quotas: Mapping[str, Quota],
        roles: Sequence[str],
        names: Sequence[str],
        total: Mapping[str, int],
        shapes: Sequence[Sequence[Fraction]],
    ) -> None:
        index = {name: i for i, name in enumerate(names)}

        def normalized(vector: Mapping[str, int]) -> dict[int, Fraction]:
            return {
                index[name]: Fraction(millis, total[name])
                for name, millis in vector.items()
                if name in index
            }

        self.shapes = shapes
        self.owners: list[_Owner] = []
        for path, quota in sorted(quotas.items()):
            if quota.empty:
                continue
            self.owners.append(
                _Owner(
                    path,
                    [i for i, role in enumerate(roles) if is_within(role, path)],
                    normalized(dict(quota.guarantee.millis_items())),
                    {} if quota.limit is None else normalized(dict(quota.limit.millis_items())),
                )
            )
        guaranteed = [owner for owner in self.owners if owner.guarantee]
        for owner in guaranteed:
            owner.top = not any(
                other is not owner and is_within(owner.path, other.path) for other in guaranteed
            )
        self.tops = [owner for owner in guaranteed if owner.top]
        self.active = bool(self.owners)
        self.has_guarantees = bool(guaranteed)
        self.chains: list[list[_Owner]] = [[] for _ in roles]
        for owner in self.owners:
            for leaf in owner.leaves:
                self.chains[leaf].append(owner)
        self.top_of: list[_Owner | None] = [None] * len(roles)
        for owner in self.tops:
            for leaf in owner.leaves:
                self.top_of[leaf] = owner
        self.eligible = [
            any(shape[r] > 0 for owner in chain for r in owner.guarantee)
            for shape, chain in zip(shapes, self.chains, strict=True)
        ]

    # -- what the roles hold ------------------------------------------------------------------

    def _held(self, owner: _Owner, tasks: Sequence[Fraction]) -> list[Fraction]:
        held = [ZERO] * len(self.shapes[0]) if self.shapes else []
        for leaf in owner.leaves:
            x = tasks[leaf]
            if x:
                held = [h + x * a for h, a in zip(held, self.shapes[leaf], strict=True)]
        return held

    def _slack(
        self, held: Mapping[int, list[Fraction]], used: Sequence[Fraction]
    ) -> list[Fraction]:
        """Per resource: the free pool minus the headroom the unmet guarantees need."""
        slack = [1 - u for u in used]
        for owner in self.tops:
            mine = held[id(owner)]
            for r, g in owner.guarantee.items():
                if mine[r] < g:
                    slack[r] -= g - mine[r]
        return slack

    # -- stops and events ---------------------------------------------------------------------

    def stopped(
        self, tasks: Sequence[Fraction], used: Sequence[Fraction], stage: str
    ) -> list[bool]:
        """The leaves the quotas stop now, in ``stage``."""
        held = {id(owner): self._held(owner, tasks) for owner in self.owners}
        slack = self._slack(held, used) if stage == ALL and self.tops else None
        stops = []
        for leaf, (shape, chain) in enumerate(zip(self.shapes, self.chains, strict=True)):
            stop = stage == GUARANTEES and not self.eligible[leaf]
            for owner in chain:
                if stop:
                    break
                mine = held[id(owner)]
                stop = any(shape[r] > 0 and mine[r] >= cap for r, cap in owner.limit.items())
            if not stop and stage == GUARANTEES:
                for r, a in enumerate(shape):
                    guarantors = [owner for owner in chain if r in owner.guarantee]
                    if (
                        a > 0
                        and guarantors
                        and all(held[id(owner)][r] >= owner.guarantee[r] for owner in guarantors)
                    ):
                        stop = True
                        break
            if not stop and slack is not None:
                top = self.top_of[leaf]
                for r, a in enumerate(shape):
                    if a > 0 and slack[r] <= 0:
                        relieved = (
                            top is not None
                            and r in top.guarantee
                            and held[id(top)][r] < top.guarantee[r]
                        )
                        if not relieved:
                            stop = True
                            break
            stops.append(stop)
        return stops

    def events(
        self,
        tasks: Sequence[Fraction],
        used: Sequence[Fraction],
        rates: Mapping[int, Fraction],
        consumption: Sequence[Fraction],
        stage: str,
    ) -> list[Fraction]:
        """The times (from now, at the leaves' task ``rates``; ``consumption`` is the pool's
        rate per resource) at which a quota event comes: a consumption reaches a limit, in
        ``guarantees`` a guarantee, in ``all`` a top-most role's guarantee or a slack 0."""
        times: list[Fraction] = []
        held: dict[int, list[Fraction]] = {}
        growth: dict[int, list[Fraction]] = {}
        for owner in self.owners:
            mine = held[id(owner)] = self._held(owner, tasks)
            rate = [ZERO] * len(mine)
            for leaf in owner.leaves:
                x = rates.get(leaf)
                if x:
                    rate = [g + x * a for g, a in zip(rate, self.shapes[leaf], strict=True)]
            growth[id(owner)] = rate
            caps = list(owner.limit.items())
            if stage == GUARANTEES or owner.top:
                caps.extend(owner.guarantee.items())
            for r, cap in caps:
                if rate[r] > 0 and mine[r] < cap:
                    times.append((cap - mine[r]) / rate[r])
        if stage == ALL and self.tops:
            slack = self._slack(held, used)
            for r, free in enumerate(slack):
                change = -consumption[r]
                for owner in self.tops:
                    if r in owner.guarantee and held[id(owner)][r] < owner.guarantee[r]:
                        change += growth[id(owner)][r]
                if free > 0 and change < 0:
                    times.append(free / -change)
        return times
