"""The fit-aware choice inside an allocation run (``master.core.fit``, ``allocation._claim``).

States are built from a placement (framework -> agent -> tasks) adopted as running tasks, so
each test starts from exactly the allocation it is about; ``validate`` is on throughout.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from framework_sdk import ResourceVector
from master.core import CoreConfig, MasterState, RunningTask, SendOffers, TaskState

R = ResourceVector.parse
AGENTS = {"s1": "cpus:2;mem:12288", "s2": "cpus:12;mem:2048"}  # DRFH Fig. 1, memory in MiB
SHAPES = {"u1": "cpus:0.2;mem:1024", "u2": "cpus:1;mem:204.8"}
FIG2 = {"u1": {"s1": 5, "s2": 1}, "u2": {"s1": 1, "s2": 5}}  # per-server DRF, 6 and 6


def build(
    layout: dict[str, dict[str, int]],
    agents: dict[str, str] = AGENTS,
    shapes: dict[str, str] = SHAPES,
    weights: dict[str, float] | None = None,
    **config: Any,
) -> MasterState:
    """Frameworks wanting 30 tasks, then agents joining with ``layout``'s tasks running."""
    state = MasterState(CoreConfig(validate=True, **config))
    for framework_id, shape in shapes.items():
        weight = (weights or {}).get(framework_id, 1.0)
        state.handle_add_framework(framework_id, 0.0, weight=weight)
        if shape:
            state.handle_update_demand(framework_id, R(shape), 30, 0.0)
    for agent_id, resources in agents.items():
        running = [
            RunningTask(fid, f"{fid}-{agent_id}-{n}", "t", R(shapes[fid]), TaskState.RUNNING)
            for fid, per_agent in sorted(layout.items())
            for n in range(per_agent.get(agent_id, 0))
        ]
        state.handle_add_agent(agent_id, R(resources), 0.0, running=running)
    return state


def end_one(state: MasterState, framework_id: str, agent_id: str) -> None:
    task = min(
        (t for (f, _), t in state.tasks.items() if f == framework_id and t.agent_id == agent_id),
        key=lambda t: t.id,
    )
    state.handle_task_status(agent_id, framework_id, task.id, TaskState.FINISHED, 1.0)


