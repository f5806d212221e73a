"""Scenario validation: every bad entry is reported with the path of its field."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from analysis.sim.scenario import ScenarioError, parse_scenario

GOOD: dict[str, Any] = {
    "agents": [{"id": "a", "resources": {"cpus": 4, "mem": 8}}],
    "users": [{"task": {"cpus": 1}, "tasks": 3, "duration": {"mean": 1}}],
}


def test_defaults() -> None:
    scenario = parse_scenario(GOOD)
    assert (scenario.seed, scenario.policy, scenario.placement) == (0, "drf", "best-fit")
    user = scenario.users[0]
    assert (user.id, user.join, user.leave, user.weight) == ("u1", 0.0, None, 1.0)
    assert user.duration.dist == "deterministic"


def test_counted_agents_and_drawn_servers() -> None:
    raw = {**GOOD, "agents": [{"id": "x", "resources": {"cpus": 1}, "count": 3}]}
    raw["servers"] = {"count": 7}
    scenario = parse_scenario(raw)
    assert [a.id for a in scenario.agents] == ["x-1", "x-2", "x-3"]
    assert (scenario.mix, scenario.mix_count) == ("google", 7)


def mutate(path: str, value: Any) -> dict[str, Any]:
    raw = copy.deepcopy(GOOD)
    *parents, last = path.split(".")
    node: Any = raw
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    if value is KeyError:
        del node[last]
    else:
        node[last] = value
    return raw


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("policy", "fifo", "policy"),
        ("placement", "worst-fit", "placement"),
        ("seed", "x", "seed"),
        ("agents", [], "agents"),
        ("agents.0.resources", {}, "agents[0].resources"),
        ("agents.0.resources", {"cpus": -1}, "agents[0].resources"),
        ("agents.0.count", 0, "agents[0].count"),
        ("users", [], "users"),
        ("users.0.task", None, "users[0].task"),
        ("users.0.tasks", -1, "users[0].tasks"),
        ("users.0.tasks", KeyError, "users[0].tasks"),
        ("users.0.duration", KeyError, "users[0].duration"),
        ("users.0.duration", {"dist": "weibull", "mean": 1}, "users[0].duration.dist"),
        ("users.0.duration", {"mean": 0}, "users[0].duration.mean"),
        ("users.0.duration", {"dist": "erlang", "mean": 1, "k": 0}, "users[0].duration.k"),
        ("users.0.weight", 0, "users[0].weight"),
        ("users.0.leave", -1, "users[0].leave"),
        ("users.0.leave", 0, "users[0].leave"),
        ("servers", {"mix": "azure", "count": 3}, "servers.mix"),
        ("until", "soon", "until"),
        ("users.0.jobs", {}, "users[0].jobs"),
        ("users.0.jobs", [{"submit": 1}], "users[0].jobs[0].tasks"),
        ("users.0.jobs", [{"submit": -1, "tasks": 1}], "users[0].jobs[0].submit"),
        (
            "users.0.jobs",
            [{"tasks": 1, "duration": {"mean": -2}}],
            "users[0].jobs[0].duration.mean",
        ),
        ("allocation_interval", -1, "allocation_interval"),
        ("placement_sample", 0, "placement_sample"),
        ("workload", {"generator": "trace"}, "workload.generator"),
        ("workload", {"cpus": [0.5, 0.1]}, "workload.cpus"),
        ("workload", {"jobs": "many"}, "workload.jobs"),
        ("variants", [{"policy": "slots"}], "variants[0].name"),
        ("variants", [{"name": "x", "policy": "fifo"}], "variants[0].policy"),
    ],
)
def test_bad_fields_are_named(path: str, value: Any, field: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(mutate(path, value))
    assert caught.value.field == field
    assert str(caught.value).startswith(field)


def test_repeated_user_ids() -> None:
    raw = copy.deepcopy(GOOD)
    raw["users"] = [raw["users"][0], raw["users"][0]]
    raw["users"][0] = {**raw["users"][0], "id": "u2"}
    with pytest.raises(ScenarioError, match="users: user ids repeat"):
        parse_scenario(raw)


def test_not_an_object() -> None:
    with pytest.raises(ScenarioError, match="scenario"):
        parse_scenario([1, 2])


def test_jobs_of_a_user_are_sorted_and_counted() -> None:
    raw = copy.deepcopy(GOOD)
    raw["users"][0]["jobs"] = [{"submit": 9, "tasks": 2}, {"submit": 4, "tasks": 5}]
    user = parse_scenario(raw).users[0]
    # the job of ``tasks`` at join comes first; jobs without a duration take the user's
    assert [(job.submit, job.tasks) for job in user.jobs] == [(0.0, 3), (4.0, 5), (9.0, 2)]
    assert user.tasks == 10
    assert {job.duration for job in user.jobs} == {user.duration}


def test_workload_is_generated_with_the_seed() -> None:
    raw = {**GOOD, "seed": 5, "workload": {"users": 4, "jobs": 50, "span": 100}}
    first = parse_scenario(raw)
    assert first == parse_scenario(raw)
    generated = first.users[1:]
    assert [u.id for u in generated] == ["w1", "w2", "w3", "w4"]
    jobs = [job for user in generated for job in user.jobs]
    assert len(jobs) == 50
    assert all(0 <= job.submit < 100 and 1 <= job.tasks <= 1000 for job in jobs)
    assert all(120 <= job.duration.mean <= 7200 for job in jobs)
    # user 1 submits the most jobs (Zipf), the shapes are within the ranges
    assert len(generated[0].jobs) == max(len(u.jobs) for u in generated)
    for user in generated:
        assert 0.005 <= user.task["cpus"] <= 0.15 and 0.005 <= user.task["mem"] <= 0.15
    other = parse_scenario({**raw, "seed": 6})
    assert other.users != first.users


def test_variants_are_whole_scenarios() -> None:
    raw = {
        **GOOD,
        "placement_sample": "all",
        "variants": [
            {"name": "slots-10", "policy": "slots", "slots_per_agent": 10},
            {"name": "ff", "placement": "first-fit"},
        ],
    }
    scenario = parse_scenario(raw)
    assert scenario.sample_size == 1  # "all": the one agent
    (name1, slots), (name2, first) = scenario.variants
    assert (name1, slots.policy, slots.slots_per_agent) == ("slots-10", "slots", 10)
    assert (name2, first.placement, first.policy) == ("ff", "first-fit", "drf")
    assert slots.variants == () and slots.users == scenario.users
