"""Scenario validation: every bad entry is reported with the path of its field."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from master.sim.scenario import ScenarioError, parse_scenario

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
