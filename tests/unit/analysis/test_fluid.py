"""Fluid (divisible-task) allocations (analysis.fluid.solver) against the papers' worked
examples."""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import pytest
from fairshare.resources import ResourceVector
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.fluid import solver as fluid
from analysis.fluid.linear_program import LPStatus, solve_lp
from analysis.fluid.solver import (
    FluidAgent,
    FluidError,
    FluidFramework,
    FluidResult,
    solve_fluid,
)

F = Fraction
R = ResourceVector


def pool(**resources: float) -> list[FluidAgent]:
    return [FluidAgent("pool", R(resources))]


def fw(name: str, max_tasks: int | None = None, weight: int = 1, **task: float) -> FluidFramework:
    return FluidFramework(name, R(task), weight=F(weight), max_tasks=max_tasks)


def tasks(result: FluidResult) -> list[Fraction | float]:
    return [share.tasks for share in result.frameworks]


def exact_tasks(result: FluidResult) -> list[Fraction]:
    assert result.exact
    out = []
    for share in result.frameworks:
        assert isinstance(share.tasks, Fraction)
        out.append(share.tasks)
    return out


TABLE_1 = [fw("A", cpus=1, mem=4), fw("B", cpus=3, mem=1)]


# -- DRF paper (Ghodsi et al.) --------------------------------------------------------------------


def test_drf_table_1() -> None:
    result = solve_fluid(pool(cpus=9, mem=18), TABLE_1, "drf")
    assert exact_tasks(result) == [3, 2]
    a, b = result.frameworks
    assert a.dominant_share == b.dominant_share == F(2, 3)
    assert a.allocated == {"cpus": 3, "mem": 12}
    assert b.allocated == {"cpus": 6, "mem": 2}
    assert a.per_agent == {"pool": 3}
    assert result.utilization == {"cpus": 1, "mem": F(7, 9)}
    assert list(result.utilization) == ["cpus", "mem"]
    assert result.prices is None


def test_asset_fairness_section_5_1() -> None:
    result = solve_fluid(pool(cpus=9, mem=18), TABLE_1, "asset")
    assert exact_tasks(result) == [F(63, 25), F(54, 25)]  # 2.52 and 2.16


@pytest.mark.parametrize("policy", ["pf", "ceei"])
def test_ceei_section_5_2_is_pf(policy: str) -> None:
    result = solve_fluid(pool(cpus=9, mem=18), TABLE_1, policy)
    assert not result.exact
    a, b = (float(t) for t in tasks(result))
    assert math.isclose(a, 45 / 11, abs_tol=1e-9)
    assert math.isclose(b, 18 / 11, abs_tol=1e-9)
    assert result.prices is not None
    assert set(result.prices) == {"cpus", "mem"}
    assert math.isclose(sum(result.prices.values()), 2, rel_tol=1e-9)  # eq. 5
    assert all(float(u) <= 1.0 for u in result.utilization.values())


def test_asset_violates_sharing_incentive_theorem_1() -> None:
    result = solve_fluid(
        pool(cpus=30, mem=30), [fw("1", cpus=1, mem=3), fw("2", cpus=1, mem=1)], "asset"
    )
    assert exact_tasks(result) == [6, 12]
    assert result.frameworks[1].dominant_share == F(2, 5)  # less than 1/2 of both resources


def test_asset_violates_bottleneck_fairness_theorem_2() -> None:
    result = solve_fluid(
        pool(cpus=21, mem=21), [fw("1", cpus=3, mem=2), fw("2", cpus=4, mem=1)], "asset"
    )
    assert exact_tasks(result) == [3, 3]
    assert result.frameworks[0].allocated["cpus"] == 9  # 3/7 of the bottleneck resource


def test_asset_violates_resource_monotonicity_theorem_3() -> None:
    frameworks = [fw("A", cpus=4, mem=2), fw("B", cpus=1, mem=1)]
    before = solve_fluid(pool(cpus=77, mem=77), frameworks, "asset")
    assert exact_tasks(before) == [11, 33]
    after = solve_fluid(pool(cpus=77, mem=154), frameworks, "asset")
    assert exact_tasks(after) == [F(21, 2), 35]
    assert after.frameworks[0].allocated == {"cpus": 42, "mem": 21}


