"""Dynamic scenarios (Bonald & Roberts §3): job classes with Poisson arrivals, checked.

A dynamic scenario is a JSON object with ``"model": "dynamic"``::

    {"model": "dynamic", "mode": "fluid", "policy": ["drf", "pf"], "seed": 1,
     "capacity": {"cpus": 1, "mem": 1},
     "classes": [{"name": "cpu-bound", "task": {"cpus": 1, "mem": 0.1}, "rate": 3,
                  "tasks": 1, "tasks_dist": "fixed",
                  "duration": {"dist": "exponential", "mean": 1}}],
     "jobs": 20000, "warmup_jobs": 2000,
     "sweep": {"resource": "cpus", "loads": [0.1, 0.3, 0.5]}}

Invariants: ``parse_dynamic_scenario`` either returns a fully checked, immutable
``DynamicScenario`` or raises ``ScenarioError`` whose ``field`` is the path of the bad entry
(``classes[1].duration.k``); nothing downstream re-validates. Every class's task fits in the
pool (so an isolated job is served), every run is stable: the load of every resource, eq. (10)
of the paper, is below 1 for every point of a sweep. Without ``sweep`` the class ``rate`` values
are the arrival rates ``lambda_k``; with ``sweep`` they are relative rates, scaled for each
listed load of ``sweep.resource``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fairshare.resources import ResourceVector

from analysis.fluid.solver import FLUID_ONLY_POLICIES, FLUID_POLICIES
from analysis.sim.scenario import (
    Duration,
    ScenarioError,
    duration_field,
    number_field,
    object_field,
    resources_field,
    whole_field,
)

__all__ = [
    "DYNAMIC_MODES",
    "DYNAMIC_POLICIES",
    "DynamicScenario",
    "JobClass",
    "is_dynamic",
    "parse_dynamic_scenario",
]

DYNAMIC_MODES = ("fluid", "tasks")
DYNAMIC_POLICIES = tuple(name for name in FLUID_POLICIES if name not in FLUID_ONLY_POLICIES)
"""The core's policies that fluid mode solves too: a dynamic scenario runs each in both modes."""
TASK_COUNT_DISTRIBUTIONS = ("fixed", "geometric")
TASK_ENGINES = ("direct", "master")


@dataclass(frozen=True, slots=True)
class JobClass:
    """A job class: Poisson arrivals at ``rate``, jobs of ``tasks`` tasks (mean) of ``task``."""

    name: str
    task: ResourceVector
    rate: float
    tasks: int
    tasks_dist: str
    duration: Duration

    @property
    def mean_work(self) -> float:
        """Mean work of one job in task-seconds: mean tasks times mean task duration."""
        return self.tasks * self.duration.mean


@dataclass(frozen=True, slots=True)
class DynamicScenario:
    """A checked dynamic scenario (module docstring)."""

    mode: str
    policies: tuple[str, ...]
    seed: int
    capacity: ResourceVector
    classes: tuple[JobClass, ...]
    jobs: int | None
    warmup_jobs: int
    until: float | None
    warmup: float
    sweep_resource: str | None
    sweep_loads: tuple[float, ...]
    task_engine: str

    def isolated_tasks(self, job_class: JobClass) -> float:
        """``phi`` of a job alone in the pool: the tasks that fit, ``min_r C_r / A_kr``."""
        return min(
            self.capacity.millis(name) / millis for name, millis in job_class.task.millis_items()
        )

    def service_rate(self, job_class: JobClass) -> float:
        """``mu_k``: completions per second of an isolated job in the fluid model (§3.1)."""
        return self.isolated_tasks(job_class) / job_class.mean_work

    def resource_loads(self, rates: tuple[float, ...]) -> dict[str, float]:
        """Eq. (10): ``sum_k lambda_k E[W_k] A_kr / C_r`` per pool resource."""
        loads = dict.fromkeys(sorted(self.capacity.names()), 0.0)
        for job_class, rate in zip(self.classes, rates, strict=True):
            for name, millis in job_class.task.millis_items():
                loads[name] += rate * job_class.mean_work * millis / self.capacity.millis(name)
        return loads

    def rates_for(self, load: float | None) -> tuple[float, ...]:
        """Arrival rates: the class rates, or scaled so ``sweep_resource`` has ``load``."""
        rates = tuple(c.rate for c in self.classes)
        if load is None or self.sweep_resource is None:
            return rates
        unit = self.resource_loads(rates)[self.sweep_resource]
        return tuple(rate * load / unit for rate in rates)

    def points(self) -> tuple[float | None, ...]:
        """The loads of the sweep, or ``(None,)`` for a single run at the class rates."""
        return self.sweep_loads if self.sweep_resource is not None else (None,)


