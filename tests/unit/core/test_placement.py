"""Placement policies: Best-Fit DRFH (eq. 9 of Wang, Li & Liang), First-Fit, seeded random."""

from __future__ import annotations

import copy
from collections.abc import Container, Sequence
from fractions import Fraction

import pytest

from framework_sdk import ResourceVector
from master.core.placement import (
    PLACEMENT_POLICIES,
    BestFitPlacement,
    FirstFitPlacement,
    PlacementQuery,
    RandomPlacement,
    SplitMix64,
    make_placement_policy,
)
from master.core.records import AgentList, AgentRecord

R = ResourceVector.parse


def agent(agent_id: str, free: str, total: str | None = None) -> AgentRecord:
    return AgentRecord(id=agent_id, hostname=agent_id, total=R(total or free), free=R(free))


def pool_total(agents: Sequence[AgentRecord]) -> ResourceVector:
    return sum((a.total for a in agents), ResourceVector())


def choose(
    policy: object,
    shape: str,
    agents: Sequence[AgentRecord],
    total: ResourceVector | None = None,
    refused: Container[str] = frozenset(),
) -> AgentRecord | None:
    """``policy``'s choice over a plain list of agents, checked against the same choice made
    over the core's ``AgentList`` (whose ``FreeColumns`` take a separate, columnar scan)."""
    total = pool_total(agents) if total is None else total
    twin = copy.deepcopy(policy)
    query = policy.prepare(R(shape), total)  # type: ignore[attr-defined]
    plain = policy.choose(query, list(agents), refused)  # type: ignore[attr-defined]
    twin_query = twin.prepare(R(shape), total)  # type: ignore[attr-defined]
    columned = twin.choose(twin_query, AgentList(agents), refused)  # type: ignore[attr-defined]
    assert (None if plain is None else plain.id) == (None if columned is None else columned.id)
    return plain


def eq9(shape: ResourceVector, free: ResourceVector, total: ResourceVector) -> Fraction:
    """H(i,l) = || D_i / D_i1 - c_l / c_l1 ||_1 with D, c as shares of the pool total (exact)."""
    names = sorted(total.names() | shape.names())
    first = next(n for n in ("cpus", "mem", "disk", "gpus", *sorted(shape.names())) if n in shape)
    d1 = Fraction(shape.millis(first), total.millis(first))
    c1 = Fraction(free.millis(first), total.millis(first))
    return sum(
        (
            abs(
                Fraction(shape.millis(n), total.millis(n)) / d1
                - Fraction(free.millis(n), total.millis(n)) / c1
            )
            for n in names
        ),
        Fraction(0),
    )


# -- eq. 9 by hand ---------------------------------------------------------------------------------


def test_eq9_on_the_drfh_example() -> None:
    total = R("cpus:14;mem:14")
    shape = R("cpus:0.2;mem:1")
    # D/D1 = (1, 5); s1 free (2, 12) -> (1, 6): H = 1; s2 free (12, 2) -> (1, 1/6): H = 29/6
    assert eq9(shape, R("cpus:2;mem:12"), total) == 1
    assert eq9(shape, R("cpus:12;mem:2"), total) == Fraction(29, 6)
    query = PlacementQuery(shape, total)
    assert query.score(R("cpus:2;mem:12").millis_view()) == pytest.approx(1.0)
    assert query.score(R("cpus:12;mem:2").millis_view()) == pytest.approx(29 / 6)


def test_eq9_normalises_by_the_pool_total() -> None:
    total = R("cpus:10;mem:100")
    shape = R("cpus:1;mem:4")
    free = R("cpus:2;mem:40")
    # shares: D = (0.1, 0.04) -> (1, 0.4); c = (0.2, 0.4) -> (1, 2): H = 1.6
    assert eq9(shape, free, total) == Fraction(8, 5)
    assert PlacementQuery(shape, total).score(free.millis_view()) == pytest.approx(1.6)


