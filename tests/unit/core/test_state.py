"""``MasterState`` as a state machine: offers, filters, tasks, agents, frameworks, bad requests.

Every state is built with ``CoreConfig(validate=True)``, so the invariants (free + offered + used
== total, allocated == offered + used, references, sorter contents) are checked after every call.
Bad requests must raise the precise ``CoreError`` subclass and change nothing observable.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from framework_sdk import ResourceVector
from master.core import (
    AlreadyExists,
    CoreConfig,
    CoreError,
    FailedPrecondition,
    InvalidArgument,
    KillTask,
    LaunchTasks,
    MasterState,
    NotFound,
    PermissionDenied,
    RescindOffer,
    SendOffers,
    TaskLaunch,
    TaskState,
    TaskStatusChange,
)

R = ResourceVector.parse
AGENT = "cpus:4;mem:8"


def make_state(**config: Any) -> MasterState:
    return MasterState(CoreConfig(validate=True, **config))


def offers_of(messages: list[Any], framework_id: str) -> list[Any]:
    return [
        o
        for m in messages
        if isinstance(m, SendOffers) and m.framework_id == framework_id
        for o in m.offers
    ]


def coarse_state(
    agents: int = 1, frameworks: tuple[str, ...] = ("F",), **config: Any
) -> MasterState:
    state = make_state(**config)
    for index in range(1, agents + 1):
        state.handle_add_agent(f"a{index}", R(AGENT), 0.0)
    for framework_id in frameworks:
        state.handle_add_framework(framework_id, 0.0)
    return state


def launch(task_id: str, resources: str = "cpus:1;mem:1", **kw: Any) -> TaskLaunch:
    return TaskLaunch(task_id, task_id, R(resources), **kw)


def snapshot(state: MasterState) -> dict[str, Any]:
    """Everything a bad request must leave untouched."""
    return {
        "agents": {
            a.id: (str(a.total), str(a.free), sorted(a.offer_ids), sorted(a.task_keys), a.hostname)
            for a in state.agent_list
        },
        "agent_index": sorted(state.agents),
        "frameworks": {
            f.id: (
                str(f.allocated),
                f.offered_tasks,
                f.live_tasks,
                dict(f.filters),
                f.suppressed,
                f.active,
                f.weight,
                None if f.demand is None else str(f.demand),
                f.wanted,
                sorted(f.offer_ids),
                sorted(f.task_ids),
                f.times_chosen,
            )
            for f in state.frameworks.values()
        },
        "offers": {
            offer_id: (o.framework_id, o.agent_id, str(o.resources), o.fair_tasks, o.created_at)
            for offer_id, o in state.offers.items()
        },
        "tasks": {
            k: (t.state, t.agent_id, str(t.resources), t.updated_at) for k, t in state.tasks.items()
        },
        "order": state.ordered_frameworks(),
        "total": str(state.total),
        "role_weights": dict(state.role_weights),
        "shares": {fid: state.share(fid) for fid in state.frameworks},
    }


# -- agents and frameworks -------------------------------------------------------------------------


def test_add_agent_grows_the_pool_and_remove_shrinks_it() -> None:
    state = make_state()
    assert (
        state.handle_add_agent(
            "a1", R("cpus:4;mem:8"), 0.0, hostname="h1", attributes={"rack": "r1"}
        )
        == []
    )
    state.handle_add_agent("a2", R("cpus:2;mem:2;gpus:1"), 0.0)
    assert state.total == R("cpus:6;mem:10;gpus:1")
    assert state.agents["a1"].hostname == "h1"
    assert state.agents["a2"].hostname == "a2"
    assert state.agents["a1"].free == R("cpus:4;mem:8")
    state.handle_remove_agent("a2", 1.0)
    assert state.total == R("cpus:4;mem:8")
    assert list(state.agents) == ["a1"]


def test_offers_carry_agent_hostname_and_attributes() -> None:
    state = make_state()
    state.handle_add_agent(
        "a1", R(AGENT), 0.0, hostname="host-1", attributes={"zone": "z", "rack": "r1"}
    )
    state.handle_add_framework("F", 0.0)
    (offer,) = offers_of(state.handle_allocate(0.0), "F")
    assert offer.hostname == "host-1"
    assert offer.attributes == (("rack", "r1"), ("zone", "z"))
    assert offer.resources == R(AGENT)
    assert offer.fair_tasks == 0


def test_add_framework_records_name_role_and_weight() -> None:
    state = make_state(hierarchy="flat")
    state.handle_add_framework("F", 0.0, name="spark", role="analytics", weight=2.5)
    state.handle_add_framework("G", 0.0)
    fw = state.frameworks["F"]
    assert (fw.name, fw.role, fw.weight, fw.active, fw.suppressed) == (
        "spark",
        "analytics",
        2.5,
        True,
        False,
    )
    g = state.frameworks["G"]
    assert (g.name, g.role, g.weight) == ("G", "*", 1.0)
    assert state.ordered_frameworks() == ["F", "G"]


# -- decline, filters, revive, suppress ------------------------------------------------------------


def test_decline_with_refuse_seconds_filters_the_agent_until_then() -> None:
    state = coarse_state()
    (offer,) = offers_of(state.handle_allocate(0.0), "F")
    assert state.handle_decline("F", [offer.offer_id], 1.0, refuse_seconds=10) == []
    assert state.frameworks["F"].filters == {"a1": 11.0}
    assert state.frameworks["F"].allocated == ResourceVector()
    assert state.agents["a1"].free == R(AGENT)
    assert state.offers == {}
    assert state.handle_allocate(2.0) == []
    assert state.handle_allocate(10.999) == []
    (again,) = offers_of(state.handle_allocate(11.0), "F")
    assert again.agent_id == "a1"
    assert again.offer_id != offer.offer_id


def test_declined_agent_goes_to_other_frameworks_meanwhile() -> None:
    state = coarse_state(frameworks=("F", "G"))
    (offer,) = offers_of(state.handle_allocate(0.0), "F")
    state.handle_decline("F", [offer.offer_id], 1.0, refuse_seconds=10)
    messages = state.handle_allocate(2.0)
    assert offers_of(messages, "F") == []
    assert [o.agent_id for o in offers_of(messages, "G")] == ["a1"]


def test_decline_with_zero_refuse_seconds_is_reoffered_next_run() -> None:
    state = coarse_state()
    (offer,) = offers_of(state.handle_allocate(0.0), "F")
    state.handle_decline("F", [offer.offer_id], 1.0, refuse_seconds=0)
    assert state.frameworks["F"].filters == {}
    (again,) = offers_of(state.handle_allocate(1.0), "F")
    assert again.resources == R(AGENT)


def test_decline_default_refuse_seconds_is_five() -> None:
    state = coarse_state()
    (offer,) = offers_of(state.handle_allocate(0.0), "F")
    state.handle_decline("F", [offer.offer_id], 1.0)
    assert state.frameworks["F"].filters == {"a1": 6.0}
    assert state.handle_allocate(5.9) == []
    assert len(offers_of(state.handle_allocate(6.0), "F")) == 1


def test_decline_default_refuse_seconds_comes_from_config() -> None:
    state = coarse_state(default_refuse_seconds=2.0)
    (offer,) = offers_of(state.handle_allocate(0.0), "F")
    state.handle_decline("F", [offer.offer_id], 1.0)
    assert state.frameworks["F"].filters == {"a1": 3.0}


def test_tick_forgets_expired_filters() -> None:
    state = coarse_state()
    (offer,) = offers_of(state.handle_allocate(0.0), "F")
    state.handle_decline("F", [offer.offer_id], 1.0, refuse_seconds=10)
    assert state.handle_tick(10.0) == []
    assert state.frameworks["F"].filters == {"a1": 11.0}
    assert state.handle_tick(11.0) == []
    assert state.frameworks["F"].filters == {}


def test_revive_clears_filters() -> None:
    state = coarse_state()
    (offer,) = offers_of(state.handle_allocate(0.0), "F")
    state.handle_decline("F", [offer.offer_id], 1.0, refuse_seconds=1000)
    assert state.handle_allocate(2.0) == []
    assert state.handle_revive("F", 3.0) == []
    assert state.frameworks["F"].filters == {}
    assert len(offers_of(state.handle_allocate(3.0), "F")) == 1


def test_suppress_stops_offers_until_revive() -> None:
    state = coarse_state(agents=2)
    state.handle_suppress("F", 0.0)
    assert state.frameworks["F"].suppressed
    assert state.ordered_frameworks() == []
    assert state.handle_allocate(1.0) == []
    assert state.handle_allocate(100.0) == []
    state.handle_revive("F", 101.0)
    assert not state.frameworks["F"].suppressed
    assert state.ordered_frameworks() == ["F"]
    assert sorted(o.agent_id for o in offers_of(state.handle_allocate(101.0), "F")) == ["a1", "a2"]


def test_suppressed_framework_keeps_its_outstanding_offers() -> None:
    state = coarse_state()
    (offer,) = offers_of(state.handle_allocate(0.0), "F")
    assert state.handle_suppress("F", 1.0) == []
    assert offer.offer_id in state.offers
    state.handle_decline("F", [offer.offer_id], 2.0, refuse_seconds=0)
    assert state.handle_allocate(3.0) == []


def test_deactivate_rescinds_offers_and_stops_offering() -> None:
    state = coarse_state(agents=2, frameworks=("F", "G"))
    first = state.handle_allocate(0.0)
    f_offers = sorted(o.offer_id for o in offers_of(first, "F"))
    assert f_offers
    messages = state.handle_deactivate_framework("F", 1.0)
    assert sorted(m.offer_id for m in messages) == f_offers
    assert all(isinstance(m, RescindOffer) and m.framework_id == "F" for m in messages)
    assert state.frameworks["F"].allocated == ResourceVector()
    assert state.frameworks["F"].offer_ids == set()
    assert not state.frameworks["F"].active
    assert state.ordered_frameworks() == ["G"]
    second = state.handle_allocate(2.0)
    assert offers_of(second, "F") == []
    assert offers_of(second, "G")  # what F held goes to G
    state.handle_activate_framework("F", 3.0)
    assert "F" in state.ordered_frameworks()


def test_activate_of_a_suppressed_framework_does_not_offer() -> None:
    state = coarse_state()
    state.handle_deactivate_framework("F", 0.0)
    state.handle_suppress("F", 0.0)
    state.handle_activate_framework("F", 1.0)
    assert state.handle_allocate(1.0) == []
    state.handle_revive("F", 2.0)
    assert len(offers_of(state.handle_allocate(2.0), "F")) == 1


# -- accept, tasks, kill, status -------------------------------------------------------------------


def test_accept_launches_staging_tasks_and_returns_leftovers_with_a_filter() -> None:
    state = coarse_state()
    (offer,) = offers_of(state.handle_allocate(0.0), "F")
    tasks = [launch("t1", "cpus:1;mem:2"), launch("t2", "cpus:0.5;mem:1", details=("opaque", 3.0))]
    messages = state.handle_accept("F", [offer.offer_id], tasks, 1.0)
    assert messages == [LaunchTasks("a1", "F", tuple(tasks))]
    for task_id, resources in (("t1", "cpus:1;mem:2"), ("t2", "cpus:0.5;mem:1")):
        task = state.tasks[("F", task_id)]
        assert task.state is TaskState.STAGING
        assert task.agent_id == "a1"
        assert task.resources == R(resources)
        assert task.updated_at == 1.0
    fw = state.frameworks["F"]
    assert fw.allocated == R("cpus:1.5;mem:3")
    assert fw.live_tasks == 2
    assert fw.task_ids == {"t1", "t2"}
    assert state.offers == {}
    assert state.agents["a1"].free == R("cpus:2.5;mem:5")
    assert state.agents["a1"].task_keys == {("F", "t1"), ("F", "t2")}
    assert fw.filters == {"a1": 6.0}  # leftovers declined with the default 5 s
    assert state.handle_allocate(5.0) == []
    (again,) = offers_of(state.handle_allocate(6.0), "F")
    assert again.resources == R("cpus:2.5;mem:5")


def test_accept_of_everything_sets_no_filter() -> None:
    state = coarse_state()
    (offer,) = offers_of(state.handle_allocate(0.0), "F")
    state.handle_accept("F", [offer.offer_id], [launch("t1", AGENT)], 1.0)
    assert state.frameworks["F"].filters == {}
    assert not state.agents["a1"].free


def test_accept_with_refuse_seconds_and_with_no_tasks() -> None:
    state = coarse_state()
    (offer,) = offers_of(state.handle_allocate(0.0), "F")
    assert state.handle_accept("F", [offer.offer_id], [], 1.0, refuse_seconds=30) == []
    assert state.frameworks["F"].filters == {"a1": 31.0}
    assert state.agents["a1"].free == R(AGENT)
    assert state.tasks == {}


def test_accept_merges_several_offers_of_one_agent() -> None:
    state = coarse_state()
    (first,) = offers_of(state.handle_allocate(0.0), "F")
    state.handle_accept(
        "F", [first.offer_id], [launch("t1", "cpus:1;mem:1")], 1.0, refuse_seconds=0
    )
    (second,) = offers_of(state.handle_allocate(2.0), "F")
    state.handle_kill("F", "t1", 3.0)
    state.handle_task_status("a1", "F", "t1", TaskState.FINISHED, 3.0)
    (third,) = offers_of(state.handle_allocate(4.0), "F")
    assert second.resources + third.resources == R(AGENT)
    messages = state.handle_accept(
        "F", [second.offer_id, third.offer_id], [launch("big", AGENT)], 5.0
    )
    assert messages == [LaunchTasks("a1", "F", (launch("big", AGENT),))]
    assert state.offers == {}


def test_task_status_moves_a_task_and_terminal_states_free_resources() -> None:
    state = coarse_state()
    (offer,) = offers_of(state.handle_allocate(0.0), "F")
    state.handle_accept("F", [offer.offer_id], [launch("t1", "cpus:1;mem:1")], 1.0)
    assert state.handle_task_status("a1", "F", "t1", TaskState.STARTING, 2.0) == []
    assert state.tasks[("F", "t1")].state is TaskState.STARTING
    state.handle_task_status("a1", "F", "t1", TaskState.RUNNING, 3.0)
    assert state.tasks[("F", "t1")].state is TaskState.RUNNING
    assert state.tasks[("F", "t1")].updated_at == 3.0
    state.handle_task_status("a1", "F", "t1", TaskState.FINISHED, 4.0)
    assert ("F", "t1") not in state.tasks
    assert state.frameworks["F"].allocated == ResourceVector()
    assert state.frameworks["F"].live_tasks == 0
    assert state.agents["a1"].free == R(AGENT)
    assert state.agents["a1"].task_keys == set()


def test_kill_sends_kill_task_and_frees_resources_only_on_the_terminal_update() -> None:
    state = coarse_state()
    (offer,) = offers_of(state.handle_allocate(0.0), "F")
    state.handle_accept("F", [offer.offer_id], [launch("t1", "cpus:1;mem:1")], 1.0)
    state.handle_task_status("a1", "F", "t1", TaskState.RUNNING, 2.0)
    free_before = state.agents["a1"].free
    assert state.handle_kill("F", "t1", 3.0) == [KillTask("a1", "F", "t1")]
    assert state.tasks[("F", "t1")].state is TaskState.KILLING
    assert state.agents["a1"].free == free_before
    assert state.frameworks["F"].allocated == R("cpus:1;mem:1")
    # a late RUNNING update does not undo the kill; a retried kill is sent again
    state.handle_task_status("a1", "F", "t1", TaskState.RUNNING, 4.0)
    assert state.tasks[("F", "t1")].state is TaskState.KILLING
    assert state.handle_kill("F", "t1", 5.0) == [KillTask("a1", "F", "t1")]
    state.handle_task_status("a1", "F", "t1", TaskState.KILLED, 6.0)
    assert ("F", "t1") not in state.tasks
    assert state.agents["a1"].free == free_before + R("cpus:1;mem:1")
    assert state.frameworks["F"].allocated == ResourceVector()


@pytest.mark.parametrize(
    "terminal", [TaskState.FINISHED, TaskState.FAILED, TaskState.KILLED, TaskState.LOST]
)
def test_every_terminal_state_returns_the_resources(terminal: TaskState) -> None:
    state = coarse_state()
    (offer,) = offers_of(state.handle_allocate(0.0), "F")
    state.handle_accept("F", [offer.offer_id], [launch("t1", AGENT)], 1.0)
    state.handle_task_status("a1", "F", "t1", terminal, 2.0)
    assert state.agents["a1"].free == R(AGENT)
    assert state.frameworks["F"].live_tasks == 0
    # the task id may be reused once the task is over
    (again,) = offers_of(state.handle_allocate(3.0), "F")
    state.handle_accept("F", [again.offer_id], [launch("t1", AGENT)], 3.0)
    assert state.tasks[("F", "t1")].state is TaskState.STAGING


def test_task_end_reorders_the_sorter() -> None:
    state = coarse_state(frameworks=("F", "G"))
    state.handle_add_agent("a2", R(AGENT), 0.0)
    messages = state.handle_allocate(0.0)
    (f_offer,) = offers_of(messages, "F")
    (g_offer,) = offers_of(messages, "G")
    state.handle_accept("F", [f_offer.offer_id], [launch("f1", "cpus:1;mem:1")], 1.0)
    state.handle_accept("G", [g_offer.offer_id], [launch("g1", "cpus:2;mem:2")], 1.0)
    assert state.ordered_frameworks() == ["F", "G"]
    state.handle_task_status(g_offer.agent_id, "G", "g1", TaskState.FINISHED, 2.0)
    assert state.ordered_frameworks() == ["G", "F"]


# -- removal and time ------------------------------------------------------------------------------


def test_remove_agent_rescinds_its_offers_and_loses_its_tasks() -> None:
    state = coarse_state(agents=2, frameworks=("F", "G"))
    messages = state.handle_allocate(0.0)
    (f_offer,) = offers_of(messages, "F")
    (g_offer,) = offers_of(messages, "G")
    assert (f_offer.agent_id, g_offer.agent_id) == ("a1", "a2")
    state.handle_accept("F", [f_offer.offer_id], [launch("t1"), launch("t2")], 1.0)
    # F gets the rest of a1 again later; G's offer on a2 stays outstanding
    (f_rest,) = offers_of(state.handle_allocate(6.0), "F")
    assert f_rest.agent_id == "a1"
    out = state.handle_remove_agent("a1", 7.0)
    assert out == [
        RescindOffer("F", f_rest.offer_id, "agent removed"),
        TaskStatusChange("F", "t1", "a1", TaskState.LOST, "agent removed", "agent removed"),
        TaskStatusChange("F", "t2", "a1", TaskState.LOST, "agent removed", "agent removed"),
    ]
    assert "a1" not in state.agents
    assert state.total == R(AGENT)
    assert state.frameworks["F"].allocated == ResourceVector()
    assert state.frameworks["F"].live_tasks == 0
    assert state.tasks == {}
    assert g_offer.offer_id in state.offers
    assert state.dominant_share("G") == 1.0


def test_remove_agent_with_a_custom_state_and_drops_filters() -> None:
    state = coarse_state(agents=2)
    messages = state.handle_allocate(0.0)
    a1_offer = next(o for o in offers_of(messages, "F") if o.agent_id == "a1")
    state.handle_accept("F", [a1_offer.offer_id], [launch("t1")], 1.0)
    assert "a1" in state.frameworks["F"].filters
    out = state.handle_remove_agent("a1", 2.0, state=TaskState.GONE, reason="drained")
    assert out == [TaskStatusChange("F", "t1", "a1", TaskState.GONE, "drained", "drained")]
    assert state.frameworks["F"].filters == {}


def test_readded_agent_starts_empty() -> None:
    state = coarse_state()
    (offer,) = offers_of(state.handle_allocate(0.0), "F")
    state.handle_accept("F", [offer.offer_id], [launch("t1")], 1.0)
    state.handle_remove_agent("a1", 2.0)
    state.handle_add_agent("a1", R("cpus:2;mem:2"), 3.0)
    assert state.agents["a1"].free == R("cpus:2;mem:2")
    assert state.agents["a1"].task_keys == set()
    assert state.frameworks["F"].filters == {}
    assert [o.resources for o in offers_of(state.handle_allocate(3.0), "F")] == [R("cpus:2;mem:2")]


def test_remove_framework_kills_its_tasks_and_returns_everything() -> None:
    state = coarse_state(agents=2)
    messages = state.handle_allocate(0.0)
    a1_offer = next(o for o in offers_of(messages, "F") if o.agent_id == "a1")
    state.handle_accept("F", [a1_offer.offer_id], [launch("t1"), launch("t2")], 1.0)
    out = state.handle_remove_framework("F", 2.0)
    assert out == [KillTask("a1", "F", "t1"), KillTask("a1", "F", "t2")]
    assert "F" not in state.frameworks
    assert state.offers == {}
    assert state.tasks == {}
    for agent in state.agent_list:
        assert agent.free == agent.total
        assert agent.offer_ids == set()
    assert state.ordered_frameworks() == []
    state.handle_add_framework("F", 3.0)  # the id is free again
    assert len(offers_of(state.handle_allocate(3.0), "F")) == 2


def test_offer_timeout_rescinds_old_offers_on_tick() -> None:
    state = coarse_state(agents=2, offer_timeout=30.0)
    (first, second) = offers_of(state.handle_allocate(0.0), "F")
    state.handle_decline("F", [second.offer_id], 10.0, refuse_seconds=0)
    (third,) = offers_of(state.handle_allocate(10.0), "F")
    assert state.handle_tick(29.9) == []
    assert state.handle_tick(30.0) == [RescindOffer("F", first.offer_id, "offer timed out")]
    assert set(state.offers) == {third.offer_id}
    assert state.frameworks["F"].filters == {}  # a timeout is no decline
    assert state.handle_tick(40.0) == [RescindOffer("F", third.offer_id, "offer timed out")]
    assert state.offers == {}
    assert state.frameworks["F"].allocated == ResourceVector()


def test_without_offer_timeout_offers_never_expire() -> None:
    state = coarse_state()
    (offer,) = offers_of(state.handle_allocate(0.0), "F")
    assert state.handle_tick(1e9) == []
    assert offer.offer_id in state.offers


# -- weights ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("hierarchy", ["flat", "hdrf", "naive"])
def test_set_role_weight_reorders_frameworks(hierarchy: str) -> None:
    """Flat: the role's weight is copied onto its frameworks; the tree: it weighs the role."""
    state = make_state(hierarchy=hierarchy)
    state.handle_add_agent("a1", R(AGENT), 0.0)
    state.handle_add_agent("a2", R(AGENT), 0.0)
    state.handle_add_framework("F", 0.0, role="r1")
    state.handle_add_framework("G", 0.0, role="r2")
    state.handle_allocate(0.0)
    assert state.dominant_share("F") == state.dominant_share("G") == 0.5
    assert state.ordered_frameworks() == ["F", "G"]  # tie: times chosen, then id
    assert state.handle_set_weight("r2", 2.0, 1.0) == []
    flat = hierarchy == "flat"
    assert state.frameworks["G"].weight == (2.0 if flat else 1.0)
    assert state.share("G") == (0.25 if flat else 0.5)
    assert state.role_shares()["r2"].weighted_share == 0.25
    assert state.ordered_frameworks() == ["G", "F"]
    state.handle_set_weight("r1", 4.0, 2.0)
    assert state.ordered_frameworks() == ["F", "G"]
    # a framework joining the role later gets the role's weight (flat) or keeps its own
    state.handle_add_framework("H", 3.0, role="r1", weight=1.0)
    assert state.frameworks["H"].weight == (4.0 if flat else 1.0)


