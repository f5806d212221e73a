"""Bonald & Roberts §3-4 on the simulator: dynamic job classes, fluid and task modes.

Statistical tests use fixed seeds (so they are deterministic) and tolerances of at least three
standard deviations of the estimate, derived in each test. DRF and PF are compared on the same
seed: the job streams do not depend on the policy (common random numbers), so the difference
between the two policies is far less noisy than either estimate.
"""

from __future__ import annotations

import copy
import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from fairshare.cli import main

from analysis.fluid.solver import FluidAgent, FluidFramework, solve_fluid
from analysis.sim.dynamic import FluidEngine, run_dynamic, run_dynamic_file
from analysis.sim.dynamic_scenario import DynamicScenario, parse_dynamic_scenario
from analysis.sim.dynamic_tasks import DirectTaskEngine, MasterTaskEngine
from analysis.sim.scenario import ScenarioError

SCENARIOS = Path(__file__).resolve().parents[2] / "examples" / "scenarios"
CPU_TASK = {"cpus": 1, "mem": 0.1}  # a1 of §3.3
RAM_TASK = {"cpus": 0.1, "mem": 1}  # a2
EXPONENTIAL = {"dist": "exponential", "mean": 1}


def two_classes(rates: tuple[float, float], **changes: Any) -> dict[str, Any]:
    """The §3.3 configuration (Fig. 1) in fluid mode: exponential job sizes, mu_k = 1."""
    raw: dict[str, Any] = {
        "model": "dynamic",
        "mode": "fluid",
        "policy": ["drf", "pf"],
        "seed": 7,
        "capacity": {"cpus": 1, "mem": 1},
        "classes": [
            {"name": "cpu", "task": CPU_TASK, "rate": rates[0], "duration": EXPONENTIAL},
            {"name": "ram", "task": RAM_TASK, "rate": rates[1], "duration": EXPONENTIAL},
        ],
        "jobs": 20_000,
        "warmup_jobs": 1_000,
    }
    raw.update(changes)
    return raw


def gammas(doc: dict[str, Any]) -> dict[tuple[str, float | None, str], float]:
    """``(policy, load, class) -> gamma`` of a results document."""
    return {
        (point["policy"], point["load"], entry["name"]): entry["gamma"]
        for point in doc["points"]
        for entry in point["classes"]
    }


# -- fluid mode -----------------------------------------------------------------------------------


@pytest.mark.parametrize("rho", [0.3, 0.6])
def test_fluid_single_resource_is_processor_sharing(rho: float) -> None:
    """One class on one resource: both policies are processor sharing, gamma = 1 - rho (§3.3).

    Tolerance: for M/M/1 the time average of n over T service times has variance about
    2 rho (1 + rho) / ((1 - rho)^4 T); with T = jobs / rho this makes the standard deviation of
    gamma = rho / E[n] about sqrt(2 (1 + rho) / jobs) = 0.011 to 0.013 for 20,000 jobs (less
    for our ratio estimator), so 0.04 is over 3 sigma.
    """
    raw = {
        "model": "dynamic",
        "policy": ["drf", "pf"],
        "seed": 3,
        "capacity": {"cpus": 4},
        "classes": [
            {"name": "only", "task": {"cpus": 2}, "rate": 2 * rho, "duration": EXPONENTIAL}
        ],
        "jobs": 20_000,
        "warmup_jobs": 1_000,
    }
    doc = run_dynamic(parse_dynamic_scenario(raw))  # mu = (4 / 2 tasks) / 1 s = 2
    for point in doc["points"]:
        assert point["resource_loads"]["cpus"] == pytest.approx(rho)
        assert point["classes"][0]["gamma"] == pytest.approx(1 - rho, abs=0.04)
    drf, pf = (point["classes"][0]["gamma"] for point in doc["points"])
    assert drf == pf  # one resource: DRF and PF are the same allocation, the same run


