"""The simulator's mechanics: determinism, durations, joins and leaves, results."""

from __future__ import annotations

import copy
import itertools
import json
import random
from pathlib import Path
from typing import Any

import pytest

from analysis.sim.engine import Simulator, sample_duration
from analysis.sim.scenario import Duration, parse_scenario
from analysis.sim.servers import GOOGLE_MIX, draw_servers

SCENARIOS = Path(__file__).resolve().parents[2] / "examples" / "scenarios"


def scenario(**changes: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "seed": 3,
        "agents": [{"id": "a", "resources": {"cpus": 4, "mem": 8}, "count": 2}],
        "users": [
            {
                "id": "u1",
                "task": {"cpus": 1, "mem": 1},
                "tasks": 20,
                "duration": {"dist": "exponential", "mean": 10},
            },
            {
                "id": "u2",
                "task": {"cpus": 1, "mem": 3},
                "tasks": 10,
                "join": 5,
                "duration": {"dist": "erlang", "k": 3, "mean": 10},
            },
        ],
    }
    raw.update(changes)
    return raw


def run(**changes: Any) -> dict[str, Any]:
    return Simulator(parse_scenario(scenario(**changes))).run().to_json()


def test_same_seed_same_results_other_seed_other_results() -> None:
    assert run() == run()
    assert run() != run(seed=4)


def test_every_task_completes_and_completion_times_are_reported() -> None:
    result = run()
    users = {u["id"]: u for u in result["users"]}
    assert users["u1"]["tasks_completed"] == 20
    assert users["u2"]["tasks_completed"] == 10
    assert users["u2"]["completion_time"] == pytest.approx(users["u2"]["finished_at"] - 5)
    assert result["end_time"] == max(u["finished_at"] for u in users.values())
    counts = result["event_counts"]
    assert {k: counts[k] for k in ("joins", "job_submissions", "launches", "finishes")} == {
        "joins": 2,
        "job_submissions": 2,
        "launches": 30,
        "finishes": 30,
    }
    # every launch came with an offer of at least one task; events add up
    assert 1 <= counts["offers"] <= 30
    assert result["events"] == sum(counts.values())
    series = result["series"]
    assert series["dominant_share"]["u2"][0] is None
    assert series["utilization"]["cpus"][-1] == 0.0
    assert max(series["utilization"]["cpus"]) <= 1.0


def test_deterministic_durations_give_exact_times() -> None:
    result = run(
        users=[
            {
                "id": "u",
                "task": {"cpus": 4, "mem": 1},
                "tasks": 5,
                "duration": {"dist": "deterministic", "mean": 10},
            }
        ]
    )
    # 2 agents of 4 CPUs: tasks run 2 at a time, 3 waves of 10 s.
    assert result["users"][0]["completion_time"] == 30.0
    assert result["series"]["time"] == [0.0, 10.0, 20.0, 30.0]
    assert result["series"]["utilization"]["cpus"] == [1.0, 1.0, 0.5, 0.0]


def test_leaving_user_frees_its_resources_for_the_others() -> None:
    result = run(
        users=[
            {
                "id": "hog",
                "task": {"cpus": 1, "mem": 1},
                "tasks": 100,
                "leave": 50,
                "duration": {"dist": "deterministic", "mean": 1000},
            },
            {
                "id": "late",
                "task": {"cpus": 1, "mem": 1},
                "tasks": 8,
                "join": 10,
                "duration": {"dist": "deterministic", "mean": 5},
            },
        ]
    )
    users = {u["id"]: u for u in result["users"]}
    assert users["hog"]["tasks_completed"] == 0
    assert users["late"]["finished_at"] == 55.0
    times = result["series"]["time"]
    assert result["series"]["dominant_share"]["hog"][times.index(50.0)] is None


def test_until_stops_the_run() -> None:
    result = run(until=12)
    assert result["end_time"] == 12
    assert all(t <= 12 for t in result["series"]["time"])


def test_sample_every_thins_the_series() -> None:
    dense = run()["series"]["time"]
    sparse = run(sample_every=20)["series"]["time"]
    assert len(sparse) < len(dense)
    assert all(b - a >= 20 for a, b in itertools.pairwise(sparse[:-1]))


@pytest.mark.parametrize(
    ("duration", "spread"),
    [
        (Duration("deterministic", 2.0), 0.0),
        (Duration("exponential", 2.0), 1.0),
        (Duration("erlang", 2.0, 4), 0.5),
    ],
)
def test_duration_laws_have_the_right_mean_and_spread(duration: Duration, spread: float) -> None:
    rng = random.Random(11)
    values = [sample_duration(duration, rng) for _ in range(20_000)]
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / len(values)
    assert mean == pytest.approx(2.0, rel=0.03)
    # coefficient of variation: 0, 1, 1/sqrt(k)
    assert var**0.5 / mean == pytest.approx(spread, abs=0.03)


