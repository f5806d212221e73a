"""Allocation runs of ``MasterState`` in tasks mode: the papers' examples, every policy, demands.

Each case is the worked example of a paper (DRF Table 1, DRFH Fig. 1-3, asset fairness's
Theorem 1 family, PF's most-deprived rule) run through one ``handle_allocate`` call, with
``validate`` on so every invariant is checked after every call.
"""

from __future__ import annotations

import math
from collections import defaultdict
from fractions import Fraction

import pytest

from framework_sdk import ResourceVector
from master.core import CoreConfig, MasterState, SendOffers, TaskLaunch

R = ResourceVector.parse

DRF_POOL = "cpus:9;mem:18"
DRF_A = "cpus:1;mem:4"
DRF_B = "cpus:3;mem:1"
DRFH_AGENTS = ("cpus:2;mem:12", "cpus:12;mem:2")
DRFH_USER1 = "cpus:0.2;mem:1"
DRFH_USER2 = "cpus:1;mem:0.2"


def make_state(policy: str = "drf", placement: str = "best-fit", **config: object) -> MasterState:
    return MasterState(CoreConfig(policy=policy, placement=placement, validate=True, **config))


def build(
    agents: tuple[str, ...] | list[str],
    frameworks: list[tuple[str, str | None, int]],
    policy: str = "drf",
    placement: str = "best-fit",
    weights: dict[str, float] | None = None,
    **config: object,
) -> MasterState:
    """Agents s1..sn, then frameworks (id, task shape or None for coarse, wanted)."""
    state = make_state(policy, placement, **config)
    for index, resources in enumerate(agents, start=1):
        state.handle_add_agent(f"s{index}", R(resources), 0.0)
    for framework_id, shape, wanted in frameworks:
        weight = (weights or {}).get(framework_id, 1.0)
        state.handle_add_framework(framework_id, 0.0, weight=weight)
        if shape is not None:
            state.handle_update_demand(framework_id, R(shape), wanted, 0.0)
    return state


def tasks_by_agent(messages: list[object]) -> dict[str, dict[str, int]]:
    """framework id -> agent id -> fair_tasks offered, from SendOffers messages."""
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for message in messages:
        assert isinstance(message, SendOffers)
        for offer in message.offers:
            counts = out[message.framework_id]
            counts[offer.agent_id] = counts.get(offer.agent_id, 0) + offer.fair_tasks
    return dict(out)


def tasks_of(messages: list[object]) -> dict[str, int]:
    return {fid: sum(per.values()) for fid, per in tasks_by_agent(messages).items()}


def assert_pareto(state: MasterState) -> None:
    """No framework below its wanted count has a next task that fits on any agent."""
    for fw in state.frameworks.values():
        if fw.demand is None or not fw.active or fw.suppressed:
            continue
        if fw.live_tasks + fw.offered_tasks >= fw.wanted:
            continue
        footprint = state.fairness.footprint(fw.demand)
        assert not any(footprint.fits_in(agent.free) for agent in state.agent_list), fw.id


# -- DRF, Ghodsi et al. Table 1 ------------------------------------------------------------------


def test_drf_table1_offers_three_and_two_tasks_with_equal_dominant_shares() -> None:
    state = build([DRF_POOL], [("A", DRF_A, 100), ("B", DRF_B, 100)])
    messages = state.handle_allocate(0.0)
    assert [m.framework_id for m in messages] == ["A", "B"]
    (offer_a,) = messages[0].offers
    (offer_b,) = messages[1].offers
    assert offer_a.fair_tasks == 3
    assert offer_b.fair_tasks == 2
    assert offer_a.resources == R("cpus:3;mem:12")
    assert offer_b.resources == R("cpus:6;mem:2")
    assert offer_a.agent_id == offer_b.agent_id == "s1"
    assert state.dominant_share("A") == state.dominant_share("B") == 2 / 3
    assert state.share("A") == state.share("B") == 2 / 3
    assert state.frameworks["A"].offered_tasks == 3
    assert state.frameworks["B"].offered_tasks == 2
    assert state.agents["s1"].free == R("mem:4")
    assert set(state.offers) == {offer_a.offer_id, offer_b.offer_id}
    assert_pareto(state)


