"""The dynamic model of Bonald & Roberts §3-4: Poisson job classes, mean service rates, sweeps.

Jobs of class ``k`` arrive at rate ``lambda_k`` and leave when their work is done; performance
is the normalised mean service rate ``gamma_k = lambda_k / E[n_k] / mu_k`` (§3.3, Little's law;
``mu_k`` is the rate of a job alone in the fluid model, so 1 means "as fast as alone").

- Fluid mode (§3, Fig. 1-3): resources are infinitely divisible; at every arrival and departure
  the allocation ``phi`` is recomputed by the fluid solver (``analysis.fluid.solver``:
  ``drf`` water-filling, ``pf`` the PF optimum of eq. 2 via ``pf_prices``, ``asset``) and jobs
  progress at their rates until the next event. Jobs of one class have the same shape, so by
  symmetry (unique DRF and PF allocations) they get equal shares: the solver is called with one
  framework per class weighted by its number of jobs ``n_k`` (weighted water-filling and weighted
  PF, ``sum_k n_k log(Phi_k / n_k)``, give the class totals of the per-job problem; a test
  checks this against one framework per job), and results are cached per state ``(n_1..n_K)``.
  Each class is served processor-sharing style: all its jobs progress at the same rate, so a
  per-class virtual time and a heap of finishing virtual times give departures exactly. A job
  is not limited to its number of tasks in this mode (tasks are infinitesimal, §2.1).
- Task mode (§4, Fig. 6): ``analysis.sim.dynamic_tasks``.

A sweep runs every policy at every listed load of one resource, the class rates scaled to that
load, all with the scenario's seed (common random numbers, ``analysis.sim.dynamic_base``).

Invariants: results are a deterministic function of the scenario (no wall-clock value in
``results.json``); stability (eq. 10) is checked by the parser, so every run ends.
"""

from __future__ import annotations

import heapq
import json
import sys
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

from analysis.fluid.solver import FluidAgent, FluidFramework, solve_fluid
from analysis.sim.dynamic_base import JobSource, Meter, PointTally, gamma_of
from analysis.sim.dynamic_scenario import DynamicScenario, is_dynamic, parse_dynamic_scenario
from analysis.sim.dynamic_tasks import run_tasks
from analysis.sim.output import pyplot, write_results
from analysis.sim.scenario import ScenarioError

__all__ = ["FluidEngine", "run_dynamic", "run_dynamic_file", "run_point"]

EXIT_BAD_SCENARIO = 2  # as ``fairshare simulate`` for static scenarios


class FluidEngine:
    """One fluid-mode run (module docstring)."""

    def __init__(self, scenario: DynamicScenario, policy: str, rates: tuple[float, ...]) -> None:
        self.scenario = scenario
        self.policy = policy
        self.source = JobSource(scenario, rates)
        self.meter = Meter(scenario)
        self.pool = [FluidAgent("pool", scenario.capacity)]
        self.allocations: dict[tuple[int, ...], tuple[float, ...]] = {}
        self.events = 0

    def job_rates(self, counts: tuple[int, ...]) -> tuple[float, ...]:
        """Tasks in service per job of each class in state ``counts`` (0 for empty classes)."""
        cached = self.allocations.get(counts)
        if cached is not None:
            return cached
        present = [k for k, n in enumerate(counts) if n]
        frameworks = [
            FluidFramework(f"class-{k}", self.scenario.classes[k].task, weight=Fraction(counts[k]))
            for k in present
        ]
        rates = [0.0] * len(counts)
        if frameworks:
            result = solve_fluid(self.pool, frameworks, self.policy)
            for k, share in zip(present, result.frameworks, strict=True):
                rates[k] = float(share.tasks) / counts[k]
        self.allocations[counts] = tuple(rates)
        return self.allocations[counts]

    def run(self) -> PointTally:
        """Simulate until the window closes; returns what the meter measured."""
        count = len(self.scenario.classes)
        source, meter = self.source, self.meter
        finishing: list[list[tuple[float, int]]] = [[] for _ in range(count)]
        virtual = [0.0] * count  # work done per job of the class so far
        counts = [0] * count
        arrivals = [source.next_arrival(k, 0.0) for k in range(count)]
        rates = self.job_rates(tuple(counts))
        now = 0.0
        seq = 0
        while True:
            leaving, left_at = -1, float("inf")
            for k in range(count):
                if finishing[k]:
                    at = now + max(0.0, finishing[k][0][0] - virtual[k]) / rates[k]
                    if at < left_at:
                        leaving, left_at = k, at
            arriving = min(range(count), key=arrivals.__getitem__)
            at = min(left_at, arrivals[arriving])
            if meter.past_end(at):
                meter.advance(meter.end, counts)
                break
            meter.advance(at, counts)
            for k in range(count):
                virtual[k] += rates[k] * (at - now)
            now = at
            self.events += 1
            if leaving >= 0 and left_at <= arrivals[arriving]:
                done, _ = heapq.heappop(finishing[leaving])
                virtual[leaving] = max(virtual[leaving], done)
                counts[leaving] -= 1
                meter.departure(leaving, now)
            else:
                if meter.arrival(arriving, now):
                    break
                seq += 1
                heapq.heappush(
                    finishing[arriving], (virtual[arriving] + source.work(arriving), seq)
                )
                counts[arriving] += 1
                arrivals[arriving] = source.next_arrival(arriving, now)
            rates = self.job_rates(tuple(counts))
        return meter.tally(self.events)