# -- bad requests: precise error, no state change --------------------------------------------------


@pytest.fixture
def busy() -> dict[str, Any]:
    """Three agents; F coarse with offers on a2 and a3 and task f1; G with demand, task g1 and
    offers; H inactive; K suppressed; filters on both F and G."""
    state = make_state()
    state.handle_add_agent("a1", R(AGENT), 0.0)
    state.handle_add_agent("a2", R(AGENT), 0.0)
    for framework_id in "FGHK":
        state.handle_add_framework(framework_id, 0.0)
    state.handle_update_demand("G", R("cpus:1;mem:1"), 3, 0.0)
    state.handle_deactivate_framework("H", 0.0)
    state.handle_suppress("K", 0.0)
    first = state.handle_allocate(0.0)
    f_a1 = next(o for o in offers_of(first, "F") if o.agent_id == "a1")
    (g_offer,) = offers_of(first, "G")
    state.handle_accept("F", [f_a1.offer_id], [launch("f1")], 1.0)
    state.handle_accept("G", [g_offer.offer_id], [launch("g1")], 1.0)
    state.handle_add_agent("a3", R(AGENT), 2.0)
    state.handle_allocate(2.0)
    f_offers = {o.agent_id: oid for oid, o in state.offers.items() if o.framework_id == "F"}
    g_offers = [oid for oid, o in state.offers.items() if o.framework_id == "G"]
    # the shape the tests below rely on
    assert {"a2", "a3"} <= set(f_offers)
    assert g_offers
    assert state.frameworks["F"].filters and state.frameworks["G"].filters
    assert ("F", "f1") in state.tasks and ("G", "g1") in state.tasks
    return {
        "state": state,
        "f_a2": f_offers["a2"],
        "f_a3": f_offers["a3"],
        "f_a3_resources": state.offers[f_offers["a3"]].resources,
        "g_offer": g_offers[0],
        "used": g_offer.offer_id,
        "g1_agent": state.tasks[("G", "g1")].agent_id,
    }


