"""Quota per role path: guaranteed minimums and hard limits (Mesos 1.9 semantics).

A role's ``Quota`` has a *guarantee* (resources it gets when it asks, before the tree's fair
sharing hands out the rest) and a *limit* (its subtree never holds more: offered plus used).
Both are per resource: a limit names the resources it caps (``cpus:32`` caps cpus only), a
guarantee the resources it promises. References: Mesos 1.9's quota (docs/quota.md: limits cap
allocated plus offered; guarantees are served in a first allocation stage and protected by
*headroom*, free resources held back from roles above their guarantee), YuniKorn's guaranteed
and max per queue, Kueue's nominal quota.

Rules (``check_quotas``, ``InvalidArgument`` naming the role and the resource):
- a guarantee is at most the limit, for each resource the limit names;
- a parent with a guarantee guarantees at least the sum of its nearest descendants' guarantees
  (the roles with a guarantee whose closest ancestor with one it is);
- a child's limit is at most its parent's, for each resource both name (the limit in force is
  the smallest along the path anyway: every ancestor's limit is checked).
Top-level guarantees may add up to more than the cluster (agents join later): that is allowed
and shown as overcommitted by the views.

``QuotaLedger`` is one allocation run's bookkeeping (pure, exact millis): what each role with a
quota holds, whether a unit fits the limits of a framework's role and its ancestors
(``admits``), how much of a coarse offer does (``cut``), whether a role is *below its
guarantee* (some ancestor-or-self with a guarantee holds less of a guaranteed resource), and
the *headroom* the unmet guarantees of the top-most guaranteed roles need of the free pool, which
a unit to another role may not take (``leaves_headroom``).

Invariants: with no quota set the ledger admits everything and holds nothing back, so a run
is exactly the run without quotas; a role's consumption in the ledger is the sum of its
subtree's frameworks' ``allocated`` as of the run's start plus what the run gave them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from fairshare.resources import ResourceVector

from master.core.errors import InvalidArgument

__all__ = ["Quota", "QuotaLedger", "check_quotas", "quota_roles_over"]

EMPTY = ResourceVector()


@dataclass(frozen=True, slots=True)
class Quota:
    """A role's guarantee and limit (``None``: no limit)."""

    guarantee: ResourceVector = EMPTY
    limit: ResourceVector | None = None

    @property
    def empty(self) -> bool:
        return not self.guarantee and self.limit is None


def _within(role: str, ancestor: str) -> bool:
    return role == ancestor or role.startswith(ancestor + "/")


def _nearest_ancestor(role: str, among: Iterable[str]) -> str | None:
    """The closest strict ancestor of ``role`` in ``among``."""
    best: str | None = None
    for other in among:
        if other != role and _within(role, other) and (best is None or len(other) > len(best)):
            best = other
    return best


def check_quotas(quotas: Mapping[str, Quota]) -> None:
    """Refuse a quota table that breaks the rules of the module docstring."""
    for role, quota in sorted(quotas.items()):
        if quota.limit is not None:
            for name, millis in quota.guarantee.millis_items():
                limit = quota.limit.millis_view().get(name)
                if limit is not None and millis > limit:
                    raise InvalidArgument(
                        f"quota of {role!r}: guarantee {name}:{quota.guarantee.get(name):g} is"
                        f" above its limit {name}:{quota.limit.get(name):g}"
                    )
    guaranteed = [role for role, q in quotas.items() if q.guarantee]
    children: dict[str, ResourceVector] = {}
    for role in guaranteed:
        parent = _nearest_ancestor(role, guaranteed)
        if parent is not None:
            children[parent] = children.get(parent, EMPTY) + quotas[role].guarantee
    for parent, summed in sorted(children.items()):
        own = quotas[parent].guarantee
        for name, millis in summed.millis_items():
            if millis > own.millis(name):
                raise InvalidArgument(
                    f"quota of {parent!r}: its sub-roles guarantee {name}:{summed.get(name):g}"
                    f" in all, more than its own guarantee {name}:{own.get(name):g}"
                )
    limited = [role for role, q in quotas.items() if q.limit is not None]
    for role in limited:
        parent = _nearest_ancestor(role, limited)
        if parent is None:
            continue
        mine, theirs = quotas[role].limit, quotas[parent].limit
        assert mine is not None and theirs is not None
        for name, millis in mine.millis_items():
            cap = theirs.millis_view().get(name)
            if cap is not None and millis > cap:
                raise InvalidArgument(
                    f"quota of {role!r}: limit {name}:{mine.get(name):g} is above its parent"
                    f" {parent!r}'s limit {name}:{theirs.get(name):g}"
                )


