"""Reservations in the pure core (``master.core.reservations``): static and dynamic, offered
only to their role's subtree, given back where they came from, counted whole in quota
consumption and in H-DRF shares (the MESOS-8299 choice), refused with precise errors."""

from __future__ import annotations

from collections import Counter

import pytest
from fairshare.resources import ResourceVector
from fairshare.task_states import TaskState

from master.core import (
    CoreConfig,
    FailedPrecondition,
    InvalidArgument,
    MasterState,
    NotFound,
    RescindOffer,
    SendOffers,
    TaskLaunch,
)
from master.core.messages import RunningTask

R = ResourceVector.parse
E = ResourceVector()


def offers_of(messages: list[object]) -> dict[str, list[object]]:
    got: dict[str, list[object]] = {}
    for message in messages:
        if isinstance(message, SendOffers):
            got.setdefault(message.framework_id, []).extend(message.offers)
    return got


def held_by_role(state: MasterState) -> Counter[str]:
    got: Counter[str] = Counter()
    for fw in state.frameworks.values():
        got[fw.role] += round(fw.allocated.get("cpus"))
    return got


def two_teams(reserve: dict[str, ResourceVector] | None = None, agent: str = "cpus:8;mem:8192",
              roles: tuple[str, ...] = ("eng", "sci")) -> MasterState:  # fmt: skip
    state = MasterState(CoreConfig(validate=True))
    state.handle_add_agent("s1", R(agent), 0.0, reserved=reserve)
    for index, role in enumerate(roles):
        state.handle_add_framework(f"f{index}", 0.0, role=role)
    return state


def test_a_static_reservation_is_offered_to_its_role_only() -> None:
    state = two_teams({"eng": R("cpus:4;mem:4096")})
    state.handle_update_demand("f1", R("cpus:1;mem:512"), 100, 0.0)  # sci wants everything
    offers = offers_of(state.handle_allocate(1.0))
    assert "f0" in offers  # eng (coarse) gets its reservation though sci is more deprived
    (eng_offer, *_) = offers["f0"]  # the reserved offer first, then unreserved ones
    assert eng_offer.reserved == (("eng", R("cpus:4;mem:4096")),)
    sci = sum((o.resources for o in offers["f1"]), E)
    assert sci.get("cpus") <= 4  # sci never sees eng's reserved cpus
    assert all(not o.reserved for o in offers["f1"])


def test_sub_roles_use_a_parents_reservation_but_siblings_do_not() -> None:
    state = two_teams({"eng": R("cpus:4")}, roles=("eng/ml", "engineering", "sci"))
    for fw in ("f0", "f1", "f2"):
        state.handle_update_demand(fw, R("cpus:1"), 100, 0.0)
    state.handle_allocate(1.0)
    reserved_users = {offer.framework_id for offer in state.offers.values() if offer.reserved}
    assert reserved_users == {"f0"}  # eng/ml, not "engineering" (a prefix, not a sub-role)
    assert state.frameworks["f0"].allocated.get("cpus") >= 4


def test_resources_return_to_the_reservation_they_came_from() -> None:
    state = two_teams({"eng": R("cpus:4;mem:4096")}, roles=("eng",))
    state.handle_update_demand("f0", R("cpus:1;mem:1024"), 2, 0.0)
    offers = offers_of(state.handle_allocate(1.0))
    (offer,) = offers["f0"]
    launches = [TaskLaunch(f"t{i}", f"t{i}", R("cpus:1;mem:1024")) for i in range(2)]
    state.handle_accept("f0", [offer.offer_id], launches, 2.0)
    agent = state.agents["s1"]
    assert agent.reserved_free["eng"] == R("cpus:2;mem:2048")
    assert agent.free == R("cpus:4;mem:4096")
    assert all(task.reserved == (("eng", R("cpus:1;mem:1024")),) for task in state.tasks.values())
    state.handle_task_status("s1", "f0", "t0", TaskState.FINISHED, 3.0)
    assert agent.reserved_free["eng"] == R("cpus:3;mem:3072")
    assert agent.free == R("cpus:4;mem:4096")