def _over(b: dict[str, Any]) -> TaskLaunch:
    return TaskLaunch("big", "big", b["f_a3_resources"] + R("cpus:0.001"))


BAD_REQUESTS: list[tuple[str, type[CoreError], Callable[[MasterState, dict[str, Any]], object]]] = [
    (
        "accept unknown offer",
        NotFound,
        lambda s, b: s.handle_accept("F", ["nope"], [launch("x")], 3.0),
    ),
    (
        "accept foreign offer",
        PermissionDenied,
        lambda s, b: s.handle_accept("F", [b["g_offer"]], [launch("x")], 3.0),
    ),
    (
        "accept used offer",
        NotFound,
        lambda s, b: s.handle_accept("G", [b["used"]], [launch("x")], 3.0),
    ),
    (
        "accept duplicate offer ids",
        InvalidArgument,
        lambda s, b: s.handle_accept("F", [b["f_a3"], b["f_a3"]], [launch("x")], 3.0),
    ),
    (
        "accept no offer ids",
        InvalidArgument,
        lambda s, b: s.handle_accept("F", [], [launch("x")], 3.0),
    ),
    (
        "accept offers on two agents",
        InvalidArgument,
        lambda s, b: s.handle_accept("F", [b["f_a2"], b["f_a3"]], [launch("x")], 3.0),
    ),
    (
        "accept more than the offer holds",
        InvalidArgument,
        lambda s, b: s.handle_accept("F", [b["f_a3"]], [_over(b)], 3.0),
    ),
    (
        "accept a resource the offer lacks",
        InvalidArgument,
        lambda s, b: s.handle_accept("F", [b["f_a3"]], [launch("x", "cpus:1;gpus:1")], 3.0),
    ),
    (
        "accept two tasks over the offer",
        InvalidArgument,
        lambda s, b: s.handle_accept(
            "F", [b["f_a3"]], [TaskLaunch("x", "x", b["f_a3_resources"]), launch("y")], 3.0
        ),
    ),
    (
        "accept naming another agent",
        InvalidArgument,
        lambda s, b: s.handle_accept("F", [b["f_a3"]], [launch("x", agent_id="a1")], 3.0),
    ),
    (
        "accept duplicate task ids",
        InvalidArgument,
        lambda s, b: s.handle_accept("F", [b["f_a3"]], [launch("x"), launch("x")], 3.0),
    ),
    (
        "accept live task id",
        AlreadyExists,
        lambda s, b: s.handle_accept("F", [b["f_a3"]], [launch("f1")], 3.0),
    ),
    (
        "accept empty task id",
        InvalidArgument,
        lambda s, b: s.handle_accept("F", [b["f_a3"]], [TaskLaunch("", "", R("cpus:1"))], 3.0),
    ),
    (
        "accept empty resources",
        InvalidArgument,
        lambda s, b: s.handle_accept(
            "F", [b["f_a3"]], [TaskLaunch("x", "x", ResourceVector())], 3.0
        ),
    ),
    (
        "accept negative refuse",
        InvalidArgument,
        lambda s, b: s.handle_accept("F", [b["f_a3"]], [launch("x")], 3.0, refuse_seconds=-1),
    ),
    (
        "accept NaN refuse",
        InvalidArgument,
        lambda s, b: s.handle_accept("F", [b["f_a3"]], [launch("x")], 3.0, refuse_seconds=math.nan),
    ),
    (
        "accept by inactive framework",
        FailedPrecondition,
        lambda s, b: s.handle_accept("H", [b["f_a3"]], [launch("x")], 3.0),
    ),
    (
        "accept by unknown framework",
        NotFound,
        lambda s, b: s.handle_accept("nope", [b["f_a3"]], [launch("x")], 3.0),
    ),
    (
        "decline unknown offer",
        NotFound,
        lambda s, b: s.handle_decline("F", [b["f_a3"], "nope"], 3.0),
    ),
    (
        "decline foreign offer",
        PermissionDenied,
        lambda s, b: s.handle_decline("F", [b["f_a3"], b["g_offer"]], 3.0),
    ),
    (
        "decline duplicate offer ids",
        InvalidArgument,
        lambda s, b: s.handle_decline("F", [b["f_a3"], b["f_a3"]], 3.0),
    ),
    (
        "decline negative refuse",
        InvalidArgument,
        lambda s, b: s.handle_decline("F", [b["f_a3"]], 3.0, refuse_seconds=-0.5),
    ),
    (
        "decline NaN refuse",
        InvalidArgument,
        lambda s, b: s.handle_decline("F", [b["f_a3"]], 3.0, refuse_seconds=math.nan),
    ),
    (
        "decline bool refuse",
        InvalidArgument,
        lambda s, b: s.handle_decline("F", [b["f_a3"]], 3.0, refuse_seconds=True),
    ),
    (
        "decline text refuse",
        InvalidArgument,
        lambda s, b: s.handle_decline("F", [b["f_a3"]], 3.0, refuse_seconds="5"),
    ),
    (
        "decline by unknown framework",
        NotFound,
        lambda s, b: s.handle_decline("nope", [b["f_a3"]], 3.0),
    ),
    ("weight zero", InvalidArgument, lambda s, b: s.handle_set_weight("*", 0, 3.0)),
    ("weight negative", InvalidArgument, lambda s, b: s.handle_set_weight("*", -1.0, 3.0)),
    ("weight NaN", InvalidArgument, lambda s, b: s.handle_set_weight("*", math.nan, 3.0)),
    ("weight inf", InvalidArgument, lambda s, b: s.handle_set_weight("*", math.inf, 3.0)),
    ("weight bool", InvalidArgument, lambda s, b: s.handle_set_weight("*", True, 3.0)),
    ("weight text", InvalidArgument, lambda s, b: s.handle_set_weight("*", "2", 3.0)),
    ("weight empty role", InvalidArgument, lambda s, b: s.handle_set_weight("", 2.0, 3.0)),
    (
        "add framework weight zero",
        InvalidArgument,
        lambda s, b: s.handle_add_framework("N", 3.0, weight=0),
    ),
    (
        "add framework weight negative",
        InvalidArgument,
        lambda s, b: s.handle_add_framework("N", 3.0, weight=-2.0),
    ),
    (
        "add framework weight NaN",
        InvalidArgument,
        lambda s, b: s.handle_add_framework("N", 3.0, weight=math.nan),
    ),
    (
        "add framework weight inf",
        InvalidArgument,
        lambda s, b: s.handle_add_framework("N", 3.0, weight=math.inf),
    ),
    (
        "add framework weight bool",
        InvalidArgument,
        lambda s, b: s.handle_add_framework("N", 3.0, weight=True),
    ),
    ("add framework duplicate", AlreadyExists, lambda s, b: s.handle_add_framework("F", 3.0)),
    ("add framework empty id", InvalidArgument, lambda s, b: s.handle_add_framework("", 3.0)),
    ("add agent duplicate", AlreadyExists, lambda s, b: s.handle_add_agent("a1", R(AGENT), 3.0)),
    ("add agent empty id", InvalidArgument, lambda s, b: s.handle_add_agent("", R(AGENT), 3.0)),
    (
        "add agent empty resources",
        InvalidArgument,
        lambda s, b: s.handle_add_agent("a9", ResourceVector(), 3.0),
    ),
    ("remove unknown agent", NotFound, lambda s, b: s.handle_remove_agent("nope", 3.0)),
    ("remove unknown framework", NotFound, lambda s, b: s.handle_remove_framework("nope", 3.0)),
    (
        "deactivate unknown framework",
        NotFound,
        lambda s, b: s.handle_deactivate_framework("nope", 3.0),
    ),
    ("activate unknown framework", NotFound, lambda s, b: s.handle_activate_framework("nope", 3.0)),
    ("suppress unknown framework", NotFound, lambda s, b: s.handle_suppress("nope", 3.0)),
    ("revive unknown framework", NotFound, lambda s, b: s.handle_revive("nope", 3.0)),
    (
        "demand unknown framework",
        NotFound,
        lambda s, b: s.handle_update_demand("nope", R("cpus:1"), 1, 3.0),
    ),
    (
        "demand empty shape",
        InvalidArgument,
        lambda s, b: s.handle_update_demand("G", ResourceVector(), 5, 3.0),
    ),
    (
        "demand negative wanted",
        InvalidArgument,
        lambda s, b: s.handle_update_demand("G", R("cpus:1"), -1, 3.0),
    ),
    (
        "demand fractional wanted",
        InvalidArgument,
        lambda s, b: s.handle_update_demand("G", R("cpus:1"), 1.5, 3.0),
    ),
    (
        "demand bool wanted",
        InvalidArgument,
        lambda s, b: s.handle_update_demand("G", R("cpus:1"), True, 3.0),
    ),
    ("kill unknown task", NotFound, lambda s, b: s.handle_kill("F", "nope", 3.0)),
    ("kill another framework's task", NotFound, lambda s, b: s.handle_kill("F", "g1", 3.0)),
    ("kill by unknown framework", NotFound, lambda s, b: s.handle_kill("nope", "f1", 3.0)),
    (
        "status unknown task",
        NotFound,
        lambda s, b: s.handle_task_status("a1", "F", "nope", TaskState.RUNNING, 3.0),
    ),
    (
        "status from the wrong agent",
        PermissionDenied,
        lambda s, b: s.handle_task_status(
            "a3" if b["g1_agent"] != "a3" else "a1", "G", "g1", TaskState.RUNNING, 3.0
        ),
    ),
    (
        "terminal status from the wrong agent",
        PermissionDenied,
        lambda s, b: s.handle_task_status(
            "a3" if b["g1_agent"] != "a3" else "a1", "G", "g1", TaskState.FINISHED, 3.0
        ),
    ),
]