def is_dynamic(raw: Any) -> bool:
    """True when a decoded scenario document asks for the dynamic model."""
    return isinstance(raw, dict) and raw.get("model") == "dynamic"


def _text_choice(raw: Mapping[str, Any], key: str, options: tuple[str, ...], default: str) -> str:
    value = raw.get(key, default)
    if value not in options:
        raise ScenarioError(key, f"expected one of {', '.join(options)}, got {value!r}")
    return str(value)


def _policies(raw: Mapping[str, Any]) -> tuple[str, ...]:
    value = raw.get("policy", "drf")
    listed = value if isinstance(value, list) else [value]
    if not listed:
        raise ScenarioError("policy", "expected a policy or a non-empty list of policies")
    for index, policy in enumerate(listed):
        field = f"policy[{index}]" if isinstance(value, list) else "policy"
        if policy not in DYNAMIC_POLICIES:
            raise ScenarioError(
                field, f"expected one of {', '.join(DYNAMIC_POLICIES)}, got {policy!r}"
            )
    if len(set(listed)) != len(listed):
        raise ScenarioError("policy", "a policy is listed twice")
    return tuple(str(p) for p in listed)


def _job_class(value: Any, index: int, capacity: ResourceVector) -> JobClass:
    where = f"classes[{index}]."
    raw = object_field(value, where[:-1])
    name = raw.get("name", f"class {index + 1}")
    if not isinstance(name, str) or not name:
        raise ScenarioError(f"{where}name", "expected a non-empty string")
    task = resources_field(raw.get("task"), f"{where}task")
    missing = sorted(task.names() - capacity.names())
    if missing:
        raise ScenarioError(f"{where}task", f"needs {', '.join(missing)}, which the pool lacks")
    rate = number_field(raw, "rate", where)
    if rate <= 0:
        raise ScenarioError(f"{where}rate", "must be > 0")
    tasks = whole_field(raw, "tasks", where, 1)
    if tasks < 1:
        raise ScenarioError(f"{where}tasks", "must be >= 1")
    tasks_dist = raw.get("tasks_dist", "fixed")
    if tasks_dist not in TASK_COUNT_DISTRIBUTIONS:
        raise ScenarioError(
            f"{where}tasks_dist", f"expected one of {', '.join(TASK_COUNT_DISTRIBUTIONS)}"
        )
    if "duration" not in raw:
        raise ScenarioError(f"{where}duration", "missing")
    duration = duration_field(raw["duration"], f"{where}duration")
    return JobClass(name, task, rate, tasks, str(tasks_dist), duration)


