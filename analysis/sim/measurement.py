"""What a simulation run measures: time series, utilization and tasks-per-user integrals, job
completion times, and the ``SimResult`` they make.

``Meter`` samples after allocation runs, when no offer is outstanding: each user's dominant
share (None while it is away) and each resource's utilization (``used`` over the pool, where
``used`` is the sum of running tasks' shapes: the task's demand, not the slots it is charged).
``mean_utilization`` is ``integral of used / integral of the pool`` per resource over
``[measure_from, end]`` (the pool grows as agents join), and each user's ``mean_running`` the
time average of its running tasks over the same window (``SimUser.count_running``).

With users in roles, ``roles`` (``analysis.sim.role_meter.RoleMeter``) samples each role's
dominant share with the rest and reports its time averages.

Invariants: ``integrate`` is called before ``used`` or the pool changes (the engine does so at
every instant with events), so the integrals are exact; at most one sample per instant (a
later sample at the same time replaces the earlier one).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fairshare.resources import ResourceVector

from analysis.sim.population import SimUser
from analysis.sim.role_meter import RoleMeter
from master.core import MasterState

__all__ = ["Meter", "SimResult", "completion_summary", "user_report"]


def completion_summary(times: list[float], submitted: int) -> dict[str, Any]:
    """Job completion times: count, mean, quantiles and the CDF (at most 101 points)."""
    ordered = sorted(times)
    count = len(ordered)
    summary: dict[str, Any] = {"submitted": submitted, "completed": count}
    if not count:
        summary.update(mean=None, p50=None, p90=None, p99=None, max=None, cdf=[])
        return summary

    def quantile(q: float) -> float:
        return ordered[min(count - 1, max(0, math.ceil(q * count) - 1))]

    points = (
        range(1, count + 1) if count <= 100 else (math.ceil(p * count / 100) for p in range(1, 101))
    )
    summary.update(
        mean=sum(ordered) / count,
        p50=quantile(0.5),
        p90=quantile(0.9),
        p99=quantile(0.99),
        max=ordered[-1],
        cdf=[[ordered[n - 1], n / count] for n in points],
    )
    return summary


class Meter:
    """The series sampled over a run and the integrals behind the mean figures."""

    def __init__(
        self,
        resources: list[str],
        user_ids: Iterable[str],
        measure_from: float,
        sample_every: float,
    ) -> None:
        self.resources = resources
        self.measure_from = measure_from
        self.sample_every = sample_every
        self.used = dict.fromkeys(resources, 0)  # millis of running tasks' shapes
        self.area = dict.fromkeys(resources, 0.0)  # integral of used over time (millis * s)
        self.pool_area = dict.fromkeys(resources, 0.0)  # integral of the pool total
        self.area_time = 0.0
        self.times: list[float] = []
        self.shares: dict[str, list[float | None]] = {u: [] for u in user_ids}
        self.utilization: dict[str, list[float]] = {r: [] for r in resources}
        self.last_sample = -math.inf
        self.roles: RoleMeter | None = None  # set by the engine when users sit in roles

    def sample(
        self, now: float, state: MasterState, users: Mapping[str, SimUser], force: bool = False
    ) -> None:
        """Sample shares and utilization (at most every ``sample_every``, unless ``force``)."""
        every = self.sample_every
        if not force and every > 0 and now < self.last_sample + every:
            return
        if self.times and self.times[-1] == now:
            for shares in self.shares.values():
                shares.pop()
            for used_series in self.utilization.values():
                used_series.pop()
            if self.roles is not None:
                self.roles.drop_last()
            self.times.pop()
        self.last_sample = now
        self.times.append(now)
        for user_id, user in users.items():
            share = state.dominant_share(user_id) if user.present else None
            self.shares[user_id].append(share)
        total = state.total
        for name in self.resources:
            pool = total.millis(name)
            self.utilization[name].append(self.used[name] / pool if pool else 0.0)
        if self.roles is not None:
            self.roles.sample(users, total)

    def integrate(self, now: float, total: ResourceVector) -> None:
        """Add ``used * (now - last)`` and ``pool * (now - last)`` (the part from
        ``measure_from`` on) to the utilization integrals."""
        start = max(self.area_time, self.measure_from)
        elapsed = now - start
        if elapsed > 0:
            area, pool_area = self.area, self.pool_area
            for name, millis in self.used.items():
                area[name] += millis * elapsed
                pool_area[name] += total.millis(name) * elapsed
        self.area_time = max(self.area_time, now)

    def mean_utilization(self) -> dict[str, float]:
        """Integral of used over integral of the pool, per resource."""
        return {
            name: self.area[name] / pool if (pool := self.pool_area[name]) else 0.0
            for name in self.resources
        }


def user_report(user: SimUser, now: float, measure_from: float) -> dict[str, Any]:
    """One user's entry of the results document."""
    spec = user.spec
    done = user.finished_at
    window = now - measure_from
    return {
        "id": spec.id,
        "name": spec.name,
        "join": spec.join,
        "leave": spec.leave,
        "jobs": len(spec.jobs),
        "tasks": spec.tasks,
        "tasks_completed": user.completed,
        "tasks_running": user.running,
        "mean_running": user.running_area / window if window > 0 else float(user.running),
        "finished_at": done,
        "completion_time": None if done is None else done - spec.join,
    }


@dataclass(slots=True)
class SimResult:
    """What a run produced (``to_json`` gives the results document)."""

    times: list[float]
    shares: dict[str, list[float | None]]
    utilization: dict[str, list[float]]
    users: list[dict[str, Any]]
    total: dict[str, float]
    events: int
    end_time: float
    event_counts: dict[str, int] = field(default_factory=dict)
    mean_utilization: dict[str, float] = field(default_factory=dict)
    jobs: dict[str, Any] = field(default_factory=dict)
    allocation_runs: int = 0
    roles: list[dict[str, Any]] | None = None  # per role (``RoleMeter.report``), if any
    role_shares: dict[str, list[float]] | None = None

    def to_json(self) -> dict[str, Any]:
        """The results document (JSON-ready); ``roles`` and the series
        ``role_dominant_share`` only when users sit in roles."""
        doc: dict[str, Any] = {
            "total": self.total,
            "events": self.events,
            "event_counts": self.event_counts,
            "allocation_runs": self.allocation_runs,
            "end_time": self.end_time,
            "mean_utilization": self.mean_utilization,
            "jobs": self.jobs,
            "users": self.users,
            "series": {
                "time": self.times,
                "dominant_share": self.shares,
                "utilization": self.utilization,
            },
        }
        if self.roles is not None:
            doc["roles"] = self.roles
            doc["series"]["role_dominant_share"] = self.role_shares
        return doc
