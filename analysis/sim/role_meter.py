"""What a simulation measures per role when users sit in roles: each role's dominant share over
time and, over ``[measure_from, end]``, the time average of what its subtree holds.

A role's *holding* is the sum, over the users whose role is the role or below it
(``fairshare.roles.is_within``), of their running tasks' shapes; its dominant share is the
largest fraction of the pool it holds (the same figure whatever the hierarchy, so runs under
``naive`` and ``hdrf`` compare directly). The roles listed are every user's role, their
ancestors, and those the scenario weighs.

With quotas (``roles.<path>.guarantee``/``limit``), ``observe`` runs after every allocation run
and notes the first instant, from the moment its quota is set, at which a guaranteed role holds
its guarantee of every guaranteed resource (``guarantee_met_at``, exact: not sampled); the
report gives each role with a quota its ``guarantee``, ``limit`` and ``quota_at`` too.

Invariants: ``sample`` is called by ``Meter.sample`` (one value per sampled instant, in step with
``Meter.times``); ``report`` is exact: ``mean_held[r]`` is the integral of the role's holding
of ``r`` over the integral of the pool's ``r`` (as ``mean_utilization``), from the users' running
task integrals, so it does not depend on how often samples are taken.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fairshare.resources import ResourceVector
from fairshare.roles import DEFAULT_ROLE, ancestors, is_within

from analysis.sim.population import SimUser
from analysis.sim.scenario_specs import RoleQuota

__all__ = ["RoleMeter"]


class RoleMeter:
    """Per-role series and time averages of a run (module docstring)."""

    def __init__(
        self,
        users: Mapping[str, SimUser],
        weights: Mapping[str, float],
        resources: list[str],
        quotas: Sequence[RoleQuota] = (),
    ) -> None:
        paths: set[str] = set(weights) | {spec.role for spec in quotas}
        for user in users.values():
            role = user.spec.role
            paths.update([role] if role == DEFAULT_ROLE else ancestors(role))
        self.paths = sorted(paths)
        self.weights = dict(weights)
        self.resources = resources
        self.members = {
            path: [uid for uid, user in users.items() if is_within(user.spec.role, path)]
            for path in self.paths
        }
        self.shares: dict[str, list[float]] = {path: [] for path in self.paths}
        self.quotas = {spec.role: spec for spec in quotas}
        self.met_at: dict[str, float | None] = {
            spec.role: None for spec in quotas if spec.quota.guarantee
        }

    def _held(self, users: Mapping[str, SimUser], path: str) -> dict[str, int]:
        held = dict.fromkeys(self.resources, 0)
        for uid in self.members[path]:
            user = users[uid]
            if user.running:
                for name, millis in user.shape:
                    held[name] = held.get(name, 0) + millis * user.running
        return held

    def sample(self, users: Mapping[str, SimUser], total: ResourceVector) -> None:
        """Append each role's dominant share of the pool now."""
        for path in self.paths:
            held = self._held(users, path)
            share = 0.0
            for name, millis in held.items():
                pool = total.millis(name)
                if pool and millis / pool > share:
                    share = millis / pool
            self.shares[path].append(share)

    def observe(self, now: float, users: Mapping[str, SimUser]) -> None:
        """After an allocation run: note the guaranteed roles that hold their guarantee now."""
        for path, met in self.met_at.items():
            spec = self.quotas[path]
            if met is not None or now < spec.at:
                continue
            held = self._held(users, path)
            if all(held.get(name, 0) >= m for name, m in spec.quota.guarantee.millis_items()):
                self.met_at[path] = now

    def drop_last(self) -> None:
        """Forget the last sample (a later one at the same instant replaces it)."""
        for series in self.shares.values():
            series.pop()

    def report(
        self, users: Iterable[SimUser], window: float, pool_area: Mapping[str, float]
    ) -> list[dict[str, Any]]:
        """Per role, sorted: its weight, the time-average number of its running tasks and what
        it held over the measured window (``window`` seconds, the pool integral
        ``pool_area`` per resource in milli-units x seconds)."""
        by_id = {user.spec.id: user for user in users}
        rows = []
        for path in self.paths:
            area = dict.fromkeys(self.resources, 0.0)
            running = 0.0
            for uid in self.members[path]:
                user = by_id[uid]
                running += user.running_area
                for name, millis in user.shape:
                    area[name] = area.get(name, 0.0) + millis * user.running_area
            held = {
                name: area[name] / pool if (pool := pool_area.get(name, 0.0)) else 0.0
                for name in area
            }
            rows.append(
                {
                    "path": path,
                    "weight": self.weights.get(path, 1.0),
                    "users": list(self.members[path]),
                    "mean_running": running / window if window > 0 else 0.0,
                    "mean_held": held,
                    "mean_dominant_share": max(held.values(), default=0.0),
                }
            )
            spec = self.quotas.get(path)
            if spec is not None:
                limit = spec.quota.limit
                rows[-1]["guarantee"] = spec.quota.guarantee.to_dict()
                rows[-1]["limit"] = None if limit is None else limit.to_dict()
                rows[-1]["quota_at"] = spec.at
                if path in self.met_at:
                    rows[-1]["guarantee_met_at"] = self.met_at[path]
        return rows