def test_google_mix_draw_is_seeded_and_from_table1() -> None:
    classes = {(cpus, mem) for _, cpus, mem in GOOGLE_MIX}
    first = draw_servers("google", 500, random.Random(5))
    assert first == draw_servers("google", 500, random.Random(5))
    assert {(s["cpus"], s["mem"]) for s in first} <= classes
    half = sum(1 for s in first if (s["cpus"], s["mem"]) == (0.5, 0.5))
    assert 0.45 < half / 500 < 0.62  # 6732 / 12583 = 0.535


@pytest.mark.parametrize("policy", ["drf", "asset", "pf", "slots"])
@pytest.mark.parametrize("placement", ["best-fit", "first-fit", "random"])
def test_every_policy_and_placement_runs_to_completion(policy: str, placement: str) -> None:
    result = run(policy=policy, placement=placement, slots_per_agent=4)
    assert [u["tasks_completed"] for u in result["users"]] == [20, 10]


def test_jobs_complete_when_their_last_task_ends() -> None:
    result = run(
        agents=[{"id": "a", "resources": {"cpus": 2, "mem": 2}}],
        users=[
            {
                "id": "u",
                "task": {"cpus": 1, "mem": 1},
                "jobs": [
                    {"submit": 0, "tasks": 3, "duration": {"mean": 10}},
                    {"submit": 5, "tasks": 1, "duration": {"mean": 2}},
                ],
            }
        ],
    )
    # FIFO within the user: job 1 runs 2 tasks at 0-10 and its 3rd at 10-20; job 2 waits for
    # job 1's tasks to be launched, then runs 10-12.
    jobs = result["jobs"]
    assert (jobs["submitted"], jobs["completed"]) == (2, 2)
    assert sorted(point[0] for point in jobs["cdf"]) == [7.0, 20.0]
    assert result["users"][0]["finished_at"] == 20.0
    assert result["event_counts"]["job_submissions"] == 2


def test_allocation_interval_batches_events_into_periodic_runs() -> None:
    every_instant = run()
    periodic = run(allocation_interval=5)
    assert periodic["allocation_runs"] < every_instant["allocation_runs"]
    # runs happen on multiples of 5 s: every sample is taken at such a time
    assert all(t % 5 == 0 for t in periodic["series"]["time"][:-1])
    assert [u["tasks_completed"] for u in periodic["users"]] == [20, 10]


def test_mean_utilization_is_the_time_average() -> None:
    result = run(
        users=[
            {
                "id": "u",
                "task": {"cpus": 4, "mem": 1},
                "tasks": 3,
                "duration": {"dist": "deterministic", "mean": 10},
            }
        ]
    )
    # 8 CPUs: 2 tasks for 10 s (100%), then 1 task for 10 s (50%).
    assert result["mean_utilization"]["cpus"] == pytest.approx(0.75)
    assert result["mean_utilization"]["mem"] == pytest.approx(3 * 10 / 16 / 20)


def test_progress_reports_growing_fractions_and_changes_nothing() -> None:
    seen: list[float] = []
    raw = scenario(users=[{**scenario()["users"][0], "tasks": 3000}])
    quiet = Simulator(parse_scenario(raw)).run().to_json()
    loud = Simulator(parse_scenario(raw)).run(seen.append).to_json()
    assert quiet == loud
    assert seen == sorted(seen) and seen[-1] == 1.0 and len(seen) > 1


@pytest.mark.parametrize("placement", ["best-fit", "first-fit"])
def test_placement_knowledge_gives_the_choices_of_a_full_scan(placement: str) -> None:
    """On a saturated cluster the placement reuses what its last complete scan learnt; every
    choice must equal that of a twin that scans all agents (no knowledge) from the same
    cursor."""
    raw = json.loads((SCENARIOS / "drfh-table2-small.json").read_text())
    raw.update(until=900, placement_sample=4, placement=placement)
    simulator = Simulator(parse_scenario(raw))
    policy = simulator.state.placement
    original = policy.choose
    checked = 0

    def choose(query: Any, agents: Any, refused: Any = frozenset()) -> Any:
        nonlocal checked
        twin = copy.copy(policy)
        twin._known = type(policy._known)()  # type: ignore[attr-defined]
        expected = type(policy).choose(twin, query, agents, refused)
        got = original(query, agents, refused)
        assert got is expected
        assert getattr(twin, "_cursor", None) == getattr(policy, "_cursor", None)
        checked += 1
        return got

    policy.choose = choose  # type: ignore[method-assign]
    simulator.run()
    assert checked > 100