def test_eq9_counts_resources_the_task_does_not_use() -> None:
    total = R("cpus:8;mem:8;gpus:2")
    shape = R("cpus:1;mem:1")
    # GPU agent: c/c1 has gpus 2/2 / (4/8) = 2 on top; the plain agent has 0 there
    assert eq9(shape, R("cpus:4;mem:4;gpus:2"), total) == 2
    assert eq9(shape, R("cpus:4;mem:4"), total) == 0
    query = PlacementQuery(shape, total)
    assert query.score(R("cpus:4;mem:4;gpus:2").millis_view()) == pytest.approx(2.0)
    assert query.score(R("cpus:4;mem:4").millis_view()) == pytest.approx(0.0)


@pytest.mark.parametrize(
    ("shape", "agents", "expected"),
    [
        # a CPU-heavy task prefers the CPU-rich agent, wherever it stands in the list
        (
            "cpus:4;mem:1",
            [("mem-rich", "cpus:8;mem:32"), ("cpu-rich", "cpus:16;mem:8")],
            "cpu-rich",
        ),
        (
            "cpus:4;mem:1",
            [("cpu-rich", "cpus:16;mem:8"), ("mem-rich", "cpus:8;mem:32")],
            "cpu-rich",
        ),
        # a memory-heavy task the other way round
        (
            "cpus:1;mem:8",
            [("cpu-rich", "cpus:16;mem:8"), ("mem-rich", "cpus:8;mem:32")],
            "mem-rich",
        ),
        # DRFH Fig. 1: user 1 to s1, user 2 to s2
        ("cpus:0.2;mem:1", [("s1", "cpus:2;mem:12"), ("s2", "cpus:12;mem:2")], "s1"),
        ("cpus:1;mem:0.2", [("s1", "cpus:2;mem:12"), ("s2", "cpus:12;mem:2")], "s2"),
        # a GPU-free task avoids the GPU agent when otherwise equal
        ("cpus:1;mem:1", [("gpu", "cpus:4;mem:4;gpus:2"), ("plain", "cpus:4;mem:4")], "plain"),
        # a GPU task goes to the only agent with GPUs
        ("cpus:1;mem:1;gpus:1", [("plain", "cpus:4;mem:4"), ("gpu", "cpus:4;mem:4;gpus:2")], "gpu"),
        # equal scores: the earlier agent
        ("cpus:1;mem:1", [("first", "cpus:4;mem:4"), ("second", "cpus:4;mem:4")], "first"),
        # three resources, no GPU agent on either side
        ("cpus:1;mem:2;disk:4", [("a", "cpus:4;mem:8;disk:4"), ("b", "cpus:4;mem:8;disk:16")], "b"),
    ],
)
def test_best_fit_takes_the_least_eq9(
    shape: str, agents: list[tuple[str, str]], expected: str
) -> None:
    records = [agent(i, free) for i, free in agents]
    total = pool_total(records)
    chosen = choose(BestFitPlacement(), shape, records)
    assert chosen is not None
    assert chosen.id == expected
    scores = {a.id: eq9(R(shape), a.free, total) for a in records if R(shape).fits_in(a.free)}
    assert scores[expected] == min(scores.values())


def test_best_fit_uses_free_not_total_resources() -> None:
    # same totals, but the CPU-rich agent has its CPUs mostly in use
    records = [
        agent("cpu-rich", "cpus:4.5;mem:8", total="cpus:16;mem:8"),
        agent("mem-rich", "cpus:8;mem:32"),
    ]
    total = pool_total(records)
    chosen = choose(BestFitPlacement(), "cpus:4;mem:1", records, total)
    assert chosen is not None
    expected = min(records, key=lambda a: eq9(R("cpus:4;mem:1"), a.free, total))
    assert chosen.id == expected.id


def test_best_fit_skips_agents_that_do_not_fit() -> None:
    records = [agent("ideal-but-small", "cpus:0.5;mem:2.5"), agent("poor", "cpus:12;mem:2")]
    chosen = choose(BestFitPlacement(), "cpus:1;mem:1", records)
    assert chosen is not None and chosen.id == "poor"