def test_weighted_drf_section_4_3() -> None:
    frameworks = [fw("A", weight=2, cpus=1, mem=4), fw("B", cpus=3, mem=1)]
    result = solve_fluid(pool(cpus=9, mem=18), frameworks, "drf")
    a, b = result.frameworks
    assert a.dominant_share == 2 * b.dominant_share == F(12, 13)  # both stop when mem fills
    assert exact_tasks(result) == [F(54, 13), F(18, 13)]
    assert result.utilization["mem"] == 1


def test_cap_stops_a_framework_and_the_others_keep_filling() -> None:
    frameworks = [fw("A", cpus=1, mem=4), fw("B", max_tasks=1, cpus=3, mem=1)]
    result = solve_fluid(pool(cpus=9, mem=18), frameworks, "drf")
    assert exact_tasks(result) == [F(17, 4), 1]
    assert result.utilization["mem"] == 1


def test_cap_zero_gets_nothing() -> None:
    frameworks = [fw("A", cpus=1, mem=4), fw("B", max_tasks=0, cpus=3, mem=1)]
    result = solve_fluid(pool(cpus=9, mem=18), frameworks, "drf")
    assert exact_tasks(result) == [F(9, 2), 0]
    assert result.frameworks[1].per_agent == {}
    assert result.frameworks[1].dominant_share == 0


def test_cap_larger_than_fair_share_does_not_bind() -> None:
    frameworks = [fw("A", max_tasks=100, cpus=1, mem=4), fw("B", max_tasks=2, cpus=3, mem=1)]
    assert exact_tasks(solve_fluid(pool(cpus=9, mem=18), frameworks, "drf")) == [3, 2]


def test_pf_cap_is_a_private_resource() -> None:
    frameworks = [fw("A", cpus=1, mem=4), fw("B", max_tasks=1, cpus=3, mem=1)]
    a, b = (float(t) for t in tasks(solve_fluid(pool(cpus=9, mem=18), frameworks, "pf")))
    assert math.isclose(a, 17 / 4, abs_tol=1e-9)
    assert math.isclose(b, 1, abs_tol=1e-9)


def test_unservable_framework_gets_zero_tasks() -> None:
    frameworks = [*TABLE_1, fw("G", cpus=1, gpus=1)]
    result = solve_fluid(pool(cpus=9, mem=18), frameworks, "drf")
    assert exact_tasks(result) == [3, 2, 0]
    assert result.frameworks[2].allocated == {"cpus": 0, "gpus": 0}
    assert "gpus" not in result.utilization
    pf = solve_fluid(pool(cpus=9, mem=18), frameworks, "pf")
    assert tasks(pf)[2] == 0


# -- Bonald & Roberts §2.3 ------------------------------------------------------------------------


def test_bonald_roberts_remark_2() -> None:
    # a1 = (1, 1/3), a2 = (1/2, 1) with capacities normalised to 1 (here 6 of each).
    result = solve_fluid(
        pool(cpus=6, mem=6), [fw("1", cpus=6, mem=2), fw("2", cpus=3, mem=6)], "drf"
    )
    assert exact_tasks(result) == [F(2, 3), F(2, 3)]
    assert result.utilization == {"cpus": 1, "mem": F(8, 9)}  # resource 2 not saturated
    # Without resource 2: a1 = (1), a2 = (1/2). The paper prints phi' = (1, 2), which is the
    # ratio; with capacity 1 the allocation is phi' = (1/2, 1), equal shares 1/2 of resource 1.
    alone = solve_fluid(pool(cpus=6), [fw("1", cpus=6), fw("2", cpus=3)], "drf")
    assert exact_tasks(alone) == [F(1, 2), 1]
    assert [s.dominant_share for s in alone.frameworks] == [F(1, 2), F(1, 2)]


