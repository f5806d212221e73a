"""Fairness policies: the sort keys of drf, asset, pf and slots on hand examples."""

from __future__ import annotations

import math

import pytest

from framework_sdk import ResourceVector
from master.core.fairness import (
    FAIRNESS_POLICIES,
    AssetFairness,
    DeclaredDemand,
    DominantResourceFairness,
    PoolShape,
    ProportionalFairness,
    SlotFairness,
    make_fairness_policy,
)

R = ResourceVector.parse
EMPTY = ResourceVector()
TOTAL = R("cpus:9;mem:18")
UNBOUNDED = 10**6


def demand(shape: str, wanted: int = UNBOUNDED, weight: float = 1.0) -> DeclaredDemand:
    return DeclaredDemand(R(shape), wanted, weight)


def pool(total: str, largest: str | None = None) -> PoolShape:
    return PoolShape(R(total), R(largest or total))


# -- drf -------------------------------------------------------------------------------------------


def test_drf_key_is_the_dominant_share_over_the_weight() -> None:
    drf = DominantResourceFairness()
    drf.prepare(pool("cpus:9;mem:18"), [])
    assert drf.key(R("cpus:3;mem:12"), TOTAL, 1.0, None) == 12 / 18
    assert drf.key(R("cpus:6;mem:2"), TOTAL, 1.0, None) == 6 / 9
    assert drf.key(R("cpus:3;mem:12"), TOTAL, 1.0, None) == drf.key(
        R("cpus:6;mem:2"), TOTAL, 1.0, None
    )
    assert drf.key(R("cpus:3;mem:12"), TOTAL, 2.0, None) == pytest.approx(1 / 3)
    assert drf.key(R("cpus:1;mem:4"), TOTAL, 0.5, None) == pytest.approx(8 / 18)
    assert drf.key(EMPTY, TOTAL, 1.0, None) == 0.0
    assert drf.key(EMPTY, TOTAL, 3.0, None) == 0.0
    assert drf.key(R("gpus:1"), TOTAL, 1.0, None) == math.inf
    assert drf.footprint(R("cpus:1;mem:4")) == R("cpus:1;mem:4")
    assert drf.name == "drf"


def test_drf_key_ignores_the_declared_shape() -> None:
    drf = DominantResourceFairness()
    alloc = R("cpus:2;mem:2")
    assert (
        drf.key(alloc, TOTAL, 1.0, None) == drf.key(alloc, TOTAL, 1.0, R("cpus:1;mem:4")) == 2 / 9
    )


# -- asset -----------------------------------------------------------------------------------------


def test_asset_key_is_the_exact_sum_of_shares() -> None:
    asset = AssetFairness()
    asset.prepare(pool("cpus:9;mem:18"), [])
    assert asset.key(R("cpus:3;mem:12"), TOTAL, 1.0, None) == 1.0  # 1/3 + 2/3 exactly
    assert asset.key(R("cpus:1;mem:4"), TOTAL, 1.0, None) == pytest.approx(1 / 9 + 4 / 18)
    assert asset.key(R("cpus:3;mem:12"), TOTAL, 2.0, None) == 0.5
    assert asset.key(EMPTY, TOTAL, 1.0, None) == 0.0
    assert asset.key(R("gpus:1"), TOTAL, 1.0, None) == math.inf
    total = R("cpus:30;mem:30")
    # Theorem 1 family: 6 tasks <1,3> and 12 tasks <1,1> tie exactly at 24/30
    assert asset.key(6 * R("cpus:1;mem:3"), total, 1.0, None) == asset.key(
        12 * R("cpus:1;mem:1"), total, 1.0, None
    )
    # summed exactly: 0.1 + 0.2 as shares of 1 is 0.3, not 0.30000000000000004
    assert asset.key(R("cpus:0.1;mem:0.2"), R("cpus:1;mem:1"), 1.0, None) == 0.3
    assert asset.footprint(R("cpus:1")) == R("cpus:1")
    assert asset.name == "asset"


# -- pf --------------------------------------------------------------------------------------------


def test_pf_prices_are_one_before_any_shape_is_known() -> None:
    pf = ProportionalFairness()
    pf.prepare(pool("cpus:9;mem:18"), [])
    assert pf.prices == {"cpus": 1.0, "mem": 1.0}
    assert pf.key(R("cpus:3;mem:12"), TOTAL, 1.0, None) == pytest.approx(1.0)  # asset fairness
    assert pf.key(EMPTY, TOTAL, 1.0, None) == 0.0