def test_second_run_offers_nothing_more_when_nothing_fits() -> None:
    state = build([DRF_POOL], [("A", DRF_A, 100), ("B", DRF_B, 100)])
    state.handle_allocate(0.0)
    assert state.handle_allocate(1.0) == []


# -- DRFH, Wang, Li & Liang Fig. 1-3 ---------------------------------------------------------------


def test_drfh_best_fit_places_each_user_on_its_matching_server() -> None:
    state = build(DRFH_AGENTS, [("u1", DRFH_USER1, 1000), ("u2", DRFH_USER2, 1000)])
    placed = tasks_by_agent(state.handle_allocate(0.0))
    assert placed == {"u1": {"s1": 10}, "u2": {"s2": 10}}
    share = Fraction(5, 7)
    for user in ("u1", "u2"):
        assert state.dominant_share(user) == pytest.approx(float(share), abs=1e-12)
    assert state.dominant_share("u1") == state.dominant_share("u2")
    assert state.total == R("cpus:14;mem:14")
    assert_pareto(state)


def test_drfh_first_fit_gives_six_and_six_split_five_and_one() -> None:
    state = build(
        DRFH_AGENTS, [("u1", DRFH_USER1, 1000), ("u2", DRFH_USER2, 1000)], placement="first-fit"
    )
    placed = tasks_by_agent(state.handle_allocate(0.0))
    assert placed == {"u1": {"s1": 5, "s2": 1}, "u2": {"s1": 1, "s2": 5}}
    assert state.dominant_share("u1") == pytest.approx(3 / 7, abs=1e-12)
    assert state.dominant_share("u2") == pytest.approx(3 / 7, abs=1e-12)
    # first-fit strands resources that best-fit uses: s1 has no cpus left, s2 no mem
    assert state.agents["s1"].free == R("mem:6.8")
    assert state.agents["s2"].free == R("cpus:6.8")
    assert_pareto(state)


def test_drfh_random_placement_is_deterministic_for_a_seed_and_pareto() -> None:
    results = []
    for _ in range(2):
        state = build(
            DRFH_AGENTS,
            [("u1", DRFH_USER1, 1000), ("u2", DRFH_USER2, 1000)],
            placement="random",
            seed=7,
        )
        results.append(tasks_by_agent(state.handle_allocate(0.0)))
        assert_pareto(state)
    assert results[0] == results[1]


# -- asset fairness --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pool", "shape_a", "shape_b", "expected"),
    [
        ("cpus:30;mem:30", "cpus:1;mem:3", "cpus:1;mem:1", (6, 12)),
        ("cpus:21;mem:21", "cpus:3;mem:2", "cpus:4;mem:1", (3, 3)),
        ("cpus:77;mem:77", "cpus:4;mem:2", "cpus:1;mem:1", (11, 33)),
    ],
)
def test_asset_fairness_equalises_sums_of_shares(
    pool: str, shape_a: str, shape_b: str, expected: tuple[int, int]
) -> None:
    state = build([pool], [("A", shape_a, 1000), ("B", shape_b, 1000)], policy="asset")
    assert tasks_of(state.handle_allocate(0.0)) == {"A": expected[0], "B": expected[1]}
    total = R(pool)
    sums = []
    for fid, count in zip(("A", "B"), expected, strict=True):
        allocated = state.frameworks[fid].allocated
        assert allocated == count * R(shape_a if fid == "A" else shape_b)
        sums.append(sum(Fraction(allocated.millis(n), total.millis(n)) for n in total.names()))
    assert sums[0] == sums[1]  # asset fairness: equal sums of shares, exactly
    assert state.share("A") == state.share("B") == float(sums[0])
    assert_pareto(state)


