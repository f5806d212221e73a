"""Agent maintenance in the core: ``handle_deactivate_agent`` and ``handle_reactivate_agent``.

A deactivated agent (Mesos DEACTIVATE_AGENT) has its offers rescinded and nothing of it is
offered, while its tasks keep running and its resources stay in the pool total; reactivating it
offers it again. Reactivating several agents before one allocation run lets that run see them all
together, which is the DRFH setting (Wang et al.: every user and every server present at once).

Every state is built with ``CoreConfig(validate=True)``: the invariants (including "the
allocator's agent list is exactly the active agents") are checked after every call.
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from typing import Any

import pytest

from framework_sdk import ResourceVector
from master.core import (
    CoreConfig,
    InvalidArgument,
    MasterState,
    NotFound,
    RescindOffer,
    SendOffers,
    TaskLaunch,
    TaskState,
    TaskStatusChange,
)

R = ResourceVector.parse
AGENT = "cpus:4;mem:8"


def make_state(agents: int = 2, frameworks: tuple[str, ...] = ("F",), **config: Any) -> MasterState:
    state = MasterState(CoreConfig(validate=True, **config))
    for index in range(1, agents + 1):
        state.handle_add_agent(f"a{index}", R(AGENT), 0.0)
    for framework_id in frameworks:
        state.handle_add_framework(framework_id, 0.0)
    return state


def offers_of(messages: list[Any], framework_id: str | None = None) -> list[Any]:
    return [
        o
        for m in messages
        if isinstance(m, SendOffers) and framework_id in (None, m.framework_id)
        for o in m.offers
    ]


def launch(task_id: str, resources: str = "cpus:1;mem:1") -> TaskLaunch:
    return TaskLaunch(task_id, task_id, R(resources))


def task_state(state: MasterState, task_id: str) -> TaskState:
    return state.tasks[("F", task_id)].state


def observable(state: MasterState) -> dict[str, Any]:
    """What a refused request must leave untouched."""
    return {
        "agents": {
            a.id: (a.active, str(a.free), sorted(a.offer_ids), sorted(a.task_keys))
            for a in state.agents.values()
        },
        "listed": [a.id for a in state.agent_list],
        "offers": sorted(state.offers),
        "allocated": {f.id: str(f.allocated) for f in state.frameworks.values()},
        "total": str(state.total),
    }


def test_deactivate_rescinds_the_agents_offers_and_keeps_the_pool_total() -> None:
    state = make_state(frameworks=("F", "G"))
    offers = offers_of(state.handle_allocate(0.0))
    on_a1 = next(o for o in offers if o.agent_id == "a1")
    on_a2 = next(o for o in offers if o.agent_id == "a2")
    out = state.handle_deactivate_agent("a1", 1.0)
    assert out == [RescindOffer(on_a1.framework_id, on_a1.offer_id, "agent deactivated")]
    assert on_a1.offer_id not in state.offers and on_a2.offer_id in state.offers
    assert state.agents["a1"].free == R(AGENT)
    assert not state.agents["a1"].active
    assert [a.id for a in state.agent_list] == ["a2"]
    assert state.total == R("cpus:8;mem:16")  # still in the pool: shares do not move
    assert state.frameworks[on_a1.framework_id].allocated == ResourceVector()


def test_a_deactivated_agent_gets_no_offers_until_reactivated() -> None:
    state = make_state(agents=1)
    state.handle_deactivate_agent("a1", 0.0)
    assert offers_of(state.handle_allocate(1.0)) == []
    assert offers_of(state.handle_allocate(2.0)) == []
    assert state.handle_reactivate_agent("a1", 3.0) == []
    assert state.agents["a1"].active
    (offer,) = offers_of(state.handle_allocate(3.0), "F")
    assert (offer.agent_id, offer.resources) == ("a1", R(AGENT))


def test_other_agents_are_still_offered_while_one_is_deactivated() -> None:
    state = make_state(agents=3)
    state.handle_deactivate_agent("a2", 0.0)
    offered = sorted(o.agent_id for o in offers_of(state.handle_allocate(0.0), "F"))
    assert offered == ["a1", "a3"]


def test_running_tasks_keep_running_and_their_end_frees_resources_on_the_agent() -> None:
    state = make_state(agents=1)
    (offer,) = offers_of(state.handle_allocate(0.0), "F")
    state.handle_accept("F", [offer.offer_id], [launch("t1"), launch("t2")], 1.0, 0.0)
    (rest,) = offers_of(state.handle_allocate(1.0), "F")
    out = state.handle_deactivate_agent("a1", 2.0)
    assert out == [RescindOffer("F", rest.offer_id, "agent deactivated")]
    assert task_state(state, "t1") is TaskState.STAGING
    assert state.frameworks["F"].allocated == R("cpus:2;mem:2")
    state.handle_task_status("a1", "F", "t1", TaskState.RUNNING, 3.0)
    state.handle_task_status("a1", "F", "t2", TaskState.FINISHED, 4.0)
    assert task_state(state, "t1") is TaskState.RUNNING
    assert state.agents["a1"].free == R("cpus:3;mem:7")
    assert offers_of(state.handle_allocate(5.0)) == []
    state.handle_kill("F", "t1", 6.0)
    state.handle_reactivate_agent("a1", 7.0)
    (again,) = offers_of(state.handle_allocate(7.0), "F")
    assert again.resources == R("cpus:3;mem:7")


def test_deactivate_and_reactivate_are_idempotent() -> None:
    state = make_state()
    state.handle_deactivate_agent("a1", 0.0)
    before = observable(state)
    assert state.handle_deactivate_agent("a1", 1.0) == []
    assert observable(state) == before
    state.handle_reactivate_agent("a1", 2.0)
    before = observable(state)
    assert state.handle_reactivate_agent("a1", 3.0) == []
    assert observable(state) == before
    assert sorted(a.id for a in state.agent_list) == ["a1", "a2"]


@pytest.mark.parametrize("handler", ["handle_deactivate_agent", "handle_reactivate_agent"])
@pytest.mark.parametrize(
    ("agent_id", "error"), [("nope", NotFound), ("", InvalidArgument)], ids=["unknown", "empty"]
)
def test_bad_agent_ids_are_refused_and_change_nothing(
    handler: str, agent_id: str, error: type[Exception]
) -> None:
    state = make_state(frameworks=("F", "G"))
    state.handle_allocate(0.0)
    state.handle_deactivate_agent("a2", 0.0)
    before = observable(state)
    with pytest.raises(error):
        getattr(state, handler)(agent_id, 1.0)
    assert observable(state) == before


def test_a_deactivated_agent_can_be_removed() -> None:
    state = make_state(agents=2)
    (offer,) = [o for o in offers_of(state.handle_allocate(0.0), "F") if o.agent_id == "a1"]
    state.handle_accept("F", [offer.offer_id], [launch("t1")], 1.0, 0.0)
    state.handle_deactivate_agent("a1", 2.0)
    out = state.handle_remove_agent("a1", 3.0)
    assert out == [
        TaskStatusChange("F", "t1", "a1", TaskState.LOST, "agent removed", "agent removed")
    ]
    assert "a1" not in state.agents
    assert [a.id for a in state.agent_list] == ["a2"]
    assert state.total == R(AGENT)
    assert state.frameworks["F"].live_tasks == 0
    assert state.frameworks["F"].allocated == R(AGENT)  # its offer on a2 only


def test_accepting_an_offer_rescinded_by_deactivation_is_not_found() -> None:
    state = make_state(agents=1)
    (offer,) = offers_of(state.handle_allocate(0.0), "F")
    state.handle_deactivate_agent("a1", 1.0)
    before = observable(state)
    with pytest.raises(NotFound):
        state.handle_accept("F", [offer.offer_id], [launch("t1")], 2.0)
    assert observable(state) == before


def test_sampled_placement_skips_deactivated_agents_on_a_large_cluster() -> None:
    state = make_state(agents=60, sample_size=8)
    state.handle_update_demand("F", R("cpus:1;mem:1"), 1000, 0.0)
    off = {f"a{i}" for i in range(1, 61) if i % 3 == 0}
    for agent_id in sorted(off):
        state.handle_deactivate_agent(agent_id, 0.0)
    offers = offers_of(state.handle_allocate(0.0), "F")
    assert {o.agent_id for o in offers}.isdisjoint(off)
    assert sum(o.fair_tasks for o in offers) == 40 * 4
    for agent_id in sorted(off)[:5]:
        state.handle_reactivate_agent(agent_id, 1.0)
    more = offers_of(state.handle_allocate(1.0), "F")
    assert {o.agent_id for o in more} == set(sorted(off)[:5])


def test_drfh_with_every_agent_and_framework_present_at_once() -> None:
    """DRFH (Wang et al. §III, Fig. 2): servers <2 CPUs, 12 GB> and <12 CPUs, 2 GB>, users
    <0.2 CPU, 1 GB> and <1 CPU, 0.2 GB> -> 10 tasks each, each user on its matching server,
    global dominant shares 5/7 each. Both agents are deactivated while the frameworks declare
    their demand, then reactivated together, so one allocation run sees everything."""
    state = MasterState(CoreConfig(validate=True))
    state.handle_add_agent("s1", R("cpus:2;mem:12288"), 0.0)
    state.handle_add_agent("s2", R("cpus:12;mem:2048"), 0.0)
    state.handle_deactivate_agent("s1", 0.0)
    state.handle_deactivate_agent("s2", 0.0)
    for framework_id, shape in (("u1", "cpus:0.2;mem:1024"), ("u2", "cpus:1;mem:204.8")):
        state.handle_add_framework(framework_id, 0.0)
        state.handle_update_demand(framework_id, R(shape), 20, 0.0)
        assert offers_of(state.handle_allocate(0.0)) == []
    state.handle_reactivate_agent("s1", 1.0)
    state.handle_reactivate_agent("s2", 1.0)
    messages = state.handle_allocate(1.0)
    placed = {
        framework_id: Counter({o.agent_id: o.fair_tasks for o in offers_of(messages, framework_id)})
        for framework_id in ("u1", "u2")
    }
    assert placed == {"u1": Counter({"s1": 10}), "u2": Counter({"s2": 10})}
    for framework_id in ("u1", "u2"):
        share = Fraction(state.dominant_share(framework_id)).limit_denominator(100)
        assert share == Fraction(5, 7)
    assert offers_of(state.handle_allocate(2.0)) == []  # settled