def test_a_declined_reserved_offer_goes_back_to_the_reservation() -> None:
    state = two_teams({"eng": R("cpus:2")})
    offers = offers_of(state.handle_allocate(1.0))
    reserved = [o for o in offers["f0"] if o.reserved]
    state.handle_decline("f0", [o.offer_id for o in reserved], 2.0, refuse_seconds=0)
    assert state.agents["s1"].reserved_free["eng"] == R("cpus:2")


def test_a_task_larger_than_the_reservation_takes_the_rest_unreserved() -> None:
    state = two_teams({"eng": R("cpus:1")}, roles=("eng",))
    offers = offers_of(state.handle_allocate(1.0))["f0"]
    launch = TaskLaunch("big", "big", R("cpus:3"))
    state.handle_accept("f0", [o.offer_id for o in offers], [launch], 2.0)
    task = state.tasks[("f0", "big")]
    assert task.reserved == (("eng", R("cpus:1")),)
    state.handle_task_status("s1", "f0", "big", TaskState.FINISHED, 3.0)
    agent = state.agents["s1"]
    assert agent.reserved_free["eng"] == R("cpus:1") and agent.free.get("cpus") == 7


def test_dynamic_reserve_and_unreserve() -> None:
    state = two_teams()
    messages = state.handle_allocate(1.0)  # both coarse: the whole agent is offered out
    assert offers_of(messages)
    rescinded = state.handle_reserve("s1", "eng", R("cpus:2"), 2.0)
    assert rescinded and all(isinstance(m, RescindOffer) for m in rescinded)
    agent = state.agents["s1"]
    assert agent.reserved == {"eng": R("cpus:2")} and agent.free == R("cpus:6;mem:8192")
    assert state.subtree_holds("eng") == R("cpus:2")  # idle, counted whole
    state.handle_unreserve("s1", "eng", R("cpus:2"), 3.0)
    assert agent.reserved == {} and "s1" not in state.reserved_agents
    assert agent.free == R("cpus:8;mem:8192")


@pytest.mark.parametrize(
    ("call", "error", "says"),
    [
        (lambda s: s.handle_reserve("s1", "*", R("cpus:1"), 1.0), InvalidArgument, "unreserved"),
        (lambda s: s.handle_reserve("s1", "eng//x", R("cpus:1"), 1.0), InvalidArgument, "role"),
        (lambda s: s.handle_reserve("s1", "eng", E, 1.0), InvalidArgument, "empty"),
        (lambda s: s.handle_reserve("nope", "eng", R("cpus:1"), 1.0), NotFound, "nope"),
        (lambda s: s.handle_reserve("s1", "eng", R("cpus:9"), 1.0), FailedPrecondition, "cpus:9"),
        (lambda s: s.handle_reserve("s1", "eng", R("gpus:1"), 1.0), FailedPrecondition, "gpus"),
        (lambda s: s.handle_unreserve("s1", "eng", R("cpus:1"), 1.0), FailedPrecondition, "no"),
        (lambda s: s.handle_unreserve("s1", "sci", R("cpus:2"), 1.0), FailedPrecondition, "static"),
    ],
)
def test_bad_reservations_are_refused_and_change_nothing(call, error, says) -> None:  # type: ignore[no-untyped-def]
    state = two_teams({"sci": R("cpus:1")})
    before = (dict(state.agents["s1"].reserved), state.agents["s1"].free)
    with pytest.raises(error, match=says.replace("*", r"\*")):
        call(state)
    assert (dict(state.agents["s1"].reserved), state.agents["s1"].free) == before


def test_a_reservation_used_by_tasks_cannot_be_undone() -> None:
    state = two_teams(roles=("eng",))
    state.handle_reserve("s1", "eng", R("cpus:2"), 0.5)
    offers = offers_of(state.handle_allocate(1.0))["f0"]
    state.handle_accept(
        "f0", [o.offer_id for o in offers], [TaskLaunch("t", "t", R("cpus:2"))], 2.0
    )
    with pytest.raises(FailedPrecondition, match="tasks use cpus:2"):
        state.handle_unreserve("s1", "eng", R("cpus:1"), 3.0)