def run_point(scenario: DynamicScenario, policy: str, rates: tuple[float, ...]) -> PointTally:
    """One run of ``policy`` at arrival rates ``rates`` in the scenario's mode."""
    if scenario.mode == "fluid":
        return FluidEngine(scenario, policy, rates).run()
    return run_tasks(scenario, policy, rates)


def _point_doc(
    scenario: DynamicScenario,
    policy: str,
    load: float | None,
    rates: tuple[float, ...],
    tally: PointTally,
) -> dict[str, Any]:
    classes = []
    for job_class, counted in zip(scenario.classes, tally.classes, strict=True):
        gamma = gamma_of(counted, scenario.service_rate(job_class))
        classes.append(
            {
                "name": job_class.name,
                "gamma": gamma,
                "mean_jobs": counted.mean_jobs(tally.window),
                "arrivals": counted.arrivals,
                "completed": counted.completed,
            }
        )
    return {
        "policy": policy,
        "load": load,
        "resource_loads": scenario.resource_loads(rates),
        "rates": list(rates),
        "window": tally.window,
        "events": tally.events,
        "classes": classes,
    }


def _class_doc(scenario: DynamicScenario) -> list[dict[str, Any]]:
    return [
        {
            "name": c.name,
            "task": c.task.to_dict(),
            "rate": c.rate,
            "tasks": c.tasks,
            "tasks_dist": c.tasks_dist,
            "duration": {"dist": c.duration.dist, "mean": c.duration.mean, "k": c.duration.k},
            "mu": scenario.service_rate(c),
        }
        for c in scenario.classes
    ]


def run_dynamic(
    scenario: DynamicScenario,
    on_point: Callable[[dict[str, Any], float], None] | None = None,
) -> dict[str, Any]:
    """Run every policy at every point; the results document (``on_point`` sees each point
    and its wall time as it completes)."""
    points = []
    for policy in scenario.policies:
        for load in scenario.points():
            rates = scenario.rates_for(load)
            started = time.perf_counter()
            tally = run_point(scenario, policy, rates)
            point = _point_doc(scenario, policy, load, rates, tally)
            if on_point is not None:
                on_point(point, time.perf_counter() - started)
            points.append(point)
    curves: dict[str, dict[str, list[list[float | None]]]] = {}
    if scenario.sweep_resource is not None:
        for point in points:
            per_class = curves.setdefault(point["policy"], {})
            for entry in point["classes"]:
                per_class.setdefault(entry["name"], []).append([point["load"], entry["gamma"]])
    return {
        "model": "dynamic",
        "mode": scenario.mode,
        "seed": scenario.seed,
        "policies": list(scenario.policies),
        "capacity": scenario.capacity.to_dict(),
        "classes": _class_doc(scenario),
        "run": {
            "jobs": scenario.jobs,
            "warmup_jobs": scenario.warmup_jobs,
            "until": scenario.until,
            "warmup": scenario.warmup,
            "task_engine": scenario.task_engine if scenario.mode == "tasks" else None,
        },
        "sweep": (
            None
            if scenario.sweep_resource is None
            else {"resource": scenario.sweep_resource, "loads": list(scenario.sweep_loads)}
        ),
        "points": points,
        "curves": curves,
    }


def _plot(doc: dict[str, Any], out: Path) -> list[str]:
    """``service_rate.png``: gamma_k against the swept load, one line per policy and class."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    styles = {"drf": "--", "pf": "-", "asset": ":"}
    for policy, per_class in doc["curves"].items():
        for index, (name, curve) in enumerate(per_class.items()):
            points = [(x, y) for x, y in curve if y is not None]
            ax.plot(
                [x for x, _ in points],
                [y for _, y in points],
                styles.get(policy, "-"),
                color=f"C{index}",  # one colour per class, one line style per policy
                marker="o" if policy == "pf" else "s",
                label=f"{policy.upper()} {name}",
            )
    ax.set_xlabel(f"load of {doc['sweep']['resource']}")
    ax.set_ylabel("mean service rate (normalised)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.05)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.savefig(out / "service_rate.png", dpi=100)
    plt.close(fig)
    return ["service_rate.png"]


def _write(doc: dict[str, Any], out: Path) -> None:
    skip = None if doc["curves"] else "no sweep: one point, nothing to plot"
    write_results(doc, out, lambda directory: _plot(doc, directory), skip)


def _report_point(point: dict[str, Any], seconds: float) -> None:
    load = "" if point["load"] is None else f" load {point['load']:.2f}"
    gammas = ", ".join(
        f"{c['name']} {c['gamma']:.3f}" if c["gamma"] is not None else f"{c['name']} -"
        for c in point["classes"]
    )
    print(f"  {point['policy']}{load}: gamma {gammas} ({seconds:.1f} s)", file=sys.stderr)


def run_dynamic_file(path: str, out: str) -> int | None:
    """``fairshare simulate`` for a dynamic scenario: the exit code, or ``None`` when the file
    is not a readable dynamic scenario (the static loader then reads and reports it)."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not is_dynamic(raw):
        return None
    try:
        scenario = parse_dynamic_scenario(raw)
    except ScenarioError as exc:
        print(f"fairshare simulate: bad scenario: {exc}", file=sys.stderr)
        return EXIT_BAD_SCENARIO
    started = time.perf_counter()
    doc = run_dynamic(scenario, on_point=_report_point)
    target = Path(out)
    _write(doc, target)
    events = sum(point["events"] for point in doc["points"])
    print(
        f"simulated {len(doc['points'])} runs, {events} events, in "
        f"{time.perf_counter() - started:.1f} s; wrote {target}"
    )
    return 0
