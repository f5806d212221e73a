"""The H-DRF paper's examples on the pure core, with churn: naive starves or blocks, H-DRF not.

Bhattacharya, Culler, Friedman, Ghodsi, Shenker and Stoica, "Hierarchical Scheduling for
Diverse Datacenter Workloads", ACM SoCC 2013, §4.3 (the failures of naive H-DRF, i.e. of
Mesos's hierarchical sorter) and §4.4 (dynamic H-DRF's fixes). Each test builds the tree on one
agent, fills it, then churns: in every round one task ends (the victim rotates over the roles, so
no role is favoured by the choice) and one allocation run hands out what is free; offers are
accepted whole, as greedy frameworks do. Figures are the roles' tasks after the churn.
"""

from __future__ import annotations

from collections import Counter

import pytest
from fairshare.resources import ResourceVector

from master.core import CoreConfig, MasterState, SendOffers, TaskLaunch
from master.core.tree_allocation import tree_of

R = ResourceVector.parse


class Churn:
    """One agent, frameworks with declared shapes, offers accepted whole, tasks ended in turn."""

    def __init__(self, hierarchy: str, agent: str, roles: dict[str, str]) -> None:
        self.state = MasterState(CoreConfig(validate=True, hierarchy=hierarchy))
        self.state.handle_add_agent("s", R(agent), 0.0)
        self.roles = roles
        for role, shape in roles.items():
            self.state.handle_add_framework(role, 0.0, role=role)
            self.state.handle_update_demand(role, R(shape), 1000, 0.0)
        self.now = 0.0
        self.serial = 0
        self.turn = 0

    def allocate(self) -> None:
        self.now += 1.0
        for message in self.state.handle_allocate(self.now):
            assert isinstance(message, SendOffers)
            for offer in message.offers:
                shape = self.state.frameworks[message.framework_id].demand
                assert shape is not None
                launches = []
                for _ in range(offer.fair_tasks):
                    self.serial += 1
                    launches.append(TaskLaunch(f"t{self.serial}", "t", shape))
                self.state.handle_accept(
                    message.framework_id, [offer.offer_id], launches, self.now, 0.0
                )

    def end_one(self, candidates: list[str]) -> None:
        """End the oldest task of the next role in ``candidates`` that runs one."""
        from fairshare.task_states import TaskState

        for _ in candidates:
            role = candidates[self.turn % len(candidates)]
            self.turn += 1
            live = sorted(self.state.frameworks[role].task_ids, key=lambda t: int(t[1:]))
            if live:
                self.state.handle_task_status("s", role, live[0], TaskState.FINISHED, self.now)
                return

    def tasks(self) -> Counter[str]:
        return Counter({role: len(fw.task_ids) for role, fw in self.state.frameworks.items()})


STARVATION = {"n1": "mem:1", "n2/c": "cpus:1", "n2/g": "mem:1"}


def starve(hierarchy: str, rounds: int = 60) -> Counter[str]:
    churn = Churn(hierarchy, "cpus:10;mem:10", STARVATION)
    churn.allocate()
    for _ in range(rounds):
        churn.end_one(["n1", "n2/g"])  # the memory-bound leaves churn; n2/c holds the cpus
        churn.allocate()
    return churn.tasks()


def test_starvation_hdrf_keeps_the_memory_bound_leaves_equal() -> None:
    """§4.3's first example: n2/c holds every cpu; n2's share must not count it in full."""
    tasks = starve("hdrf")
    assert tasks == Counter({"n2/c": 10, "n1": 5, "n2/g": 5})


def test_starvation_naive_withers_n2_g() -> None:
    """Naive: n2's share is n2/c's whole cpu share (1.0), so each freed memory unit goes to n1."""
    tasks = starve("naive")
    assert tasks["n2/g"] == 0 and tasks["n1"] == 10


BLOCKING = {"n1": "cpus:1", "n2": "cpus:1", "n3/c": "cpus:1", "n3/g": "gpus:1", "n4": "gpus:1"}


def block(hierarchy: str) -> Counter[str]:
    """§4.3's second example: 3 cpu-bound leaves saturate the cpus; n3/g and n4 share gpus."""
    churn = Churn(hierarchy, "cpus:3;gpus:12", BLOCKING)
    churn.allocate()
    for _ in range(48):
        churn.end_one(["n3/g", "n4"])
        churn.allocate()
    return churn.tasks()


def test_blocking_hdrf_shares_the_gpus_equally() -> None:
    tasks = block("hdrf")
    assert (tasks["n1"], tasks["n2"], tasks["n3/c"]) == (1, 1, 1)
    assert tasks["n3/g"] == tasks["n4"] == 6


def test_blocking_naive_does_not_rescale_so_nothing_pins_n3() -> None:
    """The blocking failure is one of rescaling without ignoring blocked nodes (§4.4): Mesos's
    naive sorter does not rescale, so in this example it shares the gpus equally too."""
    tasks = block("naive")
    assert (tasks["n1"], tasks["n2"], tasks["n3/c"]) == (1, 1, 1)
    assert tasks["n3/g"] == tasks["n4"] == 6


