"""Operator weights in the core: a framework's own operator weight overrides its role's, which
overrides the weight the framework subscribed with; clearing one falls back to the next."""

from __future__ import annotations

import math

import pytest
from fairshare.resources import ResourceVector

from master.core import CoreConfig, InvalidArgument, MasterState, NotFound
from master.core.checks import MAX_WEIGHT


def state(hierarchy: str = "flat") -> MasterState:
    core = MasterState(CoreConfig(validate=True, hierarchy=hierarchy))
    core.handle_add_framework("a", 0.0, "a", "batch", 2.0)
    core.handle_add_framework("b", 0.0, "b", "batch", 1.0)
    core.handle_add_framework("c", 0.0, "c", "web", 1.0)
    return core


def weights(core: MasterState) -> dict[str, float]:
    return {fid: fw.weight for fid, fw in core.frameworks.items()}


def test_precedence_framework_then_role_then_subscribed() -> None:
    core = state()
    assert weights(core) == {"a": 2.0, "b": 1.0, "c": 1.0}
    core.handle_set_weight("batch", 3.0, 1.0)
    assert weights(core) == {"a": 3.0, "b": 3.0, "c": 1.0}
    core.handle_set_framework_weight("a", 5.0, 2.0)
    assert weights(core) == {"a": 5.0, "b": 3.0, "c": 1.0}
    core.handle_set_weight("batch", 4.0, 3.0)  # the framework weight still wins for a
    assert weights(core) == {"a": 5.0, "b": 4.0, "c": 1.0}
    core.handle_set_framework_weight("a", None, 4.0)
    assert weights(core) == {"a": 4.0, "b": 4.0, "c": 1.0}
    core.handle_set_weight("batch", None, 5.0)
    assert weights(core) == {"a": 2.0, "b": 1.0, "c": 1.0}
    assert core.role_weights == {}


def test_under_the_role_tree_a_role_weight_weighs_the_role_not_its_frameworks() -> None:
    for hierarchy in ("hdrf", "naive"):
        core = state(hierarchy)
        core.handle_set_weight("batch", 3.0, 1.0)
        assert weights(core) == {"a": 2.0, "b": 1.0, "c": 1.0}
        core.handle_set_framework_weight("a", 5.0, 2.0)
        assert weights(core) == {"a": 5.0, "b": 1.0, "c": 1.0}
        core.handle_set_framework_weight("a", None, 3.0)
        assert weights(core) == {"a": 2.0, "b": 1.0, "c": 1.0}
        assert core.role_shares()["batch"].weight == 3.0
        assert core.role_shares()["web"].weight == 1.0


def test_role_weights_split_the_pool_between_roles_under_the_tree() -> None:
    core = state("hdrf")
    core.handle_add_agent("ag", ResourceVector.parse("cpus:12;mem:120"), 0.0)
    for fid in ("a", "b", "c"):
        core.handle_update_demand(fid, ResourceVector.parse("cpus:1;mem:1"), 100, 0.0)
    core.handle_set_weight("web", 2.0, 0.0)  # web: 2, batch: 1 -> web 8 tasks, batch 4
    core.handle_allocate(1.0)
    offered = {fid: fw.offered_tasks for fid, fw in core.frameworks.items()}
    assert offered["c"] == 8
    # inside batch, a's subscribed weight 2 against b's 1: 4 tasks split about 2:1
    assert (offered["a"], offered["b"]) in {(3, 1), (2, 2)}


def test_weights_move_the_fairness_order() -> None:
    core = state()
    core.handle_remove_framework("c", 0.0)  # no demand: it would take a coarse offer
    core.handle_add_agent("ag", ResourceVector.parse("cpus:10;mem:100"), 0.0)
    for fid in ("a", "b"):
        core.handle_update_demand(fid, ResourceVector.parse("cpus:1;mem:1"), 100, 0.0)
    core.handle_set_framework_weight("b", 4.0, 0.0)  # b: 4, a: 2 -> b about twice a's tasks
    core.handle_allocate(1.0)
    offered = (core.frameworks["a"].offered_tasks, core.frameworks["b"].offered_tasks)
    assert offered in {(3, 7), (4, 6)}  # 10/3 and 20/3 rounded, whole tasks (the last tied)


@pytest.mark.parametrize("weight", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_weights_are_refused_and_change_nothing(weight: float) -> None:
    core = state()
    with pytest.raises(InvalidArgument):
        core.handle_set_framework_weight("a", weight, 1.0)
    with pytest.raises(InvalidArgument):
        core.handle_set_weight("batch", weight, 1.0)
    assert weights(core) == {"a": 2.0, "b": 1.0, "c": 1.0}
    with pytest.raises(NotFound):
        core.handle_set_framework_weight("nobody", 2.0, 1.0)


@pytest.mark.parametrize("weight", [0.0, -1.0, math.nan, math.inf, 1e6 + 1, True, "2"])
def test_one_weight_rule_for_every_weight(weight: object) -> None:
    """Subscribed, role and framework weights obey one rule: finite, in (0, 1e6]."""
    state = MasterState(CoreConfig(validate=True))
    with pytest.raises(InvalidArgument, match="weight"):
        state.handle_add_framework("F", 0.0, weight=weight)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="weight"):
        state.handle_set_weight("*", weight, 0.0)  # type: ignore[arg-type]
    state.handle_add_framework("F", 0.0, weight=MAX_WEIGHT)
    with pytest.raises(InvalidArgument, match="weight"):
        state.handle_set_framework_weight("F", weight, 0.0)  # type: ignore[arg-type]
    assert state.frameworks["F"].weight == MAX_WEIGHT