def test_single_resource_is_max_min() -> None:
    frameworks = [fw("a", cpus=1), fw("b", cpus=2), fw("c", max_tasks=1, cpus=1)]
    result = solve_fluid(pool(cpus=12), frameworks, "drf")
    assert [s.allocated["cpus"] for s in result.frameworks] == [F(11, 2), F(11, 2), 1]


# -- DRFH (Wang, Li, Liang) -----------------------------------------------------------------------

FIG_1_AGENTS = [FluidAgent("s1", R(cpus=2, mem=12)), FluidAgent("s2", R(cpus=12, mem=2))]
FIG_1_USERS = [fw("u1", cpus=0.2, mem=1), fw("u2", cpus=1, mem=0.2)]


def test_drfh_figures_1_to_3() -> None:
    result = solve_fluid(FIG_1_AGENTS, FIG_1_USERS, "drf")
    assert exact_tasks(result) == [10, 10]
    u1, u2 = result.frameworks
    assert u1.dominant_share == u2.dominant_share == F(5, 7)
    assert u1.per_agent == {"s1": 10}
    assert u2.per_agent == {"s2": 10}
    assert result.utilization == {"cpus": F(6, 7), "mem": F(6, 7)}


def test_naive_per_server_drf_figure_2_is_worse() -> None:
    per_server = [solve_fluid([agent], FIG_1_USERS, "drf") for agent in FIG_1_AGENTS]
    assert [exact_tasks(r) for r in per_server] == [[5, 1], [1, 5]]  # 6 tasks each < 10


def test_drfh_cap() -> None:
    users = [fw("u1", max_tasks=4, cpus=0.2, mem=1), FIG_1_USERS[1]]
    result = solve_fluid(FIG_1_AGENTS, users, "drf")
    assert exact_tasks(result) == [4, F(56, 5)]
    assert result.frameworks[0].per_agent == {"s1": 4}


def test_drfh_weighted_on_identical_halves_matches_one_pool() -> None:
    frameworks = [fw("A", weight=2, cpus=1, mem=4), fw("B", cpus=3, mem=1)]
    halves = [FluidAgent("h1", R(cpus=4.5, mem=9)), FluidAgent("h2", R(cpus=4.5, mem=9))]
    result = solve_fluid(halves, frameworks, "drf")
    assert exact_tasks(result) == [F(54, 13), F(18, 13)]
    assert result.frameworks[0].per_agent == {"h1": F(27, 13), "h2": F(27, 13)}


def test_drfh_task_needing_resources_no_single_agent_has() -> None:
    agents = [FluidAgent("c", R(cpus=4)), FluidAgent("g", R(gpus=4, cpus=1))]
    result = solve_fluid(agents, [fw("both", cpus=1, gpus=1), fw("cpu", cpus=1)], "drf")
    # "both" fits only on g, whose single cpu caps it at 1 task (level 1/4); "cpu" then fills c.
    assert exact_tasks(result) == [1, 4]
    assert result.frameworks[0].per_agent == {"g": 1}
    assert result.frameworks[1].per_agent == {"c": 4}
    only_split = [FluidAgent("c", R(cpus=4)), FluidAgent("g", R(gpus=4))]
    assert exact_tasks(solve_fluid(only_split, [fw("both", cpus=1, gpus=1)], "drf")) == [0]


def test_drfh_asset() -> None:
    result = solve_fluid(FIG_1_AGENTS, FIG_1_USERS, "asset")
    assert exact_tasks(result) == [10, 10]


# -- errors ---------------------------------------------------------------------------------------


def test_pf_needs_a_single_pool() -> None:
    with pytest.raises(FluidError, match=r"pf fluid mode needs a single pool \(resources\), got 2"):
        solve_fluid(FIG_1_AGENTS, FIG_1_USERS, "pf")


@pytest.mark.parametrize(
    ("policy", "message"), [("slots", "task-mode baseline"), ("maxmin", "unknown")]
)
def test_policy_errors(policy: str, message: str) -> None:
    with pytest.raises(FluidError, match=message):
        solve_fluid(pool(cpus=1), [fw("a", cpus=1)], policy)