def test_fluid_unbalanced_pf_serves_ram_bound_class_better() -> None:
    """Fig. 1(b), lambda_1 = 3/4 lambda: gamma_2(PF) well above gamma_2(DRF), gamma_1 equal.

    At CPU load 0.7 the paper's curves are far apart for class 2 (ours: about 0.36 for DRF and
    0.70 for PF), so a margin of 0.15 is many standard deviations (about 0.02 each here);
    gamma_1 is "practically the same" for both (ours differ by under 0.005; with common random
    numbers the difference is much less noisy than each value, and 0.02 allows for it).
    """
    raw = two_classes((3, 1), sweep={"resource": "cpus", "loads": [0.4, 0.7]})
    found = gammas(run_dynamic(parse_dynamic_scenario(raw)))
    for load in (0.4, 0.7):
        assert found[("pf", load, "ram")] >= found[("drf", load, "ram")]
        assert found[("pf", load, "cpu")] == pytest.approx(found[("drf", load, "cpu")], abs=0.02)
    assert found[("pf", 0.7, "ram")] > found[("drf", 0.7, "ram")] + 0.15
    # The CPU-bound class sees about the processor-sharing rate 1 - (CPU load) (§3.3).
    assert found[("drf", 0.7, "cpu")] == pytest.approx(0.3, abs=0.05)


def test_fluid_balanced_load_is_symmetric_and_pf_is_better() -> None:
    """Fig. 1(a), lambda_1 = lambda_2: both classes see the same rate; PF beats DRF.

    The two classes are mirror images, so their rates differ only by noise: over seeds 7-9
    the difference at CPU load 0.5 with 20,000 jobs is at most 0.025 (sd about 0.015), hence a
    tolerance of 0.05. DRF is below PF there: the exact Markov chain (truncated at 40 jobs per
    class, solved apart) gives 0.429 per class for DRF; PF is near 1 - 0.5. We assert a gap of
    0.08 on the sum of both classes (measured 0.12 to 0.14).
    """
    raw = two_classes((1, 1), sweep={"resource": "cpus", "loads": [0.5]})
    found = gammas(run_dynamic(parse_dynamic_scenario(raw)))
    for policy in ("drf", "pf"):
        assert found[(policy, 0.5, "cpu")] == pytest.approx(found[(policy, 0.5, "ram")], abs=0.05)
    drf = found[("drf", 0.5, "cpu")] + found[("drf", 0.5, "ram")]
    pf = found[("pf", 0.5, "cpu")] + found[("pf", 0.5, "ram")]
    assert pf > drf + 0.08
    assert drf / 2 == pytest.approx(0.429, abs=0.03)


@pytest.mark.parametrize("policy", ["drf", "pf"])
def test_class_aggregated_fluid_allocation_equals_per_job_allocation(policy: str) -> None:
    """One weighted framework per class gives each job what one framework per job gives."""
    scenario = parse_dynamic_scenario(two_classes((0.4, 0.4), policy=policy))
    per_job = FluidEngine(scenario, policy, (1.0, 1.0)).job_rates((2, 3))
    frameworks = [
        FluidFramework(f"job-{i}", scenario.classes[0 if i < 2 else 1].task) for i in range(5)
    ]
    result = solve_fluid([FluidAgent("pool", scenario.capacity)], frameworks, policy)
    for i, share in enumerate(result.frameworks):
        assert float(share.tasks) == pytest.approx(per_job[0 if i < 2 else 1], rel=1e-9)
    assert FluidFramework("x", scenario.classes[0].task, Fraction(2)).weight == 2


# -- task mode ------------------------------------------------------------------------------------


def fig6(duration: dict[str, Any], **changes: Any) -> DynamicScenario:
    """Fig. 6 (§4.2): 500 tasks per job, capacity 100, mean task time 1/5, so mu_k = 1."""
    raw: dict[str, Any] = {
        "model": "dynamic",
        "mode": "tasks",
        "policy": "drf",
        "seed": 5,
        "capacity": {"cpus": 100, "mem": 100},
        "classes": [
            {"name": "cpu", "task": CPU_TASK, "rate": 1, "tasks": 500, "duration": duration}
        ],
        "jobs": 60,
        "warmup_jobs": 0,
        "sweep": {"resource": "cpus", "loads": [0.001]},
    }
    raw.update(changes)
    return parse_dynamic_scenario(raw)


