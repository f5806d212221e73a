"""Offline analysis takes its policy and hierarchy names and its weight rule from the master's
core, instead of keeping tables of its own beside the core's (issue 25, item 4): the calculator,
the fluid solver and both simulators accept exactly what the core accepts, and refuse the rest
with a message naming the field."""

from __future__ import annotations

import argparse
import copy
import itertools
import math
from collections.abc import Callable
from typing import Any

import pytest
from fairshare.resources import ResourceVector

from analysis.calculator import POLICIES, CaseError, allocate, parse_case
from analysis.calculator.command import add_arguments
from analysis.fluid.solver import (
    FLUID_ONLY_POLICIES,
    FLUID_POLICIES,
    FluidAgent,
    FluidError,
    FluidFramework,
    solve_fluid,
)
from analysis.fluid.tree import solve_fluid_tree
from analysis.sim.dynamic_scenario import DYNAMIC_POLICIES
from analysis.sim.scenario import ScenarioError, parse_scenario
from master.core import CoreConfig, InvalidArgument
from master.core.checks import check_weight
from master.core.fairness import FAIRNESS_POLICIES
from master.core.hierarchy import HIERARCHIES
from master.core.placement import PLACEMENT_POLICIES

CASE: dict[str, Any] = {
    "resources": {"cpus": 4},
    "frameworks": [{"name": "A", "task": {"cpus": 1}, "role": "eng"}],
}
SCENARIO: dict[str, Any] = {
    "agents": [{"id": "a", "resources": {"cpus": 4, "mem": 8}}],
    "users": [{"task": {"cpus": 1}, "tasks": 3, "duration": {"mean": 1}}],
}
WEIGHTS: list[Any] = [
    1,
    0.5,
    1e-6,
    1e6,
    5e-7,
    1e6 + 1,
    1e9,
    0,
    -1,
    math.inf,
    math.nan,
    "3",
    True,
    None,
]


def core_takes_weight(weight: Any) -> bool:
    try:
        check_weight(weight, "weight")
    except InvalidArgument:
        return False
    return True


def core_takes(policy: str, hierarchy: str) -> bool:
    try:
        CoreConfig(policy=policy, hierarchy=hierarchy)
    except ValueError:
        return False
    return True


def test_the_calculators_policies_are_the_cores_and_fluid_modes_own() -> None:
    assert set(POLICIES) == set(FAIRNESS_POLICIES) | set(FLUID_ONLY_POLICIES)
    assert not set(FLUID_ONLY_POLICIES) & set(FAIRNESS_POLICIES)
    assert set(FLUID_POLICIES) - set(FLUID_ONLY_POLICIES) <= set(FAIRNESS_POLICIES)
    assert set(DYNAMIC_POLICIES) == set(FLUID_POLICIES) - set(FLUID_ONLY_POLICIES)


def test_the_allocate_flags_offer_the_cores_names() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    choices = {action.dest: action.choices for action in parser._actions if action.choices}
    assert set(choices["policy"]) == set(POLICIES)
    assert set(choices["placement"]) == set(PLACEMENT_POLICIES)
    assert tuple(choices["hierarchy"]) == HIERARCHIES


@pytest.mark.parametrize("policy", sorted(FAIRNESS_POLICIES))
def test_a_core_policy_without_a_fluid_answer_is_refused_as_task_mode_only(policy: str) -> None:
    pool = [FluidAgent("pool", ResourceVector({"cpus": 4}))]
    frameworks = [FluidFramework("a", ResourceVector({"cpus": 1}))]
    if policy in FLUID_POLICIES:
        assert solve_fluid(pool, frameworks, policy).frameworks[0].tasks > 0
    else:
        with pytest.raises(FluidError, match="task-mode"):
            solve_fluid(pool, frameworks, policy)