def test_a_blocked_child_counts_unscaled_and_does_not_pin_the_minimum() -> None:
    """n3/c holds a third of the saturated cpus and cannot grow: were it rescaled as the minimum,
    n3's share would stay at 1/3 and n3/g would take every gpu (§4.3's blocking example). H-DRF
    counts it unscaled and ignores the saturated cpus, so n3's share is n3/g's."""
    churn = Churn("hdrf", "cpus:3;gpus:12", BLOCKING)
    churn.allocate()
    state = churn.state
    for fw in ("n1", "n2", "n3/c"):  # the cpu-bound leaves want nothing more: blocked
        state.handle_update_demand(fw, R("cpus:1"), 1, churn.now)
    churn.end_one(["n4"])  # a gpu is free: the cpus are the saturated resource
    shares = state.role_shares()
    assert shares["n3/g"].share == pytest.approx(6 / 12)
    assert shares["n3"].share == pytest.approx(shares["n3/g"].share)
    assert shares["n3"].held["cpus"] == pytest.approx(1 / 3)


@pytest.mark.parametrize("hierarchy", ["hdrf", "naive"])
def test_one_framework_against_three_in_another_role_gets_half(hierarchy: str) -> None:
    """The issue's live case in the core: role a with 1 framework, role b with 3, 12 slots."""
    state = MasterState(CoreConfig(validate=True, hierarchy=hierarchy))
    state.handle_add_agent("s", R("cpus:12;mem:12288"), 0.0)
    for index, role in enumerate(["a", "b", "b", "b"]):
        state.handle_add_framework(f"f{index}", 0.0, role=role)
        state.handle_update_demand(f"f{index}", R("cpus:1;mem:256"), 12, 0.0)
    per_role: Counter[str] = Counter()
    for message in state.handle_allocate(1.0):
        assert isinstance(message, SendOffers)
        role = state.frameworks[message.framework_id].role
        per_role[role] += sum(offer.fair_tasks for offer in message.offers)
    assert per_role == Counter({"a": 6, "b": 6})


def test_flat_lets_the_role_with_more_frameworks_take_more() -> None:
    state = MasterState(CoreConfig(validate=True, hierarchy="flat"))
    state.handle_add_agent("s", R("cpus:12;mem:12288"), 0.0)
    for index, role in enumerate(["a", "b", "b", "b"]):
        state.handle_add_framework(f"f{index}", 0.0, role=role)
        state.handle_update_demand(f"f{index}", R("cpus:1;mem:256"), 12, 0.0)
    per_role: Counter[str] = Counter()
    for message in state.handle_allocate(1.0):
        assert isinstance(message, SendOffers)
        per_role[state.frameworks[message.framework_id].role] += sum(
            offer.fair_tasks for offer in message.offers
        )
    assert per_role == Counter({"a": 3, "b": 9})


def test_nested_tree_weights_split_sixteen_cpus_three_nine_four() -> None:
    """eng 3 {dev 1, prod 3}, sci 1: eng gets 12 of 16, split 1:3; sci 4."""
    state = MasterState(CoreConfig(validate=True))
    for role, weight in {"eng": 3.0, "eng/dev": 1.0, "eng/prod": 3.0, "sci": 1.0}.items():
        state.handle_set_weight(role, weight, 0.0)
    state.handle_add_agent("s", R("cpus:16;mem:16384"), 0.0)
    for role in ("eng/dev", "eng/prod", "sci"):
        state.handle_add_framework(role, 0.0, role=role)
        state.handle_update_demand(role, R("cpus:1;mem:64"), 16, 0.0)
    got = {m.framework_id: sum(o.fair_tasks for o in m.offers) for m in state.handle_allocate(1.0)}
    assert got == {"eng/dev": 3, "eng/prod": 9, "sci": 4}
    shares = state.role_shares()
    assert shares["eng"].held["cpus"] == pytest.approx(12 / 16)


def test_a_role_with_frameworks_and_sub_roles_has_a_virtual_own_group() -> None:
    """eng's own framework competes with eng/dev as a sibling of weight 1 (Mesos's '.')."""
    state = MasterState(CoreConfig(validate=True))
    state.handle_add_agent("s", R("cpus:8"), 0.0)
    for fw, role in (("own", "eng"), ("dev", "eng/dev"), ("sci", "sci")):
        state.handle_add_framework(fw, 0.0, role=role)
        state.handle_update_demand(fw, R("cpus:1"), 8, 0.0)
    got = {m.framework_id: sum(o.fair_tasks for o in m.offers) for m in state.handle_allocate(1.0)}
    assert got == {"own": 2, "dev": 2, "sci": 4}
    tree = tree_of(state)
    assert sorted(tree.groups) == ["eng", "eng/dev", "sci"]
    assert tree.groups["eng"].path == "eng/."


@pytest.mark.parametrize("hierarchy", ["hdrf", "flat"])
def test_excluded_resources_count_in_no_share(hierarchy: str) -> None:
    """A GPU job is not a dominant-share hog once gpus are excluded (Mesos's
    --fair_sharing_excluded_resource_names): ml's tasks count by their cpus only."""

    def run(excluded: frozenset[str]) -> dict[str, int]:
        config = CoreConfig(
            validate=True, hierarchy=hierarchy, fair_sharing_excluded_resources=excluded
        )
        state = MasterState(config)
        state.handle_add_agent("s", R("cpus:10;gpus:4"), 0.0)
        for fw, role, shape in (("gpu", "ml", "cpus:1;gpus:1"), ("cpu", "web", "cpus:1")):
            state.handle_add_framework(fw, 0.0, role=role)
            state.handle_update_demand(fw, R(shape), 10, 0.0)
        return {
            m.framework_id: sum(o.fair_tasks for o in m.offers) for m in state.handle_allocate(1.0)
        }

    counted = run(frozenset())
    assert counted["gpu"] < 4 and counted["gpu"] + counted["cpu"] == 10  # a gpu is 1/4: a hog
    assert run(frozenset({"gpus"})) == {"gpu": 4, "cpu": 6}  # equal cpus up to ml's 4 gpus