def test_framework_errors_name_the_framework() -> None:
    with pytest.raises(FluidError, match=r"'a'.*task is empty"):
        FluidFramework("a", R())
    with pytest.raises(FluidError, match=r"'a'.*weight"):
        FluidFramework("a", R(cpus=1), weight=F(0))
    with pytest.raises(FluidError, match=r"'a'.*weight"):
        FluidFramework("a", R(cpus=1), weight=math.inf)  # type: ignore[arg-type]
    with pytest.raises(FluidError, match=r"'a'.*max_tasks"):
        FluidFramework("a", R(cpus=1), max_tasks=-1)
    with pytest.raises(FluidError, match="name"):
        FluidFramework("", R(cpus=1))
    with pytest.raises(FluidError, match="'a' is given twice"):
        solve_fluid(pool(cpus=1), [fw("a", cpus=1), fw("a", cpus=2)], "drf")


def test_agent_errors() -> None:
    with pytest.raises(FluidError, match="agents"):
        solve_fluid([], [fw("a", cpus=1)], "drf")
    with pytest.raises(FluidError, match="agent 's' is given twice"):
        solve_fluid([FluidAgent("s", R(cpus=1)), FluidAgent("s", R(cpus=1))], [], "drf")


def test_float_weight_is_read_as_decimal() -> None:
    assert FluidFramework("a", R(cpus=1), weight=0.1).weight == F(1, 10)  # type: ignore[arg-type]


def test_no_frameworks() -> None:
    result = solve_fluid(pool(cpus=4), [], "drf")
    assert result.frameworks == []
    assert result.utilization == {"cpus": 0}


# -- properties of fluid DRF (hypothesis) ---------------------------------------------------------

NAMES = ("cpus", "mem", "disk")


@st.composite
def vectors(draw: st.DrawFn, names: Sequence[str] = NAMES, low: int = 1, high: int = 40) -> R:
    """A vector over a non-empty subset of ``names``, quantities a multiple of 0.1."""
    chosen = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
    return R.from_millis({n: draw(st.integers(low, high)) * 100 for n in chosen})


@st.composite
def instances(
    draw: st.DrawFn, names: Sequence[str] = NAMES, weighted: bool = True, capped: bool = True
) -> tuple[R, list[FluidFramework]]:
    total = R.from_millis({n: draw(st.integers(10, 400)) * 100 for n in names})
    count = draw(st.integers(1, 5))
    frameworks = []
    for k in range(count):
        weight = draw(st.integers(1, 3)) if weighted else 1
        cap = draw(st.none() | st.integers(0, 20)) if capped else None
        frameworks.append(FluidFramework(f"f{k}", draw(vectors(names)), F(weight), cap))
    return total, frameworks


def _dominant_per_task(task: R, total: R) -> Fraction:
    return max(F(m, total.millis(n)) for n, m in task.millis_items())


@settings(max_examples=50, deadline=None)
@given(instances())
def test_pareto_every_uncapped_framework_needs_a_saturated_resource(
    instance: tuple[R, list[FluidFramework]],
) -> None:
    total, frameworks = instance
    for policy in ("drf", "asset"):
        result = solve_fluid([FluidAgent("pool", total)], frameworks, policy)
        for framework, share in zip(frameworks, result.frameworks, strict=True):
            if framework.max_tasks is not None and share.tasks == framework.max_tasks:
                continue
            assert any(result.utilization[n] == 1 for n in framework.task.names())


@settings(max_examples=50, deadline=None)
@given(instances(weighted=False))
def test_sharing_incentive(instance: tuple[R, list[FluidFramework]]) -> None:
    total, frameworks = instance
    result = solve_fluid([FluidAgent("pool", total)], frameworks, "drf")
    n = len(frameworks)
    for framework, share in zip(frameworks, result.frameworks, strict=True):
        per_task = _dominant_per_task(framework.task, total)
        floor = (
            F(1, n) if framework.max_tasks is None else min(F(1, n), framework.max_tasks * per_task)
        )
        assert share.dominant_share >= floor