def test_task_mode_zero_load_rate_is_about_054_for_exponential_tasks() -> None:
    """§4.2: an isolated job runs 100 tasks until 400 are done, then 99, 98, ... 1.

    Expected rate 5 / (4.01 + 1/99 + ... + 1) = 0.5442. A job's time has standard deviation
    0.2 sqrt(401 / 100^2 + sum 1/m^2) = 0.26 around 1.84, so over 60 jobs gamma has sd
    0.544 * 0.26 / 1.84 / sqrt(60) = 0.010: the tolerance 0.03 is 3 sigma.
    """
    expected = 5 / (4.01 + sum(1 / m for m in range(1, 100)))
    assert expected == pytest.approx(0.5442, abs=1e-4)
    doc = run_dynamic(fig6({"dist": "exponential", "mean": 0.2}))
    (entry,) = doc["points"][0]["classes"]
    assert entry["arrivals"] == 60
    assert entry["mean_jobs"] < 0.01  # jobs (almost) never overlap: zero load
    assert entry["gamma"] == pytest.approx(expected, abs=0.03)


def test_task_mode_erlang20_tasks_are_closer_to_the_fluid_rate() -> None:
    """§4.2: Erlang-20 task times (same mean) give rates "much closer" to the fluid model's 1.

    The tail of an isolated job is shorter: its last tasks end almost together. Ours is about
    0.85; the exponential case is 0.54 (previous test), so > 0.8 is a safe bound.
    """
    doc = run_dynamic(fig6({"dist": "erlang", "k": 20, "mean": 0.2}, jobs=30))
    (entry,) = doc["points"][0]["classes"]
    assert 0.8 < entry["gamma"] < 1.0


@pytest.mark.parametrize("policy", ["drf", "pf"])
@pytest.mark.parametrize("dist", ["exponential", "deterministic"])
def test_direct_task_engine_decides_exactly_as_master_state(policy: str, dist: str) -> None:
    """The fast engine makes the very decisions of ``MasterState`` (same completion times)."""
    raw: dict[str, Any] = {
        "model": "dynamic",
        "mode": "tasks",
        "seed": 3,
        "capacity": {"cpus": 10, "mem": 10},
        "classes": [
            {"name": "cpu", "task": CPU_TASK, "rate": 3, "tasks": 30, "tasks_dist": "geometric",
             "duration": {"dist": dist, "mean": 1}},
            {"name": "ram", "task": RAM_TASK, "rate": 1, "tasks": 30,
             "duration": {"dist": dist, "mean": 1}},
        ],
        "jobs": 40,
        "warmup_jobs": 0,
        "sweep": {"resource": "cpus", "loads": [0.7]},
    }  # fmt: skip
    scenario = parse_dynamic_scenario(raw)
    rates = scenario.rates_for(0.7)
    master = MasterTaskEngine(scenario, policy, rates)
    exact = DirectTaskEngine(scenario, policy, rates, exact_prices=True)
    fast = DirectTaskEngine(scenario, policy, rates)
    tallies = [engine.run() for engine in (master, exact, fast)]
    assert tallies[0] == tallies[1] == tallies[2]
    # Jobs ending at one instant (deterministic durations) may be listed in another order.
    order = [sorted(e.completions, key=lambda c: (c[1], c[0])) for e in (master, exact, fast)]
    assert len(order[0]) > 20
    assert order[0] == order[1] == order[2]


# -- scenarios, results, command line -------------------------------------------------------------


def test_shipped_scenarios_parse() -> None:
    for name, mode in (
        ("br-fig1-balanced.json", "fluid"),
        ("br-fig1-unbalanced.json", "fluid"),
        ("br-fig6-exponential.json", "tasks"),
        ("br-fig6-erlang20.json", "tasks"),
    ):
        scenario = parse_dynamic_scenario(json.loads((SCENARIOS / name).read_text()))
        assert scenario.mode == mode
        assert scenario.policies == ("drf", "pf")
        assert all(scenario.service_rate(c) == pytest.approx(1.0) for c in scenario.classes)


def test_sweep_scales_rates_to_the_cpu_load() -> None:
    scenario = parse_dynamic_scenario(two_classes((3, 1), sweep={"loads": [0.62]}))
    rates = scenario.rates_for(0.62)
    assert rates[0] == pytest.approx(3 * rates[1])
    loads = scenario.resource_loads(rates)
    assert loads["cpus"] == pytest.approx(0.62)
    assert loads["mem"] == pytest.approx(0.62 * 1.3 / 3.1)  # §3.3: RAM load nearly 3x smaller