def offered(messages: list[Any]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for message in messages:
        assert isinstance(message, SendOffers)
        for offer in message.offers:
            out[message.framework_id][offer.agent_id] = offer.fair_tasks
    return dict(out)


def test_memory_freed_on_the_cpu_server_goes_to_the_user_it_fits() -> None:
    """Fig. 2, then u1's task on s2 ends: u1 (5/14) is the most deprived and s2 its only fit,
    but u2 (6/14) is within one task of it and fits s2's free resources better (eq. 9), so u2
    takes s2 until it is out of the window; then nothing fits u1 any more."""
    plain = build(FIG2, fit_window=0)
    end_one(plain, "u1", "s2")
    assert offered(plain.handle_allocate(1.0)) == {"u1": {"s2": 1}}  # Fig. 2 rebuilt

    state = build(FIG2)
    end_one(state, "u1", "s2")
    assert offered(state.handle_allocate(1.0)) == {"u2": {"s2": 5}}
    assert state.agents["s2"].free == R("cpus:2")


def test_cpus_freed_on_the_memory_server_go_to_the_user_they_fit() -> None:
    plain = build(FIG2, fit_window=0)
    end_one(plain, "u2", "s1")
    assert offered(plain.handle_allocate(1.0)) == {"u2": {"s1": 1}}

    state = build(FIG2)
    end_one(state, "u2", "s1")
    assert offered(state.handle_allocate(1.0)) == {"u1": {"s1": 5}}


@pytest.mark.parametrize(("weight", "claims"), [(1.25, True), (1.15, False)])
def test_only_frameworks_within_one_task_of_the_most_deprived_claim(
    weight: float, claims: bool
) -> None:
    """s2 with 2.2 GB, so that after six u2 tasks exactly one u1 task fits there. u1 holds
    5 GB of 14.2 (0.352), 0.423 after one more task; u2 holds 7 CPUs of 14 (1/2): with weight
    1.25 its share is 0.4, in the window, and it claims s2 (which leaves no room for u1); with
    weight 1.15 it is 0.435, outside, and u1 gets s2."""
    agents = {"s1": "cpus:2;mem:12288", "s2": "cpus:12;mem:2252.8"}
    state = build({"u1": {"s1": 5}, "u2": {"s1": 1, "s2": 6}}, agents, weights={"u2": weight})
    expected = {"u2": {"s2": 5}} if claims else {"u1": {"s2": 1}}
    assert offered(state.handle_allocate(1.0)) == expected


def test_a_claimant_that_refused_the_agent_does_not_claim_it() -> None:
    state = build(FIG2)
    end_one(state, "u2", "s2")
    (message,) = state.handle_allocate(1.0)  # u2 (5/14) gets its task back on s2 ...
    assert offered([message]) == {"u2": {"s2": 1}}
    state.handle_decline("u2", [o.offer_id for o in message.offers], 1.0, refuse_seconds=60.0)
    end_one(state, "u1", "s2")  # ... declines it; u1's task on s2 ends
    assert offered(state.handle_allocate(2.0)) == {"u1": {"s2": 1}}


def test_only_tasks_with_the_same_eq9_reference_resource_compete() -> None:
    """A memory-only task has ``mem`` as its eq. 9 reference, u1's tasks ``cpus``: their H
    values are not on one scale, so u2 never claims u1's agent. u1 holds s1's CPUs and ends its
    task on s2 (share 10/14, 11/14 after one more); u2's weight 0.115 puts it (0.745) inside the
    window, and it would fit s2. u1 gets s2 back; u2 then fills s1's memory."""
    shapes = {"u1": "cpus:0.2;mem:1024", "u2": "mem:204.8"}
    layout = {"u1": {"s1": 10, "s2": 1}, "u2": {"s1": 1, "s2": 5}}
    state = build(layout, shapes=shapes, weights={"u2": 0.115})
    end_one(state, "u1", "s2")
    assert offered(state.handle_allocate(1.0)) == {"u1": {"s2": 1}, "u2": {"s1": 9}}


@pytest.mark.parametrize(
    "config",
    [
        {"policy": "asset"},
        {"policy": "pf"},
        {"policy": "slots"},
        {"placement": "first-fit"},
        {"placement": "random", "seed": 3},
    ],
)
def test_other_policies_and_placements_are_plain_progressive_filling(
    config: dict[str, Any],
) -> None:
    """The choice is DRFH's Best-Fit over pairs: other policies and the baseline placements
    make the decisions they always made."""
    results = []
    for window in (0, 8):
        state = build(FIG2, fit_window=window, **config)
        end_one(state, "u1", "s2")
        end_one(state, "u2", "s1")
        results.append(offered(state.handle_allocate(1.0)))
    assert results[0] == results[1]


def test_coarse_frameworks_in_the_window_are_left_as_they_were() -> None:
    """A framework without a declared shape sits in the sorter among the demand-aware ones; a
    window scan passes over it and gives its entry back untouched."""
    shapes = {**SHAPES, "coarse": ""}
    state = build(FIG2, shapes=shapes)
    end_one(state, "u1", "s2")
    result = offered(state.handle_allocate(1.0))
    # the coarse framework (share 0) takes s1's free memory whole; u1 is next, and u2, within
    # one task of it, claims s2; then the coarse framework takes the rest of s2 whole
    assert result == {"coarse": {"s1": 0, "s2": 0}, "u2": {"s2": 1}}
    assert state.sorter.entry("coarse") is not None


def test_the_choice_is_deterministic() -> None:
    outcomes = []
    for _ in range(3):
        state = build(FIG2)
        end_one(state, "u1", "s2")
        end_one(state, "u2", "s1")
        outcomes.append(offered(state.handle_allocate(1.0)))
    assert outcomes[0] == outcomes[1] == outcomes[2] == {"u1": {"s1": 5}, "u2": {"s2": 5}}