def _run_length(doc: Mapping[str, Any]) -> tuple[int | None, int, float | None, float]:
    """``(jobs, warmup_jobs, until, warmup)``: exactly one of ``jobs`` and ``until``."""
    if ("jobs" in doc) == ("until" in doc):
        raise ScenarioError("jobs", "give exactly one of 'jobs' (arrivals) and 'until' (time)")
    if "jobs" in doc:
        if "warmup" in doc:
            raise ScenarioError("warmup", "with 'jobs' the warm-up is 'warmup_jobs'")
        jobs = whole_field(doc, "jobs", "")
        if jobs < 1:
            raise ScenarioError("jobs", "must be >= 1")
        warmup_jobs = whole_field(doc, "warmup_jobs", "", jobs // 10)
        if warmup_jobs < 0:
            raise ScenarioError("warmup_jobs", "must be >= 0")
        return jobs, warmup_jobs, None, 0.0
    if "warmup_jobs" in doc:
        raise ScenarioError("warmup_jobs", "with 'until' the warm-up is 'warmup' (time)")
    until = number_field(doc, "until", "")
    if until <= 0:
        raise ScenarioError("until", "must be > 0")
    warmup = number_field(doc, "warmup", "", until / 10)
    if not 0 <= warmup < until:
        raise ScenarioError("warmup", "must be >= 0 and below 'until'")
    return None, 0, until, warmup


def _sweep(
    doc: Mapping[str, Any], capacity: ResourceVector
) -> tuple[str | None, tuple[float, ...]]:
    if "sweep" not in doc:
        return None, ()
    sweep = object_field(doc["sweep"], "sweep")
    resource = sweep.get("resource", "cpus")
    if resource not in capacity.names():
        raise ScenarioError("sweep.resource", f"{resource!r} is not a resource of the capacity")
    loads = sweep.get("loads")
    if not isinstance(loads, list) or not loads:
        raise ScenarioError("sweep.loads", "expected a non-empty list of loads")
    checked = []
    for index, load in enumerate(loads):
        if isinstance(load, bool) or not isinstance(load, int | float) or not math.isfinite(load):
            raise ScenarioError(f"sweep.loads[{index}]", f"expected a number, got {load!r}")
        if not 0 < load < 1:
            raise ScenarioError(f"sweep.loads[{index}]", "must be in (0, 1)")
        checked.append(float(load))
    return str(resource), tuple(checked)


def _check_stable(scenario: DynamicScenario) -> None:
    """Eq. (10): every resource's load below 1 at every point, or the run never settles."""
    for index, load in enumerate(scenario.points()):
        loads = scenario.resource_loads(scenario.rates_for(load))
        for name, value in loads.items():
            if value >= 1:
                field = "classes" if load is None else f"sweep.loads[{index}]"
                raise ScenarioError(
                    field, f"load of {name} is {value:.3f} >= 1: unstable (paper eq. 10)"
                )


def parse_dynamic_scenario(raw: Any) -> DynamicScenario:
    """Check a decoded dynamic scenario; raises ``ScenarioError`` naming the bad field."""
    doc = object_field(raw, "scenario")
    if doc.get("model") != "dynamic":
        raise ScenarioError("model", f"expected 'dynamic', got {doc.get('model')!r}")
    mode = _text_choice(doc, "mode", DYNAMIC_MODES, "fluid")
    policies = _policies(doc)
    seed = whole_field(doc, "seed", "", 0)
    capacity = resources_field(doc.get("capacity"), "capacity")
    classes_raw = doc.get("classes")
    if not isinstance(classes_raw, list) or not classes_raw:
        raise ScenarioError("classes", "expected a non-empty list of job classes")
    classes = tuple(_job_class(value, i, capacity) for i, value in enumerate(classes_raw))
    if len({c.name for c in classes}) != len(classes):
        raise ScenarioError("classes", "class names repeat")
    jobs, warmup_jobs, until, warmup = _run_length(doc)
    sweep_resource, sweep_loads = _sweep(doc, capacity)
    task_engine = _text_choice(doc, "task_engine", TASK_ENGINES, "direct")
    scenario = DynamicScenario(
        mode=mode,
        policies=policies,
        seed=seed,
        capacity=capacity,
        classes=classes,
        jobs=jobs,
        warmup_jobs=warmup_jobs,
        until=until,
        warmup=warmup,
        sweep_resource=sweep_resource,
        sweep_loads=sweep_loads,
        task_engine=task_engine,
    )
    _check_stable(scenario)
    return scenario