@pytest.mark.parametrize(
    ("policy", "hierarchy"),
    list(itertools.product(sorted(FAIRNESS_POLICIES), ["", *HIERARCHIES, "mesos"])),
)
def test_a_case_and_a_scenario_take_a_hierarchy_exactly_when_the_core_does(
    policy: str, hierarchy: str
) -> None:
    expected = core_takes(policy, hierarchy)
    case = {**CASE, "policy": policy, **({"hierarchy": hierarchy} if hierarchy else {})}
    try:
        parsed = parse_case(case)
    except CaseError as error:
        assert not expected, error
        assert str(error).startswith("hierarchy: ")
    else:
        assert expected
        assert (
            parsed.hierarchy == CoreConfig(policy=policy, hierarchy=hierarchy).effective_hierarchy
        )
    try:
        parse_scenario({**SCENARIO, "policy": policy, "hierarchy": hierarchy})
    except ScenarioError as error:
        assert not expected, error
        assert error.field == "hierarchy"
    else:
        assert expected


@pytest.mark.parametrize("hierarchy", [*HIERARCHIES, "mesos"])
def test_the_fluid_tree_takes_the_cores_hierarchies(hierarchy: str) -> None:
    pool = [FluidAgent("pool", ResourceVector({"cpus": 4}))]
    frameworks = [FluidFramework("a", ResourceVector({"cpus": 1}))]
    if hierarchy in HIERARCHIES:
        result = solve_fluid_tree(pool, frameworks, ["eng"], {}, hierarchy)
        assert result.frameworks[0].tasks == 4
    else:
        with pytest.raises(FluidError, match="'mesos' is unknown; choose one of hdrf, naive, flat"):
            solve_fluid_tree(pool, frameworks, ["eng"], {}, hierarchy)


@pytest.mark.parametrize("weight", WEIGHTS, ids=repr)
def test_role_and_user_weights_follow_the_cores_one_rule(weight: Any) -> None:
    """A case's role weights, a scenario's role and user weights and a case's framework
    weights in tasks mode all take exactly the weights the core takes."""
    expected = core_takes_weight(weight)
    checks: list[tuple[Callable[[], object], type[Exception], str]] = []
    case_role = {**CASE, "roles": {"eng": {"weight": weight}}}
    checks.append((lambda: parse_case(case_role), CaseError, "roles.eng.weight"))
    case_framework = copy.deepcopy(CASE)
    case_framework["frameworks"][0]["weight"] = weight
    checks.append((lambda: _tasks_mode(case_framework), CaseError, "frameworks[0].weight"))
    scenario_role = {**SCENARIO, "roles": {"eng": {"weight": weight}}}
    checks.append((lambda: parse_scenario(scenario_role), ScenarioError, "roles.eng.weight"))
    scenario_user = copy.deepcopy(SCENARIO)
    scenario_user["users"][0]["weight"] = weight
    checks.append((lambda: parse_scenario(scenario_user), ScenarioError, "users[0].weight"))
    for run, error_type, field in checks:
        if expected:
            run()
        else:
            with pytest.raises(error_type) as caught:
                run()
            assert str(caught.value).startswith(f"{field}: ")


def _tasks_mode(case: dict[str, Any]) -> None:
    allocate(parse_case(case, mode="tasks"))


@pytest.mark.parametrize("weight", [1e-9, 1e9, 0.5])
def test_fluid_mode_takes_any_positive_weight(weight: float) -> None:
    case = copy.deepcopy(CASE)
    case["frameworks"][0]["weight"] = weight
    del case["frameworks"][0]["role"]
    assert allocate(parse_case(case, mode="fluid"))["frameworks"][0]["tasks"] == 4


@pytest.mark.parametrize("weight", [0, -1, math.inf, "3", True])
def test_a_weight_fluid_mode_cannot_take_names_the_framework(weight: Any) -> None:
    case = copy.deepcopy(CASE)
    case["frameworks"][0]["weight"] = weight
    with pytest.raises(CaseError, match=r"^frameworks\[0\]\.weight: "):
        parse_case(case, mode="fluid")