def test_pf_prices_and_keys_on_drf_table1() -> None:
    pf = ProportionalFairness()
    pf.prepare(pool("cpus:9;mem:18"), [demand("cpus:1;mem:4"), demand("cpus:3;mem:1")])
    # KKT of max log xA + log xB, x_A (1/9, 4/18) + x_B (3/9, 1/18) <= 1: nu = (9/5, 1/5)
    assert pf.prices["cpus"] == pytest.approx(1.8, abs=1e-6)
    assert pf.prices["mem"] == pytest.approx(0.2, abs=1e-6)
    assert sum(pf.prices.values()) == pytest.approx(2.0, abs=1e-9)  # eq. 5: sum nu = n
    # key of a framework holding its PF optimum is phi_i * a_i.nu = 1
    optimum_a = R("cpus:1;mem:4") * 45
    assert pf.key(optimum_a, TOTAL * 11, 1.0, None) == pytest.approx(1.0, abs=1e-6)
    # per task: A 11/45, B 11/18; weight divides
    assert pf.key(R("cpus:1;mem:4"), TOTAL, 1.0, None) == pytest.approx(11 / 45, abs=1e-6)
    assert pf.key(R("cpus:3;mem:1"), TOTAL, 1.0, None) == pytest.approx(11 / 18, abs=1e-6)
    assert pf.key(R("cpus:3;mem:1"), TOTAL, 2.0, None) == pytest.approx(11 / 36, abs=1e-6)
    assert pf.key(R("gpus:1"), TOTAL, 1.0, None) == math.inf
    assert pf.footprint(R("cpus:1")) == R("cpus:1")
    assert pf.name == "pf"


def test_pf_prepare_ignores_shapes_the_pool_cannot_hold() -> None:
    pf = ProportionalFairness()
    pf.prepare(pool("cpus:9;mem:18"), [demand("cpus:1;gpus:1")])
    assert pf.prices == {"cpus": 1.0, "mem": 1.0}
    pf.prepare(
        pool("cpus:9;mem:18"),
        [demand("cpus:1;gpus:1"), demand("cpus:1;mem:4"), demand("cpus:3;mem:1")],
    )
    assert pf.prices["cpus"] == pytest.approx(1.8, abs=1e-6)


def test_pf_single_resource_price_is_the_number_of_jobs() -> None:
    pf = ProportionalFairness()
    pf.prepare(pool("cpus:10"), [demand("cpus:1"), demand("cpus:2"), demand("cpus:5")])
    assert pf.prices["cpus"] == pytest.approx(3.0, abs=1e-9)


def test_pf_prices_of_weighted_frameworks_are_the_weighted_kkt_prices() -> None:
    pf = ProportionalFairness()
    pf.prepare(pool("cpus:9;mem:18"), [demand("cpus:1;mem:4", weight=3.0), demand("cpus:3;mem:1")])
    # max 3 log xA + log xB: both resources stay saturated at x* = (45/11, 18/11), and
    # w_i / x_i = a_i . nu gives nu = (7/5, 13/5); sum nu = sum w = 4 (eq. 5)
    assert pf.prices["cpus"] == pytest.approx(1.4, abs=1e-6)
    assert pf.prices["mem"] == pytest.approx(2.6, abs=1e-6)
    # at the optimum every weighted key is 1: x_i * a_i . nu / w_i
    assert pf.key(R("cpus:1;mem:4") * 45, TOTAL * 11, 3.0, None) == pytest.approx(1.0, abs=1e-6)
    assert pf.key(R("cpus:3;mem:1") * 18, TOTAL * 11, 1.0, None) == pytest.approx(1.0, abs=1e-6)


def test_pf_prices_respect_wanted_caps() -> None:
    pf = ProportionalFairness()
    pf.prepare(
        pool("cpus:90;mem:180"),
        [demand("cpus:1;mem:4", wanted=5), demand("cpus:3;mem:1"), demand("cpus:1;mem:3")],
    )
    # A capped at 5; B and C share the cpus, memory is not saturated: nu = (36/17, 0)
    assert pf.prices["cpus"] == pytest.approx(36 / 17, abs=1e-6)
    assert pf.prices["mem"] == pytest.approx(0.0, abs=1e-9)


# -- slots -----------------------------------------------------------------------------------------


def test_slot_is_the_largest_agent_over_slots_per_agent() -> None:
    slots = SlotFairness(14)
    slots.prepare(pool("cpus:14;mem:14", largest="cpus:12;mem:12"), [])
    assert slots.slot == ResourceVector.from_millis({"cpus": 857, "mem": 857})
    slots = SlotFairness(4)
    slots.prepare(pool("cpus:64;mem:256", largest="cpus:16;mem:64"), [])
    assert slots.slot == R("cpus:4;mem:16")
    assert slots.name == "slots"


