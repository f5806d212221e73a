"""``master.core.fit``: eq. 9 in integers, fits on capacities, agent kinds, exact shares."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework_sdk import ResourceVector
from master.core.fairness import DominantResourceFairness
from master.core.fit import (
    KIND_TOLERANCE,
    EqNine,
    KindFits,
    capacity_fit,
    clearly_worse,
    exact_share,
    first_resource,
    fits_better,
    task_norm,
)
from master.core.placement import PlacementQuery
from master.core.records import AgentList, AgentRecord

R = ResourceVector.parse
S1, S2 = R("cpus:2;mem:12288"), R("cpus:12;mem:2048")
U1, U2 = R("cpus:0.2;mem:1024"), R("cpus:1;mem:204.8")


def eq9(shape: ResourceVector, room: ResourceVector, total: ResourceVector) -> Fraction:
    """H(i,l) of DRFH eq. 9 by the book: shares of the pool, over the pool's resources."""
    ref = first_resource(shape)
    d1 = Fraction(shape.millis(ref), total.millis(ref))
    c1 = Fraction(room.millis(ref), total.millis(ref))
    return sum(
        (
            abs(
                Fraction(shape.millis(n), total.millis(n)) / d1
                - Fraction(room.millis(n), total.millis(n)) / c1
            )
            for n in total.names()
        ),
        Fraction(0),
    )


def agent(agent_id: str, total: ResourceVector) -> AgentRecord:
    return AgentRecord(id=agent_id, hostname=agent_id, total=total, free=total)


def kinds_of(*totals: ResourceVector) -> tuple[KindFits, AgentList]:
    agents = AgentList(agent(f"a{i}", t) for i, t in enumerate(totals))
    fits = KindFits()
    largest = ResourceVector.from_millis(
        {n: max(t.millis(n) for t in totals) for t in totals for n in t.names()}
    )
    fits.refresh(agents, largest)
    return fits, agents


# -- eq. 9 in integers ----------------------------------------------------------------------------


def test_eq_nine_on_the_drfh_example_is_eq9_up_to_its_reference_factor() -> None:
    total = S1 + S2
    eq = EqNine(total)
    scale = Fraction(total.millis("cpus"), eq.weights[0][1] * total.millis("cpus"))
    for shape in (U1, U2):
        for room in (S1, S2, R("cpus:7;mem:1024")):
            n, d = eq.fit(shape.millis_view(), "cpus", room.millis_view())
            # H = (T_ref / L) N / D, and the first weight is L / T_ref
            assert scale * Fraction(n, d) == eq9(shape, room, total)
    # Fig. 1: u1 fits s1 (H 1) far better than s2 (H 29/6), u2 the other way round
    assert eq9(U1, S1, total) == 1 and eq9(U1, S2, total) == Fraction(29, 6)
    u1_s1 = eq.fit(U1.millis_view(), "cpus", S1.millis_view())
    u1_s2 = eq.fit(U1.millis_view(), "cpus", S2.millis_view())
    assert fits_better(u1_s1, u1_s2) and not fits_better(u1_s2, u1_s1)
    assert not fits_better(u1_s1, u1_s1)


names = st.sampled_from(["cpus", "mem", "disk", "gpus"])
vectors = st.dictionaries(names, st.integers(1, 10**7), min_size=1).map(ResourceVector.from_millis)


@settings(max_examples=200, deadline=None)
@given(shape=vectors, room=vectors, extra=vectors)
def test_eq_nine_is_exact_and_ranks_like_the_placement_score(
    shape: ResourceVector, room: ResourceVector, extra: ResourceVector
) -> None:
    """For any task that fits, ``(N, D)`` is eq. 9 exactly (times a factor fixed by the pool
    and the reference resource), and the float score best-fit uses agrees to rounding."""
    room = room + shape  # the task fits
    total = room + extra
    eq = EqNine(total)
    ref = first_resource(shape)
    n, d = eq.fit(shape.millis_view(), ref, room.millis_view())
    weight = dict(eq.weights)[ref]
    exact = Fraction(n, d) / weight  # (T_ref / L) = 1 / W_ref
    assert exact == eq9(shape, room, total)
    assert PlacementQuery(shape, total).score(room.millis_view()) == pytest.approx(
        float(exact), rel=1e-9, abs=1e-9
    )


# -- capacities and kinds -------------------------------------------------------------------------