def test_asset_differs_from_drf_on_the_same_case() -> None:
    drf = build(["cpus:30;mem:30"], [("A", "cpus:1;mem:3", 1000), ("B", "cpus:1;mem:1", 1000)])
    asset = build(
        ["cpus:30;mem:30"],
        [("A", "cpus:1;mem:3", 1000), ("B", "cpus:1;mem:1", 1000)],
        policy="asset",
    )
    # DRF equalises dominant shares: 3a/30 == b/30 with 6a <= 30 mem -> 5 and 15
    assert tasks_of(drf.handle_allocate(0.0)) == {"A": 5, "B": 15}
    assert tasks_of(asset.handle_allocate(0.0)) == {"A": 6, "B": 12}


# -- proportional fairness (Bonald & Roberts) ------------------------------------------------------


def test_pf_prices_are_the_kkt_prices_of_eq9_on_drf_table1() -> None:
    state = build([DRF_POOL], [("A", DRF_A, 100), ("B", DRF_B, 100)], policy="pf")
    state.handle_allocate(0.0)
    prices = state.fairness.prices  # type: ignore[attr-defined]
    # max sum log x s.t. x_A (1/9, 4/18) + x_B (3/9, 1/18) <= 1: x* = (45/11, 18/11),
    # both resources saturated, KKT 1/x_i = a_i . nu  ->  nu = (9/5, 1/5)
    assert prices["cpus"] == pytest.approx(1.8, abs=1e-6)
    assert prices["mem"] == pytest.approx(0.2, abs=1e-6)
    a = {"A": (Fraction(1, 9), Fraction(4, 18)), "B": (Fraction(3, 9), Fraction(1, 18))}
    optimum = {"A": Fraction(45, 11), "B": Fraction(18, 11)}
    for fid, (cpu, mem) in a.items():
        assert 1 / (float(cpu) * prices["cpus"] + float(mem) * prices["mem"]) == pytest.approx(
            float(optimum[fid]), abs=1e-9
        )


def test_pf_whole_tasks_follow_the_most_deprived_rule() -> None:
    """Serve the job with the least phi_i * sum_j a_ij nu_j (Bonald & Roberts §4.1)."""
    state = build([DRF_POOL], [("A", DRF_A, 100), ("B", DRF_B, 100)], policy="pf")
    got = tasks_of(state.handle_allocate(0.0))
    prices = state.fairness.prices  # type: ignore[attr-defined]
    total = R(DRF_POOL)
    shapes = {"A": R(DRF_A), "B": R(DRF_B)}
    per_task = {
        fid: sum(shape.millis(n) / total.millis(n) * prices[n] for n in shape.names())
        for fid, shape in shapes.items()
    }
    # replay the rule independently: lowest (key, times chosen, id) among those whose task fits
    free = total
    count = {"A": 0, "B": 0}
    while True:
        candidates = [
            (count[fid] * per_task[fid], count[fid], fid)
            for fid in shapes
            if shapes[fid].fits_in(free)
        ]
        if not candidates:
            break
        _, _, fid = min(candidates)
        count[fid] += 1
        free = free - shapes[fid]
    assert got == count == {"A": 3, "B": 2}
    # whole tasks near the fluid optimum (45/11, 18/11): 3*2 beats 4*1 in sum of logs
    assert math.log(3) + math.log(2) > math.log(4) + math.log(1)
    for fid in ("A", "B"):
        assert state.share(fid) == pytest.approx(count[fid] * per_task[fid], rel=1e-12)
    assert_pareto(state)


def test_weighted_pf_whole_tasks_approach_the_weighted_pf_optimum() -> None:
    """max 3 log xA + log xB on DRF Table 1 scaled by 10: both resources stay saturated, so the
    optimum is the vertex x* = (450/11, 180/11) = (40.9, 16.4), with KKT prices nu = (1.4, 2.6)
    (1/x_i * w_i = a_i . nu; sum nu = sum w = 4). The most-deprived rule with these prices gives
    41 and 16 whole tasks. Unweighted prices (1.8, 0.2) divided by the weight give 43 and 8."""
    state = build(
        ["cpus:90;mem:180"],
        [("A", DRF_A, 1000), ("B", DRF_B, 1000)],
        policy="pf",
        weights={"A": 3.0},
    )
    got = tasks_of(state.handle_allocate(0.0))
    assert 40 <= got["A"] <= 42, got
    assert 15 <= got["B"] <= 17, got