@settings(max_examples=50, deadline=None)
@given(instances(), st.data())
def test_strategy_proofness(instance: tuple[R, list[FluidFramework]], data: st.DataObject) -> None:
    total, frameworks = instance
    liar = data.draw(st.integers(0, len(frameworks) - 1))
    honest = FluidFramework(f"f{liar}", frameworks[liar].task, frameworks[liar].weight)
    frameworks[liar] = honest
    agents = [FluidAgent("pool", total)]
    truthful = solve_fluid(agents, frameworks, "drf").frameworks[liar].tasks
    declared = data.draw(vectors())
    lying = list(frameworks)
    lying[liar] = FluidFramework(honest.name, declared, honest.weight)
    received = solve_fluid(agents, lying, "drf").frameworks[liar].tasks
    assert isinstance(received, Fraction)
    # With x' tasks of the declared shape d' it holds x' d'; it can run min_r x' d'_r / d_r.
    true_tasks = min(received * F(declared.millis(n), m) for n, m in honest.task.millis_items())
    assert true_tasks <= truthful


@settings(max_examples=50, deadline=None)
@given(instances(names=("cpus",)))
def test_single_resource_is_weighted_max_min(instance: tuple[R, list[FluidFramework]]) -> None:
    total, frameworks = instance
    result = solve_fluid([FluidAgent("pool", total)], frameworks, "drf")
    levels = [
        share.allocated["cpus"] / framework.weight
        for framework, share in zip(frameworks, result.frameworks, strict=True)
    ]
    top = max(levels)
    below_cap = False
    for framework, share, level in zip(frameworks, result.frameworks, levels, strict=True):
        if framework.max_tasks is None or share.tasks < framework.max_tasks:
            below_cap = True
            assert level == top
        else:
            assert level <= top
    assert result.utilization["cpus"] == 1 or not below_cap


@st.composite
def proportional_agents(draw: st.DrawFn) -> tuple[R, list[FluidAgent]]:
    base = R.from_millis({n: draw(st.integers(10, 200)) * 100 for n in NAMES[:2]})
    multiples = draw(st.lists(st.integers(1, 3), min_size=2, max_size=3))
    agents = [FluidAgent(f"a{k}", base * m) for k, m in enumerate(multiples)]
    return base * sum(multiples), agents


@settings(max_examples=25, deadline=None)
@given(proportional_agents(), st.data())
def test_drfh_on_proportional_agents_equals_one_pool(
    split: tuple[R, list[FluidAgent]], data: st.DataObject
) -> None:
    # Tasks are divisible, so agents that are scaled copies of one shape hold exactly the
    # allocations of their sum (they are merged, then spread back in proportion to capacity).
    total, agents = split
    _, frameworks = data.draw(instances(names=NAMES[:2]))
    for policy in ("drf", "asset"):
        one = solve_fluid([FluidAgent("pool", total)], frameworks, policy)
        many = solve_fluid(agents, frameworks, policy)
        assert tasks(many) == tasks(one)
        assert many.utilization == one.utilization
        _assert_fits(agents, frameworks, many)
    pf_one = solve_fluid([FluidAgent("pool", total)], frameworks, "pf")
    pf_many = solve_fluid(agents, frameworks, "pf")
    assert tasks(pf_many) == tasks(pf_one)


@settings(max_examples=25, deadline=None)
@given(instances(names=NAMES[:2]))
def test_lp_rounds_on_one_agent_equal_water_filling(
    instance: tuple[R, list[FluidFramework]],
) -> None:
    # White box: the DRFH linear-program rounds (DRFH Prop. 4, single-server DRF) on one agent
    # must reproduce the exact water-filling.
    total, frameworks = instance
    agent = FluidAgent("pool", total)
    totals = total.to_millis()
    for metric in ("drf", "asset"):
        jobs = fluid._jobs([agent], frameworks, totals, metric)
        by_lp = {i: sum(p.values(), F(0)) for i, p in fluid._drfh_rounds(jobs, [agent]).items()}
        by_filling = {i: x for i, x in fluid._water_fill(jobs, totals).items() if x}
        assert by_lp == by_filling


