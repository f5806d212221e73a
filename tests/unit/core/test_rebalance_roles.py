"""The rebalancer moves toward the role tree's allocation: a tenant that started three
frameworks on a cluster it filled alone gives back half when a one-framework tenant arrives."""

from __future__ import annotations

from fairshare.resources import ResourceVector

from master.core.quota import Quota
from master.core.rebalance import (
    ClusterView,
    FrameworkDemand,
    LiveTask,
    RebalanceConfig,
    Rebalancer,
)

R = ResourceVector.parse
SHAPE = ResourceVector.parse("cpus:1;mem:256")
AGENT = ("s1", ResourceVector.parse("cpus:12;mem:12288"))


def view(running: dict[str, int], role_weights: tuple[tuple[str, float], ...] = ()) -> ClusterView:
    roles = {"a1": "a", "b0": "b", "b1": "b", "b2": "b"}
    frameworks = tuple(FrameworkDemand(fid, SHAPE, 12, 1.0, roles[fid]) for fid in sorted(roles))
    tasks = tuple(
        LiveTask(fid, f"{fid}-{n}", "s1", SHAPE, True)
        for fid, count in sorted(running.items())
        for n in range(count)
    )
    return ClusterView((AGENT,), frameworks, tasks, role_weights)


def test_the_target_gives_each_role_half_and_kills_only_the_crowded_role() -> None:
    crowded = view({"b0": 4, "b1": 4, "b2": 4})
    rebalancer = Rebalancer(RebalanceConfig(patience=1, max_kills=12))
    target = rebalancer.target(crowded)
    per_role = {"a": sum(target["a1"].values())}
    per_role["b"] = sum(sum(target[fid].values()) for fid in ("b0", "b1", "b2"))
    assert per_role == {"a": 6, "b": 6}
    decision = rebalancer.check(crowded)
    assert decision.kills and all(kill.framework_id.startswith("b") for kill in decision.kills)


def test_role_weights_shape_the_target() -> None:
    rebalancer = Rebalancer(RebalanceConfig(patience=1))
    target = rebalancer.target(view({"b0": 4, "b1": 4, "b2": 4}, (("a", 2.0),)))
    assert sum(target["a1"].values()) == 8  # a weighs 2: 8 of 12


def quota_view(
    running: dict[str, int], roles: dict[str, str], quotas: dict[str, Quota]
) -> ClusterView:
    frameworks = tuple(FrameworkDemand(fid, SHAPE, 12, 1.0, roles[fid]) for fid in sorted(roles))
    tasks = tuple(
        LiveTask(fid, f"{fid}-{n}", "s1", SHAPE, True)
        for fid, count in sorted(running.items())
        for n in range(count)
    )
    return ClusterView((AGENT,), frameworks, tasks, (), tuple(sorted(quotas.items())))


def test_reclaim_takes_from_the_role_above_its_guarantee_only() -> None:
    """a holds its guarantee (6), c holds 6 with none; b arrives guaranteed 4: the target
    gives b 4 and every kill is c's."""
    roles = {"fa": "a", "fb": "b", "fc": "c"}
    quotas = {"a": Quota(R("cpus:6")), "b": Quota(R("cpus:4"))}
    full = quota_view({"fa": 6, "fc": 6}, roles, quotas)
    rebalancer = Rebalancer(RebalanceConfig(patience=1, max_kills=12))
    target = rebalancer.target(full)
    assert sum(target["fb"].values()) >= 4
    decision = rebalancer.check(full)
    assert decision.kills and {kill.framework_id for kill in decision.kills} == {"fc"}


def test_reclaim_never_takes_a_victim_below_its_own_guarantee() -> None:
    """a and c each hold exactly their guarantee of 6 (overcommitted with b's 4): no kill."""
    roles = {"fa": "a", "fb": "b", "fc": "c"}
    quotas = {"a": Quota(R("cpus:6")), "b": Quota(R("cpus:4")), "c": Quota(R("cpus:6"))}
    full = quota_view({"fa": 6, "fc": 6}, roles, quotas)
    rebalancer = Rebalancer(RebalanceConfig(patience=1, max_kills=12))
    for _ in range(3):
        assert rebalancer.check(full).kills == ()


def test_one_task_short_of_a_guarantee_is_reclaimed_too() -> None:
    """Outside guarantees a framework one task below its target is left alone (whole tasks);
    a role one task short of its guarantee gets that task back (found by the live test)."""
    roles = {"fa": "a", "fb": "b", "fg": "g"}
    quotas = {"g": Quota(R("cpus:8"))}
    short = quota_view({"fa": 3, "fb": 2, "fg": 7}, roles, quotas)
    rebalancer = Rebalancer(RebalanceConfig(patience=1, max_kills=12))
    assert sum(rebalancer.target(short)["fg"].values()) >= 8
    decision = rebalancer.check(short)
    assert decision.gap > 0
    assert [kill.framework_id for kill in decision.kills] == ["fa"]  # the richer of a and b
