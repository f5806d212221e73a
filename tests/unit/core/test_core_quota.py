"""Quota per role path in the pure core (``master.core.quota``): the rules, limits, guarantees
and headroom, forced lowering; Mesos 1.9's semantics (limits cap offered plus used;
guarantees first, protected by headroom)."""

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
    RescindOffer,
    SendOffers,
    TaskLaunch,
)
from master.core.quota import Quota, check_quotas

R = ResourceVector.parse
E = ResourceVector()


def cluster(roles: list[str], agent: str = "cpus:12;mem:12288", shape: str = "cpus:1;mem:256",
            hierarchy: str = "hdrf") -> MasterState:  # fmt: skip
    state = MasterState(CoreConfig(validate=True, hierarchy=hierarchy))
    state.handle_add_agent("s1", R(agent), 0.0)
    for index, role in enumerate(roles):
        state.handle_add_framework(f"f{index}", 0.0, role=role)
        state.handle_update_demand(f"f{index}", R(shape), 100, 0.0)
    return state


def tasks_by_role(state: MasterState, messages: list[object]) -> Counter[str]:
    got: Counter[str] = Counter()
    for message in messages:
        if isinstance(message, SendOffers):
            role = state.frameworks[message.framework_id].role
            got[role] += sum(offer.fair_tasks for offer in message.offers)
    return got


# -- the rules ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("quotas", "says"),
    [
        ({"eng": Quota(R("cpus:8"), R("cpus:4"))}, "guarantee cpus:8 is above its limit cpus:4"),
        (
            {
                "eng": Quota(R("cpus:4")),
                "eng/dev": Quota(R("cpus:3")),
                "eng/ci": Quota(R("cpus:2")),
            },
            "its sub-roles guarantee cpus:5 in all, more than its own guarantee cpus:4",
        ),
        (
            {"eng": Quota(E, R("cpus:8")), "eng/dev": Quota(E, R("cpus:10"))},
            "limit cpus:10 is above its parent 'eng''s limit cpus:8",
        ),
    ],
)
def test_quota_rules_are_checked_with_a_message(quotas: dict[str, Quota], says: str) -> None:
    with pytest.raises(InvalidArgument, match=says.replace("(", r"\(")):
        check_quotas(quotas)


def test_consistent_quotas_pass_and_top_level_guarantees_may_overcommit() -> None:
    check_quotas(
        {
            "eng": Quota(R("cpus:100;mem:1000"), R("cpus:200")),
            "eng/dev": Quota(R("cpus:60"), R("cpus:150")),
            "eng/dev/ci": Quota(R("cpus:10")),
            "sci": Quota(R("cpus:1000")),  # more than any cluster: accepted (agents join later)
        }
    )


def test_set_quota_refuses_a_bad_table_and_changes_nothing() -> None:
    state = cluster(["eng"])
    state.handle_set_quota("eng", R("cpus:4"), R("cpus:8"), 0.0)
    with pytest.raises(InvalidArgument):
        state.handle_set_quota("eng/dev", E, R("cpus:9"), 1.0)
    with pytest.raises(InvalidArgument):
        state.handle_set_quota("eng//dev", R("cpus:1"), None, 1.0)
    assert state.quotas == {"eng": Quota(R("cpus:4"), R("cpus:8"))}
    state.handle_set_quota("eng", E, None, 2.0)  # empty: cleared
    assert state.quotas == {}


# -- limits ------------------------------------------------------------------------------------


@pytest.mark.parametrize("hierarchy", ["hdrf", "flat"])
def test_a_role_limited_to_four_cpus_alone_on_twelve_gets_four(hierarchy: str) -> None:
    state = cluster(["batch"], hierarchy=hierarchy)
    state.handle_set_quota("batch", E, R("cpus:4"), 0.0)
    assert tasks_by_role(state, state.handle_allocate(1.0)) == Counter({"batch": 4})


def test_a_parent_limit_caps_the_subtree() -> None:
    state = cluster(["eng/dev", "eng/ci", "sci"])
    state.handle_set_quota("eng", E, R("cpus:5"), 0.0)
    got = tasks_by_role(state, state.handle_allocate(1.0))
    assert got["eng/dev"] + got["eng/ci"] == 5 and got["sci"] == 7