def quota_roles_over(role: str, quotas: Mapping[str, Quota]) -> list[str]:
    """The roles with a quota that contain ``role`` (itself and its ancestors), outermost
    first."""
    return sorted((q for q in quotas if _within(role, q)), key=len)


class QuotaLedger:
    """One allocation run's view of the quotas (see the module docstring)."""

    def __init__(
        self,
        quotas: Mapping[str, Quota],
        held_by_role: Mapping[str, ResourceVector],
        free: Mapping[str, int],
    ) -> None:
        """``held_by_role``: what each role's own frameworks hold (not its subtree's);
        ``free``: what the pool has free, per resource (the active agents' free resources)."""
        self.quotas = {role: q for role, q in quotas.items() if not q.empty}
        self.held: dict[str, dict[str, int]] = {role: {} for role in self.quotas}
        for role, held in held_by_role.items():
            for owner in quota_roles_over(role, self.quotas):
                into = self.held[owner]
                for name, millis in held.millis_items():
                    into[name] = into.get(name, 0) + millis
        self.free = dict(free)
        guaranteed = [role for role, q in self.quotas.items() if q.guarantee]
        self.top_guaranteed = [r for r in guaranteed if _nearest_ancestor(r, guaranteed) is None]
        self._limit_items = {
            role: tuple(q.limit.millis_items())
            for role, q in self.quotas.items()
            if q.limit is not None
        }
        self._chains: dict[str, list[str]] = {}
        self._limited: dict[str, list[str]] = {}
        self._top_of: dict[str, str | None] = {}
        # kept as units are recorded: what each top-most guaranteed role misses, and the sum
        self._top_unmet = {owner: self.unmet(owner) for owner in self.top_guaranteed}
        self.needed: dict[str, int] = {}
        for unmet in self._top_unmet.values():
            for name, millis in unmet.items():
                self.needed[name] = self.needed.get(name, 0) + millis
        self._holding_back = any(millis > 0 for millis in self.needed.values())

    def chain(self, role: str) -> list[str]:
        """The quota roles containing ``role``, outermost first (cached per run)."""
        chain = self._chains.get(role)
        if chain is None:
            chain = self._chains[role] = quota_roles_over(role, self.quotas)
        return chain

    def limited_chain(self, role: str) -> list[str]:
        """The quota roles containing ``role`` that have a limit (cached per run)."""
        chain = self._limited.get(role)
        if chain is None:
            chain = [o for o in self.chain(role) if self.quotas[o].limit is not None]
            self._limited[role] = chain
        return chain

    def admits(self, role: str, unit: ResourceVector) -> bool:
        """Does ``unit`` fit the limits of ``role`` and every ancestor with one?"""
        needs = unit.millis_view()
        for owner in self.limited_chain(role):
            limit = self.quotas[owner].limit
            assert limit is not None
            held = self.held[owner]
            for name, cap in limit.millis_items():
                if held.get(name, 0) + needs.get(name, 0) > cap:
                    return False
        return True

    def cut(self, role: str, offered: ResourceVector) -> ResourceVector:
        """``offered`` cut to what the limits of ``role`` and its ancestors leave."""
        owners = self.limited_chain(role)
        if not owners:
            return offered
        has = offered.millis_view()
        millis: dict[str, int] | None = None  # copied only when something is cut
        for owner in owners:
            held = self.held[owner]
            for name, cap in self._limit_items[owner]:
                room = cap - held.get(name, 0)
                amount = has.get(name, 0) if millis is None else millis.get(name, 0)
                if amount > room:
                    if millis is None:
                        millis = dict(has)
                    millis[name] = max(0, room)
        if millis is None:
            return offered  # the hot path: nothing near its limit
        return ResourceVector.from_millis({n: m for n, m in millis.items() if m})

    def unmet(self, owner: str) -> dict[str, int]:
        """What ``owner``'s guarantee still misses, per resource (only the positive parts)."""
        held = self.held[owner]
        return {
            name: millis - held.get(name, 0)
            for name, millis in self.quotas[owner].guarantee.millis_items()
            if millis > held.get(name, 0)
        }

    def meets_guarantee(self, role: str, unit: ResourceVector) -> bool:
        """Does ``unit`` go toward an unmet guarantee of ``role`` or an ancestor (it holds some
        of a guaranteed resource that role still misses)? Only such units are served in the
        guarantees stage (Mesos's first stage allocates up to the guarantee)."""
        needs = unit.millis_view()
        for owner in self.chain(role):
            if self.quotas[owner].guarantee:
                for name in self.unmet(owner):
                    if needs.get(name, 0):
                        return True
        return False

    def cut_to_guarantee(self, role: str, offered: ResourceVector) -> ResourceVector:
        """A coarse offer in the guarantees stage: only what ``role``'s (and its ancestors')
        unmet guarantees miss."""
        missing: dict[str, int] = {}
        for owner in self.chain(role):
            if self.quotas[owner].guarantee:
                for name, millis in self.unmet(owner).items():
                    missing[name] = max(missing.get(name, 0), millis)
        has = offered.millis_view()
        return ResourceVector.from_millis(
            {n: min(m, has[n]) for n, m in missing.items() if has.get(n, 0)}
        )

    @property
    def holding_back(self) -> bool:
        """Do unmet guarantees still need some of the free pool? (Kept by ``record``.)"""
        return self._holding_back

    def headroom(self) -> dict[str, int]:
        """What the unmet guarantees of the top-most guaranteed roles need of the free pool."""
        return {name: millis for name, millis in self.needed.items() if millis > 0}

    def _relief(self, role: str) -> dict[str, int]:
        """What the unmet guarantee of ``role``'s top-most guaranteed role misses (``{}``)."""
        top = self._top_of.get(role, "")
        if top == "":
            top = next((o for o in self.chain(role) if o in self._top_unmet), None)
            self._top_of[role] = top
        return self._top_unmet[top] if top is not None else {}

    def leaves_headroom(self, role: str, unit: ResourceVector) -> bool:
        """Would the pool, after giving ``unit`` to ``role``, still hold the headroom the other
        roles' unmet guarantees need? (What ``role``'s own unmet guarantee gets of ``unit``
        counts as meeting it, not as taking it.)"""
        needed = self.needed
        if not self.holding_back:
            return True
        relief = self._relief(role)
        for name, millis in unit.millis_items():
            want = needed.get(name, 0)
            if not want:
                continue
            own = min(millis, relief.get(name, 0))
            if self.free.get(name, 0) - millis < want - own:
                return False
        return True

    def cut_headroom(self, role: str, offered: ResourceVector) -> ResourceVector:
        """``offered`` cut so that the pool keeps the headroom of the other roles' unmet
        guarantees (``role``'s own unmet guarantee may take its part)."""
        if not self._holding_back:
            return offered
        relief = self._relief(role)
        has = offered.millis_view()
        free = self.free
        millis: dict[str, int] | None = None  # copied only when something is cut
        for name, want in self.needed.items():
            amount = has.get(name, 0)
            if amount:
                spare = free.get(name, 0) - (want - relief.get(name, 0))
                if amount > spare:
                    if millis is None:
                        millis = dict(has)
                    millis[name] = max(0, spare)
        if millis is None:
            return offered
        return ResourceVector.from_millis({n: m for n, m in millis.items() if m})

    def record(self, role: str, unit: ResourceVector) -> None:
        """``role`` got ``unit``: it counts for every quota role containing it."""
        units = unit.millis_view()
        for owner in self.chain(role):
            held = self.held[owner]
            for name, millis in units.items():
                held[name] = held.get(name, 0) + millis
        relief = self._relief(role)
        if relief:
            needed = self.needed
            for name, millis in units.items():
                unmet = relief.get(name, 0)
                met = millis if millis < unmet else unmet
                if met:
                    needed[name] -= met
                    if met == unmet:
                        del relief[name]  # relief is this run's own dict: kept current in place
                    else:
                        relief[name] = unmet - met
            if self._holding_back:
                self._holding_back = any(millis > 0 for millis in needed.values())
        free = self.free
        for name, millis in units.items():
            if name in free:
                free[name] -= millis