# -- refusals and None -----------------------------------------------------------------------------


@pytest.mark.parametrize("policy", [BestFitPlacement, FirstFitPlacement, RandomPlacement])
def test_refused_agents_are_skipped(policy: type) -> None:
    records = [agent("a", "cpus:4;mem:4"), agent("b", "cpus:4;mem:4"), agent("c", "cpus:4;mem:4")]
    for _ in range(10):
        chosen = choose(policy(), "cpus:1;mem:1", records, refused={"a", "c"})
        assert chosen is not None and chosen.id == "b"
    assert choose(policy(), "cpus:1;mem:1", records, refused={"a", "b", "c"}) is None


@pytest.mark.parametrize("policy", [BestFitPlacement, FirstFitPlacement, RandomPlacement])
def test_none_only_when_nothing_fits(policy: type) -> None:
    records = [agent("a", "cpus:1;mem:8"), agent("b", "cpus:8;mem:1")]
    assert choose(policy(), "cpus:2;mem:2", records) is None
    assert choose(policy(), "cpus:1;mem:1;gpus:1", records) is None
    assert choose(policy(), "cpus:1;mem:1", []) is None
    exact = [agent("a", "cpus:1;mem:8"), agent("exact", "cpus:2;mem:2"), agent("b", "cpus:8;mem:1")]
    chosen = choose(policy(), "cpus:2;mem:2", exact)
    assert chosen is not None and chosen.id == "exact"


@pytest.mark.parametrize("policy", [BestFitPlacement, RandomPlacement])
@pytest.mark.parametrize("only", [0, 57, 99])
def test_sampling_on_large_clusters_still_finds_the_only_fitting_agent(
    policy: type, only: int
) -> None:
    records = [agent(f"a{i:03d}", "cpus:1;mem:1") for i in range(100)]
    records[only] = agent(f"a{only:03d}", "cpus:8;mem:8")
    placement = policy(4)
    total = pool_total(records)
    for _ in range(5):  # the scan cursor moves between calls; it must still find it
        chosen = choose(placement, "cpus:2;mem:2", records, total)
        assert chosen is not None and chosen.id == f"a{only:03d}"


def test_sampling_scores_only_a_bounded_sample() -> None:
    # 40 agents fit; the best is far from the cursor, so a sample of 4 need not find it,
    # but whatever is returned fits and the cursor rotates over the cluster
    records = [agent(f"a{i:02d}", "cpus:4;mem:16") for i in range(39)] + [
        agent("best", "cpus:4;mem:4")
    ]
    placement = BestFitPlacement(4)
    seen = set()
    for _ in range(10):
        chosen = choose(placement, "cpus:1;mem:1", records)
        assert chosen is not None
        assert R("cpus:1;mem:1").fits_in(chosen.free)
        seen.add(chosen.id)
    assert "best" in seen  # the round-robin sample reaches the end of the list
    assert len(seen) > 1
    exhaustive = choose(BestFitPlacement(100), "cpus:1;mem:1", records)
    assert exhaustive is not None and exhaustive.id == "best"


# -- first-fit -------------------------------------------------------------------------------------


def test_first_fit_takes_the_first_fitting_agent_in_order() -> None:
    records = [
        agent("small", "cpus:0.1;mem:4"),
        agent("poor", "cpus:12;mem:2"),
        agent("ideal", "cpus:2;mem:12"),
    ]
    chosen = choose(FirstFitPlacement(), "cpus:0.2;mem:1", records)
    assert chosen is not None and chosen.id == "poor"