@pytest.mark.parametrize(
    ("error", "request_"),
    [(e, r) for _, e, r in BAD_REQUESTS],
    ids=[name for name, _, _ in BAD_REQUESTS],
)
def test_bad_request_raises_precisely_and_changes_nothing(
    busy: dict[str, Any],
    error: type[CoreError],
    request_: Callable[[MasterState, dict[str, Any]], object],
) -> None:
    state: MasterState = busy["state"]
    before = snapshot(state)
    with pytest.raises(CoreError) as caught:
        request_(state, busy)
    assert type(caught.value) is error
    assert caught.value.code == error.code
    assert caught.value.message
    assert snapshot(state) == before
    state.validate()
    # and the state still works: an allocation run goes through and validates
    state.handle_allocate(4.0)
    state.validate()


def test_accept_of_an_expired_offer_is_not_found_and_changes_nothing() -> None:
    state = coarse_state(offer_timeout=10.0)
    (offer,) = offers_of(state.handle_allocate(0.0), "F")
    assert state.handle_tick(10.0) == [RescindOffer("F", offer.offer_id, "offer timed out")]
    before = snapshot(state)
    with pytest.raises(NotFound):
        state.handle_accept("F", [offer.offer_id], [launch("t1")], 11.0)
    with pytest.raises(NotFound):
        state.handle_decline("F", [offer.offer_id], 11.0)
    assert snapshot(state) == before