def test_pf_prices_account_for_wanted_counts() -> None:
    """A wants only 5 tasks. PF with that cap (Bonald & Roberts with finite demand, as the fluid
    solver does it): A 5, and B, C share the cpus with nu = (36/17, 0): x_B = 30/nu_c = 14.17,
    x_C = 90/nu_c = 42.5. Prices computed as if A were unbounded put a price on memory and give
    B 18 and C 31 instead."""
    state = build(
        ["cpus:90;mem:180"],
        [("A", DRF_A, 5), ("B", DRF_B, 1000), ("C", "cpus:1;mem:3", 1000)],
        policy="pf",
    )
    got = tasks_of(state.handle_allocate(0.0))
    assert got["A"] == 5
    assert 13 <= got["B"] <= 15, got
    assert 42 <= got["C"] <= 44, got


def test_pf_without_declared_shapes_prices_every_resource_one() -> None:
    state = build([DRF_POOL], [("A", None, 0)], policy="pf")
    state.handle_allocate(0.0)
    assert state.fairness.prices == {"cpus": 1.0, "mem": 1.0}  # type: ignore[attr-defined]
    assert state.share("A") == pytest.approx(2.0)  # whole pool: 1 + 1


# -- slots baseline --------------------------------------------------------------------------------


def test_slots_charge_whole_slots_and_place_fewer_tasks_than_drf() -> None:
    state = build(
        DRFH_AGENTS,
        [("u1", DRFH_USER1, 1000), ("u2", DRFH_USER2, 1000)],
        policy="slots",
        slots_per_agent=14,
    )
    messages = state.handle_allocate(0.0)
    slot = state.fairness.slot  # type: ignore[attr-defined]
    # the largest agent holds 12 cpus and 12 mem; a slot is 1/14 of it, truncated to millis
    assert slot == ResourceVector.from_millis({"cpus": 12000 // 14, "mem": 12000 // 14})
    # each task (mem 1 or cpus 1 > one slot of 0.857) is charged two whole slots
    for message in messages:
        for offer in message.offers:
            assert offer.resources == slot * (2 * offer.fair_tasks)
    slot_tasks = sum(tasks_of(messages).values())
    drf = build(DRFH_AGENTS, [("u1", DRFH_USER1, 1000), ("u2", DRFH_USER2, 1000)])
    drf_tasks = sum(tasks_of(drf.handle_allocate(0.0)).values())
    assert drf_tasks == 20
    assert 0 < slot_tasks < drf_tasks
    assert slot_tasks == 2
    assert state.share("u1") == state.share("u2") == 2.0  # slots held
    assert_pareto(state)


def test_slots_policy_counts_slots_per_task() -> None:
    state = build(
        ["cpus:14;mem:14"],
        [("A", "cpus:1;mem:1", 100), ("B", "cpus:1.5;mem:0.5", 100)],
        policy="slots",
    )
    got = tasks_of(state.handle_allocate(0.0))
    # a slot is cpus:1;mem:1; A's task takes one slot, B's two: equal slots held -> A 2x B's tasks
    assert state.fairness.slot == R("cpus:1;mem:1")  # type: ignore[attr-defined]
    assert got["A"] + 2 * got["B"] == 14
    assert abs(got["A"] - 2 * got["B"]) <= 2
    assert abs(state.share("A") - state.share("B")) <= 2.0  # within one B task (2 slots)


# -- weights and wanted counts ---------------------------------------------------------------------


def test_weighted_drf_gives_weight_two_twice_the_dominant_share() -> None:
    state = build(
        ["cpus:30;mem:30"],
        [("A", "cpus:1;mem:1", 1000), ("B", "cpus:1;mem:1", 1000)],
        weights={"A": 2.0},
    )
    assert tasks_of(state.handle_allocate(0.0)) == {"A": 20, "B": 10}
    assert state.dominant_share("A") == pytest.approx(2 * state.dominant_share("B"))
    assert state.share("A") == state.share("B") == pytest.approx(1 / 3)


def test_weighted_drf_on_table1_serves_by_weighted_share() -> None:
    state = build([DRF_POOL], [("A", DRF_A, 100), ("B", DRF_B, 100)], weights={"B": 3.0})
    assert tasks_of(state.handle_allocate(0.0)) == {"A": 3, "B": 2}
    # keys are dominant share / weight: B's 2/3 counts as 2/9
    assert state.share("B") == pytest.approx(2 / 9)
    assert state.share("A") == state.dominant_share("A") == 2 / 3
    assert state.ordered_frameworks() == ["B", "A"]


def test_offers_stop_at_the_wanted_count() -> None:
    state = build(["cpus:100;mem:100"], [("A", "cpus:1;mem:1", 4), ("B", "cpus:1;mem:1", 0)])
    messages = state.handle_allocate(0.0)
    assert tasks_of(messages) == {"A": 4}
    assert state.frameworks["A"].offered_tasks == 4
    assert state.frameworks["B"].offered_tasks == 0
    assert state.handle_allocate(1.0) == []


def test_running_tasks_count_toward_the_wanted_count() -> None:
    state = build(["cpus:100;mem:100"], [("A", "cpus:1;mem:1", 3)])
    (message,) = state.handle_allocate(0.0)
    (offer,) = message.offers
    assert offer.fair_tasks == 3
    launches = [TaskLaunch(f"t{i}", f"t{i}", R("cpus:1;mem:1")) for i in range(3)]
    state.handle_accept("A", [offer.offer_id], launches, 1.0)
    assert state.frameworks["A"].live_tasks == 3
    assert state.frameworks["A"].offered_tasks == 0
    assert state.handle_allocate(2.0) == []  # 3 running == 3 wanted
    state.handle_update_demand("A", R("cpus:1;mem:1"), 5, 3.0)
    assert tasks_of(state.handle_allocate(3.0)) == {"A": 2}
    state.handle_update_demand("A", R("cpus:1;mem:1"), 1, 4.0)
    assert state.handle_allocate(4.0) == []  # wanting fewer than running never offers


def test_demand_tasks_spread_over_agents_become_one_offer_per_agent() -> None:
    state = build(
        ["cpus:2;mem:2", "cpus:2;mem:2"], [("A", "cpus:1;mem:1", 4)], placement="first-fit"
    )
    (message,) = state.handle_allocate(0.0)
    assert sorted((o.agent_id, o.fair_tasks, str(o.resources)) for o in message.offers) == [
        ("s1", 2, "cpus:2;mem:2"),
        ("s2", 2, "cpus:2;mem:2"),
    ]


def test_task_needing_an_absent_resource_is_never_offered() -> None:
    state = build(["cpus:8;mem:8"], [("A", "cpus:1;gpus:1", 5), ("B", "cpus:1;mem:1", 2)])
    assert tasks_of(state.handle_allocate(0.0)) == {"B": 2}
    assert state.frameworks["A"].offered_tasks == 0


def test_a_shape_that_fits_nowhere_does_not_block_smaller_shapes() -> None:
    state = build(
        ["cpus:2;mem:2"],
        [("A", "cpus:3;mem:1", 5), ("B", "cpus:1;mem:1", 2), ("C", "cpus:3;mem:2", 5)],
    )
    assert tasks_of(state.handle_allocate(0.0)) == {"B": 2}
    assert_pareto(state)


def test_a_shape_refused_by_one_framework_is_still_placed_for_another() -> None:
    state = build(["cpus:4;mem:4", "cpus:1;mem:1"], [("B", "cpus:1;mem:1", 1)])
    (offer,) = state.handle_allocate(0.0)[0].offers
    state.handle_accept("B", [offer.offer_id], [TaskLaunch("b1", "b1", R("cpus:1;mem:1"))], 0.0)
    assert offer.agent_id == "s1"
    state.handle_add_framework("A", 0.0)
    state.handle_update_demand("A", R("cpus:2;mem:2"), 1, 0.0)
    (a_offer,) = state.handle_allocate(1.0)[0].offers
    assert (a_offer.agent_id, a_offer.fair_tasks) == ("s1", 1)
    state.handle_decline("A", [a_offer.offer_id], 1.0, refuse_seconds=100)
    # A (key 0) is served first and finds s1 refused; B's equal shape must still go to s1
    state.handle_update_demand("B", R("cpus:2;mem:2"), 2, 2.0)
    assert state.ordered_frameworks() == ["A", "B"]
    assert tasks_by_agent(state.handle_allocate(2.0)) == {"B": {"s1": 1}}
    assert_pareto(state)


# -- coarse (no demand) offers ---------------------------------------------------------------------


def test_coarse_offers_hand_whole_agents_to_the_lowest_share_framework() -> None:
    state = build(
        ["cpus:8;mem:16", "cpus:2;mem:4", "cpus:4;mem:8"], [("F", None, 0), ("G", None, 0)]
    )
    messages = state.handle_allocate(0.0)
    got = {
        m.framework_id: [(o.agent_id, o.resources, o.fair_tasks) for o in m.offers]
        for m in messages
    }
    # F (tie at 0, smaller id) takes s1 (8/14); G then is lowest and takes s2 (2/14), and
    # being still lowest (2/14 < 8/14) also takes s3
    assert got == {
        "F": [("s1", R("cpus:8;mem:16"), 0)],
        "G": [("s2", R("cpus:2;mem:4"), 0), ("s3", R("cpus:4;mem:8"), 0)],
    }
    for agent in state.agent_list:
        assert not agent.free
    assert state.dominant_share("F") == 8 / 14
    assert state.dominant_share("G") == 6 / 14
    assert state.ordered_frameworks() == ["G", "F"]


def test_coarse_offers_with_equal_agents_alternate_in_fairness_order() -> None:
    state = build(["cpus:4;mem:8"] * 3, [("F", None, 0), ("G", None, 0)])
    got = tasks_by_agent(state.handle_allocate(0.0))
    assert got == {"F": {"s1": 0, "s3": 0}, "G": {"s2": 0}}


def test_coarse_and_demand_frameworks_share_one_run() -> None:
    state = build(["cpus:4;mem:4", "cpus:4;mem:4"], [("C", None, 0), ("D", "cpus:1;mem:1", 3)])
    messages = state.handle_allocate(0.0)
    offered = {m.framework_id: m.offers for m in messages}
    assert sum(o.fair_tasks for o in offered["D"]) == 3
    assert all(o.fair_tasks == 0 for o in offered["C"])
    for agent in state.agent_list:
        assert not agent.free  # coarse offers took whatever the demand left


def test_no_agents_or_no_frameworks_offer_nothing() -> None:
    assert make_state().handle_allocate(0.0) == []
    state = build([], [("A", DRF_A, 3), ("C", None, 0)])
    assert state.handle_allocate(0.0) == []
    state = build([DRF_POOL], [])
    assert state.handle_allocate(0.0) == []


@pytest.mark.parametrize("policy", ["drf", "asset", "pf", "slots"])
@pytest.mark.parametrize("placement", ["best-fit", "first-fit", "random"])
def test_every_policy_and_placement_is_pareto_efficient(policy: str, placement: str) -> None:
    state = build(
        ["cpus:4;mem:16", "cpus:16;mem:4", "cpus:8;mem:8;gpus:2"],
        [
            ("A", "cpus:1;mem:3", 100),
            ("B", "cpus:2;mem:0.5", 100),
            ("C", "cpus:1;mem:1;gpus:1", 100),
            ("D", None, 0),
        ],
        policy=policy,
        placement=placement,
    )
    messages = state.handle_allocate(0.0)
    assert messages
    assert_pareto(state)
    for fid, fw in state.frameworks.items():
        assert fw.allocated == sum(
            (state.offers[o].resources for o in fw.offer_ids), ResourceVector()
        )
        assert fw.offered_tasks == sum(state.offers[o].fair_tasks for o in fw.offer_ids), fid
