"""Servers that join over time (``agents[].join``, ``servers.join``) and the measured window.

The full experiment (100 Google servers joining one by one under 20 users,
``examples/scenarios/drfh-servers-joining.json``) is in docs/experiments.md; here a 20-server
version keeps it to a second.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from analysis.sim.engine import Simulator, results_document
from analysis.sim.scenario import ScenarioError, parse_scenario

EXAMPLE = Path(__file__).parents[2] / "examples" / "scenarios" / "drfh-servers-joining.json"

TWO_AGENTS: dict[str, Any] = {
    "agents": [
        {"id": "early", "resources": {"cpus": 4, "mem": 4}},
        {"id": "late", "resources": {"cpus": 4, "mem": 4}, "join": 10},
    ],
    "users": [
        {
            "id": "u",
            "task": {"cpus": 1, "mem": 1},
            "tasks": 8,
            "duration": {"dist": "deterministic", "mean": 20},
        }
    ],
}


def test_agents_join_at_their_time() -> None:
    scenario = parse_scenario(TWO_AGENTS)
    assert [(a.id, a.join) for a in scenario.agents] == [("early", 0.0), ("late", 10.0)]
    doc = results_document(scenario)
    assert doc["event_counts"]["agent_joins"] == 1  # the early one is there from the start
    assert doc["total"] == {"cpus": 8.0, "mem": 8.0}
    # 4 tasks at 0 (one agent), 4 more at 10; they end at 20 and 30
    assert doc["end_time"] == 30.0
    # used/pool: 4/4 for 10 s, 8/8 for 10 s, 4/8 for 10 s -> (40 + 80 + 40) / (40 + 80 + 80)
    assert doc["mean_utilization"]["cpus"] == pytest.approx(160 / 200)
    assert doc["users"][0]["mean_running"] == pytest.approx((4 * 10 + 8 * 10 + 4 * 10) / 30)


def test_measure_from_limits_the_window() -> None:
    doc = results_document(parse_scenario({**TWO_AGENTS, "measure_from": 10}))
    assert doc["mean_utilization"]["cpus"] == pytest.approx((80 + 40) / (80 + 80))
    assert doc["users"][0]["mean_running"] == pytest.approx((8 * 10 + 4 * 10) / 20)


def test_a_user_waiting_for_the_first_agent_starts_when_it_joins() -> None:
    raw = copy.deepcopy(TWO_AGENTS)
    raw["agents"][0]["join"] = 5
    doc = results_document(parse_scenario(raw))
    assert doc["series"]["utilization"]["cpus"][0] == 0.0
    assert doc["end_time"] == 30.0  # 4 tasks from 5 to 25, 4 from 10 to 30


def test_drawn_servers_join_on_a_schedule() -> None:
    raw = {
        "servers": {"mix": "google", "count": 5, "join": {"start": 3, "every": 2}},
        "users": TWO_AGENTS["users"],
    }
    simulator = Simulator(parse_scenario(raw))
    joins = sorted((event[0], event[3].id) for event in simulator.heap if event[1] == 2)
    assert joins == [(3.0, "server-1"), (5.0, "server-2"), (7.0, "server-3"), (9.0, "server-4"),
                     (11.0, "server-5")]  # fmt: skip


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"agents": [{"resources": {"cpus": 1}, "join": -1}]}, "agents[0].join"),
        ({"servers": {"count": 2, "join": {"every": -1}}}, "servers.join"),
        ({"servers": {"count": 2, "join": 5}}, "servers.join"),
        ({"measure_from": -1}, "measure_from/fit_window"),
        ({"fit_window": -1}, "measure_from/fit_window"),
    ],
)
def test_bad_join_times_and_windows_name_their_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(ScenarioError) as error:
        parse_scenario({**TWO_AGENTS, **change})
    assert error.value.field == field


SMALL: dict[str, Any] = {
    "seed": 3,
    "servers": {"mix": "google", "count": 20, "join": {"start": 0, "every": 10}},
    "users": [
        {"id": user, "task": {"cpus": cpus, "mem": mem}, "tasks": 100_000,
         "duration": {"dist": "exponential", "mean": 30}}
        for user, cpus, mem in (
            ("a", 0.15, 0.02), ("b", 0.02, 0.15), ("c", 0.05, 0.05),
            ("d", 0.1, 0.04), ("e", 0.03, 0.09), ("f", 0.07, 0.12),
        )
    ],
    "until": 900,
    "measure_from": 400,
    "allocation_interval": 1,
}  # fmt: skip


def test_servers_joining_one_by_one_end_as_if_all_were_there() -> None:
    """20 Google servers joining every 10 s under 6 users with 30 s tasks: over the window
    after the last join, utilization is at least 98% of the run with every server present from
    the start, and every user runs at least 95% as many tasks."""
    joining = results_document(parse_scenario(SMALL))
    present = results_document(parse_scenario({**SMALL, "servers": {"mix": "google", "count": 20}}))
    assert joining["total"] == present["total"]
    for resource, value in present["mean_utilization"].items():
        assert joining["mean_utilization"][resource] >= 0.98 * value, resource
    running = {user["id"]: user["mean_running"] for user in present["users"]}
    for user in joining["users"]:
        assert user["mean_running"] >= 0.95 * running[user["id"]], user["id"]


def test_the_documented_experiment_compares_joining_with_all_present() -> None:
    raw = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    scenario = parse_scenario(raw)
    assert (scenario.mix_count, len(scenario.users)) == (100, 20)
    variants = dict(scenario.variants)
    assert list(variants) == ["all-present", "joining", "all-present-plain", "joining-plain"]
    assert variants["joining"].mix_join_every == 10
    assert variants["all-present"].mix_join_every == 0
    assert variants["joining-plain"].fit_window == 0
    assert scenario.measure_from > 99 * scenario.mix_join_every


FIG1_LONG: dict[str, Any] = {
    "agents": [
        {"id": "s1", "resources": {"cpus": 2, "mem": 12}, "join": 1},
        {"id": "s2", "resources": {"cpus": 12, "mem": 2}, "join": 2},
    ],
    "users": [
        {"id": "u1", "task": {"cpus": 0.2, "mem": 1}, "tasks": 30, "preemptible": True,
         "duration": {"mean": 100_000}},
        {"id": "u2", "task": {"cpus": 1, "mem": 0.2}, "tasks": 30, "preemptible": True,
         "duration": {"mean": 100_000}},
    ],
    "until": 100,
    "allocation_interval": 1,
}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "running", "preempted"),
    [
        ({}, {"u1": 5, "u2": 11}, 0),  # the fit-aware choice alone: no task ever ends
        ({"rebalance": {"every": 2, "grace": 1}}, {"u1": 10, "u2": 10}, 1),
        ({"fit_window": 0}, {"u1": 6, "u2": 6}, 0),  # Fig. 2
        # the replay shows u2 taking the freed CPU back under plain filling: nothing to do
        ({"fit_window": 0, "rebalance": {"every": 2, "grace": 1}}, {"u1": 6, "u2": 6}, 0),
    ],
)
def test_drfh_fig1_with_long_tasks_needs_the_rebalancer(
    change: dict[str, Any], running: dict[str, int], preempted: int
) -> None:
    """Both users wait, then s1 and s2 join; tasks never end. Only preemption reaches DRFH's
    10 and 10, and it needs the fit-aware choice to hand the freed CPU to u1."""
    doc = results_document(parse_scenario({**FIG1_LONG, **change}))
    assert {user["id"]: user["tasks_running"] for user in doc["users"]} == running
    assert doc["event_counts"]["preemptions"] == preempted


def test_rebalance_settings_are_checked() -> None:
    with pytest.raises(ScenarioError) as error:
        parse_scenario({**FIG1_LONG, "rebalance": {"every": 0}})
    assert error.value.field == "rebalance.every/grace"
    with pytest.raises(ScenarioError) as error:
        parse_scenario({**FIG1_LONG, "rebalance": {"threshold": 0.01, "release": 0.5}})
    assert error.value.field == "rebalance"
    with pytest.raises(ScenarioError) as error:
        parse_scenario({**FIG1_LONG, "until": None, "rebalance": {}})
    assert error.value.field == "rebalance"
    raw = copy.deepcopy(FIG1_LONG)
    raw["users"][0]["preemptible"] = "yes"
    with pytest.raises(ScenarioError) as error:
        parse_scenario(raw)
    assert error.value.field == "users[0].preemptible"


def test_the_documented_long_running_experiment() -> None:
    scenario = parse_scenario(
        json.loads(EXAMPLE.with_name(f"{EXAMPLE.stem}-long.json").read_text())
    )
    variants = dict(scenario.variants)
    assert list(variants) == ["all-present", "joining", "joining-rebalance", "joining-plain"]
    assert all(user.preemptible and user.duration.mean > scenario.until for user in scenario.users)
    assert variants["joining-rebalance"].rebalance is not None
    assert scenario.rebalance is None