def test_coarse_offers_are_cut_to_the_limit() -> None:
    state = MasterState(CoreConfig(validate=True))
    state.handle_add_agent("s1", R("cpus:16;mem:1024"), 0.0)
    state.handle_add_agent("s2", R("cpus:16;mem:1024"), 0.0)
    state.handle_add_framework("web", 0.0, role="web")
    state.handle_set_quota("web", E, R("cpus:20"), 0.0)
    offers = [o for m in state.handle_allocate(1.0) for o in m.offers]  # type: ignore[attr-defined]
    assert sorted(str(o.resources) for o in offers) == ["cpus:16;mem:1024", "cpus:4;mem:1024"]
    assert state.agents["s2"].free == R("cpus:12") or state.agents["s1"].free == R("cpus:12")


def test_lowering_a_limit_below_use_needs_force_and_kills_nothing() -> None:
    state = cluster(["batch"])
    (message,) = state.handle_allocate(1.0)
    assert isinstance(message, SendOffers)
    offer = message.offers[0]
    launches = [TaskLaunch(f"t{n}", "t", R("cpus:1;mem:256")) for n in range(6)]
    state.handle_accept("f0", [offer.offer_id], launches, 1.0, refuse_seconds=0.0)
    state.handle_allocate(2.0)  # offers the other 6 cpus again
    assert state.frameworks["f0"].offer_ids
    with pytest.raises(FailedPrecondition, match="already holds more than the new limit"):
        state.handle_set_quota("batch", E, R("cpus:4"), 3.0)
    assert state.quotas == {}
    messages = state.handle_set_quota("batch", E, R("cpus:4"), 3.0, force=True)
    assert messages and all(isinstance(m, RescindOffer) for m in messages)
    assert len(state.frameworks["f0"].task_ids) == 6  # nothing killed
    assert tasks_by_role(state, state.handle_allocate(4.0)) == Counter()  # over: nothing more
    for n in range(3):
        state.handle_task_status("s1", "f0", f"t{n}", TaskState.FINISHED, 5.0)
    assert tasks_by_role(state, state.handle_allocate(6.0)) == Counter({"batch": 1})


# -- guarantees and headroom ------------------------------------------------------------------


def test_a_guaranteed_role_is_served_first_up_to_its_guarantee() -> None:
    state = cluster(["a", "b", "c"])
    state.handle_set_quota("c", R("cpus:8"), None, 0.0)
    assert tasks_by_role(state, state.handle_allocate(1.0)) == Counter({"c": 8, "a": 2, "b": 2})


def test_without_the_guarantee_the_tree_shares_equally() -> None:
    state = cluster(["a", "b", "c"])
    assert tasks_by_role(state, state.handle_allocate(1.0)) == Counter({"a": 4, "b": 4, "c": 4})


def test_headroom_keeps_free_what_an_absent_guaranteed_role_may_ask_for() -> None:
    state = cluster(["a", "b"])
    state.handle_set_quota("ml", R("cpus:8"), None, 0.0)  # no framework yet
    assert tasks_by_role(state, state.handle_allocate(1.0)) == Counter({"a": 2, "b": 2})
    state.handle_add_framework("late", 2.0, role="ml")
    state.handle_update_demand("late", R("cpus:1;mem:256"), 100, 2.0)
    assert tasks_by_role(state, state.handle_allocate(3.0)) == Counter({"ml": 8})


def test_guarantee_then_fair_share_of_the_rest() -> None:
    """c is guaranteed 4 of 12; above that the tree shares: a, b and c end at 4 each."""
    state = cluster(["a", "b", "c"])
    state.handle_set_quota("c", R("cpus:4"), None, 0.0)
    assert tasks_by_role(state, state.handle_allocate(1.0)) == Counter({"a": 4, "b": 4, "c": 4})


def test_with_no_quota_the_run_is_the_trees() -> None:
    with_quota = cluster(["a", "b", "b"])
    with_quota.handle_set_quota("zzz", E, R("cpus:100"), 0.0)  # a quota nobody is under
    plain = cluster(["a", "b", "b"])
    assert tasks_by_role(with_quota, with_quota.handle_allocate(1.0)) == tasks_by_role(
        plain, plain.handle_allocate(1.0)
    )
