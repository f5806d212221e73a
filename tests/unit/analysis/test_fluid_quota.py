"""Quotas in the fluid allocation over the role tree (``analysis.fluid.tree`` with
``analysis.fluid.quota``): limits, the guarantees' first filling, headroom, exactly; and the
core's whole tasks converging to it on random trees.

Mesos 1.9's quota semantics (limits cap offered plus used; guarantees first, protected by
headroom) on Static H-DRF (Bhattacharya et al., ACM SoCC 2013, §4.1).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from fractions import Fraction

import pytest
from fairshare.resources import ResourceVector

from analysis.fluid.solver import FluidAgent, FluidError, FluidFramework
from analysis.fluid.tree import solve_fluid_tree
from master.core import CoreConfig, InvalidArgument
from master.core.quota import Quota, check_quotas
from master.core.target import TargetFramework, tasks_target

R = ResourceVector.parse
F = Fraction
E = ResourceVector()

# name, role, task shape, max_tasks (weights 1)
Spec = tuple[str, str, str, int | None]


def solve(
    pool: str,
    specs: Sequence[Spec],
    quotas: Mapping[str, Quota] | None,
    hierarchy: str = "hdrf",
    weights: Mapping[str, int] | None = None,
) -> dict[str, Fraction]:
    result = solve_fluid_tree(
        [FluidAgent("pool", R(pool))],
        [FluidFramework(name, R(task), F(1), cap) for name, _, task, cap in specs],
        [role for _, role, _, _ in specs],
        {role: F(w) for role, w in (weights or {}).items()},
        hierarchy,
        quotas,
    )
    assert result.exact
    for name, used in result.utilization.items():
        assert used <= 1, name
    return {share.name: F(share.tasks) for share in result.frameworks}


def core(pool: str, specs: Sequence[Spec], quotas: Mapping[str, Quota]) -> dict[str, int]:
    got = tasks_target(
        [("s", R(pool))],
        [TargetFramework(n, R(t), cap or 10**4, 1.0, n, r) for n, r, t, cap in specs],
        CoreConfig(validate=True),
        quotas=quotas,
    )
    return {name: sum(per_agent.values()) for name, per_agent in got.items()}


THREE: list[Spec] = [
    ("prod", "prod", "cpus:1;mem:256", None),
    ("dev", "dev", "cpus:1;mem:256", None),
    ("ci", "ci", "cpus:1;mem:256", None),
]


@pytest.mark.parametrize("hierarchy", ["hdrf", "naive", "flat"])
def test_a_guaranteed_role_gets_its_guarantee_and_the_others_share_the_rest(
    hierarchy: str,
) -> None:
    quotas = {"prod": Quota(R("cpus:8"))}
    tasks = solve("cpus:12;mem:12288", THREE, quotas, hierarchy)
    assert tasks == {"prod": 8, "dev": 2, "ci": 2}
    assert solve("cpus:12;mem:12288", THREE, None, hierarchy) == {"prod": 4, "dev": 4, "ci": 4}


@pytest.mark.parametrize("hierarchy", ["hdrf", "naive", "flat"])
def test_a_limited_role_alone_gets_its_limit(hierarchy: str) -> None:
    specs: list[Spec] = [("batch", "batch", "cpus:1;mem:256", None)]
    assert solve("cpus:12;mem:12288", specs, {"batch": Quota(limit=R("cpus:4"))}, hierarchy) == {
        "batch": 4
    }


def test_a_limit_stops_only_the_leaves_that_need_the_limited_resource() -> None:
    """batch is limited to 2 cpus: its cpu framework stops there, its memory framework goes on
    and shares the memory with the other role (6 and 6)."""
    specs: list[Spec] = [
        ("c", "batch", "cpus:1", None),
        ("m", "batch", "mem:1", None),
        ("o", "other", "cpus:1;mem:1", None),
    ]
    quotas = {"batch": Quota(limit=R("cpus:2"))}
    assert solve("cpus:12;mem:12", specs, quotas) == {"c": 2, "m": 6, "o": 6}
    assert core("cpus:12;mem:12", specs, quotas) == {"c": 2, "m": 6, "o": 6}


def test_a_guarantee_with_a_limit_then_fair_sharing_up_to_the_limit() -> None:
    specs: list[Spec] = [("g", "g", "cpus:1", None), ("a", "a", "cpus:1", None)]
    assert solve("cpus:12", specs, {"g": Quota(R("cpus:3"), R("cpus:5"))}) == {"g": 5, "a": 7}
    assert solve("cpus:12", specs, {"g": Quota(R("cpus:8"), R("cpus:9"))}) == {"g": 8, "a": 4}


def test_a_sub_roles_guarantee_is_served_past_its_parents() -> None:
    """eng guarantees 6, eng/x 6: x and y fill eng's 6 equally, then x goes on to its own 6
    (the core serves a unit toward the guarantee of the role or an ancestor); sci gets the
    rest."""
    specs: list[Spec] = [
        ("x", "eng/x", "cpus:1", None),
        ("y", "eng/y", "cpus:1", None),
        ("s", "sci", "cpus:1", None),
    ]
    quotas = {"eng": Quota(R("cpus:6")), "eng/x": Quota(R("cpus:6"))}
    assert solve("cpus:12", specs, quotas) == {"x": 6, "y": 3, "s": 3}
    quotas = {"eng": Quota(R("cpus:8")), "eng/x": Quota(R("cpus:6"))}
    assert solve("cpus:12", specs, quotas) == {"x": 6, "y": 4, "s": 2}
    assert core("cpus:12", specs, quotas) == {"x": 6, "y": 4, "s": 2}


def test_overcommitted_guarantees_share_the_pool_by_h_drf_in_the_first_filling() -> None:
    specs: list[Spec] = [
        ("p", "p", "cpus:1", None),
        ("q", "q", "cpus:1", None),
        ("r", "r", "cpus:1", None),
    ]
    quotas = {"p": Quota(R("cpus:10")), "q": Quota(R("cpus:4"))}
    assert solve("cpus:12", specs, quotas) == {"p": 8, "q": 4, "r": 0}
    assert core("cpus:12", specs, quotas) == {"p": 8, "q": 4, "r": 0}


def test_headroom_keeps_an_unmet_guarantee_free_as_mesos_does() -> None:
    """g guarantees 6 cpus but wants 2 tasks: its unmet 4 stay free (Mesos 1.9's headroom);
    a role with a guarantee and no framework at all keeps all of it free."""
    specs: list[Spec] = [("g", "g", "cpus:1", 2), ("a", "a", "cpus:1", None)]
    assert solve("cpus:12", specs, {"g": Quota(R("cpus:6"))}) == {"g": 2, "a": 6}
    lone: list[Spec] = [("a", "a", "cpus:1", None)]
    assert solve("cpus:12", lone, {"idle": Quota(R("cpus:5"))}) == {"a": 7}
    assert solve("cpus:12", lone, {"idle": Quota(R("mem:5"))}) == {"a": 12}


def test_a_guarantee_on_two_resources_stops_at_the_first_met() -> None:
    """g guarantees 8 cpus and 8 mem with tasks <1 cpu, 2 mem>: the first filling stops at 4
    tasks (mem at its guarantee, as Mesos 1.9's offers cut to the unmet guarantee); then the
    headroom of its 4 unmet cpus is kept, a grows to the rest of the cpus and g takes what
    memory is left (the core, serving whole tasks toward some unmet resource, gives g 6)."""
    specs: list[Spec] = [("g", "g", "cpus:1;mem:2", None), ("a", "a", "cpus:1;mem:0.5", None)]
    quotas = {"g": Quota(R("cpus:8;mem:8"))}
    assert solve("cpus:12;mem:12", specs, quotas) == {"g": 5, "a": 4}


def test_empty_quotas_are_no_quotas() -> None:
    specs: list[Spec] = [*THREE, ("lone", "lone/x", "cpus:2", 1)]
    plain = solve("cpus:12;mem:12288", specs, None)
    assert solve("cpus:12;mem:12288", specs, {}) == plain
    assert solve("cpus:12;mem:12288", specs, {"prod": Quota()}) == plain


def test_quotas_need_one_pool() -> None:
    frameworks = [FluidFramework("a", R("cpus:1")), FluidFramework("b", R("cpus:1"))]
    quotas = {"a": Quota(limit=R("cpus:1"))}
    scaled = [FluidAgent("s1", R("cpus:2;mem:4")), FluidAgent("s2", R("cpus:6;mem:12"))]
    result = solve_fluid_tree(scaled, frameworks, ["a", "b"], {}, "flat", quotas)
    assert [share.tasks for share in result.frameworks] == [1, 7]
    assert [share.per_agent for share in result.frameworks] == [
        {"s1": F(1, 4), "s2": F(3, 4)},
        {"s1": F(7, 4), "s2": F(21, 4)},
    ]
    mixed = [FluidAgent("s1", R("cpus:2;mem:12")), FluidAgent("s2", R("cpus:12;mem:2"))]
    for hierarchy in ("hdrf", "flat"):
        with pytest.raises(FluidError, match="with quotas needs a single pool"):
            solve_fluid_tree(mixed, frameworks, ["a", "b"], {}, hierarchy, quotas)


# -- the core's whole tasks converge to the fluid answer --------------------------------------


TREES = [
    ["a", "b"],
    ["a", "b/x", "b/y"],
    ["a/p", "a/q", "b", "c/d/e"],
    ["a", "a/x", "b"],
    ["x", "y", "z/w", "z/v"],
]


def _random_case(
    rng: random.Random,
) -> tuple[list[tuple[str, str, str, int, int | None]], dict[str, int], dict[str, Quota]]:
    roles = rng.choice(TREES)
    specs = []
    for index in range(rng.randint(2, 6)):
        cpus, mem = rng.choice([0, 1, 2, 3]), rng.choice([0, 1, 2, 4])
        shape = ";".join(f"{n}:{q}" for n, q in (("cpus", cpus), ("mem", mem)) if q) or "cpus:1"
        weight = rng.choice([1, 1, 2, 3])
        specs.append((f"f{index}", rng.choice(roles), shape, weight, rng.choice([None, 5, 20])))
    weights = {role: rng.choice([1, 2, 3]) for role in roles if rng.random() < 0.5}
    quotas = {}
    for path in sorted({p for role in roles for p in (role.split("/")[0], role)}):
        if rng.random() < 0.5:
            guarantee = rng.choice([0, 0, 2, 3, 5])
            limit = rng.choice([None, None, 4, 6, 8])
            quota = Quota(
                R(f"{rng.choice(['cpus', 'mem'])}:{guarantee}") if guarantee else E,
                None if limit is None else R(f"{rng.choice(['cpus', 'mem'])}:{limit}"),
            )
            if not quota.empty:
                quotas[path] = quota
    return specs, weights, quotas


def _scaled(vector: ResourceVector, factor: int) -> ResourceVector:
    return ResourceVector.from_millis({n: m * factor for n, m in vector.millis_items()})


# The core learns that a leaf group is blocked (H-DRF's "ignoring blocked nodes", §4.4) only
# when its walk reaches the group and fails to serve it; a group blocked by a limit (or by a
# saturated resource after the guarantees' stage) while ahead of its siblings is never
# reached, so its parent's hdrf share keeps rescaling it to the minimum. The filling knows
# every block at once: in this case the core gives the role ``b`` 1.4 of the 10 cpus fewer.
LAZY_BLOCK = pytest.mark.xfail(strict=True, reason="the core detects a blocked group lazily")
SEEDS = [
    pytest.param(seed, hierarchy, marks=LAZY_BLOCK if (seed, hierarchy) == (11, "hdrf") else ())
    for seed in range(40)
    for hierarchy in ("hdrf", "naive")
]


@pytest.mark.parametrize(("seed", "hierarchy"), SEEDS)
def test_the_cores_small_tasks_converge_to_the_filling_with_quotas(
    seed: int, hierarchy: str
) -> None:
    """One guaranteed resource per role: the core's two-stage run on a pool 100 times larger
    (quotas and caps 100 times larger) gives the fluid tasks within 0.1 task (whole tasks
    and ties cost about 1/100 per level; ``LAZY_BLOCK`` is the one seed that does not)."""
    rng = random.Random(seed)
    specs, weights, quotas = _random_case(rng)
    try:
        check_quotas(quotas)
    except InvalidArgument:
        quotas = {}
    result = solve_fluid_tree(
        [FluidAgent("pool", R("cpus:10;mem:10"))],
        [FluidFramework(n, R(t), F(w), cap) for n, _, t, w, cap in specs],
        [role for _, role, _, _, _ in specs],
        {role: F(w) for role, w in weights.items()},
        hierarchy,
        quotas,
    )
    fluid = {share.name: share.tasks for share in result.frameworks}
    scale = 100
    got = tasks_target(
        [("s", R(f"cpus:{10 * scale};mem:{10 * scale}"))],
        [
            TargetFramework(n, R(t), 10**6 if cap is None else cap * scale, float(w), n, role)
            for n, role, t, w, cap in specs
        ],
        CoreConfig(hierarchy=hierarchy),
        role_weights={role: float(w) for role, w in weights.items()},
        quotas={
            path: Quota(
                _scaled(q.guarantee, scale), None if q.limit is None else _scaled(q.limit, scale)
            )
            for path, q in quotas.items()
        },
    )
    for name, *_ in specs:
        assert sum(got[name].values()) / scale == pytest.approx(float(fluid[name]), abs=0.1)