def test_capacity_fit_and_misplacement_on_the_drfh_example() -> None:
    largest = R("cpus:12;mem:12288")  # normalized to the largest agent, as in DRFH Table I
    assert capacity_fit(U1, S1, largest) == 1
    assert capacity_fit(U1, S2, largest) == Fraction(29, 6)
    assert capacity_fit(U2, S2, largest) == Fraction(1, 30)
    assert capacity_fit(U2, S1, largest) == Fraction(29, 5)
    assert task_norm(U1, largest) == 6  # (1, 5)
    assert task_norm(U2, largest) == Fraction(6, 5)  # (1, 1/5)
    # u1 on s2: 29/6 - 1 > (1 + 6) / 4; u2 on s1: 29/5 - 1/30 > (1/30 + 6/5) / 4
    assert clearly_worse(Fraction(29, 6), Fraction(1), Fraction(6))
    assert clearly_worse(Fraction(29, 5), Fraction(1, 30), Fraction(6, 5))
    assert not clearly_worse(Fraction(1) + KIND_TOLERANCE * 7, Fraction(1), Fraction(6))
    fits, _ = kinds_of(S1, S2)
    assert fits.heterogeneous
    assert fits.home(U1) == 1 and fits.home(U2) == Fraction(1, 30)
    assert fits.misplaced(U1, S2) and not fits.misplaced(U1, S1)
    assert fits.misplaced(U2, S1) and not fits.misplaced(U2, S2)


def test_agents_that_are_multiples_of_one_vector_are_one_direction() -> None:
    fits, _ = kinds_of(R("cpus:2;mem:4"), R("cpus:4;mem:8"), R("cpus:8;mem:16"))
    assert not fits.heterogeneous
    for shape in (U1, U2, R("cpus:1;mem:1"), R("cpus:1")):
        for kind in (R("cpus:2;mem:4"), R("cpus:4;mem:8")):
            assert not fits.misplaced(shape, kind)


def test_capacities_a_few_per_cent_apart_are_one_kind() -> None:
    """Agents that report slightly different memory (a real cluster) are heterogeneous to the
    letter, but no task is misplaced on any of them."""
    totals = [R(f"cpus:16;mem:{64000 + 97 * i}") for i in range(20)]
    fits, _ = kinds_of(*totals)
    assert fits.heterogeneous
    for shape in (U1, U2, R("cpus:4;mem:1024"), R("cpus:0.5;mem:8192")):
        assert not any(fits.misplaced(shape, kind) for kind in totals)


def test_a_task_fitting_no_kind_is_never_misplaced() -> None:
    fits, _ = kinds_of(S1, S2)
    assert fits.home(R("cpus:20;mem:1")) is None
    assert not fits.misplaced(R("cpus:20;mem:1"), S2)


def brute_home(
    shape: ResourceVector, kinds: list[ResourceVector], largest: ResourceVector
) -> Fraction | None:
    fits = [capacity_fit(shape, k, largest) for k in kinds if shape.fits_in(k)]
    return min(fits) if fits else None


@settings(max_examples=100, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.booleans(), st.integers(0, 5), st.integers(1, 4), st.integers(1, 4)),
        min_size=1,
        max_size=25,
    ),
    shape=st.tuples(st.integers(1, 4), st.integers(1, 4)),
)
def test_kinds_kept_across_agent_changes_are_the_kinds_computed_afresh(
    steps: list[tuple[bool, int, int, int]], shape: tuple[int, int]
) -> None:
    """Agents join and leave (a few capacities, so kinds repeat and vanish); after every change
    the kept ``KindFits`` answers what a fresh one computes."""
    task = ResourceVector({"cpus": shape[0], "mem": shape[1]})
    largest = R("cpus:4;mem:4")
    agents = AgentList()
    kept = KindFits()
    records: dict[int, AgentRecord] = {}
    for serial, (join, slot, cpus, mem) in enumerate(steps):
        if join and slot not in records:
            records[slot] = agent(f"a{slot}-{serial}", ResourceVector({"cpus": cpus, "mem": mem}))
            agents.append(records[slot])
        elif not join and slot in records:
            agents.discard(records.pop(slot))
        kept.refresh(agents, largest)
        kept.home(task)  # cache it, so later changes must update it
        fresh = KindFits()
        fresh.refresh(agents, largest)
        kinds = list(agents.kinds)
        assert kept.home(task) == fresh.home(task) == brute_home(task, kinds, largest)
        assert kept.heterogeneous == fresh.heterogeneous
        for kind in kinds:
            assert kept.misplaced(task, kind) == fresh.misplaced(task, kind)


# -- exact shares ---------------------------------------------------------------------------------


def test_exact_share_is_what_the_drf_key_rounds() -> None:
    total = S1 + S2
    drf = DominantResourceFairness()
    for count in range(12):
        exact = exact_share(U1 * 2, U1, count, total, 1.0)
        assert exact == Fraction(1024 * (2 + count), 14336)
        assert float(exact) == drf.key(U1 * (2 + count), total, 1.0, U1)
    assert exact_share(U2, U2, 5, total, 2.0) == Fraction(6, 28)
    assert exact_share(R("gpus:1"), U1, 1, total, 1.0) is None  # the pool has no GPUs