def _assert_fits(
    agents: Sequence[FluidAgent], frameworks: Sequence[FluidFramework], result: FluidResult
) -> None:
    for agent in agents:
        for name in agent.resources.names() | {n for f in frameworks for n in f.task.names()}:
            used = sum(
                (
                    F(share.per_agent.get(agent.id, 0)) * framework.task.millis(name)
                    for framework, share in zip(frameworks, result.frameworks, strict=True)
                ),
                F(0),
            )
            assert used <= agent.resources.millis(name)


@settings(max_examples=25, deadline=None)
@given(st.lists(vectors(NAMES[:2], 5, 200), min_size=2, max_size=2), st.data())
def test_drfh_is_envy_free_and_feasible(agent_vectors: list[R], data: st.DataObject) -> None:
    agents = [FluidAgent(f"s{k}", v) for k, v in enumerate(agent_vectors)]
    count = data.draw(st.integers(2, 3))
    frameworks = [FluidFramework(f"u{k}", data.draw(vectors(NAMES[:2]))) for k in range(count)]
    result = solve_fluid(agents, frameworks, "drf")
    _assert_fits(agents, frameworks, result)
    for mine, share in zip(frameworks, result.frameworks, strict=True):
        for other in result.frameworks:
            # Tasks ``mine`` could run with ``other``'s per-agent resources (DRFH Prop. 1).
            could = sum(
                (
                    min(
                        F(other_tasks)
                        * F(frameworks[result.frameworks.index(other)].task.millis(n), m)
                        for n, m in mine.task.millis_items()
                    )
                    for other_tasks in other.per_agent.values()
                ),
                F(0),
            )
            assert could <= share.tasks
    _assert_pareto(agents, frameworks, result)


def _assert_pareto(
    agents: Sequence[FluidAgent], frameworks: Sequence[FluidFramework], result: FluidResult
) -> None:
    """No framework can get more tasks while every other keeps its own (DRFH Prop. 2)."""
    pairs = [
        (k, agent)
        for k, framework in enumerate(frameworks)
        for agent in agents
        if framework.task.names() <= agent.resources.names()
    ]
    rows: list[tuple[list[Fraction | int], str, Fraction | int]] = []
    for agent in agents:
        for name, capacity in agent.resources.millis_items():
            row: list[Fraction | int] = [
                frameworks[k].task.millis(name) if other is agent else 0 for k, other in pairs
            ]
            rows.append((row, "<=", capacity))
    got = [F(share.tasks) for share in result.frameworks]
    for k in range(len(frameworks)):
        rows.append(([int(j == k) for j, _ in pairs], ">=", got[k]))
    for i in range(len(frameworks)):
        best = solve_lp([int(j == i) for j, _ in pairs], rows)
        assert best.status is LPStatus.OPTIMAL
        assert best.objective == got[i]


@settings(max_examples=20, deadline=None)
@given(st.lists(vectors(NAMES[:2], 5, 200), min_size=2, max_size=2), st.data())
def test_drfh_is_truthful(agent_vectors: list[R], data: st.DataObject) -> None:
    agents = [FluidAgent(f"s{k}", v) for k, v in enumerate(agent_vectors)]
    count = data.draw(st.integers(2, 3))
    frameworks = [FluidFramework(f"u{k}", data.draw(vectors(NAMES[:2]))) for k in range(count)]
    truthful = solve_fluid(agents, frameworks, "drf").frameworks[0].tasks
    declared = data.draw(vectors(NAMES[:2]))
    lying = [FluidFramework("u0", declared), *frameworks[1:]]
    received = solve_fluid(agents, lying, "drf").frameworks[0].per_agent
    # On each agent it holds x'_l d'; it can run min_r x'_l d'_r / d_r true tasks there.
    true_tasks = sum(
        (
            min(F(x) * F(declared.millis(n), m) for n, m in frameworks[0].task.millis_items())
            for x in received.values()
        ),
        F(0),
    )
    assert true_tasks <= truthful