def test_reservations_count_toward_quota_limits() -> None:
    state = two_teams(roles=("eng",))
    state.handle_set_quota("eng", E, R("cpus:3"), 0.5)
    state.handle_reserve("s1", "eng", R("cpus:2"), 0.6)
    with pytest.raises(FailedPrecondition, match="limit of 'eng'"):
        state.handle_reserve("s1", "eng", R("cpus:2"), 0.7)
    state.handle_update_demand("f0", R("cpus:1"), 100, 0.8)
    state.handle_allocate(1.0)
    assert state.frameworks["f0"].allocated.get("cpus") == 3  # 2 reserved + 1 unreserved
    with pytest.raises(FailedPrecondition, match="already holds more"):
        state.handle_set_quota("eng", E, R("cpus:1"), 2.0)


def test_a_sub_roles_limit_caps_what_it_takes_of_a_parents_reservation() -> None:
    state = two_teams({"eng": R("cpus:6")}, roles=("eng/ml",))
    state.handle_set_quota("eng/ml", E, R("cpus:2"), 0.5)
    state.handle_update_demand("f0", R("cpus:1"), 100, 0.8)
    state.handle_allocate(1.0)
    assert state.frameworks["f0"].allocated.get("cpus") == 2


def test_idle_reservations_count_in_the_roles_share_mesos_8299() -> None:
    """eng holds 4 reserved cpus it does not use (its framework refused the agent); with 16
    cpus in all, H-DRF gives sci and eng 8 each: eng's idle 4 count, so eng gets 4 more of the
    unreserved 12 and sci 8 (Mesos would count only allocations: 6 and 6, eng holding 10)."""
    state = MasterState(CoreConfig(validate=True))
    state.handle_add_agent("reserved", R("cpus:4"), 0.0, reserved={"eng": R("cpus:4")})
    state.handle_add_agent("s2", R("cpus:12"), 0.0)
    state.handle_add_framework("eng-fw", 0.0, role="eng")
    state.handle_add_framework("sci-fw", 0.0, role="sci")
    for fw in ("eng-fw", "sci-fw"):
        state.handle_update_demand(fw, R("cpus:1"), 100, 0.0)
    state.frameworks["eng-fw"].filters["reserved"] = 1e9  # eng refuses its reservation
    state.handle_allocate(1.0)
    assert held_by_role(state) == Counter({"sci": 8, "eng": 4})
    assert state.role_shares()["eng"].held["cpus"] == pytest.approx(0.5)


def test_running_tasks_rejoin_into_the_reservation_that_serves_them() -> None:
    state = MasterState(CoreConfig(validate=True))
    state.handle_add_framework("f0", 0.0, role="eng/ml")
    running = [RunningTask("f0", "t", "t", R("cpus:3"), TaskState.RUNNING)]
    state.handle_add_agent("s1", R("cpus:8"), 1.0, running=running, reserved={"eng": R("cpus:2")})
    assert state.tasks[("f0", "t")].reserved == (("eng", R("cpus:2")),)
    assert state.agents["s1"].free == R("cpus:5")


def test_the_agents_reservations_must_fit_it() -> None:
    state = MasterState(CoreConfig(validate=True))
    with pytest.raises(InvalidArgument, match="do not fit"):
        state.handle_add_agent(
            "s1", R("cpus:2"), 0.0, reserved={"a": R("cpus:2"), "b": R("cpus:1")}
        )
    assert not state.agents


def test_the_rebalancer_never_picks_a_task_on_reserved_resources() -> None:
    from master.core.rebalance import raw_view_of

    state = two_teams({"eng": R("cpus:2")}, roles=("eng",))
    offers = offers_of(state.handle_allocate(1.0))["f0"]
    launches = [TaskLaunch(f"t{i}", "t", R("cpus:1"), preemptible=True) for i in range(4)]
    state.handle_accept("f0", [o.offer_id for o in offers], launches, 2.0)
    flags = {task[1]: task[4] for task in raw_view_of(state).tasks}
    reserved = {task.id for task in state.tasks.values() if task.reserved}
    assert len(reserved) == 2
    assert {t for t, preemptible in flags.items() if preemptible} == {
        "t0",
        "t1",
        "t2",
        "t3",
    } - reserved