def test_first_fit_skips_emptied_agents_within_a_run_and_rescans_after_begin_run() -> None:
    records = [agent("a", "cpus:1;mem:1"), agent("b", "cpus:4;mem:4")]
    placement = FirstFitPlacement()
    placement.begin_run()
    first = choose(placement, "cpus:1;mem:1", records)
    assert first is not None and first.id == "a"
    records[0].free = ResourceVector()
    second = choose(placement, "cpus:1;mem:1", records)
    assert second is not None and second.id == "b"
    records[0].free = R("cpus:1;mem:1")  # freed between runs
    placement.begin_run()
    third = choose(placement, "cpus:1;mem:1", records)
    assert third is not None and third.id == "a"


# -- random and SplitMix64 -------------------------------------------------------------------------


def test_random_placement_is_deterministic_for_a_seed() -> None:
    records = [agent(f"a{i}", "cpus:4;mem:4") for i in range(10)]

    def picks(seed: int) -> list[str]:
        placement = RandomPlacement(16, seed)
        out = []
        for _ in range(30):
            chosen = choose(placement, "cpus:1;mem:1", records)
            assert chosen is not None
            out.append(chosen.id)
        return out

    assert picks(42) == picks(42)
    assert picks(42) != picks(43)
    assert len(set(picks(42))) > 3  # it does spread


def test_random_placement_picks_only_fitting_agents() -> None:
    records = [
        agent(f"a{i}", "cpus:4;mem:4" if i % 3 == 0 else "cpus:0.5;mem:4") for i in range(12)
    ]
    placement = RandomPlacement(16, 1)
    chosen_ids = set()
    for _ in range(50):
        chosen = choose(placement, "cpus:1;mem:1", records)
        assert chosen is not None
        chosen_ids.add(chosen.id)
    assert chosen_ids == {"a0", "a3", "a6", "a9"}


def test_splitmix64_matches_the_reference_sequence() -> None:
    generator = SplitMix64(0)
    assert [generator.next_u64() for _ in range(3)] == [
        0xE220A8397B1DCDAF,
        0x6E789E6AA1B965F4,
        0x06C45D188009454F,
    ]
    generator = SplitMix64(1234567)
    assert [generator.next_u64() for _ in range(3)] == [
        6457827717110365317,
        3203168211198807973,
        9817491932198370423,
    ]


def test_splitmix64_is_reproducible_and_bounded() -> None:
    a, b = SplitMix64(99), SplitMix64(99)
    assert [a.next_u64() for _ in range(100)] == [b.next_u64() for _ in range(100)]
    generator = SplitMix64(-1)  # masked to 64 bits
    assert generator.next_u64() == SplitMix64(2**64 - 1).next_u64()
    values = [SplitMix64(5).below(7) for _ in range(3)]
    assert values[0] == values[1] == values[2]
    generator = SplitMix64(5)
    drawn = [generator.below(7) for _ in range(500)]
    assert set(drawn) == set(range(7))
    assert all(0 <= v < 2**64 for v in (SplitMix64(s).next_u64() for s in range(50)))


# -- the table -------------------------------------------------------------------------------------


def test_make_placement_policy_by_name() -> None:
    assert sorted(PLACEMENT_POLICIES) == ["best-fit", "first-fit", "random"]
    assert isinstance(make_placement_policy("best-fit"), BestFitPlacement)
    assert isinstance(make_placement_policy("first-fit"), FirstFitPlacement)
    assert isinstance(make_placement_policy("random", 8, 3), RandomPlacement)
    assert make_placement_policy("best-fit", 7).sample_size == 7  # type: ignore[attr-defined]
    for name in ("best-fit", "first-fit", "random"):
        assert make_placement_policy(name).name == name


@pytest.mark.parametrize("name", ["worst-fit", "", "Best-Fit", "bestfit"])
def test_make_placement_policy_rejects_unknown_names(name: str) -> None:
    with pytest.raises(ValueError, match="unknown placement policy") as caught:
        make_placement_policy(name)
    assert "best-fit" in str(caught.value)


def test_best_fit_rejects_a_sample_below_one() -> None:
    with pytest.raises(ValueError, match="sample_size"):
        BestFitPlacement(0)