def test_accept_of_a_rescinded_offer_is_not_found() -> None:
    state = coarse_state()
    (offer,) = offers_of(state.handle_allocate(0.0), "F")
    state.handle_remove_agent("a1", 1.0)
    with pytest.raises(NotFound):
        state.handle_accept("F", [offer.offer_id], [launch("t1")], 2.0)


def test_accept_after_reactivation_needs_fresh_offers() -> None:
    state = coarse_state()
    (offer,) = offers_of(state.handle_allocate(0.0), "F")
    state.handle_deactivate_framework("F", 1.0)
    before = snapshot(state)
    with pytest.raises(FailedPrecondition):
        state.handle_accept("F", [offer.offer_id], [launch("t1")], 2.0)
    assert snapshot(state) == before
    state.handle_activate_framework("F", 3.0)
    with pytest.raises(NotFound):
        state.handle_accept("F", [offer.offer_id], [launch("t1")], 3.0)


def test_errors_carry_grpc_codes() -> None:
    assert InvalidArgument("x").code == "INVALID_ARGUMENT"
    assert NotFound("x").code == "NOT_FOUND"
    assert AlreadyExists("x").code == "ALREADY_EXISTS"
    assert FailedPrecondition("x").code == "FAILED_PRECONDITION"
    assert PermissionDenied("x").code == "PERMISSION_DENIED"
    assert str(NotFound("offer 'o-1' is gone")) == "offer 'o-1' is gone"
    assert issubclass(NotFound, CoreError)


def test_bad_config_is_rejected() -> None:
    with pytest.raises(ValueError, match="sample_size"):
        MasterState(CoreConfig(sample_size=0, validate=True))
    with pytest.raises(ValueError, match="fairness policy"):
        MasterState(CoreConfig(policy="fifo", validate=True))
    with pytest.raises(ValueError, match="placement policy"):
        MasterState(CoreConfig(placement="worst-fit", validate=True))
    with pytest.raises(ValueError, match="slots_per_agent"):
        MasterState(CoreConfig(policy="slots", slots_per_agent=0, validate=True))


def test_validate_catches_a_broken_invariant() -> None:
    state = coarse_state()
    state.handle_allocate(0.0)
    state.agents["a1"].free = R("cpus:1")  # corrupt on purpose: free + offered != total
    with pytest.raises(AssertionError, match="a1"):
        state.validate()