def test_results_are_deterministic_and_until_runs_work() -> None:
    raw = two_classes((0.2, 0.4), until=2_000.0, warmup=100.0)
    del raw["jobs"], raw["warmup_jobs"]
    first = run_dynamic(parse_dynamic_scenario(raw))
    assert first == run_dynamic(parse_dynamic_scenario(raw))
    point = first["points"][0]
    assert point["window"] == pytest.approx(1_900.0)
    assert point["load"] is None and first["curves"] == {}
    assert sum(c["arrivals"] for c in point["classes"]) > 0


def test_simulate_command_runs_a_dynamic_scenario(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = two_classes((3, 1), jobs=2_000, warmup_jobs=100, sweep={"loads": [0.2, 0.5]})
    path = tmp_path / "dynamic.json"
    path.write_text(json.dumps(raw))
    assert main(["simulate", str(path), "--out", str(tmp_path / "out")]) == 0
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [p["load"] for p in doc["points"]] == [0.2, 0.5, 0.2, 0.5]
    curve = doc["curves"]["pf"]["ram"]
    assert [x for x, _ in curve] == [0.2, 0.5] and curve[0][1] > curve[1][1]
    assert "plots" in doc
    assert "wrote" in capsys.readouterr().out
    assert run_dynamic_file(str(SCENARIOS / "drf-table1.json"), str(tmp_path)) is None
    path.write_text(json.dumps({**raw, "mode": "slow"}))
    assert run_dynamic_file(str(path), str(tmp_path / "bad")) == 2
    assert "mode" in capsys.readouterr().err


def mutate(path: str, value: Any) -> dict[str, Any]:
    raw = copy.deepcopy(two_classes((3, 1), sweep={"loads": [0.5]}))
    *parents, last = path.split(".")
    node: Any = raw
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    key: int | str = int(last) if last.isdigit() else last
    if value is KeyError:
        del node[key]
    else:
        node[key] = value
    return raw


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("model", "static", "model"),
        ("mode", "slow", "mode"),
        ("policy", "fifo", "policy"),
        ("policy", ["drf", "slots"], "policy[1]"),
        ("policy", [], "policy"),
        ("seed", 1.5, "seed"),
        ("capacity", {}, "capacity"),
        ("classes", [], "classes"),
        ("classes.1", "cpu", "classes[1]"),
        ("classes.0.task", {"gpus": 1}, "classes[0].task"),
        ("classes.1.task", None, "classes[1].task"),
        ("classes.0.rate", 0, "classes[0].rate"),
        ("classes.0.rate", KeyError, "classes[0].rate"),
        ("classes.0.tasks", 0, "classes[0].tasks"),
        ("classes.0.tasks_dist", "poisson", "classes[0].tasks_dist"),
        ("classes.1.duration", KeyError, "classes[1].duration"),
        ("classes.1.duration", {"dist": "erlang", "mean": 1, "k": 0}, "classes[1].duration.k"),
        ("classes.0.name", "ram", "classes"),
        ("jobs", KeyError, "jobs"),
        ("jobs", 0, "jobs"),
        ("until", 10, "jobs"),
        ("warmup_jobs", -1, "warmup_jobs"),
        ("warmup", 5, "warmup"),
        ("sweep.resource", "disk", "sweep.resource"),
        ("sweep.loads", [], "sweep.loads"),
        ("sweep.loads", [0.5, 1.2], "sweep.loads[1]"),
        ("sweep.loads", ["high"], "sweep.loads[0]"),
        ("sweep", {"loads": [0.5], "resource": "mem"}, "sweep.loads[0]"),  # CPU load 1.19
        ("task_engine", "fast", "task_engine"),
    ],
)
def test_bad_fields_are_named(path: str, value: Any, field: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_dynamic_scenario(mutate(path, value))
    assert caught.value.field == field
    assert str(caught.value).startswith(field)


def test_unstable_rates_without_sweep_are_rejected() -> None:
    """Eq. (10): without a sweep the class rates themselves must keep every load below 1."""
    assert parse_dynamic_scenario(two_classes((0.9, 0.9))).jobs == 20_000  # CPU load 0.99
    with pytest.raises(ScenarioError) as caught:
        parse_dynamic_scenario(two_classes((1.0, 0.5)))  # CPU load 1.05
    assert caught.value.field == "classes"
    assert "cpus" in str(caught.value)