def test_slot_footprint_is_whole_slots_covering_the_shape() -> None:
    slots = SlotFairness(4)
    slots.prepare(pool("cpus:64;mem:256", largest="cpus:16;mem:64"), [])
    slot = R("cpus:4;mem:16")
    assert slots.footprint(R("cpus:1;mem:1")) == slot
    assert slots.footprint(R("cpus:4;mem:16")) == slot
    assert slots.footprint(R("cpus:4.001;mem:1")) == 2 * slot
    assert slots.footprint(R("cpus:1;mem:40")) == 3 * slot
    assert slots.footprint(R("mem:1")) == slot  # at least one slot, charged in full
    # a resource slots do not cover is charged as is
    assert slots.footprint(R("cpus:1;gpus:1")) == slot + R("gpus:1")
    for shape in ("cpus:1;mem:1", "cpus:7;mem:3", "cpus:1;mem:40;gpus:2"):
        assert R(shape).fits_in(slots.footprint(R(shape)))


def test_slot_key_counts_slots_held_over_the_weight() -> None:
    slots = SlotFairness(4)
    slots.prepare(pool("cpus:64;mem:256", largest="cpus:16;mem:64"), [])
    total = R("cpus:64;mem:256")
    assert slots.key(3 * R("cpus:4;mem:16"), total, 1.0, None) == 3.0
    assert slots.key(3 * R("cpus:4;mem:16"), total, 2.0, None) == 1.5
    assert slots.key(R("cpus:8;mem:16"), total, 1.0, None) == 2.0  # the larger count wins
    assert slots.key(EMPTY, total, 1.0, None) == 0.0
    assert slots.key(R("gpus:3"), total, 1.0, None) == 0.0  # no slot size for gpus


def test_slot_fairness_rejects_fewer_than_one_slot() -> None:
    with pytest.raises(ValueError, match="slots_per_agent"):
        SlotFairness(0)


# -- steppers: key(allocated + k * footprint) without building vectors, bit for bit ----------------


def _prepared(name: str) -> object:
    policy = make_fairness_policy(name)
    policy.prepare(
        pool("cpus:90;mem:180;gpus:4", largest="cpus:16;mem:64;gpus:2"),
        [
            demand("cpus:1;mem:4"),
            demand("cpus:3;mem:1", wanted=7, weight=2.0),
            demand("cpus:1;gpus:1"),
        ],
    )
    return policy


@pytest.mark.parametrize("name", ["drf", "asset", "pf", "slots"])
@pytest.mark.parametrize(
    ("allocated", "footprint", "weight"),
    [
        ("", "cpus:1;mem:4", 1.0),
        ("cpus:3;mem:1", "cpus:1;mem:4", 1.0),
        ("cpus:0.7;mem:33.3", "cpus:0.1;mem:0.2", 3.0),
        ("cpus:2;gpus:1", "cpus:1;mem:1;gpus:1", 0.5),
        ("mem:5", "cpus:0.3", 1.0),
    ],
)
def test_stepper_equals_key_bit_for_bit(
    name: str, allocated: str, footprint: str, weight: float
) -> None:
    policy = _prepared(name)
    total = R("cpus:90;mem:180;gpus:4")
    fp = policy.footprint(R(footprint))  # type: ignore[attr-defined]
    step = policy.stepper(R(allocated), fp, total, weight, R(footprint))  # type: ignore[attr-defined]
    for k in (0, 1, 2, 3, 7, 10, 29):
        expected = policy.key(R(allocated) + fp * k, total, weight, R(footprint))  # type: ignore[attr-defined]
        assert step(k) == expected, (k, step(k), expected)


@pytest.mark.parametrize("name", ["drf", "asset", "pf"])
def test_stepper_of_a_resource_outside_the_pool_is_infinite(name: str) -> None:
    policy = _prepared(name)
    total = R("cpus:90;mem:180")
    step = policy.stepper(R("cpus:1"), R("cpus:1;fpgas:1"), total, 1.0, None)  # type: ignore[attr-defined]
    assert step(1) == math.inf
    assert policy.key(R("cpus:2;fpgas:1"), total, 1.0, None) == math.inf  # type: ignore[attr-defined]


# -- the table -------------------------------------------------------------------------------------


def test_make_fairness_policy_by_name() -> None:
    assert sorted(FAIRNESS_POLICIES) == ["asset", "drf", "pf", "slots"]
    for name, cls in (
        ("drf", DominantResourceFairness),
        ("asset", AssetFairness),
        ("pf", ProportionalFairness),
        ("slots", SlotFairness),
    ):
        policy = make_fairness_policy(name)
        assert isinstance(policy, cls)
        assert policy.name == name
    assert make_fairness_policy("slots").slots_per_agent == 14  # type: ignore[attr-defined]
    assert make_fairness_policy("pf") is not make_fairness_policy("pf")  # fresh state each time


@pytest.mark.parametrize("name", ["fifo", "", "DRF", "drfh", "max-min"])
def test_make_fairness_policy_rejects_unknown_names(name: str) -> None:
    with pytest.raises(ValueError, match="unknown fairness policy") as caught:
        make_fairness_policy(name)
    message = str(caught.value)
    assert repr(name) in message
    assert "asset, drf, pf, slots" in message
